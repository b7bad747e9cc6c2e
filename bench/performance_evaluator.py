"""Does PerformanceEvaluator report the latency the code really has?

    python bench/performance_evaluator.py [--iterations 3] [--rounds 20] [--size 40000]

A known CPU-bound workload (integer arithmetic) is timed three ways, interleaved over many short
rounds so drift (CPU boost, other load on a shared machine) hits all of them alike:

    bare        perf_counter around the call, nothing else running
    evaluator   PerformanceEvaluator(...).run() latency (sync agent, and the same work as an
                async agent)
    tracemalloc the same bare loop with tracemalloc on during timing (what measuring latency and
                memory in the same runs would report)

Prints medians and ratios to bare; the evaluator must be within 5% (exit status 1 otherwise).

Then the evaluator's own cost with big frameworks imported (``--no-frameworks`` skips it):
LangGraph, the OpenAI Agents SDK, pydantic-ai and Upsonic make a heap of ~300,000 tracked
objects, where one full ``gc.collect()`` takes 0.3-1 s. ``run()`` on a trivial agent (ten
iterations, two warm-ups) is timed (wall and CPU), beside what it cost when it collected the
whole heap before every run (22 full collections: measured here as 22 x one full collection in
this heap) and what a young collection (what it does now before each run) costs.

Why integer arithmetic rather than building many objects: run back to back, an allocation-heavy
workload's time depends on whether pymalloc can reuse the arenas the previous run freed or must
map (and page-fault) fresh ones, which varies with whatever else was allocated in between. That
moves such timings by 10-20% in either direction between any two harnesses, bare included, and
says nothing about the evaluator. (Interleaved one call at a time, they agree.)
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from typing import Any

from assay.evals import PerformanceEvaluator

TOLERANCE = 0.05


def make_workload(size: int) -> Any:
    def workload(_: Any = None) -> int:
        """A linear congruential generator folded with xor: pure-Python integer arithmetic.

        Every step creates and frees int objects (beyond the small-int cache), so tracemalloc
        hooks each of them, yet the working set stays tiny: no memory growth, no page faults,
        nothing for the allocator's state to change from one run to the next.
        """
        x = 1
        acc = 0
        for _ in range(size):
            x = (x * 1103515245 + 12345) % 2147483648
            acc ^= x
        return acc

    return workload


WARMUP = 2


def time_bare(fn: Any, n: int, *, traced: bool = False) -> list[float]:
    """The reference: same warm-up and collection as the evaluator, a timer around the call."""
    if traced:
        tracemalloc.start()
    try:
        gc.collect()
        for _ in range(WARMUP):
            fn()
        out = []
        for _ in range(n):
            gc.collect(1)
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
        return out
    finally:
        if traced:
            tracemalloc.stop()


def evaluator_cost_with_frameworks() -> None:
    """run()'s own cost once big frameworks are imported (see the module docstring)."""
    import importlib
    import os
    import warnings

    loaded = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("langgraph.prebuilt", "langchain_openai", "agents", "pydantic_ai",
                     "upsonic"):
            try:
                importlib.import_module(name)
                loaded.append(name.split(".")[0])
            except ImportError:
                pass
    tracked = len(gc.get_objects())

    def clock(fn: Any) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - wall, time.process_time() - cpu

    full = statistics.median(clock(gc.collect)[0] for _ in range(3))
    young = statistics.median(clock(lambda: gc.collect(1))[0] for _ in range(20))

    def agent(_: Any) -> int:
        return sum(range(1000))

    def evaluate_once() -> None:
        PerformanceEvaluator(agent, None, num_iterations=10, warmup_runs=2).run()

    evaluate_once()  # first use: instruments the imported frameworks once
    runs = [clock(evaluate_once) for _ in range(3)]
    wall = statistics.median(w for w, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    print(f"\nwith {', '.join(loaded) or 'no frameworks'} imported ({tracked:,} tracked "
          f"objects; load average {os.getloadavg()[0]:.2f}):")
    print(f"  one full collection {full * 1000:.0f} ms, one young collection "
          f"{young * 1e6:.1f} us")
    print(f"  PerformanceEvaluator(trivial agent, 10 iterations, 2 warm-ups).run(): "
          f"{wall:.3f} s wall, {cpu:.3f} s CPU (median of 3)")
    print(f"  before (a full collection before each of its 22 runs): ~{22 * full:.1f} s of "
          f"collections alone")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--size", type=int, default=40_000)
    parser.add_argument("--no-frameworks", action="store_true",
                        help="skip run()'s cost with big frameworks imported")
    args = parser.parse_args()

    workload = make_workload(args.size)

    async def async_agent(task: Any) -> int:
        return workload(task)

    bare: list[float] = []
    traced: list[float] = []
    evaluated: list[float] = []
    evaluated_async: list[float] = []
    last = None
    for _ in range(args.rounds):
        bare += time_bare(workload, args.iterations)
        last = PerformanceEvaluator(workload, None, num_iterations=args.iterations,
                                    warmup_runs=WARMUP).run()
        evaluated += [run.latency_seconds for run in last.all_runs]
        evaluated_async += [run.latency_seconds for run in PerformanceEvaluator(
            async_agent, None, num_iterations=args.iterations, warmup_runs=WARMUP).run().all_runs]
        traced += time_bare(workload, args.iterations, traced=True)

    samples = {"bare": bare, "evaluator (sync agent)": evaluated,
               "evaluator (async agent)": evaluated_async,
               "tracemalloc on while timing": traced}
    med = {name: statistics.median(v) for name, v in samples.items()}
    low = {name: min(v) for name, v in samples.items()}
    print(f"\nworkload: {args.size} steps of integer LCG arithmetic; "
          f"{args.rounds} rounds x {args.iterations} timed runs per method\n")
    print(f"{'method':30} {'median ms':>10} {'ratio':>7} {'min ms':>9} {'ratio':>7}")
    for name in samples:
        print(f"{name:30} {med[name] * 1000:10.3f} {med[name] / med['bare']:7.3f} "
              f"{low[name] * 1000:9.3f} {low[name] / low['bare']:7.3f}")
    assert last is not None
    print(f"\nevaluator memory (last round): increase avg "
          f"{last.memory_increase_stats['average']:.0f} B, peak avg "
          f"{last.memory_peak_stats['average'] / 1e3:.1f} KB, p95 latency "
          f"{last.latency_stats['p95'] * 1000:.3f} ms")

    ok = True
    for name in ("evaluator (sync agent)", "evaluator (async agent)"):
        ratio = med[name] / med["bare"]
        within = abs(ratio - 1) <= TOLERANCE
        ok &= within
        print(f"{name}: median ratio {ratio:.3f} -> {'within' if within else 'OUTSIDE'} "
              f"{TOLERANCE:.0%} of bare (min ratio {low[name] / low['bare']:.3f})")
    print(f"tracemalloc on during timing would report "
          f"{med['tracemalloc on while timing'] / med['bare']:.1f}x the real latency")
    if not args.no_frameworks:
        evaluator_cost_with_frameworks()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
