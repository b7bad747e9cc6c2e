"""pydantic-evals peer: ``Dataset.evaluate`` with a no-op task and one trivial Evaluator.

Prints one JSON line: seconds spent in the evaluate call (dataset built beforehand).
pydantic-evals keeps results in memory (its report); it has no store.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import time
from dataclasses import dataclass

from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import Evaluator, EvaluatorContext


@dataclass
class Matches(Evaluator):
    def evaluate(self, ctx: EvaluatorContext) -> bool:
        return ctx.output == ctx.expected_output


async def task(inputs: int) -> int:
    return inputs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=None)
    args = ap.parse_args()
    target = task
    if args.sleep_ms:
        delay = args.sleep_ms / 1000

        async def target(inputs: int) -> int:  # type: ignore[misc]
            await asyncio.sleep(delay)
            return inputs

    cases = [Case(name=f"case-{i}", inputs=i, expected_output=i) for i in range(args.n)]
    dataset = Dataset(name="bench", cases=cases, evaluators=[Matches()])
    c0 = time.process_time()  # CPU of all threads: steadier than wall on a busy machine
    t0 = time.perf_counter()
    report = dataset.evaluate_sync(target, max_concurrency=args.concurrency, progress=False)
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    assert len(report.cases) == args.n and not report.failures, "pydantic-evals run failed"
    assert all(c.assertions["Matches"].value is True for c in report.cases)
    print(json.dumps({"peer": "pydantic-evals", "n": args.n, "seconds": seconds,
                      "cpu_seconds": cpu_seconds,
                      "version": importlib.metadata.version("pydantic-evals")}))


if __name__ == "__main__":
    main()
