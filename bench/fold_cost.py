"""What a traced run costs from the journal to queryable: the fold, per run, SQLite and PostgreSQL.

    .venv/bin/python bench/fold_cost.py [--n 20000] [--pg-url URL] [--profile] [--ab ROUNDS]
        [--llm] [--fixed ROUNDS] [--checkpoint ROUNDS] [--stream ROUNDS]

Traces ``n`` root runs with one child each (``@traceable``, the README's pattern) into a fresh
store with the background fold off, flushes (the journal-only figure), then times the fold
alone (``Store.settle``; wall and CPU time, per run). Then the same again with the background
fold on: flush, then the first ``read_project`` (the end-to-end figure: traced run to
queryable per span, and the first read after all of them). ``--profile`` runs the fold under
pyinstrument and prints where it goes. ``--ab`` alternates, ROUNDS each, the journal and fold
as they are (``new``: inputs and outputs journaled as their JSON text, value lists folded
straight to rows by ``_fold_columns``), the columnar fold of the previous format (``lists``),
and the previous format folded as post dicts (``old``, ``_fold_rows.insert_new`` on every post),
and prints medians and ratios. ``--llm``: each child is an llm run (``run_type="llm"``, its
outputs carrying ``usage_metadata``, its metadata ``ls_provider``/``ls_model_name``: tokens and
a genai-prices cost to derive), as in agents' traces; with ``--ab`` it alternates the
columnar fold of such runs (``new``) with the route before it (``prev``: ``_fold_columns.USAGE``
off, the llm runs handed to ``_fold_rows.insert_new`` as post dicts). ``--fixed``: what one
fold transaction costs whatever it holds (each small fold pays it: an agent's coalesced runs, a
read after a few runs): ROUNDS times, one root with one llm child traced and flushed, then
``Store.settle`` timed; and the same with 40 roots, the difference per run. ``--checkpoint``:
SQLite only, alternates, ROUNDS each, the WAL checkpointed inside the commits that cross
SQLite's limit (``inline``, as before stop 38) and by the store's thread of its own (``new``).
``--stream``: PostgreSQL only, alternates, ROUNDS each, the fold's transactions batch by batch
(``batches``, as before stop 46) and streamed through one ``COPY`` (``new``).
The floor's inserts commit on the driver directly, so SQLite checkpoints them inside their
commits in every mode. Prints figures, never asserts them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _fresh_pg(admin: str) -> tuple[str, object]:
    import psycopg

    name = f"assay_fold_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    plain = admin.replace("postgresql+psycopg://", "postgresql://")
    conn = psycopg.connect(plain, autocommit=True)
    conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin.rpartition("/")
    return f"{base}/{name}", (conn, name)


def _drop_pg(handle: object) -> None:
    conn, name = handle  # type: ignore[misc]
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


@contextlib.contextmanager
def scratch_url(backend: str, pg_url: str, stem: str) -> Iterator[str | None]:
    """A fresh database of ``backend`` for one measurement (a temporary SQLite file, or a
    PostgreSQL database dropped after); None, said once, when PostgreSQL is not there."""
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "sqlite":
            yield f"sqlite:///{tmp}/{stem}.db"
            return
        try:
            url, handle = _fresh_pg(pg_url)
        except Exception as exc:  # noqa: BLE001 - no server: say so, measure the rest
            print(f"postgres: skipped ({exc.__class__.__name__}: {exc})")
            yield None
            return
        try:
            yield url
        finally:
            _drop_pg(handle)


def backends(args: argparse.Namespace, stem: str) -> Iterator[tuple[str, str]]:
    """(backend, a fresh database's URL) for each backend ``--only`` leaves, one at a time (the
    database dropped when the next is asked for); PostgreSQL left out, said once, when absent."""
    for backend in ("sqlite", "postgres"):
        if args.only and backend != args.only:
            continue
        with scratch_url(backend, args.pg_url, stem) as url:
            if url is not None:
                yield backend, url


def _trace(client: object, n: int, project: str, llm: bool = False) -> None:
    from assay.tracing import traceable, tracing_context

    if llm:  # a chat model's call as an SDK wrapper records it: usage and the model's name
        @traceable(run_type="llm", name="chat",
                   metadata={"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"})
        def child(i: int) -> dict[str, object]:
            return {"content": f"answer {i}", "role": "assistant",
                    "usage_metadata": {"input_tokens": 100 + i % 32, "output_tokens": 20 + i % 8,
                                       "total_tokens": 120 + i % 32 + i % 8}}
    else:
        @traceable
        def child(i: int) -> int:  # type: ignore[misc]
            return i

    @traceable
    def root(i: int) -> object:
        out = child(i)  # the agent's answer, not the model's usage: a plain root
        return out["content"] if isinstance(out, dict) else out

    with tracing_context(enabled=True, client=client, project_name=project):
        for i in range(n):
            root(i)


def measure(url: str, n: int, profile: bool, llm: bool = False) -> dict[str, float]:
    from assay.client import Client
    from assay.store import Store

    out: dict[str, float] = {}
    spans = 2 * n
    # 1. journal only, then the fold alone
    os.environ["ASSAY_BACKGROUND_FOLD"] = "0"
    store = Store.open(url)
    client = Client(store=store)
    t0, c0 = time.perf_counter(), time.process_time()
    _trace(client, n, "journal-only", llm)
    client.flush()
    out["journal_us_per_span"] = (time.perf_counter() - t0) / spans * 1e6
    out["journal_cpu_us_per_span"] = (time.process_time() - c0) / spans * 1e6
    w0, c0 = time.perf_counter(), time.process_time()
    if profile:
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0005)
        prof.start()
        store.settle()
        prof.stop()
        print(prof.output_text(unicode=True, color=False, show_all=False))
    else:
        store.settle()
    out["fold_us_per_run"] = (time.perf_counter() - w0) / spans * 1e6
    out["fold_cpu_us_per_run"] = (time.process_time() - c0) / spans * 1e6
    out["floor_us_per_run"], out["floor_no_index_us_per_run"] = floors(store)
    # 2. end to end: the background fold on, flush, first read
    os.environ["ASSAY_BACKGROUND_FOLD"] = "1"
    c0 = time.process_time()
    t0 = time.perf_counter()
    _trace(client, n, "end-to-end", llm)
    t1 = time.perf_counter()
    client.flush()
    t2 = time.perf_counter()
    stats = client.read_project(project_name="end-to-end", include_stats=True)
    t3 = time.perf_counter()
    out["queryable_cpu_us_per_span"] = (time.process_time() - c0) / spans * 1e6
    assert stats.run_count == n, (stats.run_count, n)  # a figure for a partial read is no figure
    out["trace_us_per_span"] = (t1 - t0) / spans * 1e6
    out["flush_s"] = t2 - t1
    out["first_read_s"] = t3 - t2
    out["queryable_us_per_span"] = (t3 - t0) / spans * 1e6
    from assay.store._background import wait_idle

    wait_idle(store)  # the folder's last look, before the database goes away
    store.close()
    return out


def _floor_once(drv: Any, create: Any, insert: Any, n: int, batch: int) -> float:
    """Microseconds per row to ``insert`` (rows ``i`` to ``j``) ``n`` rows into the table
    ``create`` makes, ``batch`` rows a committed transaction; the table dropped after."""
    create()
    drv.commit()
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        insert(i, i + batch)
        drv.commit()
    took = time.perf_counter() - t0
    drv.execute("DROP TABLE floor_runs")
    drv.commit()
    return took / n * 1e6


def floors(store: object, batch: int = 1_000) -> tuple[float, float]:
    """The bare floor of the fold, per run: the rows it stored, inserted again into a copy of
    the runs table by the database's own bulk path, ``batch`` rows a transaction as the fold
    commits them: SQLite's inserts of the values as read back, several rows a statement as the
    fold writes them (``store/_multirow.py``; ``executemany`` before stop 51), the NULLs left
    out of the statement, not bound (stop 38), PostgreSQL's ``COPY``
    of the text ``COPY ... TO`` gave (no client-side work at all). No JSON, no ids, no
    statistics: what the database alone costs on this machine. Two figures from one read of
    the rows: with the table's indexes, and with its primary key only (the secondary indexes'
    share of the floor)."""
    engine = store.engine  # type: ignore[attr-defined]
    raw = engine.raw_connection()
    try:
        drv = raw.driver_connection
        if engine.dialect.name == "postgresql":
            with drv.cursor() as cur:
                chunks: list[bytes] = []
                with cur.copy("COPY runs TO STDOUT") as cp:
                    chunks.extend(bytes(data) for data in cp)
                drv.commit()
                lines = b"".join(chunks).splitlines(keepends=True)  # rows: newlines escaped

                def copy_in(i: int, j: int) -> None:
                    with cur.copy("COPY floor_runs FROM STDIN") as cp:
                        cp.write(b"".join(lines[i:j]))

                def create(indexes: bool) -> None:
                    cur.execute("CREATE TABLE floor_runs (LIKE runs INCLUDING ALL)" if indexes
                                else "CREATE TABLE floor_runs (LIKE runs INCLUDING DEFAULTS "
                                     "INCLUDING CONSTRAINTS); "
                                     "ALTER TABLE floor_runs ADD PRIMARY KEY (id)")

                return (_floor_once(drv, partial(create, True), copy_in, len(lines), batch),
                        _floor_once(drv, partial(create, False), copy_in, len(lines), batch))
        import re

        from assay.store._multirow import insert_many

        ddl = [sql for (sql,) in drv.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'runs' AND sql IS NOT NULL")]
        cursor = drv.execute("SELECT * FROM runs")
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()

        def insert(i: int, j: int) -> None:
            # a NULL left out of the statement, not bound: the driver binds None through a
            # failing adapter lookup (~3x a text value), which is the client's cost, not the
            # database's; so rows go by which of their values are NULL
            if not drv.in_transaction:  # (the engine's connections begin explicitly)
                drv.execute("BEGIN")
            shapes: dict[tuple[bool, ...], list[tuple[Any, ...]]] = {}
            for row in rows[i:j]:
                shape = tuple(v is not None for v in row)
                shapes.setdefault(shape, []).append(tuple(v for v in row if v is not None))
            for shape, values in shapes.items():
                cols = ", ".join(n for n, keep in zip(names, shape, strict=True) if keep)
                marks = ", ".join("?" * len(values[0]))
                # the fold's own statement form: several rows a statement (``_multirow``)
                insert_many(drv, f"INSERT INTO floor_runs ({cols}) VALUES ({marks})", values)

        def create_sqlite(indexes: bool) -> None:
            for sql in ddl:  # the table and its indexes, renamed
                if not indexes and sql.startswith("CREATE INDEX"):
                    continue
                sql = re.sub(r"^CREATE TABLE runs", "CREATE TABLE floor_runs", sql)
                sql = re.sub(r"^CREATE (UNIQUE )?INDEX (\S+) ON runs ",
                             r"CREATE \1INDEX floor_\2 ON floor_runs ", sql)
                drv.execute(sql)

        return (_floor_once(drv, partial(create_sqlite, True), insert, len(rows), batch),
                _floor_once(drv, partial(create_sqlite, False), insert, len(rows), batch))
    finally:
        raw.close()


FIGURES = ("journal_us_per_span", "journal_cpu_us_per_span", "fold_us_per_run",
           "fold_cpu_us_per_run", "queryable_us_per_span", "queryable_cpu_us_per_span")


MODES = ("old", "lists", "new")
LLM_MODES = ("prev", "new")  # --llm: the first is what the ratios divide by
CHECKPOINT_MODES = ("inline", "new")  # --checkpoint
STREAM_MODES = ("batches", "new")  # --stream


@contextlib.contextmanager
def fold_path(mode: str) -> Iterator[None]:
    """``new``: the journal and fold as they are; ``lists``: the columnar fold of value lists
    journaled with their inputs and outputs as values (the previous format); ``old``: the
    previous format folded as post dicts (no batch's columns match ``WRITER_COLUMNS``);
    ``prev``: as ``new``, but runs with usage (llm runs) folded as post dicts by
    ``_fold_rows.insert_new``, as before the columnar path took them; ``inline``: as ``new``,
    but the WAL checkpointed inside the commits (SQLite's own ``wal_autocheckpoint``), as
    before a thread of its own took that (``store/_checkpoint.py``); ``batches``: as
    ``new``, but PostgreSQL's fold transactions batch by batch, each its own ``COPY``, as
    before the fold streamed them (``store/_fold_stream.py``)."""
    from assay.store import _checkpoint, _engine, _fold_columns, _journal

    saved = _journal.WRITER_COLUMNS, _journal.encoded_rows, _journal.JSON_COLUMNS
    usage, every, stream = _fold_columns.USAGE, _checkpoint.CHECKPOINT_ROWS, _journal.STREAM
    limit = _engine.WAL_CHECKPOINT_BYTES
    if mode == "inline":
        _checkpoint.CHECKPOINT_ROWS = 1 << 62  # never reached: the thread never starts
        _engine.WAL_CHECKPOINT_BYTES = 16 * 1024 * 1024  # the commits' limit before stop 38
    elif mode == "prev":
        _fold_columns.USAGE = False
    elif mode == "batches":
        _journal.STREAM = False
    elif mode == "old":
        _journal.WRITER_COLUMNS = ()  # type: ignore[assignment]  # matches no batch
    elif mode == "lists":
        _journal.encoded_rows = list  # type: ignore[assignment]  # the values as they are
        _journal.JSON_COLUMNS = ()  # type: ignore[assignment]  # says so in the batch
    try:
        yield
    finally:
        _journal.WRITER_COLUMNS, _journal.encoded_rows, _journal.JSON_COLUMNS = saved
        _fold_columns.USAGE = usage
        _checkpoint.CHECKPOINT_ROWS = every
        _journal.STREAM = stream
        _engine.WAL_CHECKPOINT_BYTES = limit


def fixed(args: argparse.Namespace) -> None:
    """A fold transaction's fixed cost: small folds timed one by one (see the docstring)."""
    import statistics

    os.environ["ASSAY_BACKGROUND_FOLD"] = "0"  # each fold is this measure's own
    from assay.client import Client
    from assay.store import Store

    print(f"{args.fixed} folds of 2 runs and of 80 (llm children); load average "
          f"{os.getloadavg()}")
    for backend, url in backends(args, "fixed"):
        store = Store.open(url)
        client = Client(store=store)
        _trace(client, 50, "p", True)  # imports, the project, genai-prices' first look
        client.flush()
        store.settle()
        took: dict[int, list[float]] = {1: [], 40: []}
        for _ in range(args.fixed):
            for roots, times in took.items():
                _trace(client, roots, "p", True)
                client.flush()
                t0 = time.perf_counter()
                store.settle()
                times.append(time.perf_counter() - t0)
        store.close()
        small, large = (statistics.median(took[k]) for k in (1, 40))
        print(f"{backend:8s} fold of 2 runs {small * 1e3:5.2f} ms (min "
              f"{min(took[1]) * 1e3:5.2f}), of 80 runs {large * 1e3:5.2f} ms: "
              f"{(large - small) / 78 * 1e6:5.1f} us a run beyond the fixed cost", flush=True)


def ab(args: argparse.Namespace, modes: tuple[str, ...]) -> None:
    import statistics

    for backend in ("sqlite", "postgres"):
        if args.only and backend != args.only:
            continue
        got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        for r in range(args.ab):
            for mode in (modes if r % 2 == 0 else modes[::-1]):
                with scratch_url(backend, args.pg_url, f"ab{mode}") as url, fold_path(mode):
                    if url is None:
                        return
                    got[mode].append(measure(url, args.n, False, args.llm))
        med = {m: {k: statistics.median(x[k] for x in got[m]) for k in FIGURES} for m in got}
        print(f"{backend} ({args.ab} rounds each, medians; load average {os.getloadavg()})")
        base = modes[0]
        for k in FIGURES:
            b = med[base][k]
            figures = "  ".join(f"{m} {med[m][k]:7.2f}" for m in modes)
            ratios = "  ".join(f"{m}/{base} {med[m][k] / b:5.2f}" for m in modes[1:])
            print(f"  {k:26s} {figures}  {ratios}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000, help="root runs (each with one child)")
    ap.add_argument("--pg-url", default=os.environ.get("ASSAY_BENCH_PG_URL", PG_DEFAULT))
    ap.add_argument("--only", choices=["sqlite", "postgres"], default=None)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                    help="old vs new fold path, alternated, ROUNDS each")
    ap.add_argument("--llm", action="store_true",
                    help="the children are llm runs with usage and a model to price")
    ap.add_argument("--fixed", type=int, default=0, metavar="ROUNDS",
                    help="time ROUNDS small folds (a fold transaction's fixed cost)")
    ap.add_argument("--checkpoint", type=int, default=0, metavar="ROUNDS",
                    help="SQLite's checkpoints inside the commits vs in their own thread, "
                         "alternated, ROUNDS each")
    ap.add_argument("--stream", type=int, default=0, metavar="ROUNDS",
                    help="PostgreSQL's fold batch by batch vs streamed, alternated, ROUNDS "
                         "each")
    args = ap.parse_args()
    kind = "llm children" if args.llm else "children"
    if args.llm:  # genai-prices' import and the bench's 32 token counts priced before timing
        from assay._usage import price

        for i in range(32):
            price("openai", "gpt-4o-mini", 100 + i % 32, 20 + i % 8)
    if args.fixed:
        fixed(args)
        return
    if args.ab or args.checkpoint or args.stream:
        print(f"{args.n:,} root runs + {args.n:,} {kind}; load average {os.getloadavg()}")
        if args.checkpoint:
            args.ab, args.only = args.checkpoint, "sqlite"
            ab(args, CHECKPOINT_MODES)
        elif args.stream:
            args.ab, args.only = args.stream, "postgres"
            ab(args, STREAM_MODES)
        else:
            ab(args, LLM_MODES if args.llm else MODES)
        return
    results: dict[str, dict[str, float]] = {}
    print(f"{args.n:,} root runs + {args.n:,} {kind} = {2 * args.n:,} spans; "
          f"load average {os.getloadavg()}", flush=True)
    for backend, url in backends(args, "fold"):
        r = results[backend] = measure(url, args.n, args.profile, args.llm)
        print(f"{backend:8s} journal only {r['journal_us_per_span']:6.2f} us/span "
              f"({r['journal_cpu_us_per_span']:5.2f} CPU) | fold alone "
              f"{r['fold_us_per_run']:6.2f} us/run wall, {r['fold_cpu_us_per_run']:6.2f} CPU "
              f"(goal <= 10; the database's own floor {r['floor_us_per_run']:5.2f} us/run, "
              f"fold = {r['fold_us_per_run'] / r['floor_us_per_run']:4.2f} x floor; "
              f"{r['floor_no_index_us_per_run']:5.2f} without the secondary indexes) | end to "
              f"end: traced {r['trace_us_per_span']:5.2f} us/span, flush "
              f"{r['flush_s']:.3f} s, first read {r['first_read_s']:.3f} s, traced run to "
              f"queryable {r['queryable_us_per_span']:6.2f} us/span wall, "
              f"{r['queryable_cpu_us_per_span']:6.2f} CPU (goal <= 15); load average "
              f"{os.getloadavg()}", flush=True)
    if args.json:
        print(json.dumps({"n": args.n, "spans": 2 * args.n, "results": results}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
