"""The bare floor: a plain asyncio loop that calls the same no-op target and trivial evaluator
and writes each row to SQLite (WAL) in one transaction: the SQLite assay's stores use
(``assay.store._driver``: pysqlite3-binary's where installed, else Python's sqlite3), so the
floor and assay pay the same database.

Nothing a harness adds (tracing, run trees, results objects, batching threads): what is left is
the unavoidable cost of calling two functions and inserting one row per example.

With ``--concurrency C`` (and ``--sleep-ms``) the same work runs on C asyncio workers whose
target awaits the sleep, the rows inserted in one transaction at the end: the floor of the
I/O-bound concurrency measurement (what asyncio itself costs on this machine).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import tempfile
import time
import uuid
from typing import Any


def _stores_driver() -> Any:
    """``assay.store.sqlite_driver()``, its module loaded by path: the floor imports nothing
    else of assay's (no SQLAlchemy, no pydantic: nothing a harness adds, not even its heap)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "src", "assay", "store",
                        "_driver.py")
    spec = importlib.util.spec_from_file_location("assay_store_driver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.driver()  # type: ignore[attr-defined]


sqlite3: Any = _stores_driver()

INSERT = ("INSERT INTO results (id, example_id, inputs, outputs, score, start_time, end_time)"
          " VALUES (?, ?, ?, ?, ?, ?, ?)")


async def target(inputs: dict) -> dict:
    return {"y": inputs["x"]}


def matches(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


async def run(examples: list[tuple[str, dict, dict]], db: Any,
              delay: float) -> None:
    db.execute("BEGIN")
    for ex_id, inputs, reference in examples:
        start = time.time()
        outputs = await target(inputs)
        if delay:
            await asyncio.sleep(delay)
        score = matches(outputs, reference)
        db.execute(INSERT, (str(uuid.uuid4()), ex_id, json.dumps(inputs), json.dumps(outputs),
                            float(score), start, time.time()))
    db.execute("COMMIT")


async def run_concurrent(examples: list[tuple[str, dict, dict]], db: Any,
                         delay: float, bound: int) -> None:
    it = iter(examples)
    rows: list[tuple] = []

    async def atarget(inputs: dict) -> dict:
        await asyncio.sleep(delay)
        return {"y": inputs["x"]}

    async def worker() -> None:
        for ex_id, inputs, reference in it:
            start = time.time()
            outputs = await atarget(inputs)
            score = matches(outputs, reference)
            rows.append((str(uuid.uuid4()), ex_id, json.dumps(inputs), json.dumps(outputs),
                         float(score), start, time.time()))

    async with asyncio.TaskGroup() as group:
        for _ in range(bound):
            group.create_task(worker())
    db.execute("BEGIN")
    db.executemany(INSERT, rows)
    db.execute("COMMIT")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=0)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
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
    if args.concurrency > 1:
        asyncio.run(run_concurrent(examples, db, args.sleep_ms / 1000, args.concurrency))
    else:
        asyncio.run(run(examples, db, args.sleep_ms / 1000))
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    (count,) = db.execute("SELECT count(*) FROM results WHERE score = 1").fetchone()
    assert count == args.n
    print(json.dumps({"peer": "floor", "n": args.n, "seconds": seconds,
                      "cpu_seconds": cpu_seconds}))


if __name__ == "__main__":
    main()
