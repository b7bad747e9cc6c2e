"""assay: ``evaluate`` / ``aevaluate`` with a no-op target and one trivial evaluator, stored.

Runs in assay's own venv (``.venv``). The dataset is created in a fresh temporary SQLite store
before the clock starts; the timed call runs every example, traces it as a root run, scores it
and writes runs and feedback to the store (``evaluate`` returns once everything is durable in
the store's journal). The statistics are then read back, which folds the journal into the
indexed tables (timed apart: ``first_read_seconds``), to check that all N runs and N scores are
there.

    --mode sequential   evaluate(target, ...)               (sync target, the default bound 0)
    --mode concurrent   aevaluate(async target, max_concurrency=C)
Prints one JSON line; ``peak_rss_mb`` is the process's peak resident memory (VmHWM).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))


def peak_rss_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: Linux carries ru_maxrss over
    from the parent across fork+exec, so a child of a big runner would report the runner's size."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--mode", choices=["sequential", "concurrent"], default="sequential")
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--profile", default=None, help="write a pyinstrument HTML/text profile here")
    args = ap.parse_args()

    from assay import Client
    from assay.evaluation import aevaluate, evaluate

    tmp = tempfile.mkdtemp(prefix="assay-bench-")
    client = Client(database_url=os.path.join(tmp, "bench.db"))
    ds = client.create_dataset("bench")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i}, "outputs": {"y": i}} for i in range(args.n)])

    def target(inputs: dict) -> dict:
        return {"y": inputs["x"]}

    delay = args.sleep_ms / 1000

    marks: list[float] = []  # first call and last return: set-up / examples / tear-down

    async def atarget(inputs: dict) -> dict:
        if not marks:
            marks.append(time.perf_counter())
        if delay:
            await asyncio.sleep(delay)
        marks[1:] = [time.perf_counter()]
        return {"y": inputs["x"]}

    def matches(outputs: dict, reference_outputs: dict) -> bool:
        return outputs["y"] == reference_outputs["y"]

    def go():  # type: ignore[no-untyped-def]
        if args.mode == "sequential" and not delay:
            return evaluate(target, data="bench", evaluators=[matches], client=client)
        return asyncio.run(aevaluate(atarget, data="bench", evaluators=[matches], client=client,
                                     max_concurrency=args.concurrency))

    profiler = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005, async_mode="disabled")
        profiler.start()
    c0 = time.process_time()  # CPU of all threads: steadier than wall on a busy machine
    t0 = time.perf_counter()
    results = go()
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    if profiler is not None:
        profiler.stop()
        with open(args.profile, "w") as fh:
            fh.write(profiler.output_text(unicode=False, color=False, show_all=False))
    # the first read folds the journal into the indexed tables: timed apart, reported beside
    r0 = time.perf_counter()
    stats = client.read_project(project_name=results.experiment_name, include_stats=True)
    first_read = time.perf_counter() - r0
    fb = (stats.feedback_stats or {}).get("matches")
    assert stats.run_count == args.n, f"stored {stats.run_count} runs, expected {args.n}"
    assert fb is not None and fb.n == args.n and fb.avg == 1.0, f"feedback {fb}"
    peak = peak_rss_mb()
    phases = {}
    if len(marks) == 2:
        phases = {"setup_seconds": marks[0] - t0, "examples_seconds": marks[1] - marks[0],
                  "teardown_seconds": t0 + seconds - marks[1]}
    print(json.dumps({"peer": "assay", "mode": args.mode, "n": args.n, "seconds": seconds,
                      "cpu_seconds": cpu_seconds, "first_read_seconds": first_read,
                      "peak_rss_mb": round(peak, 1), **phases}))


if __name__ == "__main__":
    main()
