"""Synthetic experiments for the ``read_project`` benchmark, loaded fast and cached.

Each root run (a ``chain`` target with a reference example, 2% errors) has one ``llm`` child with
token usage, a model that genai-prices knows, and a streamed first token (a ``new_token`` event),
and two feedback keys on the root: ``correctness`` (score 0/1) and ``grade`` (score plus a
categorical value). Rows go through ``assay.store._runs._finish`` so the derived columns
(latency_us, first_token_us, tokens, costs, is_root, status) are exactly what the store writes,
then in big batches straight into the store's tables (SQLAlchemy Core executemany on SQLite,
``COPY`` on PostgreSQL), with the secondary indexes dropped during the load and rebuilt after.

The SQLite file is cached under ``bench/.cache/``; PostgreSQL is filled from that file. A store
that keeps statistics on write gets them rebuilt after the load by its own ``rebuild_aggregates``;
a cached file from an older schema is brought up to date by the store's migrations when opened.
Bump ``GEN_VERSION`` when what a run row holds changes (e.g. ``_finish``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

GEN_VERSION = 1
T0_US = 1_763_000_000_000_000  # 2025-11-13, fixed so the data is the same on every build
BATCH = 20_000
DATASET_ID = "0192f000-0000-7000-8000-00000000da7a"


def session_id_for(n: int) -> str:
    return f"0192f000-0000-7000-8000-{n:012d}"


def _iso(us: int) -> str:
    from assay.store._types import from_micros

    return from_micros(us).isoformat()  # type: ignore[union-attr]


def _pairs(n: int, sid: str, tenant: str) -> Iterator[tuple[dict, dict, list[dict]]]:
    """(root row, llm row, feedback rows) for each of ``n`` examples, derived columns filled."""
    import uuid_utils.compat as uu

    from assay._ids import dotted_segment
    from assay.store._runs import _finish
    from assay.store._types import from_micros

    for i in range(n):
        rid, cid = str(uu.uuid7()), str(uu.uuid7())
        start = T0_US + i * 1_000
        latency = 150_000 + (i * 7_919) % 2_850_000  # 0.15 .. 3.0 s, spread evenly
        end = start + latency
        seg = dotted_segment(from_micros(start), rid)  # type: ignore[arg-type]
        error = "ValueError: synthetic failure" if i % 50 == 7 else None
        root = {
            "id": rid, "tenant_id": tenant, "session_id": sid, "trace_id": rid,
            "name": "target", "run_type": "chain", "start_time": start, "end_time": end,
            "inputs": {"question": f"question {i}"},
            "outputs": None if error else {"answer": f"answer {i}"},
            "error": error, "extra": {"metadata": {"num_repetitions": 1}}, "events": [],
            "tags": [], "dotted_order": seg,
            "reference_example_id": f"0192f001-0000-7000-8000-{i:012d}",
        }
        prompt, completion = 200 + (i * 7) % 40, 50 + (i * 13) % 25
        c_start, c_end = start + 1_000, end - 1_000
        first = c_start + 40_000 + (i * 31) % min(400_000, latency - 45_000)
        child = {
            "id": cid, "tenant_id": tenant, "session_id": sid, "trace_id": rid,
            "parent_run_id": rid, "name": "ChatOpenAI", "run_type": "llm",
            "start_time": c_start, "end_time": c_end,
            "inputs": {"messages": [{"role": "user", "content": f"question {i}"}]},
            "outputs": {"content": f"answer {i}"},
            "extra": {"metadata": {
                "ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                "usage_metadata": {"input_tokens": prompt, "output_tokens": completion,
                                   "total_tokens": prompt + completion}}},
            "events": [{"name": "new_token", "time": _iso(first), "kwargs": {"token": "A"}}],
            "tags": [], "dotted_order": seg + "." + dotted_segment(from_micros(c_start), cid),  # type: ignore[arg-type]
        }
        grade = "ABC"[i % 3]
        fb = [
            {"id": str(uu.uuid7()), "tenant_id": tenant, "run_id": rid, "session_id": sid,
             "trace_id": rid, "key": "correctness", "score": float(i % 4 != 0), "value": None,
             "label": None, "comment": None, "correction": None,
             "feedback_source": {"type": "model"}, "extra": None,
             "created_at": end + 500, "modified_at": end + 500},
            {"id": str(uu.uuid7()), "tenant_id": tenant, "run_id": rid, "session_id": sid,
             "trace_id": rid, "key": "grade", "score": {"A": 1.0, "B": 0.5, "C": 0.0}[grade],
             "value": grade, "label": grade, "comment": None, "correction": None,
             "feedback_source": {"type": "model"}, "extra": None,
             "created_at": end + 600, "modified_at": end + 600},
        ]
        yield _finish(root), _finish(child), fb


def expected_stats(n: int) -> dict[str, Any]:
    """What ``read_project`` must answer for the session of size ``n`` (from the same formulas
    as ``_pairs``), so the benchmark also checks the statistics it times."""
    import numpy as np

    i = np.arange(n, dtype=np.int64)
    latency = 150_000 + (i * 7_919) % 2_850_000
    first = 40_000 + (i * 31) % np.minimum(400_000, latency - 45_000)
    prompt, completion = 200 + (i * 7) % 40, 50 + (i * 13) % 25
    grade = np.array(list("ABC"))[i % 3]
    return {
        "run_count": n,
        "error_rate": float(np.count_nonzero(i % 50 == 7)) / n,
        "streaming_rate": 1.0,
        "prompt_tokens": int(prompt.sum()),
        "completion_tokens": int(completion.sum()),
        "total_tokens": int(prompt.sum() + completion.sum()),
        "latency_p50": float(np.percentile(latency, 50)) / 1e6,
        "latency_p99": float(np.percentile(latency, 99)) / 1e6,
        "first_token_p50": float(np.percentile(first, 50)) / 1e6,
        "first_token_p99": float(np.percentile(first, 99)) / 1e6,
        "correctness_avg": float(np.count_nonzero(i % 4 != 0)) / n,
        "grade_values": {g: int(np.count_nonzero(grade == g)) for g in "ABC"},
    }


def check_stats(res: Any, n: int) -> list[str]:
    """Differences between a TracerSessionResult and ``expected_stats(n)`` (empty: correct)."""
    import math

    want = expected_stats(n)
    got = res.model_dump()
    wrong = []
    for key in ("run_count", "error_rate", "streaming_rate", "prompt_tokens",
                "completion_tokens", "total_tokens", "latency_p50", "latency_p99",
                "first_token_p50", "first_token_p99"):
        g = got.get(key)
        if hasattr(g, "total_seconds"):
            g = g.total_seconds()
        if g is None or not math.isclose(float(g), want[key], rel_tol=1e-6, abs_tol=1e-6):
            wrong.append(f"{key}: got {g!r}, want {want[key]!r}")
    fb = got.get("feedback_stats") or {}
    corr, grade = fb.get("correctness") or {}, fb.get("grade") or {}
    if corr.get("n") != n or not math.isclose(corr.get("avg") or -1, want["correctness_avg"],
                                              rel_tol=1e-9):
        wrong.append(f"feedback correctness: got {corr}, want n={n}, "
                     f"avg={want['correctness_avg']}")
    if grade.get("n") != n or grade.get("values") != want["grade_values"]:
        wrong.append(f"feedback grade: got {grade}, want n={n}, values={want['grade_values']}")
    return wrong


def _secondary_indexes(table: Any) -> list[Any]:
    return list(table.indexes)


def _rebuild_aggregates(conn: Any, backend: str, log: Callable[[str], None]) -> None:
    """Stores that keep statistics on write get them recomputed from the bulk-loaded rows, with
    the store's own ``rebuild_aggregates`` (what its migration does for an existing store)."""
    try:
        from assay.store._aggregates import rebuild_aggregates
    except ImportError:  # a store that computes statistics at read time only
        return
    t0 = time.perf_counter()
    rebuild_aggregates(conn)
    log(f"    {backend}: write-time aggregates rebuilt in {time.perf_counter() - t0:.1f} s")


