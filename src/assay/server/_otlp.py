"""OTLP/HTTP trace bodies (protobuf or JSON) decoded into spans, checked span by span.

Only decoding lives here: what a span means as a run is ``tracing/_otel_map.span_fields``, the
mapping ``AssaySpanProcessor`` uses in-process too, and placing runs in their traces is the
store's (``store/_spans.py``). A body that cannot be decoded is a 400; a span that is decoded but
unusable (ids of the wrong length, no start time, a start far in the future, an end before its
start) is rejected alone and reported in the response's ``partial_success``.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._time import from_micros
from ..errors import require
from ..store._spans import SpanRun
from ..tracing._otel_map import SpanEvent, SpanView, span_fields
from ._errors import ApiError

__all__ = ["Decoded", "decode_json", "decode_protobuf", "to_span_runs"]

FUTURE_SLACK_NS = 24 * 3600 * 10**9  # a start more than a day ahead is a broken clock
_STATUS_ERROR = 2


@dataclass
class Decoded:
    spans: list[SpanView] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # "span <id>: <problem>"


# -- protobuf ----------------------------------------------------------------------------------
def _pb_value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(_pb_value(x) for x in v.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return getattr(v, kind)


def _pb_attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in items}


def decode_protobuf(body: bytes) -> Decoded:
    require("opentelemetry.proto", "server", "the OTLP endpoint (/otel/v1/traces)")
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise ApiError(400, "malformed_body", f"the body is not an OTLP protobuf "
                       f"ExportTraceServiceRequest ({exc})") from None
    out = Decoded()
    for rs in req.resource_spans:
        resource = _pb_attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name or None
            for s in ss.spans:
                _add(out, s.trace_id.hex(), s.span_id.hex(),
                     s.parent_span_id.hex() if s.parent_span_id else None, s.name,
                     s.start_time_unix_nano, s.end_time_unix_nano, _pb_attrs(s.attributes),
                     [SpanEvent(e.name, e.time_unix_nano, _pb_attrs(e.attributes))
                      for e in s.events],
                     s.status.code == _STATUS_ERROR, s.status.message or None, resource, scope)
    return out


# -- JSON (OTLP/JSON: camelCase, ids in hex, 64-bit integers as strings or numbers) ------------
def _js_value(v: Any) -> Any:
    if not isinstance(v, Mapping) or not v:
        return None
    (kind, val), = list(v.items())[:1]
    if kind == "intValue":
        return int(val)
    if kind == "doubleValue":
        return float(val)
    if kind == "arrayValue":
        return tuple(_js_value(x) for x in (val or {}).get("values") or [])
    if kind == "kvlistValue":
        return {kv.get("key"): _js_value(kv.get("value")) for kv in (val or {}).get("values") or []}
    return val


def _js_attrs(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        raise ValueError("attributes must be a list of {key, value}")
    return {str(kv["key"]): _js_value(kv.get("value")) for kv in items}


def _list(obj: Mapping[str, Any], *names: str) -> list[Any]:
    for name in names:
        value = obj.get(name)
        if value is not None:
            if not isinstance(value, list):
                raise ValueError(f"{name} must be a list")
            return value
    return []


def decode_json(data: Any) -> Decoded:
    if not isinstance(data, Mapping):
        raise ApiError(400, "malformed_body", "an OTLP/JSON body is an object with resourceSpans")
    out = Decoded()
    try:
        for rs in _list(data, "resourceSpans", "resource_spans"):
            resource = _js_attrs((rs.get("resource") or {}).get("attributes") or [])
            for ss in _list(rs, "scopeSpans", "scope_spans", "instrumentationLibrarySpans"):
                scope = (ss.get("scope") or ss.get("instrumentationLibrary") or {}).get("name")
                for s in _list(ss, "spans"):
                    sid = str(s.get("spanId") or "")
                    try:
                        status = s.get("status") or {}
                        code = status.get("code")
                        _add(out, str(s.get("traceId") or "").lower(), sid.lower(),
                             (s.get("parentSpanId") or "").lower() or None, str(s.get("name", "")),
                             int(s.get("startTimeUnixNano") or 0),
                             int(s.get("endTimeUnixNano") or 0),
                             _js_attrs(s.get("attributes") or []),
                             [SpanEvent(str(e.get("name", "")), int(e.get("timeUnixNano") or 0),
                                        _js_attrs(e.get("attributes") or []))
                              for e in s.get("events") or []],
                             code in (_STATUS_ERROR, "STATUS_CODE_ERROR"),
                             status.get("message") or None, resource, scope)
                    except (TypeError, ValueError, KeyError, AttributeError) as exc:
                        out.rejected.append(f"span {sid or '?'}: malformed ({exc})")
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ApiError(400, "malformed_body", f"malformed OTLP/JSON body: {exc}") from None
    return out


# -- checks and runs ---------------------------------------------------------------------------
def _is_hex(text: str, length: int) -> bool:
    if len(text) != length:
        return False
    try:
        return int(text, 16) != 0
    except ValueError:
        return False


def _add(out: Decoded, trace_id: str, span_id: str, parent: str | None, name: str,
         start: int, end: int, attrs: dict[str, Any], events: list[SpanEvent], error: bool,
         message: str | None, resource: dict[str, Any], scope: str | None) -> None:
    label = f"span {span_id or '?'}" + (f" ({name})" if name else "")
    problem = None
    if not _is_hex(trace_id, 32):
        problem = f"trace id {trace_id!r} is not 16 non-zero bytes"
    elif not _is_hex(span_id, 16):
        problem = f"span id {span_id!r} is not 8 non-zero bytes"
    elif parent is not None and not _is_hex(parent, 16):
        problem = f"parent span id {parent!r} is not 8 non-zero bytes"
    elif start <= 0:
        problem = "no start time"
    elif start > time.time_ns() + FUTURE_SLACK_NS:
        problem = f"start time {start} is more than a day in the future"
    elif end and end < start:
        problem = "ends before it starts"
    if problem is not None:
        out.rejected.append(f"{label}: {problem}")
        return
    out.spans.append(SpanView(trace_id, span_id, parent, name, start, end or None, attrs,
                              events, error, message, resource, scope))


def _dt(ns: int | None) -> datetime | None:
    """Nanoseconds since the epoch as an exact UTC datetime (to the microsecond)."""
    return None if not ns else from_micros(ns // 1000)


def run_id_of(tenant: str, trace_id: str, span_id: str | None = None) -> str:
    """A span's run id: its trace's for a root (so a root's id is its trace id, as in
    LangSmith), else one derived from the span; per workspace, so workspaces never collide.
    A name-based UUID (RFC 9562 version 8, BLAKE2b of the names: a third of uuid5's cost)."""
    key = f"{tenant}:{trace_id}:{span_id or ''}".encode()
    b = bytearray(hashlib.blake2b(key, digest_size=16, person=b"assay-otlp").digest())
    b[6] = (b[6] & 0x0F) | 0x80
    b[8] = (b[8] & 0x3F) | 0x80
    x = b.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _project(span: SpanView, fields: dict[str, Any], header: str | None) -> str | None:
    return (header or fields.get("project") or span.resource.get("langsmith.project")
            or span.resource.get("openinference.project.name") or None)


def to_span_runs(tenant: str, spans: list[SpanView], project: str | None) -> Iterator[SpanRun]:
    """Runs (as ``store_spans`` takes them) for decoded spans."""
    traces: dict[str, str] = {}
    for span in spans:
        fields = span_fields(span)
        trace = traces.get(span.trace_id)
        if trace is None:
            trace = traces[span.trace_id] = run_id_of(tenant, span.trace_id)
        alias = run_id_of(tenant, span.trace_id, span.span_id)
        meta = fields["metadata"]
        post: dict[str, Any] = {
            "id": trace if span.parent_span_id is None else alias, "trace_id": trace,
            "name": fields["name"][:512], "run_type": fields["run_type"],
            "inputs": fields["inputs"], "outputs": fields["outputs"], "error": fields["error"],
            "start_time": _dt(span.start_ns), "end_time": _dt(span.end_ns),
            "extra": {"metadata": meta, **({"runtime": {"service": span.resource[
                "service.name"]}} if span.resource.get("service.name") else {})},
            "events": fields["events"], "tags": fields["tags"],
            "session_name": _project(span, fields, project) or "default",
        }
        yield SpanRun(post, span.span_id, span.parent_span_id,
                      None if span.parent_span_id is None else run_id_of(
                          tenant, span.trace_id, span.parent_span_id), alias)
