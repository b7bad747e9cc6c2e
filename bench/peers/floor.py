"""The bare floor: a plain asyncio loop that calls the same no-op target and trivial evaluator
and writes each row to SQLite (stdlib sqlite3, WAL) in one transaction.

Nothing a harness adds (tracing, run trees, results objects, batching threads): what is left is
the unavoidable cost of calling two functions and inserting one row per example.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import tempfile
import time
import uuid


async def target(inputs: dict) -> dict:
    return {"y": inputs["x"]}


def matches(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


async def run(examples: list[tuple[str, dict, dict]], db: sqlite3.Connection,
              delay: float) -> None:
    db.execute("BEGIN")
    for ex_id, inputs, reference in examples:
        start = time.time()
        outputs = await target(inputs)
        if delay:
            await asyncio.sleep(delay)
        score = matches(outputs, reference)
        db.execute(
            "INSERT INTO results (id, example_id, inputs, outputs, score, start_time, end_time)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (str(uuid.uuid4()), ex_id, json.dumps(inputs), json.dumps(outputs), float(score),
             start, time.time()))
    db.execute("COMMIT")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    args = ap.parse_args()
    path = os.path.join(tempfile.mkdtemp(prefix="floor-bench-"), "floor.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE results (id TEXT PRIMARY KEY, example_id TEXT, inputs TEXT, "
               "outputs TEXT, score REAL, start_time REAL, end_time REAL)")
    examples = [(str(uuid.uuid4()), {"x": i}, {"y": i}) for i in range(args.n)]
    c0 = time.process_time()  # CPU of all threads: steadier than wall on a busy machine
    t0 = time.perf_counter()
    asyncio.run(run(examples, db, 0.0))
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    (count,) = db.execute("SELECT count(*) FROM results WHERE score = 1").fetchone()
    assert count == args.n
    print(json.dumps({"peer": "floor", "n": args.n, "seconds": seconds,
                      "cpu_seconds": cpu_seconds}))


if __name__ == "__main__":
    main()
