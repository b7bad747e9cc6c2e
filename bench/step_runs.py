"""What asking "which framework step is running here?" costs a traced call.

Each instrumented framework whose steps run user code (LangChain, the Agents SDK, Upsonic, an
``AssaySpanProcessor``) adds a function to ``tracing._context.STEP_RUNS``; every run started
outside such a step asks each of them once (``innermost``). This prints the cost of a sync
``@traceable`` call (the C traced call where built), tracing off and on (inside a ``trace``
block whose runs a writer with no store takes), with no framework instrumented and with the
four, outside any framework step, in ns a call (median of rounds).

    python bench/step_runs.py [--calls 200000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.tracing import _context, trace, traceable, tracing_context


@traceable(name="leaf")
def leaf(x: int) -> int:
    return x


def per_call(calls: int, rounds: int, body: Callable[[], Any]) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        body()
        times.append((time.perf_counter_ns() - start) / calls)
    return statistics.median(times)


def off(calls: int) -> Callable[[], None]:
    def body() -> None:
        for i in range(calls):
            leaf(i)
    return body


def on(calls: int) -> Callable[[], None]:
    from assay.client import Client

    client = Client(database_url=Path(tempfile.mkdtemp()) / "bench.db")

    def body() -> None:
        with tracing_context(enabled=True, client=client, project_name="bench"), \
                trace("root"):
            for i in range(calls):
                leaf(i)
        client.flush()
    return body


def instrument_all() -> list[str]:
    from assay.integrations import instrument
    from assay.tracing.otel import AssaySpanProcessor

    names = [n for n in ("langchain", "openai-agents", "upsonic") if instrument(n)]
    AssaySpanProcessor()
    return names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    on_calls = args.calls // 10  # (each run stored: a tenth as many)
    names = instrument_all()  # first: the frameworks' imports weigh on both columns alike
    lookups = list(_context.STEP_RUNS)
    bodies = (off(args.calls), on(on_calls))
    figures: dict[bool, list[list[float]]] = {False: [[], []], True: [[], []]}
    for _ in range(args.rounds):  # interleaved: with the lookups and without, in turn
        for asked in (False, True):
            _context.STEP_RUNS[:] = lookups if asked else []
            figures[asked][0].append(per_call(args.calls, 1, bodies[0]))
            figures[asked][1].append(per_call(on_calls, 1, bodies[1]))
    _context.STEP_RUNS[:] = lookups
    bare, with_all = ([statistics.median(f) for f in figures[k]] for k in (False, True))
    print(f"STEP_RUNS: {len(lookups)} ({', '.join(names)}, an AssaySpanProcessor)")
    print("| lookups asked | tracing off, ns/call | tracing on, ns/call (stored) |")
    print("| --- | --- | --- |")
    print(f"| none | {bare[0]:.0f} | {bare[1]:.0f} |")
    print(f"| {len(lookups)} | {with_all[0]:.0f} (+{with_all[0] - bare[0]:.0f}) | "
          f"{with_all[1]:.0f} (+{with_all[1] - bare[1]:.0f}) |")


if __name__ == "__main__":
    main()
