"""read_project statistics of a real experiment (llm and tool steps, streaming, failures,
categorical feedback, summary evaluators, repetitions) against figures computed here from the
stored runs and from genai-prices directly."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from genai_prices import Usage, calc_price

from assay import aevaluate, evaluate
from assay.client import Client
from assay.tracing import get_current_run_tree, traceable

from .conftest import make_dataset


@traceable(run_type="llm", name="model")
def _model(prompt: str, n: int):
    run = get_current_run_tree()
    run.set_usage(input_tokens=100 + n, output_tokens=10 + n, provider="openai",
                  model="gpt-4o-mini")
    yield from ("the", "answer", "is", str(n))


@traceable(run_type="tool", name="double")
def _double(x: int) -> int:
    return 2 * x


@traceable(run_type="llm", name="plain-model")
def _plain_model(prompt: str) -> str:
    get_current_run_tree().set_usage(input_tokens=7, output_tokens=3, provider="openai",
                                     model="gpt-4o-mini")
    return "ok"


def agent(inputs: dict) -> dict:
    x = inputs["x"]
    if x % 5 == 4:
        raise RuntimeError(f"agent failed on {x}")
    if x % 2:
        text = " ".join(_model("question", x))
    else:
        text = _plain_model("question")
    return {"y": _double(x), "text": text}


def exact(outputs: dict, reference_outputs: dict) -> dict:
    ok = outputs.get("y") == reference_outputs["y"]
    return {"key": "exact", "score": int(ok), "value": "CORRECT" if ok else "INCORRECT"}


def parity(run, example) -> dict:  # LangSmith's legacy positional form
    return {"key": "odd", "score": example.inputs["x"] % 2}


def mean_y(outputs: list, reference_outputs: list) -> dict:
    ok = [o.get("y") == r["y"] for o, r in zip(outputs, reference_outputs, strict=True)]
    return {"key": "accuracy", "score": sum(ok) / len(ok)}


def test_statistics_match_the_stored_runs(client: Client) -> None:
    make_dataset(client, "calc", 10)
    res = evaluate(agent, data="calc", evaluators=[exact, parity], summary_evaluators=[mean_y],
                   num_repetitions=3, client=client, experiment_prefix="calc")
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    exp = client.read_project(project_name=res.experiment_name)
    roots = list(client.list_runs(project_id=exp.id, is_root=True))
    runs = list(client.list_runs(project_id=exp.id))
    llm = [r for r in runs if r.run_type == "llm"]

    assert stats.run_count == len(roots) == 30
    lat = [(r.end_time - r.start_time).total_seconds() for r in roots]
    assert stats.latency_p50 == pytest.approx(np.percentile(lat, 50), abs=1e-6)
    assert stats.latency_p99 == pytest.approx(np.percentile(lat, 99), abs=1e-6)

    streamed = [r for r in runs if any(e.get("name") == "new_token" for e in r.events or [])]
    assert len(streamed) == 12  # odd x that did not fail (1, 3, 5, 7), three times
    ft = [(r.first_token_time - r.start_time).total_seconds() for r in streamed]
    assert stats.first_token_p50 == pytest.approx(np.percentile(ft, 50), abs=1e-6)
    assert stats.first_token_p99 == pytest.approx(np.percentile(ft, 99), abs=1e-6)
    assert stats.streaming_rate == pytest.approx(len({r.trace_id for r in streamed}) / 30)

    ok_x = [x for x in range(10) if x % 5 != 4]
    prompt = sum((100 + x) if x % 2 else 7 for x in ok_x) * 3
    completion = sum((10 + x) if x % 2 else 3 for x in ok_x) * 3
    assert (stats.prompt_tokens, stats.completion_tokens) == (prompt, completion)
    assert stats.total_tokens == prompt + completion
    assert len(llm) == len(ok_x) * 3
    p_cost = c_cost = 0.0
    for r in llm:
        price = calc_price(Usage(input_tokens=r.prompt_tokens, output_tokens=r.completion_tokens),
                           model_ref="gpt-4o-mini", provider_id="openai")
        p_cost += float(price.input_price)
        c_cost += float(price.output_price)
    assert stats.prompt_cost == pytest.approx(p_cost)
    assert stats.completion_cost == pytest.approx(c_cost)
    assert stats.total_cost == pytest.approx(p_cost + c_cost) and stats.total_cost > 0

    failed = [r for r in roots if r.error]
    assert len(failed) == 6 and all("RuntimeError: agent failed" in r.error for r in failed)
    assert stats.error_rate == pytest.approx(6 / 30)

    exact_fb = stats.feedback_stats["exact"]
    assert exact_fb.n == 30
    assert exact_fb.values == {"CORRECT": 24, "INCORRECT": 6}
    assert exact_fb.avg == pytest.approx(24 / 30)
    assert exact_fb.stdev == pytest.approx(float(np.std([1] * 24 + [0] * 6)))
    assert stats.feedback_stats["odd"].avg == pytest.approx(0.5)
    assert stats.session_feedback_stats["accuracy"].avg == pytest.approx(24 / 30)
    assert res.summary_results["results"][0].score == pytest.approx(24 / 30)
    assert stats.test_run_number == 1

    # repetitions: one root per (example, repetition), index in metadata, dataset order
    pairs = sorted((str(r.reference_example_id), r.metadata["repetition"]) for r in roots)
    assert len(set(pairs)) == 30 and {p[1] for p in pairs} == {0, 1, 2}
    rows = list(res)
    assert [r["example"].inputs["x"] for r in rows] == list(range(10)) * 3
    assert [r["run"].metadata["repetition"] for r in rows] == [0] * 10 + [1] * 10 + [2] * 10

    # a second experiment on the same dataset is test run number 2
    res2 = evaluate(agent, data="calc", client=client)
    assert client.read_project(project_name=res2.experiment_name,
                               include_stats=True).test_run_number == 2


async def test_aevaluate_async_target_and_streaming(client: Client) -> None:
    make_dataset(client, "a", 4)

    @traceable(run_type="llm", name="stream")
    async def stream(n: int):
        get_current_run_tree().set_usage(input_tokens=5, output_tokens=n + 1, provider="openai",
                                         model="gpt-4o-mini")
        for i in range(n + 1):
            await asyncio.sleep(0)
            yield str(i)

    async def target(inputs: dict) -> dict:
        return {"y": "".join([t async for t in stream(inputs["x"])])}

    res = await aevaluate(target, data="a", client=client, max_concurrency=4, num_repetitions=2)
    stats = client.read_project(project_id=res.experiment_id, include_stats=True)
    assert stats.run_count == 8 and stats.streaming_rate == 1.0
    assert stats.completion_tokens == 2 * sum(n + 1 for n in range(4))
    assert stats.first_token_p50 is not None
    assert [r["run"].outputs["y"] for r in res] == ["0", "01", "012", "0123"] * 2
