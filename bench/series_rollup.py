"""A project's charts at 10^6 runs: ``series()`` from the hourly rollups vs counted from the runs.

    .venv/bin/python bench/series_rollup.py [--n 1000000] [--days 30] [--pg-url URL] [--only ...]

Writes ``n`` runs (half roots, half llm children with tokens and cost, spread over ``days``)
into one project of a fresh store directly (the store's bulk insert, then
``rebuild_aggregates``, which fills ``run_hours`` as migration 0010 does), then times the
project page's charts: hourly over the last 3 days, daily over the whole window, hourly over
the last 24 h, each from the rollups (``series``) and from the runs (``rollup=False``, the
previous implementation), wall and CPU, and checks the two agree. Prints figures, never
asserts speed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from fold_cost import PG_DEFAULT, scratch_url  # noqa: E402

HOUR_US = 3_600_000_000


def _load(url: str, n: int, days: int, now_us: int) -> tuple[Any, str]:
    from assay.store import Store
    from assay.store._aggregates import rebuild_aggregates
    from assay.store._bulk import insert_many
    from assay.store._tables import runs

    store = Store.open(url)
    sid = store.projects.create("charts").id if hasattr(store.projects, "create") else None
    if sid is None:  # pragma: no cover - older ProjectRepo
        raise SystemExit("ProjectRepo.create is missing")
    sid = str(sid)
    tenant = store.tenant_id
    span = days * 24 * HOUR_US
    step = span // max(n // 2, 1)
    t0 = now_us - span
    batch: list[dict[str, Any]] = []
    blank: dict[str, Any] = dict.fromkeys((c.name for c in runs.columns), None)
    done = 0

    def flush() -> None:
        nonlocal batch
        with store.write() as conn:
            insert_many(conn, runs, batch)
        batch = []

    for i in range(n // 2):
        start = t0 + i * step
        rid = str(uuid.uuid4())
        root = dict(blank)
        for k, v in (("id", rid), ("tenant_id", tenant), ("session_id", sid),
                     ("trace_id", rid), ("dotted_order", f"{start}Z{rid}"), ("name", "agent"),
                     ("run_type", "chain"), ("start_time", start), ("end_time", start + 900_000),
                     ("is_root", True), ("latency_us", 900_000),
                     ("error", "boom" if i % 17 == 0 else None),
                     ("status", "error" if i % 17 == 0 else "success")):
            root[k] = v
        cid = str(uuid.uuid4())
        child = dict(blank)
        for k, v in (("id", cid), ("tenant_id", tenant), ("session_id", sid),
                     ("trace_id", rid), ("parent_run_id", rid), ("name", "llm"),
                     ("dotted_order", f"{start}Z{rid}.{start + 10}Z{cid}"),
                     ("run_type", "llm"), ("start_time", start + 10),
                     ("end_time", start + 800_000), ("is_root", False), ("latency_us", 799_990),
                     ("status", "success"), ("total_tokens", 100 + i % 50),
                     ("prompt_tokens", 80), ("completion_tokens", 20 + i % 50),
                     ("total_cost", 0.0001 * (1 + i % 7))):
            child[k] = v
        batch += [root, child]
        done += 2
        if len(batch) >= 20_000:
            flush()
    if batch:
        flush()
    with store.write() as conn:
        rebuild_aggregates(conn)
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("ANALYZE runs")
            conn.exec_driver_sql("ANALYZE run_hours")
    return store, sid


def _time(fn: Any, repeat: int = 3) -> tuple[float, float, Any]:
    best_w = best_c = float("inf")
    out = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best_w = min(best_w, time.perf_counter() - w0)
        best_c = min(best_c, time.process_time() - c0)
    return best_w, best_c, out


def measure(url: str, n: int, days: int) -> None:
    from assay.store._series import series

    now = datetime.now(UTC).replace(microsecond=0)
    now_us = int(now.timestamp()) * 1_000_000
    t0 = time.perf_counter()
    store, sid = _load(url, n, days, now_us)
    print(f"  loaded {n:,} runs over {days} days in {time.perf_counter() - t0:.1f} s; "
          f"load average {os.getloadavg()}", flush=True)
    end = now + timedelta(seconds=1)
    for label, width, back in (("hourly, 3 days", 3600, timedelta(days=3)),
                               (f"daily, {days} days", 86400, timedelta(days=days)),
                               ("hourly, 24 h", 3600, timedelta(hours=24))):
        start = datetime.fromtimestamp((now - back).timestamp() // width * width, tz=UTC)

        def run(rollup: bool, start: datetime = start, width: int = width) -> Any:
            return series(store, sid, start=start, end=end, bucket_seconds=width,
                          rollup=rollup)

        w_old, c_old, old = _time(lambda: run(False))
        w_new, c_new, new = _time(lambda: run(True))
        same = ([(b.runs, b.errors, b.tokens) for b in old]
                == [(b.runs, b.errors, b.tokens) for b in new]
                and all(abs(a.cost - b.cost) <= 1e-9 * max(1.0, abs(a.cost))
                        for a, b in zip(old, new, strict=True)))
        print(f"  {label:16s} {sum(b.runs for b in new):>8,} roots: from runs "
              f"{w_old * 1e3:7.1f} ms wall {c_old * 1e3:7.1f} CPU | from rollups "
              f"{w_new * 1e3:7.1f} ms wall {c_new * 1e3:7.1f} CPU | x{w_old / w_new:5.1f} "
              f"| same figures: {same}", flush=True)
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000, help="runs (half roots)")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--pg-url", default=os.environ.get("ASSAY_BENCH_PG_URL", PG_DEFAULT))
    ap.add_argument("--only", choices=["sqlite", "postgres"], default=None)
    args = ap.parse_args()
    print(f"series() at {args.n:,} runs; load average {os.getloadavg()}", flush=True)
    for backend in ("sqlite", "postgres"):
        if args.only and backend != args.only:
            continue
        print(backend, flush=True)
        with scratch_url(backend, args.pg_url, "series") as url:
            if url is not None:
                measure(url, args.n, args.days)


if __name__ == "__main__":
    main()
