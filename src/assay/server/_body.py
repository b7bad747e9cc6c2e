"""Request bodies: a size cap, zstd/gzip decoding with a cap (zip bombs), JSON and multipart.

Everything is read and checked before anything is written, so a bad body never leaves a partial
write behind. Limits apply twice: to the bytes on the wire (``BodyLimitMiddleware``, which also
catches chunked uploads without a Content-Length) and to the decoded bytes (``decode``).
"""

from __future__ import annotations

import io
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import _zstd
from .._compiled import compiled
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
_MISSING = object()
# Integers orjson would read as floats (past 64 bits): 19 digits in a row send a body to
# ``json``. Found by mapping digits to "0" and the rest to "." (a regex costs 5x the parse).
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x2E for i in range(256))
_DIGIT_RUN = b"0" * 19


def _may_hold_big_int(raw: bytes) -> bool:
    return len(raw) >= 19 and _DIGIT_RUN in raw.translate(_DIGITS)


try:  # optional speed-up (the ``server`` extra installs it; langsmith depends on it too)
    import orjson as _orjson
except ImportError:  # pragma: no cover - pure-json fallback
    _orjson = None  # type: ignore[assignment]  # optional module


def _too_large(limit: int, what: str = "request body") -> ApiError:
    return ApiError(413, "payload_too_large",
                    f"{what} exceeds the server's limit of {limit} bytes "
                    "(assay serve --max-body-bytes)",
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
        reader = _zstd.decompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
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


def loads(data: bytes | str, what: str = "request body") -> Any:
    """Strict JSON (no NaN/Infinity); the error names ``what`` and the position.

    orjson parses the common case (about 4x faster than ``json``); anything it refuses, or that
    it might read differently (integers past 64 bits, which it turns into floats), goes through
    ``json`` so the result and the error message are the reference behaviour.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    value: Any = _MISSING
    if _orjson is not None and not _may_hold_big_int(raw):
        try:
            value = _orjson.loads(raw)
        except ValueError:
            value = _MISSING
    if value is _MISSING:
        try:
            value = json.loads(data, parse_constant=_no_constant, parse_float=_finite)
        except UnicodeDecodeError as exc:
            raise ApiError(400, "malformed_json", f"{what} is not UTF-8: {exc.reason}") from None
        except ValueError as exc:
            raise ApiError(400, "malformed_json", f"{what} is not valid JSON: {exc}") from None
        except RecursionError:  # past the interpreter's depth: refused, not a 500
            raise ApiError(400, "malformed_json",
                           f"{what} nests objects or arrays too deeply") from None
    return value


async def read_json(request: Request, limit: int) -> Any:
    body = await request.body()
    if not body:
        raise ApiError(400, "malformed_json", "request body is empty: expected JSON")
    return loads(decode(body, request.headers.get("content-encoding"), limit))


@dataclass(slots=True)
class Part:
    name: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    # the body holds neither a 19-digit run nor an escaped NUL: orjson reads every part as
    # ``loads`` would (checked once per body, not per part: ingest parses ~5 parts a run)
    plain: bool = False

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "application/json").split(";")[0].strip().lower()

    def json(self) -> Any:
        data = self.data
        if _orjson is not None and (self.plain or (b"\\u0000" not in data
                                                   and not _may_hold_big_int(data))):
            try:  # the common case inline
                return _orjson.loads(data)
            except ValueError:
                pass  # loads() decides, and words the error
        return loads(data, f"multipart part {self.name!r}")


_MAX_PART_HEADERS = 32
# the Content-Disposition both SDKs send; anything else goes through python-multipart's parser
_SIMPLE_DISPOSITION = re.compile(r'form-data;\s*name="([^"\\]*)"(?:;\s*filename="([^"\\]*)")?\s*')


# The whole header block exactly as both SDKs write it (Content-Disposition, then optional
# Content-Type and Content-Length, in that order and spelling): one match instead of splitting
# and stripping header lines. Any other layout takes the general path, line by line.
_USUAL_HEAD = re.compile(
    rb'\r\nContent-Disposition: form-data; name="([^"\\\r\n]*)"(?:; filename="([^"\\\r\n]*)")?\r\n'
    rb'(?:Content-Type: ([^\r\n]*)\r\n)?(?:Content-Length: ([0-9]+)\r\n)?\r\n')


def _text(raw: bytes) -> str:
    """A quoted header parameter: the SDKs send UTF-8 (header bytes are otherwise latin-1)."""
    return raw.decode("ascii") if raw.isascii() else raw.decode("utf-8", "replace")


def _malformed(detail: str) -> ApiError:
    return ApiError(400, "malformed_multipart", f"malformed multipart body: {detail}")


def _disposition(value: str, index: int) -> tuple[str, str | None]:
    simple = _SIMPLE_DISPOSITION.fullmatch(value)
    if simple is not None:  # header values are latin-1 text; the SDKs send UTF-8 names
        name, filename = simple.group(1), simple.group(2)
        if not name.isascii():
            name = name.encode("latin-1").decode("utf-8", "replace")
        if filename and not filename.isascii():
            filename = filename.encode("latin-1").decode("utf-8", "replace")
        return name, filename or None
    from python_multipart.multipart import parse_options_header

    disp, opts = parse_options_header(value)
    name = opts.get(b"name")
    if disp != b"form-data" or name is None:
        raise ApiError(400, "malformed_multipart", f"multipart part #{index} has no form-data name")
    filename = opts.get(b"filename")
    return (name.decode("utf-8", "replace"),
            filename.decode("utf-8", "replace") if filename else None)


_CSPLIT: Any = compiled("assay.server._csplit")  # the usual layout in C (``_csplit.c``)
if _CSPLIT is not None:
    _CSPLIT.bind(Part)


def parse_multipart(data: bytes, content_type: str, *, max_parts: int = 100_000) -> list[Part]:
    """Split a multipart/form-data body (RFC 7578) into parts; malformed bodies raise a 400.

    Written over ``bytes.find`` rather than python-multipart's byte-by-byte state machine with
    a callback per header and chunk, which cost ~50 us a part: ingest sends five parts a run.
    """
    from python_multipart.multipart import parse_options_header

    ctype, params = parse_options_header(content_type or "")
    if ctype != b"multipart/form-data":
        raise ApiError(415, "unsupported_media_type",
                       f"expected multipart/form-data, got {content_type or 'no Content-Type'!r}")
    boundary = params.get(b"boundary")
    if not boundary:
        raise ApiError(400, "malformed_multipart", "multipart Content-Type has no boundary")
    if len(boundary) > 200:
        raise _malformed("boundary is longer than 200 characters")
    if _CSPLIT is not None:  # the usual layout in one C pass; None: anything else, read below
        usual_parts: list[Part] | None = _CSPLIT.split(data, boundary, max_parts)
        if usual_parts is not None:
            return usual_parts
    delimiter = b"\r\n--" + boundary
    # the first boundary may open the body (usual) or follow a preamble, which is ignored
    segments = (b"\r\n" + data if data.startswith(delimiter[2:]) else data).split(delimiter)
    if len(segments) < 2:
        raise _malformed("no boundary found in the body")
    closing = next((i for i in range(1, len(segments)) if segments[i].startswith(b"--")), None)
    if closing is None:  # what follows the close delimiter is an epilogue, also ignored
        raise ApiError(400, "malformed_multipart",
                       "multipart body ended before its closing boundary")
    if closing - 1 > max_parts:
        raise _too_large(max_parts, "number of multipart parts")
    plain = b"\\u0000" not in data and not _may_hold_big_int(data)
    parts: list[Part] = []
    usual_head = _USUAL_HEAD.match
    for index in range(1, closing):
        seg = segments[index]
        usual = usual_head(seg)  # CRLF, then the SDKs' header block: ~5 parts a run
        if usual is not None:
            name_b, file_b, ctype_b, length_b = usual.groups()
            headers: dict[str, str] = {}  # the disposition is parsed: name and filename
            if ctype_b is not None:
                headers["content-type"] = ctype_b.decode("latin-1")
            if length_b is not None:
                headers["content-length"] = length_b.decode("ascii")
            parts.append(Part(_text(name_b), seg[usual.end():], headers,
                              _text(file_b) if file_b else None, plain))
            continue
        if seg.startswith(b"\r\n"):
            pos = 2
        else:  # transport padding after the boundary
            pos = len(seg) - len(seg.lstrip(b" \t"))
            if not seg.startswith(b"\r\n", pos):
                raise _malformed(f"part #{index} does not start with CRLF after its boundary")
            pos += 2
        headers = {}
        if seg.startswith(b"\r\n", pos):  # a part without headers
            body_start = pos + 2
        else:
            head_end = seg.find(b"\r\n\r\n", pos)
            if head_end < 0:
                raise _malformed(f"part #{index} has no blank line after its headers")
            lines = seg[pos:head_end].decode("latin-1").split("\r\n")
            if len(lines) > _MAX_PART_HEADERS:
                raise _malformed(f"part #{index} has more than {_MAX_PART_HEADERS} headers")
            for line in lines:
                hname, colon, hvalue = line.partition(":")
                hname = hname.strip()
                if not colon or not hname or " " in hname:
                    raise _malformed(f"part #{index} has an invalid header line {line[:80]!r}")
                headers[hname.lower()] = hvalue.strip()
            body_start = head_end + 4
        name, filename = _disposition(headers.get("content-disposition", ""), index)
        parts.append(Part(name, seg[body_start:], headers, filename, plain))
    return parts


async def read_multipart(request: Request, limit: int) -> list[Part]:
    body = await request.body()
    data = decode(body, request.headers.get("content-encoding"), limit)
    return parse_multipart(data, request.headers.get("content-type", ""))
