"""Web UI page load times with 100,000 and 1,000,000 runs in one project (issue 26).

Goal: every page loads in under 300 ms with 100,000 runs in a project and under 1 s at
1,000,000. Not a test: it prints figures and how far each is from its goal.

Data: the ``read_project`` benchmark's generator (``measures/_statsdata._pairs``: each root a
``chain`` with an ``llm`` child, tokens, a streamed first token, 2% errors, two feedback keys),
with the roots spread evenly over ``--days`` days ending when the store is built (that
generator packs them 1 ms apart, which would give the charts one bucket and ``window=24h`` all
or nothing). Rows go straight into the tables in big batches, indexes rebuilt after and the
write-time aggregates recomputed by the store's own code. The SQLite file is cached in
``bench/.cache/ui-v<N>.db`` (delete it, or ``--rebuild``, to rebuild; the 24h window drifts
as the cache ages). PostgreSQL (``--pg``) gets a scratch database ``assay_bench_ui`` filled
from that file by ``COPY`` and dropped after.

Pages: the projects list; a project's first page, its page 200 (keyset cursor), filtered by
``where``, errors, a 24 h window, run type, and a text search with its "search older" second
request (``store/_search.py``: a bounded slice per request); a run's tree; an experiment's first
and second page and its errors / failing-score filters (``store/_experiment_page.py``); a
dataset's experiments.

Serving: ``assay serve --no-auth`` as a subprocess on 127.0.0.1 (the real app, one worker);
each page is fetched with httpx: the first request is reported as ``cold``, then one warm-up,
then the median of ``--repeats`` requests. ``--profile`` then runs each page in this process
with every SQL statement timed (the slowest named) and, for pages over their goal, a
pyinstrument profile of the page's view function.

    .venv/bin/python bench/ui_pages.py                      # 100,000 runs, SQLite
    .venv/bin/python bench/ui_pages.py --sizes 100000,1000000 --pg --profile
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measures._common import CACHE, ROOT, offline_env
from measures._common import process_cpu_s as cpu_s
from measures._statsdata import (
    DATASET_ID,
    T0_US,
    _pairs,
    _session_row,
    copy_sqlite_to_pg,
    load_sqlite,
    session_id_for,
)
from measures.ingest import _free_port, _stop
from measures.stats import _statement_timer

__all__ = ["main", "pages_for", "ui_cache"]

GEN_VERSION = 1
GOALS_S = {10_000: 0.3, 100_000: 0.3, 1_000_000: 1.0}  # sizes below 100,000: its goal
PYINSTRUMENT_MAX_S = 15.0  # slower pages: statement times only (a profile would take minutes)
PG_DB = "assay_bench_ui"
PER_PAGE = 50  # the project page's TRACES_PER_PAGE
DEEP_PAGE = 200


def log(msg: str) -> None:
    print(msg, flush=True)


def loadavg() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


# -- data -----------------------------------------------------------------------------------------
def _spread(n: int, sid: str, tenant: str, end_us: int, days: float
            ) -> Iterator[tuple[dict, dict, list[dict]]]:
    """``_pairs`` with root i moved to ``end - span + i * span / n``; every absolute time of the
    trace (its child, first token, feedback) moves by the same amount, so durations and derived
    columns stay what ``_finish`` computed."""
    from assay._ids import dotted_segment_us
    from assay.store._types import from_micros

    span = int(days * 86_400_000_000)
    step = span / n
    for i, (root, child, fb) in enumerate(_pairs(n, sid, tenant)):
        shift = int(end_us - span + i * step) - (T0_US + i * 1_000)
        for row in (root, child):
            for col in ("start_time", "end_time", "first_token_time"):
                if row.get(col) is not None:
                    row[col] += shift
        root["dotted_order"] = seg = dotted_segment_us(root["start_time"], root["id"])
        child["dotted_order"] = seg + "." + dotted_segment_us(child["start_time"], child["id"])
        child["events"] = [{**e, "time": from_micros(child["first_token_time"]).isoformat()}  # type: ignore[union-attr]
                           for e in child["events"]]
        for f in fb:
            f["created_at"] += shift
            f["modified_at"] += shift
        yield root, child, fb


def _load(store: Any, sizes: list[int], days: float) -> None:
    end_us = int(time.time() * 1_000_000)

    def session_row(n: int, tenant: str) -> dict[str, Any]:
        row = _session_row(n, tenant)
        row["start_time"] = end_us - int(days * 86_400_000_000) - 1_000_000
        row["end_time"] = end_us + 4_000_000
        return row

    load_sqlite(store, sizes, log, session_row=session_row,
                pairs=lambda n, sid, tenant: _spread(n, sid, tenant, end_us, days),
                what=f" over {days:g} days")


def ui_cache(sizes: list[int], days: float, rebuild: bool = False) -> Path:
    """The cached SQLite store holding one project per size (built or extended as needed)."""
    from assay.store import Store

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"ui-v{GEN_VERSION}.db"
    meta_path = CACHE / f"ui-v{GEN_VERSION}.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() and path.exists() else {}
    if rebuild or meta.get("days") != days:
        meta = {}
    done = meta.get("sizes", [])
    if not done:
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    missing = [n for n in sizes if n not in done]
    if not missing:
        built = meta.get("built_at", {})
        log(f"  using cached {path.relative_to(ROOT)} (roots end at the build time: "
            + ", ".join(f"{n:,} built {built.get(str(n), '?')}" for n in sizes) + ")")
        return path
    log(f"  generating {', '.join(f'{n:,}' for n in missing)} root runs into {path.name}")
    store = Store.open(path)
    try:
        _load(store, missing, days)
    finally:
        store.close()
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    built = {**meta.get("built_at", {}), **{str(n): now for n in missing}}
    meta_path.write_text(json.dumps({"sizes": sorted(done + missing), "days": days,
                                     "built_at": built}))
    return path


# -- pages ----------------------------------------------------------------------------------------
def _deep_cursor(store: Any, sid: str, page: int) -> tuple[str, str]:
    """The cursor that opens page ``page`` of the project (the last root of page ``page - 1``,
    found here with OFFSET outside the clock) and the newest root's id."""
    from sqlalchemy import BigInteger, select, type_coerce

    from assay.store._tables import runs

    base = select(type_coerce(runs.c.start_time, BigInteger), runs.c.id).where(
        runs.c.session_id == sid, runs.c.is_root.is_(True)).order_by(
        runs.c.start_time.desc(), runs.c.id.desc())
    with store.read() as conn:
        us, rid = conn.execute(base.offset((page - 1) * PER_PAGE - 1).limit(1)).one()
        _, newest = conn.execute(base.limit(1)).one()
    return f"{us}_{rid}", str(newest)


