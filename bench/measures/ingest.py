"""(5) Server ingest: runs per second accepted through ``/runs/multipart`` (zstd) by
``assay serve``, from several concurrent senders, on loopback.

``assay serve`` runs as a subprocess on 127.0.0.1 over a fresh SQLite store (and, last, over a
scratch PostgreSQL database: the team server's own store). Request bodies are
built and zstd-compressed before the clock starts, in the Python SDK's part format (see
/work/shared/reference/langsmith-wire/py_eval_zstd.txt): per run a ``post.<id>`` part plus
``.inputs``, ``.outputs``, ``.events`` and ``.extra`` parts, post and patch merged, 100 runs per
request (the ``size_limit`` /info advertises), half ``chain`` roots and half ``llm`` children
with usage and a streamed first token; run ids are uuid7s, as langsmith 0.15 and the JS SDK make
them (random ids would cost the store's indexes far more than real traffic does). Senders only
send bytes (an ``h11`` connection each: 2-4 us of CPU a run, against httpx's ~12, which took
a sixth of the 2 cores from the server), so the cores go to the server; their CPU is reported
beside the server's. A run counts once its request got 202 (the server
stores before answering); the store is counted afterwards to check that every run is there.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import uuid_utils

from ._common import ROOT, Context, child_pids, goal, median, offline_env, process_cpu_s

NAME = "ingest"
TITLE = "server ingest through /runs/multipart (zstd)"
GOAL = 5_000.0
INDEXED_GOAL = 30_000.0  # issue 27: runs/s indexed (queryable), 1 worker, SQLite, 4 senders
RUNS_PER_REQUEST = 100
SENDERS = 4


def _part(name: str, payload: Any) -> bytes:
    data = json.dumps(payload, separators=(",", ":")).encode()
    return (f'Content-Disposition: form-data; name="{name}"\r\n'
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            ).encode() + data


def _runs(n_traces: int, session: str, t0: datetime) -> list[tuple[dict, dict]]:
    """(main fields, large fields) of ``2 * n_traces`` finished runs: roots and llm children."""
    out = []
    for i in range(n_traces):
        rid, cid = uuid_utils.uuid7(), uuid_utils.uuid7()  # as the SDKs make run ids
        start = t0 + timedelta(microseconds=i * 1_000)
        end = start + timedelta(milliseconds=250)
        seg = start.strftime("%Y%m%dT%H%M%S%fZ") + str(rid)
        cstart = start + timedelta(milliseconds=2)
        root = {"id": str(rid), "trace_id": str(rid), "dotted_order": seg, "name": "Target",
                "run_type": "chain", "start_time": start.isoformat(),
                "end_time": end.isoformat(), "session_name": session, "tags": [],
                "reference_example_id": str(uuid.uuid4())}
        root_big = {"inputs": {"input": f"question {i}"}, "outputs": {"output": f"answer {i}"},
                    "events": [], "extra": {"metadata": {"ls_method": "traceable",
                                                         "num_repetitions": 1,
                                                         "__ls_runner": "py_sdk_evaluate"}}}
        child = {"id": str(cid), "trace_id": str(rid), "parent_run_id": str(rid),
                 "dotted_order": seg + "." + cstart.strftime("%Y%m%dT%H%M%S%fZ") + str(cid),
                 "name": "ChatOpenAI", "run_type": "llm", "start_time": cstart.isoformat(),
                 "end_time": (end - timedelta(milliseconds=2)).isoformat(),
                 "session_name": session, "tags": []}
        child_big = {
            "inputs": {"messages": [{"role": "user", "content": f"question {i}"}]},
            "outputs": {"content": f"answer {i}"},
            "events": [{"name": "new_token", "time": (cstart + timedelta(milliseconds=80)
                                                      ).isoformat(), "kwargs": {"token": "A"}}],
            "extra": {"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                                   "usage_metadata": {"input_tokens": 120, "output_tokens": 40,
                                                      "total_tokens": 160}}}}
        out += [(root, root_big), (child, child_big)]
    return out


def build_bodies(n_requests: int, session: str) -> list[bytes]:
    import zstandard

    cctx = zstandard.ZstdCompressor(level=3)
    t0 = datetime.now(UTC)
    bodies = []
    for r in range(n_requests):
        boundary = uuid.uuid4().hex
        chunks = []
        for main, big in _runs(RUNS_PER_REQUEST // 2, session, t0 + timedelta(seconds=r)):
            rid = main["id"]
            chunks.append(_part(f"post.{rid}", main))
            for fname, value in big.items():
                chunks.append(_part(f"post.{rid}.{fname}", value))
        sep = f"--{boundary}\r\n".encode()
        body = b"".join(sep + c + b"\r\n" for c in chunks) + f"--{boundary}--\r\n".encode()
        bodies.append(boundary.encode() + b"\n" + cctx.compress(body))
    return bodies


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _journal_empty(db: Path | str, deadline_s: float = 300.0) -> None:
    """Wait until the server's background fold has indexed everything (journal empty); ``db``:
    a SQLite file or a PostgreSQL URL."""
    if isinstance(db, str):
        import psycopg

        conn: Any = psycopg.connect(db.replace("postgresql+psycopg://", "postgresql://"),
                                    autocommit=True)
    else:
        from assay.store import sqlite_driver

        sqlite3 = sqlite_driver()  # the stores' own SQLite (store/_driver.py)
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    places = [conn]
    if not isinstance(db, str):
        # a SQLite file's journal is its queue file (store/_queue.py); entries a fold applied
        # are deleted from it right after its commit, so empty means folded
        from assay.store._queue import queue_path

        queue = queue_path(str(db))
        if Path(queue).exists():
            places.append(sqlite3.connect(f"file:{queue}?mode=ro", uri=True))
    try:
        t_end = time.monotonic() + deadline_s
        while any(c.execute("SELECT 1 FROM journal LIMIT 1").fetchone() is not None
                  for c in places):
            if time.monotonic() > t_end:
                raise RuntimeError("the server's journal did not empty within 300 s")
            time.sleep(0.005)
    finally:
        for c in places:
            c.close()


async def _send_all(url: str, key: str, bodies: list[bytes], senders: int) -> float:
    """Send every body, ``senders`` at a time on keep-alive connections; the wall time.

    The senders share the 2 cores with the server, so they are kept lean: an ``h11``
    connection each over asyncio's streams (the HTTP/1.1 that httpx itself runs on, without its
    pool, its request and response models and its headers' handling: ~1 µs of the bench's CPU
    a run against httpx's ~12, measured by ``_sender_cpu``)."""
    import h11

    host, port = url.removeprefix("http://").split(":")
    queue = list(reversed(bodies))

    async def sender() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        conn = h11.Connection(h11.CLIENT)
        try:
            while queue:
                raw = queue.pop()
                boundary, _, body = raw.partition(b"\n")
                writer.write(conn.send(h11.Request(
                    method="POST", target="/runs/multipart", headers=[
                        ("host", host), ("content-length", str(len(body))),
                        ("content-type", b"multipart/form-data; boundary=" + boundary),
                        ("content-encoding", "zstd"), ("x-api-key", key)])))
                writer.write(conn.send(h11.Data(data=body)))
                writer.write(conn.send(h11.EndOfMessage()))
                status, answer = 0, b""
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await reader.read(65536))
                    elif isinstance(event, h11.Response):
                        status = event.status_code
                    elif isinstance(event, h11.Data):
                        answer += event.data
                    elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                        break
                if status != 202:
                    raise RuntimeError(f"ingest answered {status}: {answer[:300]!r}")
                conn.start_next_cycle()
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(senders)))
    return time.perf_counter() - t0


