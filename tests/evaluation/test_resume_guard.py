"""A resume never deletes what it does not redo: a request with other splits, examples or
repetitions than the experiment's, or a tracing project named as the experiment, is refused
before anything changes; bad argument types are refused before an experiment is created."""

from __future__ import annotations

from typing import Any

import pytest

from assay import evaluate
from assay.client import Client
from assay.errors import InvalidInputError
from assay.tracing import traceable, tracing_context

from .conftest import make_dataset


def target(inputs: dict) -> dict:
    return {"y": 2 * inputs["x"]}


def correct(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


def _state(client: Client, name: str) -> tuple[int, int, dict[str, Any]]:
    stats = client.read_project(project_name=name, include_stats=True)
    fb = (stats.feedback_stats or {}).get("correct")
    return stats.run_count or 0, fb.n if fb else 0, stats.metadata


def test_a_resume_with_other_splits_examples_or_repetitions_is_refused(client: Client) -> None:
    ds = client.create_dataset("split-guard")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i}, "outputs": {"y": 2 * i}, "split": "a" if i < 3 else "b"}
        for i in range(6)])
    first = evaluate(target, data="split-guard", splits=["a"], evaluators=[correct],
                     num_repetitions=2, experiment_prefix="guard", client=client)
    name = first.experiment_name
    before = _state(client, name)
    assert before[:2] == (6, 6)
    some = list(client.list_examples(dataset_name="split-guard", splits=["a"]))[:1]
    for kwargs in ({"data": "split-guard", "splits": ["b"]},  # another split
                   {"data": some},  # fewer examples
                   {"data": "split-guard", "splits": ["a"], "num_repetitions": 1}):
        with pytest.raises(InvalidInputError, match="would not redo") as err:
            evaluate(target, evaluators=[correct], experiment=name, client=client, **kwargs)
        assert name in str(err.value)
        assert _state(client, name) == before  # nothing deleted, the metadata as it was
    again = evaluate(target, data="split-guard", splits=["a"], evaluators=[correct],
                     experiment=name, client=client)  # the same request: nothing to redo
    assert _state(client, name) == before and len(list(again)) == 6


def test_a_tracing_project_named_as_the_experiment_keeps_its_traces(client: Client) -> None:
    @traceable
    def agent(q: str) -> str:
        return q.upper()

    with tracing_context(enabled=True, project_name="prod-traces", client=client):
        for q in ("a", "b", "c"):
            agent(q)
    client.flush()
    client.create_dataset("nums-guard")
    client.create_examples(dataset_name="nums-guard", examples=[
        {"inputs": {"x": 1}, "outputs": {"y": 2}}])
    with pytest.raises(InvalidInputError, match="not an experiment's examples"):
        evaluate(target, data="nums-guard", evaluators=[correct], experiment="prod-traces",
                 client=client)
    runs = list(client.list_runs(project_name="prod-traces"))
    assert sorted(r.inputs["q"] for r in runs) == ["a", "b", "c"]


@pytest.mark.parametrize("bad", [{"experiment_prefix": 5}, {"description": 5}])
def test_bad_names_are_refused_before_an_experiment_exists(client: Client, bad: dict) -> None:
    client.create_dataset("typed")
    client.create_examples(dataset_name="typed", examples=[{"inputs": {"x": 1}}])
    with pytest.raises(InvalidInputError, match=f"{next(iter(bad))} must be a string"):
        evaluate(target, data="typed", client=client, **bad)
    assert not [p for p in client.list_projects() if p.reference_dataset_id is not None]


def test_an_unknown_experiment_id_is_an_error_not_a_new_experiment(client: Client) -> None:
    """A mistyped id would otherwise have started an experiment named like an id."""
    import uuid

    from assay.errors import NotFoundError

    data = make_dataset(client, "ids", 2)
    missing = str(uuid.uuid4())
    with pytest.raises(NotFoundError, match=f"experiment {missing} not found"):
        evaluate(lambda i: i, data=data, experiment=missing, client=client)
    assert [p.name for p in client.list_projects() if p.name == missing] == []
