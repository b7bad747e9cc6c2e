"""``POST /otel/v1/traces``: OTLP/HTTP from any OpenTelemetry-instrumented application.

Point an exporter at it with two environment variables (as for LangSmith)::

    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://host:1984/otel/v1/traces
    OTEL_EXPORTER_OTLP_HEADERS="x-api-key=<key>,Langsmith-Project=<project>"

Protobuf (``application/x-protobuf``) and JSON (``application/json``) bodies, gzip or not,
authenticated like every route. The project is the ``Langsmith-Project`` header, else the span's
``langsmith.trace.session_name``, else the resource's ``langsmith.project`` /
``openinference.project.name``, else ``default``. The answer is an ``ExportTraceServiceResponse``
in the request's encoding, with ``partial_success`` naming the spans it rejected. Under overload
(more exports in flight than the server takes at once) it answers 503 with ``Retry-After``, which
OTLP exporters honour by retrying; a span sent again is stored once. Exports that arrive while
another is being written are stored together in the next transaction (``_otlp_group``).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from . import _body
from ._deps import StoreDep, _settings
from ._errors import ApiError, error_response
from ._otlp import Decoded, decode_json, decode_protobuf, to_span_runs
from ._otlp_group import store_grouped

__all__ = ["MAX_IN_FLIGHT", "router"]

router = APIRouter()

MAX_IN_FLIGHT = 8  # exports stored at once; more wait up to _WAIT seconds, then get a 503
_WAIT = 2.0
_slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
_PROTOBUF = ("application/x-protobuf", "application/protobuf")


def _answer(rejected: list[str], as_json: bool) -> Response:
    message = "; ".join(rejected[:20]) + (f"; and {len(rejected) - 20} more"
                                          if len(rejected) > 20 else "")
    if as_json:
        body: dict[str, Any] = {}
        if rejected:
            body["partialSuccess"] = {"rejectedSpans": str(len(rejected)),
                                      "errorMessage": message}
        return Response(json.dumps(body), media_type="application/json")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    resp = ExportTraceServiceResponse()
    if rejected:
        resp.partial_success.rejected_spans = len(rejected)
        resp.partial_success.error_message = message
    return Response(resp.SerializeToString(), media_type="application/x-protobuf")


def _decode(kind: str, body: bytes, encoding: str | None, limit: int) -> tuple[Decoded, bool]:
    raw = _body.decode(body, encoding, limit)
    if kind == "application/json":
        return decode_json(_body.loads(raw, "OTLP/JSON body")), True
    return decode_protobuf(raw), False


@router.post("/otel/v1/traces")
async def export_traces(request: Request, store: StoreDep) -> Response:
    kind = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if kind not in (*_PROTOBUF, "application/json"):
        raise ApiError(415, "unsupported_media_type",
                       f"content type {kind or '(none)'!r}: OTLP/HTTP takes "
                       "application/x-protobuf or application/json")
    limit = _settings(request).max_body_bytes
    body = await request.body()
    encoding = request.headers.get("content-encoding")
    project = request.headers.get("langsmith-project") or None

    def handle() -> tuple[Decoded, bool, bool]:
        # decoding, mapping and the runs' column values (~20 us a span) here, on the request's
        # worker thread and before the write lock: on the event loop they held up reading the
        # next exports, under the lock they held up the writer (whose SQLite work releases
        # the GIL, so it overlaps this)
        decoded, as_json = _decode(kind, body, encoding, limit)
        items = list(to_span_runs(str(store.tenant_id), decoded.spans, project))
        if not items:
            return decoded, as_json, True
        if not _slots.acquire(timeout=_WAIT):
            return decoded, as_json, False
        try:
            store_grouped(store, items)
        finally:
            _slots.release()
        return decoded, as_json, True

    from .._sync import offload

    decoded, as_json, stored = await offload(handle)
    if not stored:
        return error_response(503, "overloaded", "too many OTLP exports at once: retry "
                              "after the Retry-After delay", headers={"Retry-After": "1"})
    return _answer(decoded.rejected, as_json)
