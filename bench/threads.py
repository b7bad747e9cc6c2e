"""What reading a project's conversation threads costs, as the project grows.

    .venv/bin/python bench/threads.py [--turns 20000] [--per-thread 10] [--db URL]

Traces ``--turns`` turns (a chat agent's root run with an llm call each, metadata
``thread_id``) spread over ``--turns / --per-thread`` threads into a fresh project of a fresh
store (SQLite file by default; ``--db postgresql://...`` for PostgreSQL; the project also holds
as many traces with no thread), then times, median of 5:

- ``list first page``: the 20 most recently active threads with their summaries (what the web
  UI's threads page and ``client.threads.query`` ask);
- ``list a late page``: 20 threads at offset ``threads - 20``;
- ``stats of one thread``, ``turns of one thread``.

Prints milliseconds and what they cost per turn of the project.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from assay import Client, traceable  # noqa: E402 - after the sys.path set-up
from assay.tracing import tracing_context  # noqa: E402


@traceable(run_type="llm")
def model(q: str) -> dict[str, object]:
    return {"answer": q.upper(),
            "usage_metadata": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}}


@traceable(name="chat")
def chat(q: str) -> dict[str, object]:
    return {"answer": model(q)["answer"]}


def median_ms(fn: object) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--per-thread", type=int, default=10)
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    db = args.db or os.path.join(tempfile.mkdtemp(), "threads.db")
    client = Client(database_url=db)
    project = "bench-threads"
    threads = max(1, args.turns // args.per_thread)
    with tracing_context(enabled=True, client=client, project_name=project):
        for i in range(args.turns):
            with tracing_context(metadata={"thread_id": f"t-{i % threads}"}):
                chat(f"q{i}")
            chat(f"alone {i}")  # a trace in no thread
    client.flush()
    store = client._backend
    pid = store.projects.read(project_name=project, include_stats=True).id  # folded
    first = store.threads.list(pid, limit=20)
    assert len(first) == 20 and all(t.count == args.per_thread for t in first)
    rows = [
        ("list first page", median_ms(lambda: store.threads.list(pid, limit=20))),
        ("list a late page", median_ms(lambda: store.threads.list(pid, offset=threads - 20,
                                                                   limit=20))),
        ("stats of one thread", median_ms(lambda: store.threads.stats(pid, "t-7"))),
        ("turns of one thread", median_ms(lambda: store.threads.traces(pid, "t-7"))),
    ]
    total = 2 * args.turns
    print(f"{store.engine.dialect.name}: {args.turns} turns in {threads} threads "
          f"(+{args.turns} traces in none)")
    for name, ms in rows:
        print(f"  {name:22} {ms:9.1f} ms   {ms * 1000 / total:6.2f} us per root run")


if __name__ == "__main__":
    main()
