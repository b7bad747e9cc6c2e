"""(4) ``read_project(include_stats=True)`` latency on experiments of 10^4 .. 10^6 root runs.

Measured on SQLite (the cached file of ``_statsdata``) and on PostgreSQL (a scratch database on
127.0.0.1:5432, created, filled from the SQLite cache and dropped after). Besides the end-to-end
latency (median of warm calls; the first call is reported as ``cold``) every SQL statement is
timed through SQLAlchemy's cursor events, so a miss names the statement that limits it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from ._common import Context, goal, median

NAME = "stats"
TITLE = "read_project(include_stats=True) latency"
GOAL_S = 1.0


def _statement_timer(engine: Any) -> tuple[dict[str, list[float]], Any]:
    from sqlalchemy import event

    spent: dict[str, list[float]] = defaultdict(list)

    def before(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        conn.info.setdefault("_bench_t", []).append(time.perf_counter())

    def after(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        t0 = conn.info["_bench_t"].pop()
        spent[" ".join(statement.split())].append(time.perf_counter() - t0)

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)

    def detach() -> None:
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)

    return spent, detach


def _label(sql: str) -> str:
    """A short name for a stats statement (which aggregate it computes)."""
    import re

    s = sql.lower()
    for table in ("session_aggregates", "trace_streams", "feedback_aggregates",
                  "feedback_label_counts"):
        if f"from {table}" in s:
            return f"{table} (write-time aggregate)"
    if "from sessions" in s and "count(" in s:
        return "test_run_number"
    if "from sessions" in s:
        return "session lookup"
    if "from feedback" in s and "group by" in s and "feedback.label is not null" in s:
        return "feedback label counts"
    if "from feedback" in s:
        return "feedback n/avg/stdev"
    if "sum(runs.total_tokens)" in s:
        return "tokens and costs (llm runs)"
    if "count(distinct" in s:
        return "first-token count + streamed traces"
    if "max(runs.start_time)" in s:
        return "run_count/error/last start"
    if "order by runs.latency_us" in s:
        return "latency percentile (offset)"
    if "order by runs.first_token_us" in s:
        return "first-token percentile (offset)"
    tables = sorted(set(re.findall(r"\bfrom (\w+)", s)))
    return ("query on " + ", ".join(tables)) if tables else s[:60]


def _measure(store: Any, sizes: list[int], repeats: int, backend: str, log: Any
             ) -> dict[int, dict[str, Any]]:
    from ._statsdata import check_stats, session_id_for

    out: dict[int, dict[str, Any]] = {}
    for n in sizes:
        sid = session_id_for(n)
        t0 = time.perf_counter()
        res = store.projects.read(project_id=sid, include_stats=True)
        cold = time.perf_counter() - t0
        wrong = check_stats(res, n)
        if wrong:
            raise RuntimeError(f"{backend}, {n:,} roots: read_project answered wrong statistics: "
                               + "; ".join(wrong))
        spent, detach = _statement_timer(store.engine)
        warm = []
        try:
            for _ in range(repeats):
                t0 = time.perf_counter()
                store.projects.read(project_id=sid, include_stats=True)
                warm.append(time.perf_counter() - t0)
        finally:
            detach()
        by_label: dict[str, float] = defaultdict(float)
        for sql, times in spent.items():
            by_label[_label(sql)] += sum(times) / repeats
        top = sorted(by_label.items(), key=lambda kv: -kv[1])
        out[n] = {"cold_s": cold, "median_s": median(warm), "runs_s": warm,
                  "statements_s": {k: round(v, 4) for k, v in top}}
        log(f"    {backend:8s} {n:>9,} roots: median {median(warm) * 1000:8.1f} ms "
            f"(cold {cold * 1000:.1f} ms); slowest: "
            + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in top[:3]))
    return out


def _pg_scratch(ctx: Context) -> tuple[str, Any]:
    """Create a scratch database; return its URL and a function that drops it."""
    import os

    from sqlalchemy import create_engine, text

    admin = create_engine(ctx.pg_url, isolation_level="AUTOCOMMIT")
    name = f"assay_bench_{os.getpid()}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = ctx.pg_url.rsplit("/", 1)[0] + "/" + name

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return url, drop


def run(ctx: Context) -> dict[str, Any]:
    from assay.store import Store

    from ._statsdata import cached_sqlite, copy_sqlite_to_pg

    sizes = [10_000, 100_000] if ctx.quick else [10_000, 100_000, 1_000_000]
    repeats = max(ctx.repeats, 3)
    path = cached_sqlite(sizes, ctx.log)
    figures: dict[str, Any] = {}
    results: dict[str, Any] = {}
    notes = [f"sizes: {', '.join(f'{n:,}' for n in sizes)} root runs (each + 1 llm child "
             "+ 2 feedback); the SQLite store holds them all in one file; "
             "no ANALYZE on SQLite (the store never runs it); every answer checked against "
             "the generator's own figures (counts, rates, tokens, percentiles, feedback)"]

    sq = Store.open(path)
    try:
        results["sqlite"] = _measure(sq, sizes, repeats, "sqlite", ctx.log)
    finally:
        sq.close()

    try:
        url, drop = _pg_scratch(ctx)
    except Exception as exc:  # no PostgreSQL here: say so, do not fail the whole run
        notes.append(f"PostgreSQL skipped: {exc.__class__.__name__}: {exc}")
        url, drop = None, None
    if url is not None:
        try:
            pg = Store.open(url)
            try:
                copy_sqlite_to_pg(path, pg, sizes, ctx.log)
                results["postgres"] = _measure(pg, sizes, repeats, "postgres", ctx.log)
            finally:
                pg.close()
        finally:
            drop()  # type: ignore[misc]

    table = []
    goals = []
    for backend, per_size in results.items():
        for n, r in per_size.items():
            figures[f"{backend}_{n}_s"] = round(r["median_s"], 4)
            table.append([backend, f"{n:,}", f"{r['median_s'] * 1000:.1f} ms",
                          f"{r['cold_s'] * 1000:.1f} ms",
                          "; ".join(f"{k} {v * 1000:.0f} ms"
                                    for k, v in list(r["statements_s"].items())[:3])])
        big = max(per_size)
        goals.append(goal(f"read_project stats at {big:,} runs, {backend}",
                          per_size[big]["median_s"], GOAL_S, "s"))
    return {"figures": figures, "goals": goals, "notes": notes,
            "table": {"header": ["backend", "root runs", "median", "cold", "slowest statements"],
                      "rows": table},
            "detail": {b: {str(n): r for n, r in v.items()} for b, v in results.items()}}
