"""Attachments on the wire: multipart parts in, signed download URLs out.

The SDKs fetch an attachment's ``presigned_url`` with a bare GET (no API key), as they fetch
S3's from LangSmith, so the URL itself carries the permission: a token naming the workspace,
the blob (sha256), its MIME type and an expiry, signed with HMAC-SHA256 under a key kept in the
database (``signing_keys``), which every server process on that database shares.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request

from .._json import model_jsonable
from ..errors import InvalidInputError
from ..store import Store
from ..store._attachments import AttachmentTooLarge, StoredAttachment, Upload, check_upload
from ._body import Part
from ._errors import ApiError

__all__ = ["URL_TTL_S", "attachment_urls", "upload_from_part", "verify_token",
           "with_attachment_urls", "with_run_attachment_urls"]

URL_TTL_S = 24 * 3600  # as long as an experiment over a large dataset may hold the URLs
_LENGTH = re.compile(r";\s*length=(\d+)", re.IGNORECASE)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _secret(request: Request) -> bytes:
    """The database's signing key, read once per app (every process reads the same row)."""
    state = request.app.state
    secret = getattr(state, "attachment_secret", None)
    if secret is None:
        secret = state.attachment_secret = request.app.state.store.attachments.signing_secret()
    return secret


def _sign(secret: bytes, payload: str) -> str:
    return _b64(hmac.new(secret, payload.encode("ascii"), hashlib.sha256).digest()[:24])


def make_token(secret: bytes, tenant_id: str, att: StoredAttachment, ttl_s: int = URL_TTL_S
               ) -> str:
    payload = _b64(json.dumps({"t": tenant_id, "h": att.sha256, "m": att.mime_type,
                               "n": att.name, "e": int(time.time()) + ttl_s},
                              separators=(",", ":")).encode())
    return f"{payload}.{_sign(secret, payload)}"


def verify_token(request: Request, token: str) -> dict[str, Any]:
    """The token's claims, or a 403 (bad signature) / 410 (expired) naming the problem."""
    payload, _, sig = token.partition(".")
    if not payload or not sig or not hmac.compare_digest(sig, _sign(_secret(request), payload)):
        raise ApiError(403, "forbidden", "attachment URL is not valid: its signature does not "
                       "match (read the example again for a fresh URL)")
    try:
        claims = json.loads(_unb64(payload))
    except ValueError:
        raise ApiError(403, "forbidden", "attachment URL is not valid") from None
    if claims.get("e", 0) < time.time():
        raise ApiError(410, "expired", "attachment URL has expired: read the example (or run) "
                       "again for a fresh URL")
    return claims


def attachment_urls(request: Request, store: Store,
                    found: Mapping[str, StoredAttachment] | None) -> dict[str, Any]:
    """LangSmith's ``attachment_urls`` / ``s3_urls`` shape: ``{"attachment.<name>":
    {"presigned_url", "mime_type"}}`` with absolute URLs this server serves."""
    if not found:
        return {}
    secret = _secret(request)
    base = str(request.base_url).rstrip("/")
    return {f"attachment.{name}": {
        "presigned_url": f"{base}/attachments/{make_token(secret, store.tenant_id, att)}",
        "mime_type": att.mime_type, "size": att.size, "sha256": att.sha256}
        for name, att in found.items()}


def attachment_links(request: Request, store: Store,
                     found: Mapping[str, StoredAttachment] | None) -> dict[str, str]:
    """The v2 API's ``attachments``: ``{name: download URL}`` (the same URLs as above)."""
    return {key.removeprefix("attachment."): value["presigned_url"]
            for key, value in attachment_urls(request, store, found).items()}


def with_attachment_urls(request: Request, store: Store, examples: Sequence[Any],
                         as_of: str | None = None) -> list[dict[str, Any]]:
    """Examples as wire JSON with ``attachment_urls`` (of the version ``as_of`` reads)."""
    found = store.attachments.of_examples([e.id for e in examples], as_of=as_of)
    out = []
    for ex in examples:
        data = model_jsonable(ex)
        data["attachment_urls"] = attachment_urls(request, store, found.get(str(ex.id))) or None
        out.append(data)
    return out


def with_run_attachment_urls(request: Request, store: Store, runs: Any) -> Any:
    """Runs (one or a list) as wire JSON with LangSmith's ``s3_urls`` for their attachments
    (child runs' too)."""
    one = not isinstance(runs, list)
    items = [runs] if one else runs
    ids: list[str] = []

    def collect(run: Any) -> None:
        ids.append(str(run.id))
        for child in getattr(run, "child_runs", None) or ():
            collect(child)

    for run in items:
        collect(run)
    found = store.attachments.of_runs(ids)

    def render(run: Any) -> dict[str, Any]:
        data = model_jsonable(run) if hasattr(run, "model_dump") else dict(run)
        data["s3_urls"] = attachment_urls(request, store, found.get(str(data["id"])))
        if data.get("child_runs"):
            data["child_runs"] = [render(c) for c in run.child_runs]
        return data

    out = [render(r) for r in items]
    return out[0] if one else out


def upload_from_part(part: Part, name: str, max_bytes: int, where: str) -> Upload:
    """A checked attachment from one multipart part (its Content-Type is the MIME type).

    The SDKs declare ``<mime>; length=<n>``: a part holding fewer bytes than declared was cut
    short (a truncated upload) and is refused, as is anything ``check_upload`` refuses.
    """
    ctype = part.headers.get("content-type", "")
    m = _LENGTH.search(ctype)
    declared = m.group(1) if m is not None else part.headers.get("content-length")
    if declared is not None and declared.strip() != str(len(part.data)):
        raise ApiError(400, "truncated_part", f"{where}: multipart part {part.name!r} declares "
                       f"{declared.strip()} bytes but holds {len(part.data)} (truncated upload)")
    if not ctype:
        raise ApiError(422, "invalid_input", f"{where}: multipart part {part.name!r} has no "
                       "Content-Type: send the attachment's MIME type")
    try:
        return check_upload(name, ctype, part.data, max_bytes=max_bytes)
    except AttachmentTooLarge as exc:
        raise ApiError(413, "payload_too_large", f"{where}: {exc}", limit=exc.limit) from None
    except InvalidInputError as exc:
        raise ApiError(422, "invalid_attachment", f"{where}: {exc}") from None
