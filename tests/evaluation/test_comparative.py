"""Pairwise evaluation with assay's own ``evaluate((a, b), evaluators=[...])`` on the store (SQLite
and PostgreSQL): scores stored by run whatever order the runs were shown in, kept out of each
experiment's own statistics, every evaluator return form LangSmith accepts, failures as data,
and bad arguments refused before anything is stored."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from assay import aevaluate, evaluate, evaluate_comparative
from assay.client import Client
from assay.errors import ConflictError, InvalidInputError, NotFoundError
from assay.evaluation import ComparativeExperimentResults, ComparisonEvaluationResult

from .conftest import make_dataset, unique


def _exact(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> bool:
    return bool(outputs["y"] == reference_outputs["y"])


@pytest.fixture
def pair(client: Client) -> tuple[str, str, str]:
    """Two experiments on one dataset of 4 examples: ``right`` doubles x (the reference),
    ``off`` adds one and runs each example twice."""
    ds = make_dataset(client, unique("pw"), 4)
    right = evaluate(lambda i: {"y": 2 * i["x"]}, data=ds, client=client, evaluators=[_exact],
                     experiment_prefix="right")
    off = evaluate(lambda i: {"y": 2 * i["x"] + 1}, data=ds, client=client,
                   evaluators=[_exact], experiment_prefix="off", num_repetitions=2)
    return ds, right.experiment_name, off.experiment_name


def _ids(client: Client, *names: str) -> list[str]:
    return [str(client.read_project(project_name=n).id) for n in names]


def _pairwise_rows(client: Client, cid: Any) -> list[Any]:
    return [f for f in client.store.feedback.list() if f.comparative_experiment_id == cid]


def test_scores_are_stored_by_run_and_kept_out_of_each_experiment(
        client: Client, pair: tuple[str, str, str]) -> None:
    ds, right, off = pair
    shown: list[list[str]] = []

    def correct(outputs: list[dict[str, Any]], reference_outputs: dict[str, Any],
                runs: list[Any]) -> list[int]:
        shown.append([str(r.session_id) for r in runs])
        return [int(o["y"] == reference_outputs["y"]) for o in outputs]

    res = evaluate((right, off), evaluators=[correct], client=client, randomize_order=True,
                   metadata={"judge": "exact"})
    assert isinstance(res, ComparativeExperimentResults) and len(res) == 4
    r_id, o_id = _ids(client, right, off)
    cmp = res.comparative_experiment
    assert cmp.metadata == {"judge": "exact"} and str(cmp.reference_dataset_id) == ds
    # 3 runs an example (off ran twice): the right answers win every time, whatever order
    # the runs were shown in (randomized), as the scores follow the runs
    assert cmp.feedback_stats == {"correct": {r_id: {"n": 4, "avg": 1.0},
                                              o_id: {"n": 8, "avg": 0.0}}}
    assert all(sorted(s) == sorted([r_id, o_id, o_id]) for s in shown)
    for row in res:
        result = row["evaluation_results"]["feedback.correct"]
        assert isinstance(result, ComparisonEvaluationResult) and result.error is None
        assert {r.reference_example_id for r in row["evaluation_results"]["runs"]} == {
            row["example"].id}
    rows = _pairwise_rows(client, cmp.id)
    assert len(rows) == 12 and Counter(Counter(f.feedback_group_id for f in rows).values()) == {
        3: 4}  # one group per example, its three runs scored together
    for name in (right, off):  # their own scores only
        stats = client.read_project(project_name=name, include_stats=True).feedback_stats
        assert set(stats) == {"_exact"}
    assert [c.id for c in client.list_comparative_experiments(dataset_id=ds)] == [cmp.id]


def test_every_return_form_and_async_evaluators(client: Client,
                                                pair: tuple[str, str, str]) -> None:
    _, right, off = pair
    r_id, o_id = _ids(client, right, off)

    def as_dict(runs: list[Any], example: Any) -> dict[str, Any]:
        return {"key": "bigger", "scores": {r.id: r.outputs["y"] for r in runs},
                "comment": "by value"}

    async def as_model(runs: list[Any], example: Any) -> ComparisonEvaluationResult:
        await asyncio.sleep(0)
        return ComparisonEvaluationResult(
            key="first_wins", scores={r.id: i == 0 for i, r in enumerate(runs)},
            comment={str(r.id): f"seat {i}" for i, r in enumerate(runs)})

    def langsmiths(runs: list[Any], example: Any) -> Any:
        from langsmith.evaluation.evaluator import ComparisonEvaluationResult as LS

        return LS(key="ls", scores={runs[0].id: 0.5, runs[1].id: 0.25})

    res = asyncio.run(aevaluate((right, off), evaluators=[as_dict, as_model, langsmiths],
                                client=client, max_concurrency=4))
    stats = res.comparative_experiment.feedback_stats
    assert stats["first_wins"] == {r_id: {"n": 4, "avg": 1.0}, o_id: {"n": 8, "avg": 0.0}}
    assert set(stats["ls"]) == {r_id, o_id} and stats["ls"][r_id]["avg"] == 0.5
    # (example x: right 2x, off 2x+1 twice) -> right's mean 3, off's 4
    assert stats["bigger"][r_id]["avg"] == 3.0 and stats["bigger"][o_id]["avg"] == 4.0
    comments = {(f.key, f.comment) for f in _pairwise_rows(client, res.comparative_experiment.id)}
    assert ("bigger", "by value") in comments and ("first_wins", "seat 2") in comments


def test_a_failing_evaluator_is_recorded_and_the_others_go_on(
        client: Client, pair: tuple[str, str, str]) -> None:
    _, right, off = pair

    def down(runs: list[Any], example: Any) -> list[int]:
        if example.inputs["x"] == 1:
            raise RuntimeError("judge down")
        return [1] * len(runs)

    def stray(runs: list[Any], example: Any) -> dict[str, Any]:
        return {"scores": {runs[0].id: 1, "not-a-run": 0}}

    res = evaluate_comparative((right, off), evaluators=[down, stray], client=client)
    errors = Counter()
    for row in res:
        for key in ("feedback.down", "feedback.stray"):
            if row["evaluation_results"][key].error:
                errors[key] += 1
                assert not row["evaluation_results"][key].scores
    assert errors == {"feedback.down": 1, "feedback.stray": 4}
    rows = _pairwise_rows(client, res.comparative_experiment.id)
    assert {f.key for f in rows} == {"down"} and len(rows) == 9  # 3 examples x 3 runs
    assert "judge down" in next(r for r in res if r["example"].inputs["x"] == 1)[
        "evaluation_results"]["feedback.down"].error


def test_bad_arguments_are_refused_before_anything_is_stored(
        client: Client, pair: tuple[str, str, str]) -> None:
    ds, right, off = pair

    def pref(runs: list[Any], example: Any) -> list[int]:
        return [1] * len(runs)

    with pytest.raises(InvalidInputError, match="two or more experiments"):
        evaluate((right,), evaluators=[pref], client=client)
    with pytest.raises(InvalidInputError, match="at least one comparative evaluator"):
        evaluate((right, off), client=client)
    with pytest.raises(InvalidInputError, match="must be a list"):
        evaluate((right, off), evaluators=pref, client=client)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="data, num_repetitions"):
        evaluate((right, off), data=ds, evaluators=[pref], num_repetitions=3, client=client)
    with pytest.raises(InvalidInputError, match="must take"):
        evaluate((right, off), evaluators=[lambda a, b, c: 1], client=client)
    with pytest.raises(NotFoundError, match="no-such-experiment"):
        evaluate((right, "no-such-experiment"), evaluators=[pref], client=client)
    other = evaluate(lambda i: {"y": 0}, data=make_dataset(client, unique("other"), 1),
                     client=client).experiment_name
    with pytest.raises(InvalidInputError, match="different datasets"):
        evaluate((right, other), evaluators=[pref], client=client)
    assert list(client.list_comparative_experiments(dataset_id=ds)) == []
    assert not [f for f in client.store.feedback.list() if f.comparative_experiment_id]

    made = client.create_comparative_experiment("mine", _ids(client, right, off))
    again = client.create_comparative_experiment("mine", _ids(client, right, off), id=made.id)
    assert again.id == made.id
    with pytest.raises(ConflictError):
        client.create_comparative_experiment("mine", _ids(client, off, right), id=made.id)
