"""ExperimentResults.to_pandas(): one row per (example, repetition) with performance columns."""

from __future__ import annotations

import pytest

from assay import evaluate
from assay.client import Client
from assay.tracing import get_current_run_tree, traceable

from .conftest import make_dataset


@traceable(run_type="llm", name="model")
def model(n: int):
    get_current_run_tree().set_usage(input_tokens=20, output_tokens=n, provider="openai",
                                     model="gpt-4o-mini")
    yield from ["a"] * (n + 1)


def target(inputs: dict) -> dict:
    x = inputs["x"]
    if x == 2:
        raise ValueError("no")
    return {"y": 2 * x, "text": "".join(model(x)) + "".join(model(1))}


def test_to_pandas_columns_match_the_stored_traces(client: Client) -> None:
    make_dataset(client, "d", 3)
    res = evaluate(target, data="d", client=client, num_repetitions=2,
                   evaluators=[lambda outputs, reference_outputs:
                               outputs.get("y") == reference_outputs["y"]])
    df = res.to_pandas()
    assert len(df) == 6
    for col in ("inputs.x", "outputs.y", "reference.y", "feedback.lambda", "error", "latency",
                "execution_time", "prompt_tokens", "completion_tokens", "total_tokens",
                "prompt_cost", "completion_cost", "total_cost", "first_token_latency",
                "repetition", "example_id", "id"):
        assert col in df.columns, col
    assert list(df["inputs.x"]) == [0, 1, 2, 0, 1, 2]
    assert list(df["repetition"]) == [0, 0, 0, 1, 1, 1]
    runs = list(client.list_runs(project_id=res.experiment_id))
    for _, row in df.iterrows():
        root = next(r for r in runs if r.id == row["id"])
        llm = [r for r in runs if r.trace_id == root.trace_id and r.run_type == "llm"]
        assert row["latency"] == pytest.approx((root.end_time - root.start_time).total_seconds())
        if root.error:
            assert "ValueError" in row["error"] and row["feedback.lambda"] == 0
            assert row["total_tokens"] is None or row["total_tokens"] != row["total_tokens"]
            continue
        assert row["total_tokens"] == sum(r.total_tokens for r in llm) == 40 + row["inputs.x"] + 1
        assert row["total_cost"] == pytest.approx(sum(r.total_cost for r in llm))
        first = min(r.first_token_time for r in llm)
        assert row["first_token_latency"] == pytest.approx(
            (first - root.start_time).total_seconds(), abs=1e-6)
    recs = evaluate(target, data="d", client=client, upload_results=False).to_records()
    assert [r["total_tokens"] for r in recs] == [41, 42, None]
    assert recs[0]["first_token_latency"] > 0


def test_pandas_missing_gives_an_install_hint(client: Client) -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['pandas'] = None\n"
            "from assay import evaluate\n"
            "r = evaluate(lambda i: i, data=[{'inputs': {'a': 1}}], upload_results=False)\n"
            "try:\n    r.to_pandas()\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "pip install 'assay[pandas]'" in out.stdout, out.stderr
