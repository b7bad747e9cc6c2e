"""PerformanceEvaluator: separate latency and memory runs, stats, sync/async, tracemalloc care.

Only behaviour is asserted here (which runs had tracemalloc on, what memory was attributed,
what state is left behind); speed goals live in bench/performance_evaluator.py.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
import weakref
from typing import Any

import numpy as np
import pytest

from assay.errors import InvalidInputError
from assay.evals import PerformanceEvaluator, percentile, summarize


def test_summarize_matches_numpy() -> None:
    data = [0.9, 1.3, 1.1, 4.0, 1.2, 1.0, 0.95, 1.05, 2.2, 1.15, 1.01]
    stats = summarize(data)
    assert stats["average"] == pytest.approx(np.mean(data))
    assert stats["median"] == pytest.approx(np.median(data))
    assert stats["min"] == 0.9 and stats["max"] == 4.0
    assert stats["std_dev"] == pytest.approx(np.std(data, ddof=1))
    for q in (90, 95, 99):
        assert stats[f"p{q}"] == pytest.approx(np.percentile(data, q))
    assert summarize([3.0]) == {"average": 3.0, "median": 3.0, "min": 3.0, "max": 3.0,
                                "std_dev": 0.0, "p90": 3.0, "p95": 3.0, "p99": 3.0}
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_latency_runs_without_tracemalloc_memory_runs_with_it() -> None:
    seen: list[bool] = []

    def agent(task: str) -> str:
        seen.append(tracemalloc.is_tracing())
        time.sleep(0.002)
        return task

    result = PerformanceEvaluator(agent, "t", num_iterations=3, warmup_runs=1).run()
    assert seen == [False] * 1 + [False] * 3 + [True] * 3  # warmups, timing, memory
    assert not tracemalloc.is_tracing()
    assert len(result.all_runs) == 3 and result.num_iterations == 3 and result.warmup_runs == 1
    assert all(r.latency_seconds >= 0.002 for r in result.all_runs)
    for stats in (result.latency_stats, result.memory_increase_stats, result.memory_peak_stats):
        assert set(stats) == {"average", "median", "min", "max", "std_dev", "p90", "p95", "p99"}
    assert result.latency_stats["min"] == min(r.latency_seconds for r in result.all_runs)
    assert result.latency_measured_with_tracemalloc is False
    assert result.agent == ("test_latency_runs_without_tracemalloc_memory_runs_with_it"
                            ".<locals>.agent")


def test_memory_increase_and_peak_are_relative_to_the_run() -> None:
    kept: list[bytearray] = []

    def retains(_: Any) -> None:
        kept.append(bytearray(1_000_000))  # +1 MB that stays

    def spikes(_: Any) -> int:
        tmp = bytearray(2_000_000)  # 2 MB that is freed before returning
        n = len(tmp)
        del tmp
        return n

    r = PerformanceEvaluator(retains, None, num_iterations=2, warmup_runs=0).run()
    for run in r.all_runs:
        assert 1_000_000 <= run.memory_increase_bytes < 1_050_000
        assert 1_000_000 <= run.memory_peak_bytes < 1_050_000
    s = PerformanceEvaluator(spikes, None, num_iterations=2, warmup_runs=0).run()
    for run in s.all_runs:
        assert run.memory_peak_bytes >= 2_000_000
        assert abs(run.memory_increase_bytes) < 20_000
    assert s.memory_peak_stats["min"] >= 2_000_000


def test_garbage_is_collected_before_every_run() -> None:
    """Cyclic garbage left by one run is gone when the next run starts.

    (Checked with weak references, not gc counters: other threads of the test process may
    allocate between the collection and the run.)
    """
    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    previous: list[weakref.ref[Node]] = []
    alive_at_start: list[int] = []

    def agent(_: Any) -> None:
        alive_at_start.append(sum(ref() is not None for ref in previous))
        previous.clear()
        for _ in range(1000):
            previous.append(weakref.ref(Node()))

    PerformanceEvaluator(agent, None, num_iterations=3, warmup_runs=1).run()
    assert len(alive_at_start) == 7
    assert alive_at_start == [0] * 7, alive_at_start


def test_one_full_collection_per_evaluation_not_one_per_run() -> None:
    """A full collection scans the whole heap (0.3-1 s with a big framework imported); before
    each run only the young generations are collected, which is where a run's garbage is."""
    def agent(_: Any) -> int:
        return sum(range(100))

    before = gc.get_stats()[2]["collections"]
    PerformanceEvaluator(agent, None, num_iterations=10, warmup_runs=2).run()
    full = gc.get_stats()[2]["collections"] - before
    assert 1 <= full <= 2, full  # (one per run: 22; a collection of the collector's own: 2)


def test_memory_figures_stay_right_with_old_garbage_and_a_full_collection_mid_run() -> None:
    """Each run leaves 1 MB of cyclic garbage in the oldest generation (young collections do
    not free it). Every run's increase and peak are still its own 1 MB, also for the run during
    which a full collection frees the older runs' garbage: that run is measured again."""
    class Holder:
        def __init__(self) -> None:
            self.me = self
            self.blob = bytearray(1_000_000)

    calls = [0]

    def agent(_: Any) -> None:
        calls[0] += 1
        held = Holder()
        gc.collect(1)  # survives the young generations: promoted to the oldest
        if calls[0] == 3 + 3:  # the third memory run (after 3 timed runs, no warm-up)
            gc.collect()  # frees the earlier runs' garbage while this run is measured
        del held  # garbage now, in the oldest generation

    r = PerformanceEvaluator(agent, None, num_iterations=3, warmup_runs=0).run()
    assert calls[0] == 3 + 3 + 1  # the disturbed memory run was measured again
    for run in r.all_runs:
        assert 1_000_000 <= run.memory_increase_bytes < 1_100_000, run
        assert 1_000_000 <= run.memory_peak_bytes < 1_100_000, run