def pages_for(store: Any, n: int) -> list[tuple[str, str, Callable[[Any], Any]]]:
    """(name, URL, the same page built in-process for profiling) for a project of ``n``."""
    from assay.ui import _views, _views_experiment, _views_projects

    sid = session_id_for(n)
    cursor, root = _deep_cursor(store, sid, DEEP_PAGE)
    pp = _views_projects.project_page
    where, q = 'gt(latency, "2s")', f"question {n // 2}"
    # the search's second request ("search older"), and the experiment's second page
    older = pp(store, sid, q=q)["next_url"]
    q_cursor = parse_qs(older[1:])["cursor"][0] if older else ""
    ep = _views_experiment.experiment_page
    exp_next = ep(store, sid, failing=None, errors=False, threshold=0.5)["pager"]["next_url"]
    e_cursor = parse_qs(exp_next[1:])["cursor"][0] if exp_next else ""
    return [
        ("projects", "/ui/projects", _views_projects.projects_page),
        ("project", f"/ui/projects/{sid}", lambda s: pp(s, sid)),
        (f"project page {DEEP_PAGE}", f"/ui/projects/{sid}?cursor={quote(cursor)}",
         lambda s: pp(s, sid, cursor=cursor)),
        ("project where latency>2s", f"/ui/projects/{sid}?where={quote(where)}",
         lambda s: pp(s, sid, where=where)),
        ("project errors", f"/ui/projects/{sid}?errors=true", lambda s: pp(s, sid, errors=True)),
        ("project window=24h", f"/ui/projects/{sid}?window=24h",
         lambda s: pp(s, sid, window="24h")),
        ("project q=<text>", f"/ui/projects/{sid}?q={quote(q)}", lambda s: pp(s, sid, q=q)),
        ("project q=<text> older", f"/ui/projects/{sid}?q={quote(q)}&cursor={quote(q_cursor)}",
         lambda s: pp(s, sid, q=q, cursor=q_cursor)),
        ("project run_type=llm", f"/ui/projects/{sid}?run_type=llm",
         lambda s: pp(s, sid, run_type="llm")),
        ("project feedback grade<=0.5",
         f"/ui/projects/{sid}?feedback_key=grade&score_max=0.5",
         lambda s: pp(s, sid, feedback_key="grade", score_max=0.5)),
        ("run tree", f"/ui/runs/{root}", lambda s: _views.run_page(s, root)),
        ("experiment", f"/ui/experiments/{sid}", lambda s: ep(
            s, sid, failing=None, errors=False, threshold=0.5)),
        ("experiment page 2", f"/ui/experiments/{sid}?cursor={quote(e_cursor)}", lambda s: ep(
            s, sid, failing=None, errors=False, threshold=0.5, cursor=e_cursor)),
        ("experiment errors", f"/ui/experiments/{sid}?errors=true", lambda s: ep(
            s, sid, failing=None, errors=True, threshold=0.5)),
        ("experiment failing", f"/ui/experiments/{sid}?failing=any", lambda s: ep(
            s, sid, failing="any", errors=False, threshold=0.5)),
        ("dataset experiments", f"/ui/datasets/{DATASET_ID}/experiments",
         lambda s: _views.experiments_page(s, DATASET_ID)),
    ]


