"""The runner: concurrency bound, order, timeouts, failures as data, in-memory mode, loops."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import pytest

from assay import aevaluate, evaluate
from assay.client import Client
from assay.errors import InvalidInputError
from assay.evaluation import EvaluationResult
from assay.tracing import traceable

from .conftest import make_dataset


class Gauge:
    """Counts simultaneous calls across threads and tasks."""

    def __init__(self) -> None:
        self.now = self.peak = self.calls = 0
        self.lock = threading.Lock()

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


@pytest.mark.parametrize("limit", [1, 3])
async def test_max_concurrency_bounds_target_and_evaluators_together(client: Client,
                                                                     limit: int) -> None:
    make_dataset(client, "d", 24)
    gauge = Gauge()

    async def target(inputs: dict) -> dict:
        with gauge:
            await asyncio.sleep(random.uniform(0, 0.004))
            return {"y": 2 * inputs["x"]}

    async def slow_eval(outputs: dict) -> bool:
        with gauge:
            await asyncio.sleep(random.uniform(0, 0.004))
            return True

    def sync_eval(outputs: dict, reference_outputs: dict) -> bool:
        with gauge:
            time.sleep(random.uniform(0, 0.002))
            return outputs["y"] == reference_outputs["y"]

    res = await aevaluate(target, data="d", evaluators=[slow_eval, sync_eval], client=client,
                          max_concurrency=limit)
    assert gauge.calls == 24 * 3
    assert gauge.peak == limit  # reached, never exceeded
    assert [r["example"].inputs["x"] for r in res] == list(range(24))  # dataset order
    assert all(r["run"].outputs["y"] == 2 * r["example"].inputs["x"] for r in res)


def test_sync_target_threads_keep_nesting_and_order(client: Client) -> None:
    make_dataset(client, "d", 12)

    @traceable(run_type="tool")
    def step(x: int) -> int:
        time.sleep(random.uniform(0, 0.003))
        return x + 1

    res = evaluate(lambda inputs: {"y": step(inputs["x"])}, data="d", client=client,
                   max_concurrency=4)
    assert [r["run"].outputs["y"] for r in res] == [x + 1 for x in range(12)]
    for row in res:
        kids = list(client.list_runs(parent_run_id=row["run"].id))
        assert [k.name for k in kids] == ["step"] and kids[0].trace_id == row["run"].trace_id


def test_target_and_evaluator_failures_are_recorded_not_raised(client: Client) -> None:
    make_dataset(client, "d", 6)

    def target(inputs: dict) -> dict:
        if inputs["x"] == 2:
            raise ValueError("bad input 2")
        return {"y": inputs["x"]}

    def broken(run, example) -> bool:
        if example.inputs["x"] == 3:
            raise KeyError("missing")
        return True

    res = evaluate(target, data="d", evaluators=[broken], client=client)
    rows = list(res)
    assert len(rows) == 6
    assert rows[2]["run"].error.startswith("ValueError: bad input 2")
    err = [r for r in rows[3]["evaluation_results"]["results"]]
    assert len(err) == 1 and err[0].key == "broken" and err[0].score is None
    assert err[0].extra["error"] is True and "KeyError" in err[0].comment
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.error_rate == pytest.approx(1 / 6)
    assert stats.feedback_stats["broken"].n == 6
    assert stats.feedback_stats["broken"].avg == 1.0  # the error has no score
    stored = [f for f in client.list_feedback(project_ids=[res.experiment_id])
              if f.extra and f.extra.get("error")]
    assert len(stored) == 1 and "missing" in stored[0].comment


def test_error_handling_ignore_leaves_failures_out(client: Client) -> None:
    make_dataset(client, "d", 5)

    @traceable(run_type="tool")
    def inner(x: int) -> int:
        return x

    def target(inputs: dict) -> dict:
        inner(inputs["x"])
        if inputs["x"] % 2:
            raise RuntimeError("odd")
        return {"y": inputs["x"]}

    res = evaluate(target, data="d", evaluators=[lambda outputs: True], client=client,
                   error_handling="ignore")
    assert [r["example"].inputs["x"] for r in res] == [0, 2, 4]
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.run_count == 3 and stats.error_rate == 0
    assert len(list(client.list_runs(project_id=res.experiment_id))) == 6  # roots + inner
    with pytest.raises(InvalidInputError, match="error_handling"):
        evaluate(target, data="d", client=client, error_handling="raise")


async def test_timeout_records_an_error_and_goes_on(client: Client) -> None:
    make_dataset(client, "d", 3)

    async def target(inputs: dict) -> dict:
        await asyncio.sleep(5 if inputs["x"] == 1 else 0)
        return {"y": inputs["x"]}

    t0 = time.perf_counter()
    res = await aevaluate(target, data="d", client=client, timeout=0.2, max_concurrency=1)
    assert time.perf_counter() - t0 < 3
    rows = list(res)
    assert rows[1]["run"].error.startswith("TimeoutError") and "0.2s" in rows[1]["run"].error
    assert rows[0]["run"].error is None and rows[2]["run"].outputs == {"y": 2}

    def slow_sync(inputs: dict) -> dict:
        time.sleep(2.0 if inputs["x"] == 0 else 0)
        return {"y": 0}

    t0 = time.perf_counter()
    res = evaluate(slow_sync, data="d", client=client, timeout=0.1)
    # the abandoned call is not waited for (it sleeps 2 s: a bound of 0.5 s against a 0.6 s
    # sleep failed on busy machines without any waiting)
    assert time.perf_counter() - t0 < 1.5
    assert list(res)[0]["run"].error.startswith("TimeoutError")
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.error_rate == pytest.approx(1 / 3)


def test_upload_results_false_writes_nothing(client: Client) -> None:
    @traceable(run_type="llm")
    def model(x: int) -> str:
        from assay.tracing import get_current_run_tree

        get_current_run_tree().set_usage(input_tokens=3, output_tokens=2, provider="openai",
                                         model="gpt-4o-mini")
        return str(x)

    before = (list(client.list_projects()), list(client.list_datasets()))
    res = evaluate(lambda inputs: {"y": model(inputs["x"])},
                   data=[{"inputs": {"x": i}, "outputs": {"y": str(i)}} for i in range(4)],
                   evaluators=[lambda outputs, reference_outputs: outputs == reference_outputs],
                   client=client, upload_results=False, num_repetitions=2)
    assert (list(client.list_projects()), list(client.list_datasets())) == before
    assert list(client.list_runs()) == [] and list(client.list_feedback()) == []
    rows = list(res)
    assert len(rows) == 8 and all(r["evaluation_results"]["results"][0].score for r in rows)
    assert res.experiment_id is None and res.experiment is None
    assert [c.name for c in rows[0]["run"].child_runs] == ["model"]
    recs = res.to_records()
    assert recs[0]["total_tokens"] == 5 and recs[0]["total_cost"] > 0


def test_evaluate_inside_a_running_loop_and_non_blocking(client: Client) -> None:
    make_dataset(client, "d", 5)

    async def in_loop() -> list[int]:  # as in Jupyter: a loop is already running
        res = evaluate(lambda inputs: {"y": inputs["x"]}, data="d", client=client)
        return [r["run"].outputs["y"] for r in res]

    assert asyncio.run(in_loop()) == list(range(5))

    gate = threading.Event()

    def target(inputs: dict) -> dict:
        gate.wait(5)
        return {"y": inputs["x"]}

    res = evaluate(target, data="d", client=client, blocking=False)
    gate.set()
    assert [r["run"].outputs["y"] for r in res] == list(range(5))  # iterating waits
    assert len(res.wait()) == 5


async def test_aevaluate_non_blocking_async_iteration(client: Client) -> None:
    make_dataset(client, "d", 4)

    async def target(inputs: dict) -> dict:
        await asyncio.sleep(0.01)
        return {"y": inputs["x"]}

    res = await aevaluate(target, data="d", client=client, blocking=False, max_concurrency=2)
    seen = [row["run"].outputs["y"] async for row in res]
    assert seen == [0, 1, 2, 3]


def test_invoke_objects_and_callable_objects(client: Client) -> None:
    make_dataset(client, "d", 3)

    class Graph:
        def invoke(self, inputs: dict) -> dict:
            return {"y": inputs["x"] * 10}

    class AsyncAgent:
        async def ainvoke(self, inputs: dict) -> str:
            return f"agent {inputs['x']}"

    class Fn:
        def __call__(self, inputs: dict) -> int:
            return inputs["x"]

    assert [r["run"].outputs for r in evaluate(Graph(), data="d", client=client)] == [
        {"y": 0}, {"y": 10}, {"y": 20}]
    assert [r["run"].outputs["output"] for r in evaluate(AsyncAgent(), data="d",
                                                         client=client)] == [
        "agent 0", "agent 1", "agent 2"]
    assert [r["run"].outputs["output"]
            for r in evaluate(Fn(), data="d", client=client)] == [0, 1, 2]
    with pytest.raises(InvalidInputError, match="no positional parameter"):
        evaluate(lambda: 1, data="d", client=client)


def test_bad_arguments_fail_before_anything_runs(client: Client) -> None:
    make_dataset(client, "d", 2)
    calls = []

    def target(inputs: dict) -> dict:
        calls.append(1)
        return {}

    for kwargs, msg in [({"max_concurrency": -1}, "max_concurrency"),
                        ({"num_repetitions": 0}, "num_repetitions"),
                        ({"timeout": 0}, "timeout"),
                        ({"evaluators": [lambda a, b, c: 1]}, "parameters"),
                        ({"evaluators": lambda run, example: 1}, "must be a list"),
                        ({"data": "nope"}, "nope"),
                        ({"metadata": [1]}, "metadata")]:
        kw = {"data": "d", "client": client, **kwargs}
        with pytest.raises(Exception, match=msg):
            evaluate(target, **kw)
    assert calls == []
    assert list(client.list_projects()) == []


def test_result_shapes_reach_feedback(client: Client) -> None:
    make_dataset(client, "d", 2)

    def as_bool(outputs): return True
    def as_int(run, example): return 3
    def as_str(outputs): return "good"
    def as_list(inputs, outputs): return [{"key": "a", "score": 1}, {"key": "b", "value": "x"}]
    def as_results(run): return {"results": [EvaluationResult(key="c", score=0.5)]}
    async def as_async(outputs, reference_outputs): return {"key": "d", "score": 0.25,
                                                            "comment": "hm"}

    res = evaluate(lambda inputs: {"y": inputs["x"]}, data="d", client=client,
                   evaluators=[as_bool, as_int, as_str, as_list, as_results, as_async])
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    fs = stats.feedback_stats
    assert fs["as_bool"].avg == 1.0 and fs["as_int"].avg == 3.0
    assert fs["as_str"].values == {"good": 2} and fs["b"].values == {"x": 2}
    assert fs["a"].avg == 1.0 and fs["c"].avg == 0.5 and fs["d"].avg == 0.25
    fb = [f for f in client.list_feedback(project_ids=[res.experiment_id]) if f.key == "d"]
    assert fb[0].comment == "hm" and fb[0].feedback_source.type == "model"


def test_runs_traced_by_evaluators_go_to_the_evaluators_project(client: Client) -> None:
    make_dataset(client, "d", 2)

    @traceable(run_type="llm", name="judge")
    def judge(text: str) -> int:
        return 1

    def judged(outputs: dict) -> int:
        return judge(str(outputs))

    from assay.tracing import tracing_context

    with tracing_context(enabled=True):
        res = evaluate(lambda inputs: {"y": inputs["x"]}, data="d", evaluators=[judged],
                       client=client)
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.run_count == 2 and stats.feedback_stats["judged"].avg == 1
    assert {r.run_type for r in client.list_runs(project_id=res.experiment_id)} == {"chain"}
    judges = list(client.list_runs(project_name="evaluators"))
    assert [r.name for r in judges] == ["judge", "judge"]


class _Stop(BaseException):
    """Not an Exception: a summary evaluator raising it stops the experiment."""


def test_stopped_after_its_examples_an_experiment_keeps_its_runs_and_feedback(
        client: Client) -> None:
    """Stopped between its last example and its end (here by a summary evaluator): what ran is
    stored (the feedback still queued too), and the experiment has no end time."""
    make_dataset(client, "stopped", 30)

    async def target(inputs: dict) -> dict:
        return {"y": 2 * inputs["x"]}

    def right(outputs: dict, reference_outputs: dict) -> bool:
        return outputs["y"] == reference_outputs["y"]

    def stop(runs: list, examples: list) -> float:
        raise _Stop

    with pytest.raises(_Stop):
        evaluate(target, data="stopped", evaluators=[right], summary_evaluators=[stop],
                 client=client, max_concurrency=10, experiment_prefix="stopped")
    (exp,) = [p for p in client.list_projects() if p.name.startswith("stopped-")]
    assert exp.end_time is None
    stats = client.read_project(project_id=exp.id, include_stats=True)
    assert stats.run_count == 30
    assert stats.feedback_stats["right"].n == 30


def test_summary_feedback_and_end_time_are_stored_with_the_last_runs(client: Client) -> None:
    make_dataset(client, "ended", 12)

    def target(inputs: dict) -> dict:
        return {"y": 2 * inputs["x"]}

    def fails(outputs: dict) -> bool:
        raise ValueError("bad")

    def count(runs: list, examples: list) -> int:
        return len(runs)

    res = evaluate(target, data="ended", evaluators=[fails], summary_evaluators=[count],
                   client=client, experiment_prefix="ended")
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.end_time is not None and stats.run_count == 12
    assert stats.feedback_stats["fails"].n == 12  # error results are feedback too
    assert stats.session_feedback_stats["count"].avg == 12


async def test_an_experiment_leaves_the_loop_s_default_executor_alone(client: Client) -> None:
    """Its blocking store work runs on assay's own threads: nothing for ``asyncio.run`` to
    start and join per call."""
    make_dataset(client, "own-threads", 5)

    async def target(inputs: dict) -> dict:
        return {"y": 2 * inputs["x"]}

    loop = asyncio.get_running_loop()
    res = await aevaluate(target, data="own-threads", client=client, max_concurrency=5)
    assert len(res) == 5
    # this loop's default executor was never started (a long-lived loop of assay's own, used by
    # sync entry points elsewhere in the process, may have one: not this caller's concern)
    assert loop._default_executor is None  # type: ignore[attr-defined]
    names = [t.name for t in threading.enumerate()]
    assert any(n.startswith("assay-io") for n in names), names


def test_rows_give_the_stored_examples_and_results_they_were_built_from(client: Client) -> None:
    """Rows keep what the hot path read (the stored row, plain scores) and build the models on
    first read: each must be what the store and an evaluator's own result would give."""
    from assay.tracing import get_current_run_tree

    make_dataset(client, "d", 6)
    refs = []

    def target(inputs: dict) -> dict:
        refs.append(get_current_run_tree().reference_example_id)
        return {"y": 2 * inputs["x"]}

    def matches(outputs: dict, reference_outputs: dict) -> bool:
        return outputs["y"] == reference_outputs["y"]

    def rich(outputs: dict) -> EvaluationResult:
        return EvaluationResult(key="rich", score=0.5, comment="half")

    res = evaluate(target, data="d", evaluators=[matches, rich], client=client)
    stored = {ex.id: ex for ex in client.list_examples(dataset_name="d")}
    assert len(res) == 6
    for row, ref in zip(res, refs, strict=True):
        ex = row["example"]
        assert ex == stored[ex.id] and row.example is ex  # the Example, built once
        assert ref == ex.id and type(ref) is type(ex.id)  # a UUID inside the target too
        assert row["run"].reference_example_id == ex.id
        results = row["evaluation_results"].results
        assert [type(r) for r in results] == [EvaluationResult, EvaluationResult]
        want = ex.outputs["y"] == 2 * ex.inputs["x"]
        assert [(r.key, r.score, r.comment) for r in results] == [
            ("matches", want, None), ("rich", 0.5, "half")]
        feedback = {f.key: f for f in client.list_feedback(run_ids=[row["run"].id])}
        assert feedback["matches"].score == float(want) and feedback["matches"].comment is None
        assert feedback["rich"].score == 0.5 and feedback["rich"].comment == "half"
        assert feedback["matches"].feedback_source.type == "model"


def test_a_sequential_experiment_stores_its_feedback_as_it_goes(client: Client) -> None:
    """Examples with a sync target run one after the other without giving the event loop a
    turn; their feedback must still reach the store while they run (an experiment killed
    midway keeps it), not all at the end."""
    make_dataset(client, "one-by-one", 12)
    stored_before_last: list[int] = []

    def stored() -> int:
        return len(list(client.list_feedback(feedback_key=["paced"])))

    def target(inputs: dict) -> dict:
        if inputs["x"] == 11:  # the last example waits for the eleven before it to be stored
            deadline = time.monotonic() + 20  # generous: a loaded machine starves the writer
            while (n := stored()) < 11 and time.monotonic() < deadline:
                time.sleep(0.02)
            stored_before_last.append(n)
        time.sleep(0.03)
        return {"y": 2 * inputs["x"]}

    def paced(outputs: dict, reference_outputs: dict) -> bool:
        return outputs["y"] == reference_outputs["y"]

    evaluate(target, data="one-by-one", evaluators=[paced], client=client)
    # written while the run goes on: a writer that waited for the end would leave none
    assert stored_before_last == [11], stored_before_last
    assert len(list(client.list_feedback(feedback_key=["paced"]))) == 12
