"""inspect-ai peer: ``eval`` of a task whose solver does nothing, on ``mockllm/model``.

One trivial scorer; the eval log is written (as Inspect always does) to a temporary directory.
Display, telemetry and model APIs stay local.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import tempfile
import time

from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, solver


@solver
def noop(sleep_ms: float = 0.0):  # type: ignore[no-untyped-def]
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if sleep_ms:
            await asyncio.sleep(sleep_ms / 1000)
        state.output.completion = state.input_text
        return state

    return solve


@scorer(metrics=[accuracy()])
def matches():  # type: ignore[no-untyped-def]
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=1.0 if state.output.completion == target.text else 0.0)

    return score


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=None)
    args = ap.parse_args()
    samples = [Sample(id=i, input=str(i), target=str(i)) for i in range(args.n)]
    task = Task(dataset=MemoryDataset(samples), solver=noop(args.sleep_ms), scorer=matches())
    with tempfile.TemporaryDirectory() as logs:
        c0 = time.process_time()  # CPU of all threads: steadier than wall on a busy machine
        t0 = time.perf_counter()
        (log,) = eval(task, model="mockllm/model", display="none", log_dir=logs,
                      max_samples=args.concurrency, max_connections=args.concurrency)
        seconds = time.perf_counter() - t0
        cpu_seconds = time.process_time() - c0
    assert log.status == "success", log.error
    assert log.results is not None and log.results.completed_samples == args.n
    acc = log.results.scores[0].metrics["accuracy"].value
    assert acc == 1.0, f"accuracy {acc}"
    print(json.dumps({"peer": "inspect-ai", "n": args.n, "seconds": seconds,
                      "cpu_seconds": cpu_seconds,
                      "version": importlib.metadata.version("inspect-ai")}))


if __name__ == "__main__":
    main()