async def test_async_agent_is_timed_inside_one_loop() -> None:
    async def noop(q: str) -> str:
        return q

    async def sleepy(q: str) -> str:
        await asyncio.sleep(0.01)
        return q

    fast = await PerformanceEvaluator(noop, "x", num_iterations=5, warmup_runs=1).arun()
    slow = await PerformanceEvaluator(sleepy, "x", num_iterations=2, warmup_runs=0).arun()
    assert all(0.01 <= r.latency_seconds < 0.5 for r in slow.all_runs)
    # starting a loop per run would cost far more than awaiting a no-op coroutine
    loop_start = min(_time_in_thread(noop) for _ in range(3))
    assert fast.latency_stats["median"] < loop_start


def _time(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _time_in_thread(coro_fn: Any) -> float:
    import threading

    box: list[float] = []
    t = threading.Thread(target=lambda: box.append(_time(lambda: asyncio.run(coro_fn("x")))))
    t.start()
    t.join()
    return box[0]


def test_sync_run_of_an_async_agent() -> None:
    async def agent(q: str) -> str:
        await asyncio.sleep(0)
        return q * 1000

    result = PerformanceEvaluator(agent, "ab", num_iterations=2, warmup_runs=0).run()
    assert len(result.all_runs) == 2
    assert all(r.memory_peak_bytes >= 2000 for r in result.all_runs)


def test_a_running_user_tracemalloc_session_is_left_as_it_was() -> None:
    tracemalloc.start(5)
    try:
        mine = bytearray(100_000)  # allocated while the user traces
        big = bytearray(6_000_000)
        del big
        _, user_peak = tracemalloc.get_traced_memory()

        def agent(_: Any) -> int:
            return len(bytearray(200_000))

        result = PerformanceEvaluator(agent, None, num_iterations=2, warmup_runs=0).run()
        assert tracemalloc.is_tracing()
        assert tracemalloc.get_traceback_limit() == 5
        assert tracemalloc.get_object_traceback(mine) is not None  # traces were not wiped
        _, peak_after = tracemalloc.get_traced_memory()
        assert user_peak <= peak_after < user_peak + 50_000  # restored, not inflated
        assert result.latency_measured_with_tracemalloc is True
        assert all(200_000 <= r.memory_peak_bytes < 260_000 for r in result.all_runs)

        def hungry(_: Any) -> int:
            return len(bytearray(12_000_000))

        current_before = tracemalloc.get_traced_memory()[0]
        PerformanceEvaluator(hungry, None, num_iterations=1, warmup_runs=0).run()
        # the agent's own peak (higher than the user's) remains visible to the user
        assert tracemalloc.get_traced_memory()[1] >= current_before + 12_000_000
    finally:
        tracemalloc.stop()


def test_agent_failure_propagates_and_cleans_up() -> None:
    calls = {"n": 0}

    def flaky(_: Any) -> None:
        calls["n"] += 1
        if tracemalloc.is_tracing():
            raise RuntimeError("boom in a memory run")

    with pytest.raises(RuntimeError, match="boom in a memory run"):
        PerformanceEvaluator(flaky, None, num_iterations=2, warmup_runs=0).run()
    assert not tracemalloc.is_tracing()
    # the measurement lock was released
    assert PerformanceEvaluator(lambda _: None, None, num_iterations=1).run().num_iterations == 1


async def test_concurrent_evaluations_are_serialized() -> None:
    active = {"now": 0, "max": 0}

    async def agent(_: Any) -> None:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0.001)
        active["now"] -= 1

    results = await asyncio.gather(*(PerformanceEvaluator(agent, None, num_iterations=1,
                                                          warmup_runs=0).arun()
                                     for _ in range(3)))
    assert [r.num_iterations for r in results] == [1, 1, 1]
    assert active["max"] == 1
    assert not tracemalloc.is_tracing()


@pytest.mark.parametrize("kwargs,match", [
    ({"num_iterations": 0}, "num_iterations"),
    ({"num_iterations": 2.5}, "num_iterations"),
    ({"warmup_runs": -1}, "warmup_runs"),
])
def test_bad_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        PerformanceEvaluator(lambda q: q, "t", **kwargs)


def test_as_evaluator_feedback() -> None:
    seen: list[Any] = []

    def agent(task: Any) -> bytearray:
        seen.append(task)
        return bytearray(50_000)

    evaluator = PerformanceEvaluator(agent, num_iterations=2, warmup_runs=0).as_evaluator()
    assert evaluator.__name__ == "performance"
    out = evaluator({"question": "q1"})
    assert seen == ["q1"] * 4
    results = {r["key"]: r for r in out["results"]}
    assert set(results) == {"latency_seconds", "latency_p95_seconds", "memory_increase_bytes",
                            "memory_peak_bytes"}
    assert results["latency_seconds"]["score"] > 0
    assert results["memory_peak_bytes"]["score"] >= 50_000
    assert "median" in results["latency_seconds"]["comment"]
    PerformanceEvaluator(agent, num_iterations=1, warmup_runs=0).as_evaluator()({"a": 1, "b": 2})
    assert seen[-1] == {"a": 1, "b": 2}
    with pytest.raises(InvalidInputError, match="no 'text'"):
        PerformanceEvaluator(agent).as_evaluator(input_key="text")({"a": 1})
