"""Build request bodies the way the SDKs do (multipart parts, zstd/gzip) for direct HTTP tests."""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import zstandard

BOUNDARY = "assayTestBoundary7MA4YWxkTrZu0gW"


def multipart(parts: list[tuple[str, Any]], *,
              encoding: str | None = None) -> tuple[bytes, dict[str, str]]:
    """``parts`` of (name, JSON value or raw bytes) -> (body, headers), optionally compressed."""
    chunks = []
    for name, value in parts:
        data = value if isinstance(value, bytes) else json.dumps(value).encode()
        chunks.append(
            f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data + b"\r\n")
    body = b"".join(chunks) + f"--{BOUNDARY}--\r\n".encode()
    headers = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
    if encoding == "zstd":
        body = zstandard.ZstdCompressor().compress(body)
        headers["content-encoding"] = "zstd"
    elif encoding == "gzip":
        body = gzip.compress(body)
        headers["content-encoding"] = "gzip"
    return body, headers


def iso(t: datetime) -> str:
    return t.isoformat()


def ms(t: datetime) -> int:
    """Epoch milliseconds, as the JS SDK sends end_time."""
    return int(t.timestamp() * 1000)


def make_run(name: str = "root", *, session: str = "proj", parent: dict[str, Any] | None = None,
             start: datetime | None = None, **fields: Any) -> dict[str, Any]:
    """A post payload with a proper id, trace id and dotted order."""
    rid = str(uuid.uuid4())
    start = start or datetime.now(UTC) - timedelta(seconds=1)
    seg = start.strftime("%Y%m%dT%H%M%S%fZ") + rid
    run = {"id": rid, "name": name, "run_type": fields.pop("run_type", "chain"),
           "start_time": iso(start), "session_name": session,
           "trace_id": parent["trace_id"] if parent else rid,
           "dotted_order": f"{parent['dotted_order']}.{seg}" if parent else seg,
           "inputs": {"q": name}}
    if parent:
        run["parent_run_id"] = parent["id"]
    run.update(fields)
    return run
