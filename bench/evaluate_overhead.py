"""Harness overhead of ``evaluate()`` per example, beside a bare asyncio loop writing to SQLite.

    .venv/bin/python bench/evaluate_overhead.py [--n 10000] [--repeats 3] [--profile out.txt]

A no-op target and one trivial evaluator over N examples, results stored in a fresh SQLite store
(runs and feedback; ``evaluate`` returns once everything is durable in the store's journal). The
floor is a plain asyncio loop that calls the same two functions and inserts one row per example with
the stores' own SQLite driver (``assay.store.sqlite_driver()``) in one transaction. Figures are
medians of ``--repeats`` runs, interleaved so that background load hits both sides alike.
Goal (issue 8): <= 50 us per example at N = 10,000.

The breakdown runs the same experiment in parts (each a separate measurement, so they do not add
up exactly): reading the examples, the loop in memory (``upload_results=False``), journaling N
runs and N feedback rows as the writers do, and (not part of evaluate()) the fold that indexes
them on the first read.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "src"))

from assay import Client  # noqa: E402
from assay.evaluation import evaluate  # noqa: E402
from assay.store import sqlite_driver  # noqa: E402

sqlite3 = sqlite_driver()  # the floor pays the SQLite assay's stores use

GOAL_US = 50.0


def target(inputs: dict) -> dict:
    return {"y": inputs["x"]}


def matches(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


# -- the floor ------------------------------------------------------------------------------------
async def _floor_loop(examples: list[tuple[str, dict, dict]], db: sqlite3.Connection) -> None:
    db.execute("BEGIN")
    for ex_id, inputs, reference in examples:
        start = time.time()
        outputs = target(inputs)
        score = matches(outputs, reference)
        db.execute(
            "INSERT INTO results (id, example_id, inputs, outputs, score, start_time, end_time)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (str(uuid.uuid4()), ex_id, json.dumps(inputs), json.dumps(outputs), float(score),
             start, time.time()))
    db.execute("COMMIT")


def floor(n: int) -> float:
    return _floor(n)[0]


def _floor(n: int) -> tuple[float, float]:
    path = os.path.join(tempfile.mkdtemp(prefix="floor-"), "floor.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE results (id TEXT PRIMARY KEY, example_id TEXT, inputs TEXT, "
               "outputs TEXT, score REAL, start_time REAL, end_time REAL)")
    examples = [(str(uuid.uuid4()), {"x": i}, {"y": i}) for i in range(n)]
    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(_floor_loop(examples, db))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert db.execute("SELECT count(*) FROM results WHERE score = 1").fetchone()[0] == n
    db.close()
    return seconds, cpu


# -- assay ----------------------------------------------------------------------------------------
def _fresh_client(n: int) -> Client:
    client = Client(database_url=os.path.join(tempfile.mkdtemp(prefix="assay-bench-"), "b.db"))
    ds = client.create_dataset("bench")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i}, "outputs": {"y": i}} for i in range(n)])
    return client


def assay_stored(n: int, profile: str | None = None) -> float:
    return _assay_stored(n, profile)[0]


def _assay_stored(n: int, profile: str | None = None) -> tuple[float, float]:
    client = _fresh_client(n)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    res = evaluate(target, data="bench", evaluators=[matches], client=client)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    if profiler is not None:
        import pstats

        profiler.disable()
        with open(profile, "w") as fh:
            pstats.Stats(profiler, stream=fh).sort_stats("tottime").print_stats(60)
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.run_count == n, stats.run_count
    fb = (stats.feedback_stats or {})["matches"]
    assert fb.n == n and fb.avg == 1.0, fb
    client.store.close()
    return seconds, cpu


def part_load(n: int) -> float:
    """Reading the dataset as ``evaluate()`` does (``ExampleRepo.stream``: pages of
    ``StoredExample``, the full model built only when asked for), not ``list_examples``."""
    client = _fresh_client(n)
    ds = client.read_dataset(dataset_name="bench")
    t0 = time.perf_counter()
    _, count, _, pages = client.store.examples.stream(ds.id)
    examples = [ex for page in pages for ex in page]
    seconds = time.perf_counter() - t0
    assert len(examples) == count == n
    return seconds


def part_memory(n: int) -> float:
    client = _fresh_client(n)
    examples = list(client.list_examples(dataset_name="bench"))
    t0 = time.perf_counter()
    evaluate(target, data=examples, evaluators=[matches], client=client, upload_results=False)
    return time.perf_counter() - t0


def _journal_rows(n: int, project_id: Any) -> list[tuple[Any, ...]]:
    from assay.tracing import RunTree
    from assay.tracing._run_tree import ROW

    out = []
    for i in range(n):
        run = RunTree("target", "chain", {"x": i}, project_id=project_id,
                      reference_example_id=uuid.uuid4(), metadata={"repetition": 0})
        run.end(outputs={"y": i})
        out.append(ROW(run))  # as the tracing writer journals a finished root
    return out


def _feedback_rows(run_ids: list[str]) -> list[list[Any]]:
    """Plain scores of these root runs as ``evaluate()``'s feedback sink journals them:
    ``SCORE_COLUMNS`` value lists, the experiment and source given once per batch."""
    return [[rid, rid, "matches", True] for rid in run_ids]


def _journaled(n: int, runs: bool, feedback: bool) -> tuple[Any, float]:
    """A fresh store with N runs and/or N feedback rows appended to its journal in the writers'
    batch sizes (tracing writer 1,000, feedback sink 2,000); seconds the appends took."""
    client = _fresh_client(1)
    p = client.create_project("p")
    from assay.evaluation._sink import SCORE_COLUMNS
    from assay.tracing import RunTree

    posts = _journal_rows(n, p.id) if runs else []
    at = RunTree.ROW_COLUMNS.index("id")  # the scores' runs: these, or as many others
    ids = [str(r[at]) for r in posts] if runs else [str(uuid.uuid4()) for _ in range(n)]
    rows = _feedback_rows(ids) if feedback else []
    defaults = {"session_id": str(p.id), "feedback_source": {"type": "model"}}
    t0 = time.perf_counter()

    for i in range(0, len(posts), 1000):
        client.store.journal.append_runs(posts[i:i + 1000], columns=RunTree.ROW_COLUMNS,
                                         extra=RunTree.ROW_EXTRA)
    for i in range(0, len(rows), 2000):
        client.store.journal.append_feedback(rows[i:i + 2000], columns=SCORE_COLUMNS,
                                             defaults=defaults)
    return client, time.perf_counter() - t0


def part_store_runs(n: int) -> float:
    return _journaled(n, runs=True, feedback=False)[1]


def part_store_feedback(n: int) -> float:
    return _journaled(n, runs=False, feedback=True)[1]


def part_fold(n: int) -> float:
    """What the first read after the experiment pays: folding N runs and N feedback rows."""
    client, _ = _journaled(n, runs=True, feedback=True)
    t0 = time.perf_counter()
    client.store.settle()
    return time.perf_counter() - t0


def _median(fn: Callable[[int], float], n: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        times.append(fn(n))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", default=None, help="write a cProfile of one stored run here")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    n = args.n
    floor(min(n, 1000))  # warm up imports and caches
    assay_stored(min(n, 1000))
    floors, assays = [], []
    for _ in range(args.repeats):  # interleaved: background load hits both alike
        gc.collect()
        floors.append(_floor(n))
        gc.collect()
        assays.append(_assay_stored(n))
    f_us = statistics.median(w for w, _ in floors) / n * 1e6
    a_us = statistics.median(w for w, _ in assays) / n * 1e6
    f_cpu = statistics.median(c for _, c in floors) / n * 1e6
    a_cpu = statistics.median(c for _, c in assays) / n * 1e6
    # each part alone: the store's background folder would fold beside the appends and the
    # reads, and the fold would be counted in them instead of in its own line
    os.environ["ASSAY_BACKGROUND_FOLD"] = "0"
    parts = {
        "read examples (as evaluate() reads them)": _median(part_load, n, args.repeats) / n * 1e6,
        "loop in memory (upload_results=False)": _median(part_memory, n, args.repeats) / n * 1e6,
        "journal runs (batches of 1000)": _median(part_store_runs, n, args.repeats) / n * 1e6,
        "journal feedback (batches of 2000)":
            _median(part_store_feedback, n, args.repeats) / n * 1e6,
        "later, once: fold on the first read": _median(part_fold, n, args.repeats) / n * 1e6,
    }
    if args.profile:
        assay_stored(n, args.profile)
    figures = {"n": n, "floor_us_per_example": round(f_us, 2),
               "assay_us_per_example": round(a_us, 2), "ratio_to_floor": round(a_us / f_us, 2),
               "floor_cpu_us_per_example": round(f_cpu, 2),
               "assay_cpu_us_per_example": round(a_cpu, 2),
               "goal_us": GOAL_US, "goal_met": a_us <= GOAL_US,
               "parts_us_per_example": {k: round(v, 2) for k, v in parts.items()},
               "loadavg": os.getloadavg()}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"evaluate() harness overhead, N = {n:,}, median of {args.repeats} (loadavg "
          f"{figures['loadavg'][0]:.2f})")
    print(f"  bare floor (asyncio + sqlite3, 1 txn)   {f_us:8.1f} us/example")
    print(f"  assay evaluate(), stored                {a_us:8.1f} us/example   "
          f"{a_us / f_us:5.1f}x floor   goal <= {GOAL_US:.0f} us: "
          f"{'met' if a_us <= GOAL_US else f'missed by {a_us - GOAL_US:.1f} us'}")
    print(f"  CPU time (all threads; steadier under load): floor {f_cpu:.1f}, assay {a_cpu:.1f} "
          "us/example")
    print("  where it goes (separate measurements, wall time):")
    for name, us in parts.items():
        print(f"    {name:46s} {us:8.1f} us/example")


if __name__ == "__main__":
    main()
