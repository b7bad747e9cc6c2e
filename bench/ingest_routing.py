"""Per-request overhead of the ingest routes, in process: route matching and API-key lookup.

    .venv/bin/python bench/ingest_routing.py [--requests 400] [--rounds 3]

Two figures per hot route (POST /otel/v1/traces, /runs/multipart, /runs/batch, /runs):

- *match*: the time Starlette/FastAPI spend finding the route (the app's top-level routes are
  tried in order, each included router walking its own routes), without handling it;
- *request*: a whole small request (one span / one run) through ``httpx.ASGITransport`` into
  the app over a SQLite store, with an API key: wall time and this process's CPU time each.

Three set-ups are compared in one process (same load): ``before`` = the routers in their old
registration order (ingest 8th and 19th of 21) and no authentication cache; ``order`` = the
ingest routers first; ``after`` = that plus the authentication cache (``store/_keys.py``).
The machine is shared: CPU time per request and the load average are printed beside wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

HOT = (("POST", "/otel/v1/traces"), ("POST", "/runs/multipart"), ("POST", "/runs/batch"),
       ("POST", "/runs"))


def legacy_order(app: Any) -> list[Any]:
    """The app's top-level routes in their order before the ingest routers moved first: the
    route-order test's list (it checks that no answer changed), so both compare one order."""
    sys.path.insert(0, str(ROOT))
    from tests.server.test_route_order import _legacy_order

    return _legacy_order(app)


def _scope(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": [],
            "query_string": b"", "http_version": "1.1", "scheme": "http"}


def match_us(app: Any, method: str, path: str, n: int) -> float:
    """Microseconds to find the route answering ``method path`` (the top-level loop)."""
    from starlette.routing import Match

    routes = app.router.routes
    start = time.perf_counter()
    for _ in range(n):
        scope = _scope(method, path)
        for route in routes:
            if route.matches(scope)[0] == Match.FULL:
                break
        else:
            raise AssertionError(f"nothing answers {method} {path}")
    return (time.perf_counter() - start) / n * 1e6


def _span_body() -> dict[str, Any]:
    now = time.time_ns()
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
             {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
             {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
             {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "3"}}]
    span = {"traceId": secrets.token_hex(16), "spanId": secrets.token_hex(8), "name": "chat",
            "kind": 3, "startTimeUnixNano": str(now - 1_000_000),
            "endTimeUnixNano": str(now), "attributes": attrs}
    return {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "bench"}}]},
        "scopeSpans": [{"scope": {"name": "bench"}, "spans": [span]}]}]}


def _run() -> dict[str, Any]:
    rid = str(uuid.uuid4())
    start = datetime.now(UTC)
    return {"id": rid, "trace_id": rid, "name": "root", "run_type": "chain",
            "start_time": start.isoformat(), "session_name": "bench",
            "dotted_order": start.strftime("%Y%m%dT%H%M%S%fZ") + rid, "inputs": {"q": 1}}


async def _requests(app: Any, key: str, n: int) -> dict[str, tuple[float, float]]:
    """Per kind: (wall us, CPU us) per request over ``n`` sequential requests."""
    import httpx

    out = {}
    headers = {"x-api-key": key}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
        for kind in ("otlp", "batch"):
            bodies = [_span_body() if kind == "otlp" else {"post": [_run()]} for _ in range(n)]
            url = "/otel/v1/traces" if kind == "otlp" else "/runs/batch"
            wall, cpu = time.perf_counter(), time.process_time()
            for body in bodies:
                resp = await http.post(url, json=body, headers=headers)
                assert resp.status_code < 300, resp.text
            out[kind] = ((time.perf_counter() - wall) / n * 1e6,
                         (time.process_time() - cpu) / n * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--matches", type=int, default=5000)
    args = parser.parse_args()

    from assay.server import create_app
    from assay.store import Store, _keys

    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "bench.db")
        key = store.keys.create(tenant="bench").key
        assert key is not None
        app = create_app(store=store)
        current = list(app.router.routes)
        setups = {"before": (legacy_order(app), 0.0), "order": (current, 0.0),
                  "after": (current, _keys.AUTH_CACHE_TTL)}
        match: dict[str, dict[str, list[float]]] = {s: {} for s in setups}
        reqs: dict[str, dict[str, list[tuple[float, float]]]] = {s: {} for s in setups}
        asyncio.run(_requests(app, key, 20))  # warm up
        for _ in range(args.rounds):
            for name, (routes, ttl) in setups.items():
                app.router.routes[:] = routes
                store.keys.cache_ttl = ttl
                _keys._cache.clear()
                for method, path in HOT:
                    match[name].setdefault(path, []).append(
                        match_us(app, method, path, args.matches))
                for kind, fig in asyncio.run(_requests(app, key, args.requests)).items():
                    reqs[name].setdefault(kind, []).append(fig)
        app.router.routes[:] = current
        store.close()

    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; medians of {args.rounds} "
          f"rounds")
    print("route matching, us per request (top-level loop only):")
    for method, path in HOT:
        b, a = median(match["before"][path]), median(match["after"][path])
        print(f"  {method} {path:18} before {b:7.1f}  after {a:7.1f}  ({b / a:4.1f}x)")
    print(f"whole request, us per request ({args.requests} sequential, one span / one run):")
    for kind in ("otlp", "batch"):
        row = []
        for name in setups:
            wall = median(w for w, _ in reqs[name][kind])
            cpu = median(c for _, c in reqs[name][kind])
            row.append(f"{name} {wall:6.0f} wall {cpu:6.0f} cpu")
        print(f"  {kind:6} " + " | ".join(row))


if __name__ == "__main__":
    main()
