"""The FastAPI application: LangSmith's REST API over one store, one workspace per API key."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from .. import __version__
from .._gc import relaxed_gc
from ..store import Store, _background
from ._body import BodyLimitMiddleware
from ._deps import Settings
from ._errors import install_error_handlers
from ._folder import Folder
from ._loopback import LoopbackOnlyMiddleware
from ._prefix import ApiPrefixMiddleware, route_paths

__all__ = ["DEFAULT_MAX_BODY_BYTES", "app_from_env", "create_app"]

DEFAULT_MAX_BODY_BYTES = Settings.max_body_bytes


def _info(settings: Settings) -> dict[str, Any]:
    """What ``GET /info`` advertises decides what the SDKs send (see the wire notes)."""
    return {
        # below 0.8.10 on purpose: from there the Python SDK queues create_feedback (default
        # extend_trace_retention=True) with the runs instead of posting it, and evaluate()
        # does not flush, so the seed's read_project right after it would miss the feedback.
        # (The SDKs' v2 resources, which ask for 0.16, log an "older backend" warning.)
        "version": __version__,
        "license_expiration_time": None,
        "batch_ingest_config": {
            "use_multipart_endpoint": True,
            "scale_up_qsize_trigger": 1000,
            "scale_up_nthreads_limit": 16,
            "scale_down_nempty_trigger": 4,
            "size_limit": settings.batch_size_limit,
            "size_limit_bytes": settings.ingest_size_limit_bytes,
        },
        "instance_flags": {
            "dataset_examples_multipart_enabled": True,  # JS refuses to upload examples without
            "examples_multipart_enabled": True,
            "zstd_compression_enabled": True,
            "gzip_body_enabled": True,
        },
    }


def create_app(
    store_url: str | os.PathLike[str] | None = None,
    *,
    store: Store | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    batch_size_limit: int = 100,
    auth: bool = True,
    max_attachment_bytes: int | None = None,
    fold: Literal["thread", "process"] = "thread",
) -> FastAPI:
    """A LangSmith-compatible server over the store at ``store_url`` (or an open ``store``).

    ``max_body_bytes`` caps each request body, on the wire and after decompression; bigger
    requests get a 413 with a JSON error. ``auth=False`` (a one-person server on a laptop)
    serves the default workspace to every request without an API key.
    ``max_attachment_bytes`` caps one example or run attachment (413 naming it).
    ``fold``: who indexes what ingest journals: a thread of this process (``_folder``), or
    ``"process"``: a fold process beside the workers (``_fold_process``, which ``assay serve``
    starts), so this one only accepts.
    """
    if fold not in ("thread", "process"):
        raise ValueError(f"fold must be 'thread' or 'process', not {fold!r}")
    if max_body_bytes < 1024:
        raise ValueError("max_body_bytes must be at least 1024")
    settings = Settings(max_body_bytes=max_body_bytes, batch_size_limit=batch_size_limit,
                        auth=auth)
    if max_attachment_bytes is not None:  # attachments (issue 23)
        settings = replace(settings, max_attachment_bytes=max_attachment_bytes)
    base = store if store is not None else Store.open(store_url)
    if auth:
        _ = base.keys  # reads ASSAY_AUTH_CACHE_TTL: a bad value fails here, not per request
    folder = Folder(base) if fold == "thread" else None
    if folder is None:  # the fold process's: not the store's own background folder either
        _background.claim(base.engine)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if folder is not None:
            folder.start()  # ingest journals; this indexes soon after (reads never wait)
        try:
            with relaxed_gc(freeze=True):  # ingest allocates ~50 objects a run
                yield
        finally:
            if folder is not None:
                folder.stop()

    app = FastAPI(title="assay", version=__version__, docs_url="/docs", redoc_url=None,
                  openapi_url="/openapi.json", lifespan=lifespan)
    app.state.store = base
    app.state.folder = folder
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    if not auth:  # no keys: other sites' pages and rebinding names kept out (``_loopback``)
        app.add_middleware(LoopbackOnlyMiddleware)

    from . import (
        _routes_comparative,  # pairwise experiments: before /datasets/{dataset_id}
        _routes_datasets,
        _routes_feedback,
        _routes_feedback_tokens,  # presigned: before /feedback/{feedback_id}
        _routes_otel,  # OTLP/HTTP traces from any OpenTelemetry exporter (issue 25)
        _routes_results,
        _routes_runs,
        _routes_runs_v2,
        _routes_sessions,
        _routes_shares,  # shared traces: before /runs/{run_id}... and the UI's pages
    )

    # Routes are tried in registration order, each included router walking its own routes: the
    # ingest routers (every traced call lands there) go first. Safe because no earlier router
    # answers their paths (tests/server/test_route_order.py checks every path and method).
    for module in (_routes_otel, _routes_runs):
        app.include_router(module.router)

    # async: neither waits for anything, and a sync endpoint costs a hop to the thread pool
    # (every SDK asks /info at start, load balancers ask /ok all day)
    @app.get("/info")
    async def info() -> JSONResponse:
        return JSONResponse(_info(settings))

    @app.get("/ok")
    async def health() -> JSONResponse:
        return JSONResponse({"ok": True})

    for module in (_routes_comparative, _routes_datasets, _routes_sessions,
                   _routes_feedback_tokens, _routes_feedback,
                   _routes_results, _routes_shares, _routes_runs_v2):
        app.include_router(module.router)
    from . import (  # issue 23: dataset tools, annotation queues, feedback configs, refusals
        _routes_dataset_tools,
        _routes_feedback_configs,
        _routes_not_served,
        _routes_queue_items,
        _routes_queues,
    )

    for module in (_routes_dataset_tools, _routes_queues, _routes_queue_items,
                   _routes_feedback_configs, _routes_not_served):
        app.include_router(module.router)
    from . import _routes_attachments  # example attachments, downloads (issue 23)

    app.include_router(_routes_attachments.router)
    from . import (  # run stats, v2 traces (issue 23), v2 threads
        _routes_run_stats,
        _routes_threads_v2,
        _routes_traces_v2,
    )

    app.include_router(_routes_run_stats.router)
    app.include_router(_routes_traces_v2.router)
    app.include_router(_routes_threads_v2.router)
    from ..ui import StoreFromKey, create_ui_router  # the web UI at / and /ui/... (issue 7)
    app.include_router(create_ui_router(StoreFromKey(base, auth=auth)))
    app.add_middleware(ApiPrefixMiddleware, routes=route_paths(app.router.routes))
    return app


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory`` / several workers: settings from ``ASSAY_*`` env vars."""
    limit = os.environ.get("ASSAY_MAX_BODY_BYTES")
    no_auth = os.environ.get("ASSAY_SERVER_NO_AUTH", "").lower() in ("1", "true", "yes")
    attach = os.environ.get("ASSAY_MAX_ATTACHMENT_BYTES")
    return create_app(os.environ.get("ASSAY_DATABASE_URL") or None,
                      max_body_bytes=int(limit) if limit else DEFAULT_MAX_BODY_BYTES,
                      auth=not no_auth, max_attachment_bytes=int(attach) if attach else None,
                      fold="process" if os.environ.get("ASSAY_SERVER_FOLD") == "process"
                      else "thread")
