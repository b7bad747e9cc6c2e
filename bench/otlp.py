"""OTLP ingest: spans per second through ``POST /otel/v1/traces`` (protobuf), beside
``/runs/multipart``, on ``assay serve --workers 1`` with a SQLite store (or PostgreSQL).

    .venv/bin/python bench/otlp.py [--requests 100] [--senders 4] [--rounds 3] [--postgres]
                                   [--compare-pragmas]

Bodies are made up front by the OpenTelemetry SDK and the OTLP exporter's own encoder (traces of
five spans: an agent span, two chat spans with GenAI token attributes, a tool span, a retriever
span), 100 spans per request, sent by ``senders`` threads with a ``requests`` session each (the
OTLP/HTTP exporter's own client) on loopback. The clock stops at the last 200; every span is
then checked in the store (OTLP spans are written and placed in their traces in the request,
so accepted = queryable). The goal is 10,000 spans/s with 4 exporters on 2 cores.

The machine's 2 cores are shared (senders, server, anything else running), so beside spans/s
it prints the server process's CPU time per span (``/proc/<pid>/stat``), the senders' own, and
the load average: CPU per span is the figure that does not depend on what else runs.

``--compare-pragmas`` serves a second SQLite store beside the first, from a server whose
connections keep SQLite's own page cache (2 MB) and autocheckpoint (1,000 pages) instead of
``SQLITE_PRAGMAS``' (``store/_engine.py``), and alternates the rounds between the two (each
round's bodies go to both, the order swapped every round): what those pragmas buy, measured in
one run on the same load. The WAL's size is printed after every round.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from measures._common import process_cpu_s  # noqa: E402

GOAL = 10_000.0
SPANS_PER_TRACE = 5


def _spans(n_requests: int, spans_per_request: int = 100) -> list[Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    traces = n_requests * spans_per_request // SPANS_PER_TRACE
    for i in range(traces):
        with tracer.start_as_current_span("invoke_agent", attributes={
                "gen_ai.operation.name": "invoke_agent", "input.value": json.dumps({"q": i})}):
            for _ in range(2):
                with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.system": "openai", "gen_ai.usage.input_tokens": 120,
                        "gen_ai.usage.output_tokens": 30}):
                    pass
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": '{"city": "Paris"}'}):
                pass
            with tracer.start_as_current_span("retrieve", attributes={
                    "openinference.span.kind": "RETRIEVER", "input.value": "paris"}):
                pass
    return list(memory.get_finished_spans())


def build_bodies(n_requests: int, spans_per_request: int = 100) -> list[bytes]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = _spans(n_requests, spans_per_request)
    return [encode_spans(spans[i:i + spans_per_request]).SerializeToString()
            for i in range(0, len(spans), spans_per_request)]


def send_all(url: str, key: str, bodies: list[bytes], senders: int) -> float:
    """Send ``bodies`` from ``senders`` threads, each with its own ``requests.Session``: the
    HTTP client (and connection reuse) of ``opentelemetry-exporter-otlp-proto-http``'s
    exporter, so the senders cost what real exporters' requests cost (their encoding is done
    up front, see ``encode_cost_us``). A 503 is retried after Retry-After, as exporters do."""
    import requests

    queue = list(reversed(bodies))
    lock = threading.Lock()
    failed: list[str] = []

    def sender() -> None:
        with requests.Session() as http:
            http.headers.update({"content-type": "application/x-protobuf", "x-api-key": key,
                                 "Langsmith-Project": "bench-otlp"})
            while not failed:
                with lock:
                    if not queue:
                        return
                    body = queue.pop()
                resp = http.post(f"{url}/otel/v1/traces", data=body, timeout=120)
                if resp.status_code == 503:  # overloaded: retry as exporters do
                    with lock:
                        queue.append(body)
                    time.sleep(float(resp.headers.get("retry-after", "1")))
                elif resp.status_code != 200:
                    failed.append(f"OTLP answered {resp.status_code}: {resp.text[:300]}")

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if failed:
        raise RuntimeError(failed[0])
    return wall


def encode_cost_us(n_requests: int = 10) -> float:
    """What a real exporter spends encoding, per span (``encode_spans`` and serializing), which
    the senders here do not pay in the timed part: their bodies are made up front."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = _spans(n_requests)
    t0 = time.process_time()
    for i in range(0, len(spans), 100):
        encode_spans(spans[i:i + 100]).SerializePartialToString()
    return (time.process_time() - t0) / len(spans) * 1e6


@contextmanager
def _postgres_server(admin_url: str) -> Iterator[tuple[str, str, str, Any]]:
    """A fresh PostgreSQL database with one API key, served by ``assay serve``; dropped
    afterwards."""
    import psycopg
    from measures.ingest import _free_port, _serve, _stop

    from assay.store import Store

    name = f"assay_bench_otlp_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{admin_url.rpartition('/')[0]}/{name}"
    try:
        with Store.open(url) as store:
            key = str(store.keys.create(tenant="default", description="bench").key)
        port = _free_port()
        proc = _serve(url, port, 1)  # type: ignore[arg-type]  # --db takes a URL too
        try:
            yield url, f"http://127.0.0.1:{port}", key, proc
        finally:
            _stop(proc)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_OLD_PRAGMAS = ("import sys; import assay.store._engine as e; "
                "e.SQLITE_PRAGMAS = tuple(p for p in e.SQLITE_PRAGMAS "
                "if not p.startswith(('cache_size', 'wal_autocheckpoint'))); "
                "from assay.cli import main; sys.argv[0] = 'assay'; sys.exit(main())")