def _serve(db: Path | str, port: int, workers: int,
           fold: str | None = None) -> subprocess.Popen[bytes]:
    exe = ROOT / ".venv" / "bin" / "assay"
    env = offline_env()
    proc = subprocess.Popen([str(exe), "serve", "--db", str(db), "--host", "127.0.0.1",
                             "--port", str(port), "--workers", str(workers),
                             "--log-level", "warning",
                             *(("--fold", fold) if fold else ())],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"assay serve exited: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("assay serve did not answer /ok within 60 s")


def _process_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of ``pid`` and each of its descendants, by role: ``fold`` (the fold
    process), ``server`` (the server and its workers)."""
    out = {"server": 0.0, "fold": 0.0}
    todo = [pid]
    while todo:
        one = todo.pop()
        try:
            with open(f"/proc/{one}/cmdline", "rb") as fh:
                role = "fold" if b"_fold_process" in fh.read() else "server"
        except OSError:  # gone meanwhile
            continue
        out[role] += process_cpu_s(one)
        todo += child_pids(one)
    return out


def _one_server(ctx: Context, workers: int, n_requests: int, repeats: int,
                senders: int = SENDERS, postgres: bool = False,
                fold: str | None = None) -> dict[str, Any]:
    from sqlalchemy import func, select

    from assay.store import Store
    from assay.store._tables import runs

    with _running_server(workers, ctx if postgres else None, fold) as (db, url, key, proc):
        warm = build_bodies(max(2, workers * 2), "bench-warmup")
        asyncio.run(_send_all(url, key, warm, SENDERS))
        _journal_empty(db)
        rates, walls, indexed_rates = [], [], []
        cpu: dict[str, list[float]] = {"server": [], "fold": [], "senders": []}
        for rep in range(repeats):
            bodies = build_bodies(n_requests, f"bench-ingest-{rep}")
            before = _process_cpu(proc.pid)
            t0, c0 = time.perf_counter(), time.process_time()
            wall = asyncio.run(_send_all(url, key, bodies, senders))
            cpu["senders"].append((time.process_time() - c0) / (n_requests * RUNS_PER_REQUEST)
                                  * 1e6)
            _journal_empty(db)
            indexed = time.perf_counter() - t0
            after = _process_cpu(proc.pid)
            walls.append(wall)
            rates.append(n_requests * RUNS_PER_REQUEST / wall)
            indexed_rates.append(n_requests * RUNS_PER_REQUEST / indexed)
            for role in ("server", "fold"):  # CPU a run, until the journal is folded
                cpu[role].append((after[role] - before[role]) / (n_requests * RUNS_PER_REQUEST)
                                 * 1e6)
        _stop(proc)
        with Store.open(db) as store, store.engine.connect() as conn:
            store.settle()  # nothing left after _journal_empty; a no-op probe
            stored = conn.execute(select(func.count()).select_from(runs)).scalar()
    expected = (repeats * n_requests + max(2, workers * 2)) * RUNS_PER_REQUEST
    if stored != expected:
        raise RuntimeError(f"the store holds {stored} runs, {expected} were accepted")
    size = sum(len(b) for b in build_bodies(1, "size-probe"))
    return {"workers": workers, "senders": senders, "runs_per_s": median(rates), "rates": rates,
            "indexed_runs_per_s": median(indexed_rates), "indexed_rates": indexed_rates,
            "server_cpu_us_per_run": median(cpu["server"]),
            "fold_cpu_us_per_run": median(cpu["fold"]),
            "senders_cpu_us_per_run": median(cpu["senders"]),
            "walls_s": walls, "requests": n_requests, "runs": n_requests * RUNS_PER_REQUEST,
            "stored_ok": True, "compressed_request_bytes": size}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextmanager
def _running_server(workers: int, pg: Context | None = None, fold: str | None = None
                    ) -> Iterator[tuple[Path | str, str, str, subprocess.Popen[bytes]]]:
    """A fresh SQLite store (with ``pg``: a scratch PostgreSQL database on its server) with one
    API key, served by ``assay serve``; removed afterwards."""
    from assay.store import Store

    from .stats import _pg_scratch

    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-ingest-"))
    db: Path | str = tmp / "server.db"
    drop = None
    if pg is not None:
        db, drop = _pg_scratch(pg)
    try:
        with Store.open(db) as store:
            key = store.keys.create(tenant="default", description="bench").key
        port = _free_port()
        proc = _serve(db, port, workers, fold)
        try:
            yield db, f"http://127.0.0.1:{port}", key, proc
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if drop is not None:
            drop()


def run(ctx: Context) -> dict[str, Any]:
    n_requests = 30 if ctx.quick else 150
    # (workers, senders, PostgreSQL, fold): the goal's figure is the first; the others show
    # what limits it, and the team server's own store, PostgreSQL (a scratch database on
    # --pg-url's server); each backend with its default fold process and with a fold thread
    # per worker
    configs: list[tuple[int, int, bool, str | None]] = [
        (1, SENDERS, False, None), (1, SENDERS, False, "thread"), (1, 1, False, None)]
    if not ctx.quick:
        configs.append((2, SENDERS, False, None))
    configs += [(1, SENDERS, True, None), (1, SENDERS, True, "thread")]
    if not ctx.quick:
        configs.append((2, SENDERS, True, None))
    out, rows, figures = {}, [], {}
    for w, k, pg, fold in configs:
        try:
            r = _one_server(ctx, w, n_requests, ctx.repeats, senders=k, postgres=pg, fold=fold)
        except Exception as exc:  # noqa: BLE001 - no PostgreSQL server: say so, keep the rest
            if not pg:
                raise
            ctx.log(f"    postgres: skipped ({exc.__class__.__name__}: {str(exc)[:200]})")
            continue
        tag = (",postgres" if pg else "") + (f",fold={fold}" if fold else "")
        out[f"workers={w},senders={k}{tag}"] = r
        figures[f"workers={w} senders={k}{tag} runs/s"] = round(r["runs_per_s"])
        figures[f"workers={w} senders={k}{tag} indexed runs/s"] = round(
            r["indexed_runs_per_s"])
        backend = "PostgreSQL" if pg else "SQLite"
        how = fold or "process"  # what --fold auto picks
        fold_cpu = f"{r['fold_cpu_us_per_run']:.1f}" if how == "process" else "-"
        rows.append([f"assay serve --workers {w} ({backend}, fold {how})", str(k),
                     f"{r['runs']:,}", f"{r['runs_per_s']:,.0f}",
                     f"{r['indexed_runs_per_s']:,.0f}", f"{r['server_cpu_us_per_run']:.1f}",
                     fold_cpu, f"{r['senders_cpu_us_per_run']:.1f}",
                     f"{r['runs_per_s'] / GOAL:.2f}"])
        ctx.log(f"    {backend}, workers={w}, senders={k}, fold {how}: "
                f"{r['runs_per_s']:,.0f} runs/s accepted, "
                f"{r['indexed_runs_per_s']:,.0f} runs/s indexed "
                f"({r['runs']:,} runs in {r['requests']} requests)")
    first = out[f"workers=1,senders={SENDERS}"]
    return {"figures": figures,
            "goals": [goal(f"ingest runs/s, assay serve (1 worker, SQLite, {SENDERS} senders)",
                           first["runs_per_s"], GOAL, "runs/s", lower_is_better=False),
                      goal(f"indexed ingest runs/s, assay serve (1 worker, SQLite, {SENDERS} "
                           "senders; end to end: queryable)", first["indexed_runs_per_s"],
                           INDEXED_GOAL, "runs/s", lower_is_better=False)],
            "notes": [f"h11 senders on loopback, {RUNS_PER_REQUEST} runs per zstd multipart "
                      f"request (~{first['compressed_request_bytes'] // 1024} KiB compressed), "
                      f"bodies prebuilt; median of {ctx.repeats} rounds of {n_requests} "
                      "requests; every accepted run checked in the store",
                      "accepted: the clock stops at the last 202 (each run durable in the "
                      "journal, checked for conflicts); indexed: it stops when the server's "
                      "background fold has emptied the journal (runs, statistics and indexes "
                      "written)",
                      "CPU a run: the server's processes (its workers) and the fold process, "
                      "from the first request to the emptied journal (/proc); the senders' (the "
                      "bench's own process, on the same 2 cores) while they send",
                      "fold: who indexes (assay serve --fold; auto, the default, picks a fold "
                      "process beside the workers; thread: a fold thread in each worker. "
                      "On SQLite the workers append to the database's queue file "
                      "(store/_queue.py) and the fold process holds the database's write lock: "
                      "neither waits for the other; it decodes and builds each batch's rows "
                      "before it takes the lock)"],
            "table": {"header": ["server", "senders", "runs per round", "accepted runs/s",
                                 "indexed runs/s", "server CPU us/run", "fold process CPU us/run",
                                 "senders CPU us/run", "x goal (accepted)"], "rows": rows},
            "detail": out}


def profile_server(raw: Path, seconds: int = 8, workers: int = 1,
                   spy_args: list[str] | None = None) -> None:
    """Record py-spy stacks of ``assay serve`` while senders keep it busy (bench/hotspots.py;
    ``spy_args``: its py-spy command up to the target)."""
    import shutil as _sh

    with _running_server(workers) as (_db, url, key, proc):
        asyncio.run(_send_all(url, key, build_bodies(4, "warmup"), SENDERS))
        bodies = build_bodies(400, "bench-profile")
        spy = _sh.which("py-spy") or str(ROOT / ".venv" / "bin" / "py-spy")
        args = spy_args or [spy, "record", "-r", "400", "--threads", "--format", "raw", "-o",
                            str(raw)]
        rec = subprocess.Popen([*args, "--pid", str(proc.pid), "--duration", str(seconds)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # the fold process, recorded on its own (py-spy's --subprocesses missed it)
        kids = {pid: raw.with_name(f"{raw.stem}-{pid}.txt") for pid in child_pids(proc.pid)}
        at = args.index("-o") + 1
        kid_recs = [subprocess.Popen([*args[:at], str(out), *args[at + 1:], "--pid", str(pid),
                                      "--duration", str(seconds)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    for pid, out in kids.items()]
        time.sleep(1.0)
        deadline = time.monotonic() + seconds - 1.5
        while time.monotonic() < deadline:
            asyncio.run(_send_all(url, key, bodies[:40], SENDERS))
            bodies = bodies[40:] or build_bodies(400, f"bench-profile-{time.time()}")
        rec.wait(timeout=seconds + 30)
        for kid in kid_recs:
            kid.wait(timeout=seconds + 30)
        with raw.open("a") as fh:  # its threads named apart from the server's
            for out in kids.values():
                if out.exists():
                    fh.write(re.sub(r"^(thread \(\d+\): )", r"\1fold-process ",
                                    out.read_text(), flags=re.M))
