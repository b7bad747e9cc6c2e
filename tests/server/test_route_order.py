"""The ingest routers are registered first (route matching is a walk in registration order),
and that changed no answer: every path and method reaches the route it reached before."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from starlette.routing import Match

from assay.server import create_app

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
SAMPLE_ID = "0190f3c2-7a1b-7c3d-8e4f-123456789abc"


def _legacy_order(app: Any) -> list[Any]:
    """The top-level routes in the order ``create_app`` registered them before the move."""
    from assay.server import (
        _routes_attachments,
        _routes_comparative,
        _routes_dataset_tools,
        _routes_datasets,
        _routes_feedback,
        _routes_feedback_configs,
        _routes_feedback_tokens,
        _routes_not_served,
        _routes_otel,
        _routes_queue_items,
        _routes_queues,
        _routes_results,
        _routes_run_stats,
        _routes_runs,
        _routes_runs_v2,
        _routes_sessions,
        _routes_shares,
        _routes_threads_v2,
        _routes_traces_v2,
    )

    modules = (_routes_comparative, _routes_datasets, _routes_sessions, _routes_runs,
               _routes_feedback_tokens, _routes_feedback, _routes_results, _routes_shares,
               _routes_runs_v2,
               _routes_dataset_tools, _routes_queues, _routes_queue_items,
               _routes_feedback_configs, _routes_not_served,
               _routes_attachments, _routes_run_stats, _routes_traces_v2, _routes_threads_v2,
               _routes_otel)
    routes = list(app.router.routes)
    by_router = {id(getattr(r, "original_router", None)): r for r in routes}
    plain = [r for r in routes if getattr(r, "original_router", None) is None]
    ordered = [by_router[id(m.router)] for m in modules]
    rest = [r for r in routes if r not in plain and r not in ordered]  # the web UI
    assert len(rest) == 1, "a router was added: add it to this legacy order"
    return plain + ordered + rest


def _paths(routes: list[Any]) -> set[str]:
    """A concrete path for every route (parameters filled in), with and without a trailing
    slash, plus a few that match nothing."""
    out = {"/", "/nope", "/runs/", "/otel/v1/traces/", "/otel/v1/logs"}
    stack = list(routes)
    while stack:
        route = stack.pop()
        if hasattr(route, "original_router"):
            stack.extend(route.original_router.routes)
            continue
        path = getattr(route, "path", None)
        if not path:
            continue
        path = re.sub(r"\{[^}:]+:path\}", "a/b", path)
        path = re.sub(r"\{[^}]+\}", SAMPLE_ID, path)
        out |= {path, path.rstrip("/") + "/"}
    return out


def _answering(routes: list[Any], method: str, path: str) -> Any:
    """The top-level route Starlette hands the request to: the first full match, else the first
    partial one (a 405 naming that route's methods), else None."""
    partial = None
    for route in routes:
        scope = {"type": "http", "method": method, "path": path, "root_path": "",
                 "headers": [], "query_string": b""}
        match = route.matches(scope)[0]
        if match == Match.FULL:
            return route
        if match == Match.PARTIAL and partial is None:
            partial = route
    return partial


def test_ingest_routes_first_and_every_answer_unchanged(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'routes.db'}")
    now = list(app.router.routes)
    before = _legacy_order(app)
    assert now != before  # the order did change
    paths = _paths(now)
    assert len(paths) > 100
    compared = 0
    for path in sorted(paths):
        for method in METHODS:
            assert _answering(now, method, path) is _answering(before, method, path), (
                f"{method} {path} is answered by another route than before")
            compared += 1
    assert compared == len(paths) * len(METHODS)
    # the ingest routes are reached through the first included routers, not the 8th and 19th
    from assay.server import _routes_otel, _routes_runs

    for path, module in (("/otel/v1/traces", _routes_otel), ("/runs/multipart", _routes_runs),
                         ("/runs/batch", _routes_runs), ("/runs", _routes_runs)):
        answer = _answering(now, "POST", path)
        assert answer.original_router is module.router
        included = [r for r in now if hasattr(r, "original_router")]
        assert included.index(answer) < 2, path