@contextmanager
def _sqlite_server(old_pragmas: bool) -> Iterator[tuple[Path, str, str, Any]]:
    """A fresh SQLite store served by ``assay serve --workers 1``; with ``old_pragmas``, by a
    server that drops the page cache and checkpoint pragmas (SQLite's defaults)."""
    if not old_pragmas:
        from measures.ingest import _running_server

        with _running_server(1) as server:
            yield server
        return
    import shutil
    import subprocess
    import tempfile

    import httpx
    from measures._common import offline_env
    from measures.ingest import _free_port, _stop

    from assay.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-otlp-"))
    db = tmp / "server.db"
    try:
        with Store.open(db) as store:
            key = str(store.keys.create(tenant="default", description="bench").key)
        port = _free_port()
        proc = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "python"), "-c", _OLD_PRAGMAS, "serve", "--db",
             str(db), "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
             "--log-level", "warning"],
            env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("assay serve (old pragmas) did not start: "
                                       f"{proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            yield db, f"http://127.0.0.1:{port}", key, proc
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _wal_mb(db: Any) -> float:
    try:
        return os.path.getsize(f"{db}-wal") / 2**20
    except OSError:
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-multipart", action="store_true",
                        help="skip the /runs/multipart figure measured beside it")
    parser.add_argument("--postgres", metavar="ADMIN_URL", nargs="?",
                        const="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="serve a fresh PostgreSQL database instead of SQLite")
    parser.add_argument("--compare-pragmas", action="store_true",
                        help="beside it, a server with SQLite's default page cache and "
                             "autocheckpoint; rounds alternate between the two")
    args = parser.parse_args()
    from contextlib import ExitStack

    from sqlalchemy import func, select

    from assay.store import Store
    from assay.store._tables import runs

    backend = "PostgreSQL" if args.postgres else "SQLite"
    arms = ["current"] + (["old pragmas"] if args.compare_pragmas and not args.postgres else [])
    rates: dict[str, list[float]] = {a: [] for a in arms}
    server_us: dict[str, list[float]] = {a: [] for a in arms}
    sender_us: dict[str, list[float]] = {a: [] for a in arms}
    with ExitStack() as stack:
        servers = {a: stack.enter_context(
            _postgres_server(args.postgres) if args.postgres
            else _sqlite_server(a == "old pragmas")) for a in arms}
        for _db, url, key, _proc in servers.values():
            send_all(url, key, build_bodies(4), args.senders)  # warm-up
        sent = 4 * 100
        for r in range(args.rounds):
            bodies = build_bodies(args.requests)
            n = args.requests * 100
            for arm in (arms if r % 2 == 0 else arms[::-1]):
                db, url, key, proc = servers[arm]
                cpu0, own0 = process_cpu_s(proc.pid), time.process_time()
                wall = send_all(url, key, bodies, args.senders)
                server_us[arm].append((process_cpu_s(proc.pid) - cpu0) / n * 1e6)
                sender_us[arm].append((time.process_time() - own0) / n * 1e6)
                rates[arm].append(n / wall)
                wal = "" if args.postgres else f", WAL {_wal_mb(db):.1f} MB"
                print(f"  OTLP round{'' if len(arms) == 1 else f' ({arm})'}: {n:,} spans in "
                      f"{wall:.2f} s = {rates[arm][-1]:,.0f} spans/s; server CPU "
                      f"{server_us[arm][-1]:.1f} us/span, senders {sender_us[arm][-1]:.1f} "
                      f"us/span{wal}, load {os.getloadavg()[0]:.2f}", flush=True)
            sent += n
        for arm, (db, _url, _key, _proc) in servers.items():
            with Store.open(str(db)) as store, store.engine.connect() as conn:
                stored = conn.execute(select(func.count()).select_from(runs)).scalar()
            if stored != sent:
                raise SystemExit(f"the store ({arm}) holds {stored} runs, {sent} spans were "
                                 "accepted")
    otlp = median(rates["current"])
    print(f"OTLP protobuf, {args.senders} exporters, assay serve --workers 1 ({backend}): "
          f"{otlp:,.0f} spans/s (median of {args.rounds}), x goal {otlp / GOAL:.2f}; "
          f"every span checked in the store")
    cpu = median(server_us["current"])
    print(f"  server CPU {cpu:.1f} us/span (= {1e6 / cpu:,.0f} "
          f"spans/s per core), senders' CPU {median(sender_us['current']):.1f} us/span; "
          f"load average {os.getloadavg()[0]:.2f}; a real exporter's encoding (not in the "
          f"timed part) adds {encode_cost_us():.1f} us/span on its side")
    if "old pragmas" in rates:
        old, old_cpu = median(rates["old pragmas"]), median(server_us["old pragmas"])
        print(f"  with SQLite's default cache and autocheckpoint (same run, rounds alternated): "
              f"{old:,.0f} spans/s, server CPU {old_cpu:.1f} us/span; current / old: "
              f"spans/s x{otlp / old:.2f}, CPU per span x{cpu / old_cpu:.2f}")
    if not args.no_multipart and not args.postgres:
        from measures._common import Context
        from measures.ingest import _one_server

        ctx = Context()
        r = _one_server(ctx, 1, args.requests, args.rounds, senders=args.senders)
        print(f"/runs/multipart (zstd), same server and senders: {r['runs_per_s']:,.0f} runs/s "
              f"accepted, {r['indexed_runs_per_s']:,.0f} runs/s indexed; "
              f"OTLP / multipart indexed = {otlp / r['indexed_runs_per_s']:.2f}")


if __name__ == "__main__":
    main()
