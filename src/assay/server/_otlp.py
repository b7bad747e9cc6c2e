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
from typing import Any

from ..errors import require
from ..store._span_rows import span_values
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
_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value"})


def _pb_value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind in _SCALARS:
        return getattr(v, kind)
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
    out: dict[str, Any] = {}
    for kv in items:
        v = kv.value
        kind = v.WhichOneof("value")  # the common scalars inline: a call less per attribute
        out[kv.key] = getattr(v, kind) if kind in _SCALARS else _pb_value(v)
    return out


def _pb_id(raw: bytes, size: int) -> str | None:
    """A protobuf id as lowercase hex when it is ``size`` non-zero bytes, else None."""
    return raw.hex() if len(raw) == size and raw.strip(b"\0") else None


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
    spans = out.spans
    latest = time.time_ns() + FUTURE_SLACK_NS
    for rs in req.resource_spans:
        resource = _pb_attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name or None
            for s in ss.spans:
                trace, sid, up = s.trace_id, s.span_id, s.parent_span_id
                trace_id, span_id = _pb_id(trace, 16), _pb_id(sid, 8)
                parent = _pb_id(up, 8) if up else None
                start, end, name = s.start_time_unix_nano, s.end_time_unix_nano, s.name
                status = s.status
                error, message = status.code == _STATUS_ERROR, status.message or None
                events = [SpanEvent(e.name, e.time_unix_nano, _pb_attrs(e.attributes))
                          for e in s.events]
                if (trace_id is None or span_id is None or (up and parent is None)
                        or not 0 < start <= latest or (end and end < start)):
                    _add(out, trace.hex(), sid.hex(), up.hex() if up else None, name, start,
                         end, {}, events, error, message, resource, scope)  # names the problem
                    continue
                spans.append(SpanView(trace_id, span_id, parent, name, start, end or None,
                                      _pb_attrs(s.attributes), events, error, message,
                                      resource, scope))
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


def run_id_of(tenant: str, trace_id: str, span_id: str | None = None, *,
              trace_hash: str | None = None) -> str:
    """A span's run id: its trace's for a root (so a root's id is its trace id, as in
    LangSmith), else one derived from the span; per workspace, so workspaces never collide.
    A name-based UUID (RFC 9562 version 8, BLAKE2b of the names: a third of uuid5's cost).

    A span's id begins with its trace's first 48 bits: a trace's runs sit side by side in the
    id, trace and parent indexes, so storing a trace dirties a leaf page of each instead of one
    per span (the pages a commit writes to SQLite's WAL: ~1.5 a span instead of ~2 at 40,000
    runs, fewer than half as the table grows). ``trace_hash``: the trace's, if known."""
    trace = trace_hash or _hash(f"{tenant}:{trace_id}:")
    x = trace if span_id is None else trace[:12] + _hash(f"{tenant}:{trace_id}:{span_id}")[12:]
    # version 8 in the 13th hex digit, the RFC 4122 variant (10xx) in the 17th
    return f"{x[:8]}-{x[8:12]}-8{x[13:16]}-{_VARIANT[x[16]]}{x[17:20]}-{x[20:]}"


def _hash(name: str) -> str:
    return _blake(name.encode(), digest_size=16, person=b"assay-otlp").hexdigest()


_blake = hashlib.blake2b
_VARIANT = {h: "89ab"[int(h, 16) & 3] for h in "0123456789abcdef"}


def _project(span: SpanView, fields: dict[str, Any], header: str | None) -> str | None:
    return (header or fields.get("project") or span.resource.get("langsmith.project")
            or span.resource.get("openinference.project.name") or None)


def to_span_runs(tenant: str, spans: list[SpanView], project: str | None) -> Iterator[SpanRun]:
    """Runs (as ``store_spans`` takes them) for decoded spans."""
    ids: dict[tuple[str, str | None], str] = {}  # a parent's id is often a sibling's too
    hashes: dict[str, str] = {}

    def id_of(trace_id: str, span_id: str | None) -> str:
        rid = ids.get((trace_id, span_id))
        if rid is None:
            trace = hashes.get(trace_id)
            if trace is None:
                trace = hashes[trace_id] = _hash(f"{tenant}:{trace_id}:")
            rid = ids[trace_id, span_id] = run_id_of(tenant, trace_id, span_id,
                                                     trace_hash=trace)
        return rid

    services: dict[int, dict[str, Any]] = {}  # one runtime dict per resource
    for span in spans:
        fields = span_fields(span)
        trace = id_of(span.trace_id, None)
        alias = id_of(span.trace_id, span.span_id)
        resource = span.resource
        runtime = services.get(id(resource))
        if runtime is None:
            service = resource.get("service.name")
            runtime = services[id(resource)] = {"service": service} if service else {}
        extra: dict[str, Any] = {"metadata": fields["metadata"]}
        if runtime:
            extra["runtime"] = dict(runtime)
        name = fields["name"]
        post: dict[str, Any] = {
            "id": trace if span.parent_span_id is None else alias, "trace_id": trace,
            "name": name if len(name) <= 512 else name[:512], "run_type": fields["run_type"],
            "inputs": fields["inputs"], "outputs": fields["outputs"], "error": fields["error"],
            "start_time": span.start_ns // 1000,  # epoch microseconds, as the store keeps them
            "end_time": span.end_ns // 1000 if span.end_ns else None,
            "extra": extra, "events": fields["events"], "tags": fields["tags"],
            "session_name": project or _project(span, fields, None) or "default",
        }
        yield SpanRun(post, span.span_id, span.parent_span_id,
                      None if span.parent_span_id is None else id_of(
                          span.trace_id, span.parent_span_id), alias,
                      span_values(post))  # here: on the request's thread, not the writer's