def _ensure_dataset(conn: Any, tenant: str) -> None:
    from sqlalchemy import select

    from assay.store._tables import datasets

    if conn.execute(select(datasets.c.id).where(datasets.c.id == DATASET_ID)).first() is None:
        conn.execute(datasets.insert().values(
            id=DATASET_ID, tenant_id=tenant, name="bench-stats", created_at=T0_US,
            modified_at=T0_US))


def _session_row(n: int, tenant: str) -> dict[str, Any]:
    return {"id": session_id_for(n), "tenant_id": tenant, "name": f"bench-stats-{n}",
            "start_time": T0_US + n, "end_time": T0_US + n * 1_000 + 4_000_000,
            "extra": {"metadata": {"num_repetitions": 1}},
            "reference_dataset_id": DATASET_ID}


def load_sqlite(store: Any, sizes: list[int], log: Callable[[str], None], *,
                session_row: Callable[[int, str], dict[str, Any]] | None = None,
                pairs: Callable[[int, str, str], Iterator[Any]] | None = None,
                what: str = "") -> None:
    """Add one session per size to a SQLite store, through SQLAlchemy Core in big batches
    (secondary indexes dropped and rebuilt around it). ``session_row`` and ``pairs`` change
    the session row and the (root, child, feedback) triples (bench/ui_pages.py spreads them
    over days)."""
    from sqlalchemy import text

    from assay.store._tables import feedback, runs, sessions

    make_session = session_row or _session_row
    make_pairs = pairs or _pairs
    idx = _secondary_indexes(runs) + _secondary_indexes(feedback)
    cols = [c.name for c in runs.columns]
    with store.write() as conn:
        for ix in idx:
            conn.execute(text(f"DROP INDEX IF EXISTS {ix.name}"))
        _ensure_dataset(conn, store.tenant_id)
        for n in sizes:
            t0 = time.perf_counter()
            conn.execute(sessions.insert().values(**make_session(n, store.tenant_id)))
            run_rows: list[dict] = []
            fb_rows: list[dict] = []
            for root, child, fb in make_pairs(n, session_id_for(n), store.tenant_id):
                run_rows.append({c: root.get(c) for c in cols})
                run_rows.append({c: child.get(c) for c in cols})
                fb_rows.extend(fb)
                if len(run_rows) >= BATCH:
                    conn.execute(runs.insert(), run_rows)
                    conn.execute(feedback.insert(), fb_rows)
                    run_rows, fb_rows = [], []
            if run_rows:
                conn.execute(runs.insert(), run_rows)
                conn.execute(feedback.insert(), fb_rows)
            log(f"    sqlite: {n:,} root runs ({2 * n:,} runs, {2 * n:,} feedback){what} "
                f"in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        for ix in idx:
            ix.create(conn)
        log(f"    sqlite: indexes rebuilt in {time.perf_counter() - t0:.1f} s")
        _rebuild_aggregates(conn, "sqlite", log)


def copy_sqlite_to_pg(sqlite_path: Path, pg_store: Any, sizes: list[int],
                      log: Callable[[str], None]) -> None:
    """Copy the cached sessions into a PostgreSQL store with COPY (indexes rebuilt after)."""
    from sqlalchemy import text

    from assay.store._tables import datasets, feedback, runs, sessions

    src = sqlite3.connect(str(sqlite_path))
    bools = {"is_root"}
    raw = pg_store.engine.raw_connection()
    try:
        cur = raw.cursor()
        idx = _secondary_indexes(runs) + _secondary_indexes(feedback)
        for ix in idx:
            cur.execute(f"DROP INDEX IF EXISTS {ix.name}")
        for table, where, args in (
            (datasets, "id = ?", (DATASET_ID,)),
            (sessions, f"id IN ({','.join('?' * len(sizes))})",
             tuple(session_id_for(n) for n in sizes)),
            (runs, f"session_id IN ({','.join('?' * len(sizes))})",
             tuple(session_id_for(n) for n in sizes)),
            (feedback, f"session_id IN ({','.join('?' * len(sizes))})",
             tuple(session_id_for(n) for n in sizes)),
        ):
            t0 = time.perf_counter()
            cols = [c.name for c in table.columns]
            flags = [c in bools for c in cols]
            rows = src.execute(f"SELECT {', '.join(cols)} FROM {table.name} WHERE {where}", args)
            count = 0
            with cur.copy(f"COPY {table.name} ({', '.join(cols)}) FROM STDIN") as cp:
                for row in rows:
                    if any(flags):
                        row = tuple(bool(v) if f and v is not None else v
                                    for v, f in zip(row, flags, strict=True))
                    cp.write_row(row)
                    count += 1
            log(f"    postgres: {table.name}: {count:,} rows copied in "
                f"{time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        raw.commit()
        with pg_store.engine.begin() as conn:
            for ix in idx:
                ix.create(conn)
        log(f"    postgres: indexes rebuilt in {time.perf_counter() - t0:.1f} s")
        with pg_store.engine.begin() as conn:
            _rebuild_aggregates(conn, "postgres", log)
        t0 = time.perf_counter()
        with pg_store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
        log(f"    postgres: VACUUM ANALYZE in {time.perf_counter() - t0:.1f} s "
            "(what autovacuum does after a bulk load)")
    finally:
        raw.close()
        src.close()


def cached_sqlite(sizes: list[int], log: Callable[[str], None]) -> Path:
    """The cached SQLite store holding a session per size (built or extended as needed)."""
    from assay.store import Store

    from ._common import CACHE

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"stats-v{GEN_VERSION}.db"
    meta_path = CACHE / f"stats-v{GEN_VERSION}.json"
    done: list[int] = json.loads(meta_path.read_text()) if meta_path.exists() else []
    if not path.exists():
        done = []
    missing = [n for n in sizes if n not in done]
    if not missing:
        return path
    if not done and path.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    log(f"  generating {', '.join(f'{n:,}' for n in missing)} root runs into {path.name} "
        "(cached for later runs)")
    store = Store.open(path)
    try:
        load_sqlite(store, missing, log)
    finally:
        store.close()
    meta_path.write_text(json.dumps(sorted(done + missing)))
    return path
