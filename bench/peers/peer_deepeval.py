"""deepeval peer: ``evaluate`` with a custom BaseMetric that needs no LLM.

``--cache off`` writes no cache (CacheConfig(write_cache=False)); ``--cache default`` keeps
deepeval's default (write_cache=True). Runs in a scratch working directory (deepeval writes
``.deepeval/`` there); telemetry off through the environment the runner sets.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--cache", choices=["off", "default"], default="off")
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=20)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="deepeval-bench-")
    os.chdir(work)

    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig
    from deepeval.metrics import BaseMetric
    from deepeval.test_case import LLMTestCase

    sleep_s = args.sleep_ms / 1000

    class Matches(BaseMetric):
        """The trivial evaluator: actual output equals the expected one."""

        def __init__(self) -> None:
            self.threshold = 0.5
            self.async_mode = True
            self.include_reason = False
            self.strict_mode = False
            self.evaluation_model = None
            self.verbose_mode = False

        def measure(self, test_case: LLMTestCase, *a, **k) -> float:  # type: ignore[no-untyped-def]
            self.score = 1.0 if test_case.actual_output == test_case.expected_output else 0.0
            self.success = self.score >= self.threshold
            return self.score

        async def a_measure(self, test_case: LLMTestCase, *a, **k) -> float:  # type: ignore[no-untyped-def]
            if sleep_s:
                await asyncio.sleep(sleep_s)
            return self.measure(test_case)

        def is_successful(self) -> bool:
            return bool(self.success)

        @property
        def __name__(self) -> str:  # type: ignore[override]
            return "Matches"

    # deepeval has no target to call: the no-op target is applied while building the cases
    cases = [LLMTestCase(input=str(i), actual_output=str(i), expected_output=str(i))
             for i in range(args.n)]
    off = args.cache == "off"
    cache = CacheConfig(write_cache=False, use_cache=False) if off else CacheConfig()
    c0 = time.process_time()  # CPU of all threads: steadier than wall on a busy machine
    t0 = time.perf_counter()
    result = evaluate(cases, [Matches()], cache_config=cache,
                      async_config=AsyncConfig(run_async=True, max_concurrent=args.concurrency),
                      display_config=DisplayConfig(show_indicator=False, print_results=False,
                                                   inspect_after_run=False))
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    assert len(result.test_results) == args.n
    assert all(r.success for r in result.test_results)
    print(json.dumps({"peer": "deepeval", "cache": args.cache, "n": args.n, "seconds": seconds,
                      "cpu_seconds": cpu_seconds,
                      "version": importlib.metadata.version("deepeval")}))


if __name__ == "__main__":
    main()
