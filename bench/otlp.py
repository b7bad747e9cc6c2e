"""OTLP ingest: spans per second through ``POST /otel/v1/traces`` (protobuf), beside
``/runs/multipart``, on ``assay serve --workers 1`` with a SQLite store.

    .venv/bin/python bench/otlp.py [--requests 100] [--senders 4] [--rounds 3]

Bodies are made up front by the OpenTelemetry SDK and the OTLP exporter's own encoder (traces of
five spans: an agent span, two chat spans with GenAI token attributes, a tool span, a retriever
span), 100 spans per request, sent by ``senders`` concurrent httpx clients on loopback. The
clock stops at the last 200; every span is then checked in the store (OTLP spans are written
and placed in their traces in the request, so accepted = queryable). The goal is 10,000
spans/s with 4 exporters on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

GOAL = 10_000.0
SPANS_PER_TRACE = 5


def build_bodies(n_requests: int, spans_per_request: int = 100) -> list[bytes]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
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
    spans = list(memory.get_finished_spans())
    return [encode_spans(spans[i:i + spans_per_request]).SerializeToString()
            for i in range(0, len(spans), spans_per_request)]


async def send_all(url: str, key: str, bodies: list[bytes], senders: int) -> float:
    import httpx

    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=senders, max_keepalive_connections=senders)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        async def sender() -> None:
            while queue:
                body = queue.pop()
                resp = await http.post("/otel/v1/traces", content=body, headers={
                    "content-type": "application/x-protobuf", "x-api-key": key,
                    "Langsmith-Project": "bench-otlp"})
                if resp.status_code == 503:  # overloaded: retry as exporters do
                    queue.append(body)
                    await asyncio.sleep(float(resp.headers.get("retry-after", "1")))
                elif resp.status_code != 200:
                    raise RuntimeError(f"OTLP answered {resp.status_code}: {resp.text[:300]}")

        t0 = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(senders)))
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-multipart", action="store_true",
                        help="skip the /runs/multipart figure measured beside it")
    args = parser.parse_args()
    from measures.ingest import _running_server
    from sqlalchemy import func, select

    from assay.store import Store
    from assay.store._tables import runs

    rates = []
    with _running_server(1) as (db, url, key, _proc):
        asyncio.run(send_all(url, key, build_bodies(4), args.senders))  # warm-up
        sent = 4 * 100
        for _ in range(args.rounds):
            bodies = build_bodies(args.requests)
            wall = asyncio.run(send_all(url, key, bodies, args.senders))
            sent += args.requests * 100
            rates.append(args.requests * 100 / wall)
            print(f"  OTLP round: {args.requests * 100:,} spans in {wall:.2f} s = "
                  f"{rates[-1]:,.0f} spans/s")
        with Store.open(db) as store, store.engine.connect() as conn:
            stored = conn.execute(select(func.count()).select_from(runs)).scalar()
    if stored != sent:
        raise SystemExit(f"the store holds {stored} runs, {sent} spans were accepted")
    otlp = median(rates)
    print(f"OTLP protobuf, {args.senders} exporters, assay serve --workers 1 (SQLite): "
          f"{otlp:,.0f} spans/s (median of {args.rounds}), x goal {otlp / GOAL:.2f}; "
          f"every span checked in the store")
    if not args.no_multipart:
        from measures._common import Context
        from measures.ingest import _one_server

        ctx = Context()
        r = _one_server(ctx, 1, args.requests, args.rounds, senders=args.senders)
        print(f"/runs/multipart (zstd), same server and senders: {r['runs_per_s']:,.0f} runs/s "
              f"accepted, {r['indexed_runs_per_s']:,.0f} runs/s indexed; "
              f"OTLP / multipart indexed = {otlp / r['indexed_runs_per_s']:.2f}")


if __name__ == "__main__":
    main()
