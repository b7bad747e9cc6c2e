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
import time
from collections.abc import Callable
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

    client = Client(database_url=":memory:")

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
    rows = [("none", off(args.calls), on(on_calls))]
    bare = (per_call(args.calls, args.rounds, rows[0][1]),
            per_call(on_calls, args.rounds, rows[0][2]))
    names = instrument_all()
    with_all = (per_call(args.calls, args.rounds, off(args.calls)),
                per_call(on_calls, args.rounds, on(on_calls)))
    print(f"STEP_RUNS: {len(_context.STEP_RUNS)} ({', '.join(names)}, an AssaySpanProcessor)")
    print("| frameworks instrumented | tracing off, ns/call | tracing on, ns/call (stored) |")
    print("| --- | --- | --- |")
    print(f"| none | {bare[0]:.0f} | {bare[1]:.0f} |")
    print(f"| {len(_context.STEP_RUNS)} step resolvers | {with_all[0]:.0f} "
          f"(+{with_all[0] - bare[0]:.0f}) | {with_all[1]:.0f} (+{with_all[1] - bare[1]:.0f}) |")


if __name__ == "__main__":
    main()