@contextmanager
def serving(db: str) -> Iterator[tuple[str, int]]:
    """``assay serve --no-auth`` over ``db`` on a free loopback port; its base URL and pid."""
    import httpx

    port = _free_port()
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "assay"), "serve", "--db", db,
                             "--host", "127.0.0.1", "--port", str(port), "--no-auth",
                             "--log-level", "warning"],
                            env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError("assay serve exited: "
                                   + proc.stderr.read().decode()[-2000:])  # type: ignore[union-attr]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("assay serve did not answer /ok within 120 s")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        _stop(proc)


def time_pages(url: str, pid: int, pages: list[tuple[str, str, Any]], repeats: int,
               timeout: float, give_up_s: float) -> list[dict[str, Any]]:
    """Each page: a cold request, a warm-up, the median of ``repeats``; a page whose cold
    request took over ``give_up_s`` gets a single warm request instead. Beside the wall time,
    the server process's CPU time per request: on a busy machine wall time is mostly waiting
    for a core, CPU time is what the page costs."""
    import httpx

    out = []
    cpu: list[float] = []
    with httpx.Client(base_url=url, timeout=timeout) as http:
        for name, path, _ in pages:
            def get(path: str = path) -> tuple[float, httpx.Response]:
                t0, c0 = time.perf_counter(), cpu_s(pid)
                resp = http.get(path)
                wall = time.perf_counter() - t0
                cpu.append(cpu_s(pid) - c0)
                return wall, resp

            cpu.clear()
            try:
                cold, resp = get()
            except httpx.TimeoutException:  # e.g. a query plan that never ends: say so, go on
                log(f"    {name}: no answer within {timeout:.0f} s")
                out.append({"page": name, "path": path, "cold_s": timeout, "warm_n": 0,
                            "cpu_s": cpu[-1] if cpu else 0.0, "median_s": timeout,
                            "bytes": 0, "timed_out": True})
                continue
            if resp.status_code != 200:
                raise RuntimeError(f"{name} {path} answered {resp.status_code}: "
                                   f"{resp.text[:500]}")
            if cold > give_up_s:  # far over its goal: one more request, not 1 + repeats
                warm = [get()[0]]
            else:
                get()  # warm-up
                warm = [get()[0] for _ in range(repeats)]
            out.append({"page": name, "path": path, "cold_s": cold, "warm_n": len(warm),
                        "cpu_s": statistics.median(cpu[-len(warm):]),
                        "median_s": statistics.median(warm), "bytes": len(resp.content)})
    return out


# -- profiling ------------------------------------------------------------------------------------
def _short(sql: str) -> str:
    s = " ".join(sql.split())
    return s if len(s) <= 260 else s[:200] + " ... " + s[-50:]


def profile_pages(store: Any, pages: list[tuple[str, str, Any]], slow: set[str]) -> None:
    """Each page's view built in-process with every SQL statement timed; pyinstrument on the
    pages in ``slow``."""
    for name, path, build in pages:
        build(store)  # warm, as the served figures are
        spent, detach = _statement_timer(store.engine)
        t0 = time.perf_counter()
        try:
            build(store)
        finally:
            detach()
        total = time.perf_counter() - t0
        sql = sum(sum(v) for v in spent.values())
        top = sorted(spent.items(), key=lambda kv: -sum(kv[1]))[:3]
        log(f"\n  {name} ({path}): view {total * 1000:.0f} ms, of which SQL {sql * 1000:.0f} ms "
            f"in {sum(len(v) for v in spent.values())} statements; slowest:")
        for stmt, times in top:
            log(f"    {sum(times) * 1000:8.1f} ms x{len(times)}  {_short(stmt)}")
        if name in slow and total <= PYINSTRUMENT_MAX_S:
            from pyinstrument import Profiler

            prof = Profiler(interval=0.002)
            prof.start()
            build(store)
            prof.stop()
            text = prof.output_text(unicode=False, color=False, show_all=False)
            lines = [ln for ln in text.splitlines() if ln.strip()][:45]
            log("    pyinstrument:\n      " + "\n      ".join(lines))


