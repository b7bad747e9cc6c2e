"""Request bodies: a size cap, zstd/gzip decoding with a cap (zip bombs), JSON and multipart.

Everything is read and checked before anything is written, so a bad body never leaves a partial
write behind. Limits apply twice: to the bytes on the wire (``BodyLimitMiddleware``, which also
catches chunked uploads without a Content-Length) and to the decoded bytes (``decode``).
"""

from __future__ import annotations

import io
import json
import math
import zlib
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import ApiError, error_response

__all__ = [
    "BodyLimitMiddleware",
    "Part",
    "decode",
    "loads",
    "parse_multipart",
    "read_json",
    "read_multipart",
]

_CHUNK = 1 << 16


def _too_large(limit: int, what: str = "request body") -> ApiError:
    return ApiError(413, "payload_too_large",
                    f"{what} exceeds the server's limit of {limit} bytes (assay serve --max-body-bytes)",
                    limit=limit)


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes``: early by Content-Length, else while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                declared = -1
            if declared < 0 or declared > self.max_bytes:
                await _drain(receive, self.max_bytes * 4)
                resp = (error_response(400, "malformed_body", "invalid Content-Length header")
                        if declared < 0 else
                        error_response(413, "payload_too_large",
                                       f"request body of {declared} bytes exceeds the server's "
                                       f"limit of {self.max_bytes} bytes "
                                       "(assay serve --max-body-bytes)", limit=self.max_bytes))
                await resp(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    if message.get("more_body"):
                        await _drain(receive, self.max_bytes * 4)
                    raise _too_large(self.max_bytes)
            return message

        await self.app(scope, limited, send)


async def _drain(receive: Receive, budget: int) -> None:
    """Read (and drop) a refused body so the client gets our answer, not a reset connection."""
    seen = 0
    while seen <= budget:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body"):
            return


def decode(data: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo Content-Encoding (zstd, gzip, deflate, identity), never producing over ``limit``."""
    codings = [c.strip().lower() for c in (encoding or "").split(",") if c.strip()]
    for coding in reversed(codings):
        if coding in ("identity", ""):
            continue
        if coding == "zstd":
            data = _unzstd(data, limit)
        elif coding in ("gzip", "x-gzip", "deflate"):
            data = _unzlib(data, limit, coding)
        else:
            raise ApiError(415, "unsupported_encoding",
                           f"unsupported Content-Encoding {coding!r}: use zstd, gzip or none")
    if len(data) > limit:
        raise _too_large(limit)
    return data


def _unzstd(data: bytes, limit: int) -> bytes:
    import zstandard

    out = io.BytesIO()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data),
                                                            read_across_frames=True)
        while True:
            chunk = reader.read(_CHUNK)
            if not chunk:
                break
            out.write(chunk)
            if out.tell() > limit:
                raise _too_large(limit, "decompressed request body")
    except zstandard.ZstdError as exc:
        raise ApiError(400, "bad_compression", f"body is not valid zstd data: {exc}") from None
    if data and not out.tell():
        raise ApiError(400, "bad_compression", "zstd body is truncated or empty")
    return out.getvalue()


def _unzlib(data: bytes, limit: int, coding: str) -> bytes:
    wbits = 47 if coding != "deflate" else 15  # 47: gzip or zlib header, detected
    out = bytearray()
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(wbits)
            buf = rest
            while buf:
                out += d.decompress(buf, limit + 1 - len(out))
                if len(out) > limit:
                    raise _too_large(limit, "decompressed request body")
                buf = d.unconsumed_tail
            if not d.eof:
                raise ApiError(400, "bad_compression", f"{coding} body is truncated")
            rest = d.unused_data  # a further gzip member
    except zlib.error as exc:
        raise ApiError(400, "bad_compression", f"body is not valid {coding} data: {exc}") from None
    return bytes(out)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range")
    return value


def _scrub(value: Any) -> Any:
    """NUL characters cannot be stored by PostgreSQL; replace them (U+FFFD) instead of failing."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


def loads(data: bytes | str, what: str = "request body") -> Any:
    """Strict JSON (no NaN/Infinity); the error names ``what`` and the position."""
    try:
        value = json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except UnicodeDecodeError as exc:
        raise ApiError(400, "malformed_json", f"{what} is not UTF-8: {exc.reason}") from None
    except ValueError as exc:
        raise ApiError(400, "malformed_json", f"{what} is not valid JSON: {exc}") from None
    raw = data if isinstance(data, bytes) else data.encode()
    if b"\\u0000" in raw:
        value = _scrub(value)
    return value


async def read_json(request: Request, limit: int) -> Any:
    body = await request.body()
    if not body:
        raise ApiError(400, "malformed_json", "request body is empty: expected JSON")
    return loads(decode(body, request.headers.get("content-encoding"), limit))


@dataclass
class Part:
    name: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    filename: str | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "application/json").split(";")[0].strip().lower()

    def json(self) -> Any:
        return loads(self.data, f"multipart part {self.name!r}")


def parse_multipart(data: bytes, content_type: str, *, max_parts: int = 100_000) -> list[Part]:
    """Split a multipart/form-data body into parts; malformed bodies raise a 400."""
    from python_multipart.multipart import (
        MultipartParseError,
        MultipartParser,
        parse_options_header,
    )

    ctype, params = parse_options_header(content_type or "")
    if ctype != b"multipart/form-data":
        raise ApiError(415, "unsupported_media_type",
                       f"expected multipart/form-data, got {content_type or 'no Content-Type'!r}")
    boundary = params.get(b"boundary")
    if not boundary:
        raise ApiError(400, "malformed_multipart", "multipart Content-Type has no boundary")
    parts: list[Part] = []
    headers: dict[str, str] = {}
    current: dict[str, Any] = {}
    state = {"field": b"", "value": b"", "ended": False}

    def on_part_begin() -> None:
        headers.clear()
        current.clear()
        current["data"] = bytearray()
        if len(parts) >= max_parts:
            raise _too_large(max_parts, "number of multipart parts")

    def on_header_field(buf: bytes, start: int, end: int) -> None:
        state["field"] += buf[start:end]

    def on_header_value(buf: bytes, start: int, end: int) -> None:
        state["value"] += buf[start:end]

    def on_header_end() -> None:
        headers[state["field"].decode("latin-1").lower()] = state["value"].decode("latin-1")
        state["field"] = b""
        state["value"] = b""

    def on_part_data(buf: bytes, start: int, end: int) -> None:
        current["data"] += buf[start:end]

    def on_part_end() -> None:
        disp, opts = parse_options_header(headers.get("content-disposition", ""))
        name = opts.get(b"name")
        if disp != b"form-data" or name is None:
            raise ApiError(400, "malformed_multipart",
                           f"multipart part #{len(parts) + 1} has no form-data name")
        filename = opts.get(b"filename")
        parts.append(Part(name=name.decode("utf-8", "replace"), data=bytes(current["data"]),
                          headers=dict(headers),
                          filename=filename.decode("utf-8", "replace") if filename else None))

    def on_end() -> None:
        state["ended"] = True

    parser = MultipartParser(boundary, {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field,
        "on_header_value": on_header_value, "on_header_end": on_header_end,
        "on_part_data": on_part_data, "on_part_end": on_part_end, "on_end": on_end,
    }, max_header_count=32)
    try:
        parser.write(data)
        parser.finalize()
    except MultipartParseError as exc:
        raise ApiError(400, "malformed_multipart", f"malformed multipart body: {exc}") from None
    if not state["ended"]:
        raise ApiError(400, "malformed_multipart",
                       "multipart body ended before its closing boundary")
    return parts


async def read_multipart(request: Request, limit: int) -> list[Part]:
    body = await request.body()
    data = decode(body, request.headers.get("content-encoding"), limit)
    return parse_multipart(data, request.headers.get("content-type", ""))
