"""End to end: experiments made by evaluate() compare as expected (repetitions averaged)."""

from __future__ import annotations

from typing import Any

import pytest

from assay.analysis import compare_experiments, load_experiment
from assay.client import Client
from assay.store import Store


def test_evaluate_then_compare(sqlite_url: str) -> None:
    from assay.evaluation import evaluate

    store = Store.open(sqlite_url)
    client = Client(store=store)
    ds = client.create_dataset("doubling")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i}, "outputs": {"y": 2 * i}} for i in range(16)])

    def good(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"y": 2 * inputs["x"]}

    def sloppy(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"y": 2 * inputs["x"] if inputs["x"] % 2 else -1}

    def exact(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
        return {"key": "exact", "score": float(outputs["y"] == reference_outputs["y"])}

    first = evaluate(good, data="doubling", evaluators=[exact], client=client,
                     experiment_prefix="good", num_repetitions=2)
    second = evaluate(sloppy, data="doubling", evaluators=[exact], client=client,
                      experiment_prefix="sloppy")
    client.flush()
    data = load_experiment(store, store.projects.read(project_name=first.experiment_name).id)
    assert len(data.rows) == 16 and {r.repetitions for r in data.rows} == {2}
    assert data.score_keys == ["exact"] and all(r.scores == {"exact": 1.0} for r in data.rows)
    assert data.rows[3].reference == {"y": 6} and data.rows[3].outputs == {"y": 6}

    result, _ = compare_experiments(store, [first.experiment_name, second.experiment_name])
    exact_diff = next(d for d in result.diffs if d.metric == "exact")
    assert exact_diff.n == 16 and exact_diff.diff == pytest.approx(-0.5)
    assert exact_diff.regression and exact_diff.ci_high < 0
    # latency is left out: two microsecond targets timed a second apart, while the store's
    # background fold may hold the GIL during one of them, can differ by more than the noise
    # the bootstrap allows (a CI run saw it); scores, tokens, cost and errors are exact
    assert [d.metric for d in result.regressions if d.metric != "latency"] == ["exact"]
    store.close()