# -- main -----------------------------------------------------------------------------------------
@contextmanager
def pg_copy(path: Path, sizes: list[int], pg_url: str) -> Iterator[str]:
    """A scratch database ``assay_bench_ui`` filled from the SQLite cache; dropped after."""
    from sqlalchemy import create_engine, text

    from assay.store import Store

    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    url = pg_url.rsplit("/", 1)[0] + "/" + PG_DB
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{PG_DB}"'))
    try:
        pg = Store.open(url)
        try:
            copy_sqlite_to_pg(path, pg, sizes, lambda m: log(m))
        finally:
            pg.close()
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)'))
        admin.dispose()


def _row(backend: str, n: int, r: dict[str, Any]) -> list[str]:
    limit = GOALS_S.get(n, 1.0)
    x = r["median_s"] / limit
    warm = f"{r['median_s'] * 1000:,.0f}" + ("" if r["warm_n"] > 1 else " (1 run)")
    if r.get("timed_out"):
        warm = f"> {r['median_s'] * 1000:,.0f} (timed out)"
    return [backend, r["page"], f"{n:,}", warm, f"{r['cold_s'] * 1000:,.0f}",
            f"{r['cpu_s'] * 1000:,.0f}", f"{x:.2f}", "met" if x <= 1 else "MISSED"]


def print_table(rows: list[list[str]]) -> None:
    header = ["backend", "page", "root runs in project", "median ms", "cold ms", "server CPU ms",
              "x goal", "goal"]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        log("  " + "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000", help="root runs per project, comma separated "
                    "(each root has an llm child: runs in the project = 2 x this)")
    ap.add_argument("--days", type=float, default=7.0, help="the roots span this many days")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pg", action="store_true", help="PostgreSQL too (scratch database)")
    ap.add_argument("--no-sqlite", action="store_true", help="with --pg: PostgreSQL only")
    ap.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--profile", action="store_true",
                    help="time each page's SQL in-process; pyinstrument on pages over goal")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a page may take")
    ap.add_argument("--skip", default="", help="page names to leave out, comma separated "
                    "(e.g. project q=<text> older)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached SQLite store")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    sizes = sorted(int(s.replace("_", "")) for s in args.sizes.split(","))

    from assay.store import Store

    log(f"ui_pages: sizes {', '.join(f'{n:,}' for n in sizes)} root runs, {args.days:g} days, "
        f"{os.cpu_count()} cores; load average at start: {loadavg()}")
    t0 = time.perf_counter()
    path = ui_cache(sizes, args.days, args.rebuild)
    log(f"  store ready in {time.perf_counter() - t0:.1f} s; load average: {loadavg()}")

    backends = [] if args.pg and args.no_sqlite else [("sqlite", str(path))]
    results: dict[str, dict[int, list[dict[str, Any]]]] = {}
    rows: list[list[str]] = []
    with pg_copy(path, sizes, args.pg_url) if args.pg else nullcontext() as pg_url:
        if pg_url:
            backends.append(("postgres", pg_url))
        for backend, db in backends:
            store = Store.open(db)
            try:
                skip = {p.strip() for p in args.skip.split(",") if p.strip()}
                per = {n: [p for p in pages_for(store, n) if p[0] not in skip] for n in sizes}
                log(f"\n  {backend}: serving {db if backend == 'sqlite' else PG_DB}; "
                    f"load average: {loadavg()}")
                with serving(db) as (url, pid):
                    for n in sizes:
                        res = time_pages(url, pid, per[n], args.repeats, timeout=args.timeout,
                                         give_up_s=10 * GOALS_S.get(n, 1.0))
                        results.setdefault(backend, {})[n] = res
                        for r in res:
                            rows.append(_row(backend, n, r))
                            log(f"    {rows[-1][1]:28s} {n:>9,}: median {rows[-1][3]:>7} ms, "
                                f"cold {rows[-1][4]:>7} ms, server CPU {rows[-1][5]:>7} ms "
                                f"({r['bytes'] / 1024:.0f} KiB)")
                if args.profile:
                    log(f"\n  {backend}: in-process profile of each page")
                    for n in sizes:
                        slow = {r["page"] for r in results[backend][n]
                                if r["median_s"] > GOALS_S.get(n, 1.0)}
                        log(f"\n  -- {n:,} root runs --")
                        profile_pages(store, per[n], slow)
            finally:
                store.close()

    log(f"\nUI page load times (warm: median of {args.repeats} after 1 warm-up; cold: the "
        f"page's first request; server CPU: median CPU time of the server process per warm "
        f"request, 10 ms ticks). Goal: < 300 ms at 100,000 runs, "
        f"< 1 s at 1,000,000.")
    print_table(rows)
    log(f"\n  load average at end: {loadavg()} ({os.cpu_count()} cores; other work on the "
        "machine makes these figures pessimistic)")
    if args.json:
        args.json.write_text(json.dumps({"load_end": os.getloadavg(), "results": {
            b: {str(n): v for n, v in per.items()} for b, per in results.items()}}, indent=1))
    return 0 if all(r[-1] == "met" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
