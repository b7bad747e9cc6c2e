"""Performance: latency and memory of an agent, measured so that one does not distort the other.

tracemalloc hooks every allocation, which can slow allocation-heavy code many times over, so
latency comes from runs with tracemalloc off and memory from separate runs with it on.

Garbage: the whole heap is collected once, before the first run; before every run only the
young generations are (``gc.collect(1)``: microseconds), which frees
what the previous run left there, most of its garbage, so it does not land in the next run. A
full collection before every run cost 0.3-1 s each once a big framework is imported (300,000
tracked objects): 22 of them for ten iterations (11 s). What a run leaves in the oldest generation
stays until the collector's own full collection, as in the real program, which keeps the
timing honest (the heap is deliberately not frozen, ``gc.freeze``, for the same reason: that
would make the collections *inside* a timed run cheaper than in the real program). A memory run
during which a full collection ran (it freed older garbage, so its base was stale) is measured
again after a full collection, once. Async agents
are timed inside one event loop (no per-run loop start-up). A tracemalloc session the caller
already had running is never stopped or restarted (that would discard its traces): it stays on,
keeps its frame limit, and its peak is restored to at least what it was.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
import time
import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any

from .._sync import awaited as _awaited
from .._sync import on_a_running_loop, run_sync
from ..errors import InvalidInputError
from ..integrations._registry import instrument_loaded
from ._agent import AgentUnderTest
from ._models import PerformanceEvaluationResult, PerformanceRunResult
from ._stats import summarize

__all__ = ["PerformanceEvaluator"]

# tracemalloc and wall time are process-wide: two measurements at once would corrupt both
_MEASURE_LOCK = threading.Lock()


def _raise_peak_to(target: int) -> None:
    """Bring tracemalloc's peak back up to ``target`` after ``reset_peak`` lowered it.

    tracemalloc has no ``set_peak``; allocating (and freeing) one block of the missing size
    makes the traced peak what it would have been had we never reset it.
    """
    for _ in range(4):
        if tracemalloc.get_traced_memory()[1] >= target:
            return
        before = tracemalloc.get_traced_memory()[0]
        probe = bytearray(1024)
        overhead = tracemalloc.get_traced_memory()[0] - before - 1024
        del probe
        current = tracemalloc.get_traced_memory()[0]
        pad = bytearray(max(1, target - current - max(overhead, 0)))
        del pad


def _full_collections() -> int:
    """Full (oldest-generation) collections so far in this process."""
    return int(gc.get_stats()[2]["collections"])


async def _invoke(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    result = fn(*args)
    while inspect.isawaitable(result):
        result = await result
    return result


class PerformanceEvaluator:
    """``PerformanceEvaluator(agent, task, num_iterations=10, warmup_runs=2).run()``."""

    def __init__(
        self,
        agent_under_test: Any,
        task: Any = None,
        num_iterations: int = 10,
        warmup_runs: int = 2,
        *,
        input_mapper: Callable[[Any], Any] | None = None,
    ) -> None:
        if isinstance(num_iterations, bool) or not isinstance(num_iterations, int) \
                or num_iterations < 1:
            raise InvalidInputError(f"num_iterations must be an integer >= 1, got "
                                    f"{num_iterations!r}")
        if isinstance(warmup_runs, bool) or not isinstance(warmup_runs, int) or warmup_runs < 0:
            raise InvalidInputError(f"warmup_runs must be an integer >= 0, got {warmup_runs!r}")
        self.agent = AgentUnderTest(agent_under_test, input_mapper=input_mapper)
        self.task = task
        self.num_iterations = num_iterations
        self.warmup_runs = warmup_runs

    def run(self, task: Any = ...) -> PerformanceEvaluationResult:
        """Measure from sync code (async agents run inside one event loop)."""
        return run_sync(self.arun(task))

    async def arun(self, task: Any = ...) -> PerformanceEvaluationResult:
        """Measure ``task`` (default: the one given at construction)."""
        task = self.task if task is ... else task
        instrument_loaded()
        while not _MEASURE_LOCK.acquire(blocking=False):  # cancellable wait
            await asyncio.sleep(0.005)
        try:
            return await self._measure(task)
        finally:
            _MEASURE_LOCK.release()

    async def _time_once(self, task: Any) -> float:
        agent = self.agent
        args = agent.prepare(task)
        fn = agent.fn
        gc.collect(1)  # the young generations: the previous run's garbage (see the docstring)
        if agent.is_async:
            start = time.perf_counter()
            result = await _invoke(fn, args)
            elapsed = time.perf_counter() - start
        else:
            start = time.perf_counter()
            result = fn(*args)
            while inspect.isawaitable(result):  # a sync callable returning a coroutine
                result = await result
            elapsed = time.perf_counter() - start
        del result
        return elapsed

    async def _measure(self, task: Any) -> PerformanceEvaluationResult:
        user_tracing = tracemalloc.is_tracing()
        gc.collect()  # once: the heap as the program left it, less its garbage
        for _ in range(self.warmup_runs):
            await self._time_once(task)
        latencies = [await self._time_once(task) for _ in range(self.num_iterations)]

        increases: list[int] = []
        peaks: list[int] = []
        memory_latencies: list[float] = []
        user_peak = tracemalloc.get_traced_memory()[1] if user_tracing else 0
        highest = 0
        if not user_tracing:
            tracemalloc.start()
        try:
            for _ in range(self.num_iterations):
                for again in (False, True):
                    args = self.agent.prepare(task)
                    gc.collect(1)
                    full = _full_collections()
                    base = tracemalloc.get_traced_memory()[0]
                    tracemalloc.reset_peak()
                    start = time.perf_counter()
                    result = await _invoke(self.agent.fn, args)
                    elapsed = time.perf_counter() - start
                    current, peak = tracemalloc.get_traced_memory()
                    del result
                    if again or _full_collections() == full:
                        break
                    gc.collect()  # older garbage was freed during the run: measure it again
                memory_latencies.append(elapsed)
                increases.append(current - base)
                peaks.append(max(0, peak - base))
                highest = max(highest, peak)
        finally:
            if user_tracing:
                _raise_peak_to(max(user_peak, highest))
            else:
                tracemalloc.stop()

        runs = [PerformanceRunResult(latency_seconds=lat, memory_increase_bytes=inc,
                                     memory_peak_bytes=pk, memory_run_latency_seconds=mlat)
                for lat, inc, pk, mlat in zip(latencies, increases, peaks, memory_latencies,
                                                  strict=True)]
        return PerformanceEvaluationResult(
            all_runs=runs,
            num_iterations=self.num_iterations,
            warmup_runs=self.warmup_runs,
            latency_stats=summarize(latencies),
            memory_increase_stats=summarize(increases),
            memory_peak_stats=summarize(peaks),
            latency_measured_with_tracemalloc=user_tracing,
            agent=self.agent.description,
        )

    def as_evaluator(self, *, input_key: str | None = None, key_prefix: str = ""
                     ) -> Callable[..., dict[str, Any]]:
        """An ``evaluate()`` evaluator measuring this agent on each example's inputs.

        Feedback: ``latency_seconds`` (average, with the other statistics in the comment),
        ``latency_p95_seconds``, ``memory_increase_bytes`` (average) and ``memory_peak_bytes``
        (max). ``input_key`` picks one input field as the task; by default a single-field input
        passes its value and a multi-field input the whole dict.
        """
        template = self

        def performance(inputs: Any) -> Any:
            task = _task_from(inputs, input_key)
            if on_a_running_loop():  # evaluate() calls it on its loop: awaited there, where
                return _awaited(template.arun(task), feedback)  # the agent's clients live
            return feedback(template.run(task))

        def feedback(result: PerformanceEvaluationResult) -> dict[str, Any]:
            lat, inc, peak = (result.latency_stats, result.memory_increase_stats,
                              result.memory_peak_stats)
            n = result.num_iterations
            return {"results": [
                {"key": f"{key_prefix}latency_seconds", "score": lat["average"],
                 "comment": (f"{n} runs: median {lat['median']:.6f}s, min {lat['min']:.6f}s, "
                             f"max {lat['max']:.6f}s, std_dev {lat['std_dev']:.6f}s, "
                             f"p99 {lat['p99']:.6f}s")},
                {"key": f"{key_prefix}latency_p95_seconds", "score": lat["p95"]},
                {"key": f"{key_prefix}memory_increase_bytes", "score": inc["average"],
                 "comment": f"max {inc['max']:.0f} bytes over {n} runs"},
                {"key": f"{key_prefix}memory_peak_bytes", "score": peak["max"],
                 "comment": f"average {peak['average']:.0f} bytes over {n} runs"},
            ]}

        performance.__name__ = f"{key_prefix}performance"
        return performance


def _task_from(inputs: Any, key: str | None) -> Any:
    if key is not None:
        if not isinstance(inputs, Mapping) or key not in inputs:
            have = sorted(inputs) if isinstance(inputs, Mapping) else type(inputs).__name__
            raise InvalidInputError(f"performance evaluator: inputs have no {key!r} (have {have})")
        return inputs[key]
    if isinstance(inputs, Mapping) and len(inputs) == 1:
        return next(iter(inputs.values()))
    return inputs
