"""The multipart examples endpoints (with attachments) and the attachment download route.

Multipart part names (both SDKs), per example:

    <example id>                       the example's JSON (metadata, split, source run, ...)
    <example id>.inputs | .outputs     its inputs and outputs
    <example id>.attachment.<name>     a file: the part's Content-Type is its MIME type
    <example id>.attachments_operations  on update: {"retain": [...], "rename": {old: new}}

Everything is parsed and checked first (names, sizes, declared types against the content);
then the examples and their attachments are written in ONE transaction, so a bad part anywhere
leaves nothing behind.
"""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..errors import InvalidInputError, NotFoundError
from ..store import Store
from ..store._attachments import Upload, operations
from ._attachments import upload_from_part, verify_token
from ._body import Part
from ._deps import Parts, StoreDep, ok
from ._errors import ApiError
from ._routes_datasets import _create_grouped, _with_source_run
from ._wire import ExampleIn, ExamplePatch, validate

__all__ = ["router"]

router = APIRouter()

_EXAMPLE_FIELDS = ("inputs", "outputs", "attachments_operations")
_HELP = ("expected '<example id>', '<example id>.inputs', '<example id>.outputs', "
         "'<example id>.attachment.<name>' or '<example id>.attachments_operations'")


def _max_bytes(request: Request) -> int:
    return request.app.state.settings.max_attachment_bytes


def _example_parts(parts: list[Part], max_bytes: int
                   ) -> list[tuple[str, dict[str, Any], list[Upload]]]:
    """Group the parts into (example id, JSON fields, attachments), in the order sent."""
    order: list[str] = []
    found: dict[str, dict[str, Any]] = {}
    files: dict[str, list[Upload]] = {}
    for part in parts:
        ex_id, _, field = part.name.partition(".")
        try:
            ex_id = str(uuid.UUID(ex_id))
        except ValueError:
            raise ApiError(422, "unknown_part", f"multipart part {part.name!r}: {_HELP}") from None
        if ex_id not in found:
            order.append(ex_id)
            found[ex_id] = {}
            files[ex_id] = []
        if field.startswith("attachment."):
            name = field[len("attachment."):]
            if any(u.name == name for u in files[ex_id]):
                raise ApiError(422, "invalid_input", f"multipart part {part.name!r} appears twice")
            files[ex_id].append(upload_from_part(part, name, max_bytes, f"example {ex_id}"))
            continue
        if field and field not in _EXAMPLE_FIELDS:
            raise ApiError(422, "unknown_part", f"unknown multipart part {part.name!r}: {_HELP}")
        key = field or "_body"
        if key in found[ex_id]:
            raise ApiError(422, "invalid_input", f"multipart part {part.name!r} appears twice")
        found[ex_id][key] = part.json()
    out = []
    for ex_id in order:
        fields = found[ex_id]
        body = fields.pop("_body", {})
        if not isinstance(body, dict):
            raise ApiError(422, "invalid_input", f"multipart part {ex_id!r} must be a JSON object")
        out.append((ex_id, {**body, **fields, "id": ex_id}, files[ex_id]))
    return out


def _ops(fields: dict[str, Any], ex_id: str) -> tuple[list[str], dict[str, str]] | None:
    try:
        return operations(fields.pop("attachments_operations", None))
    except InvalidInputError as exc:
        raise ApiError(422, "invalid_input", f"example {ex_id}: {exc}") from None


def _source_files(store: Store, ex: ExampleIn, fields: dict[str, Any]) -> list[Upload]:
    """``use_source_run_io`` / ``use_source_run_attachments``: the source run's files."""
    wanted = fields.get("use_source_run_attachments")
    if ex.source_run_id is None or not (ex.use_source_run_io or wanted):
        return []
    have = store.attachments.of_runs([ex.source_run_id]).get(str(ex.source_run_id), {})
    names = list(have) if ex.use_source_run_io else list(wanted or [])
    missing = [n for n in names if n not in have]
    if missing:
        raise ApiError(422, "invalid_input", f"example {ex.id}: source run {ex.source_run_id} "
                       f"has no attachment(s) {missing}")
    return [Upload(n, have[n].mime_type, store.attachments.read_blob(have[n].sha256))
            for n in names]


def _attach(store: Store, ex_id: str, uploads: list[Upload],
            ops: tuple[list[str], dict[str, str]] | None = None) -> None:
    if uploads or ops is not None:
        store.attachments.set_example(ex_id, uploads, ops)


@router.post("/v1/platform/datasets/{dataset_id}/examples", status_code=201)
def upload_examples(request: Request, store: StoreDep, dataset_id: uuid.UUID,
                    parts: Parts) -> JSONResponse:
    items, files = [], []
    for ex_id, fields, uploads in _example_parts(parts, _max_bytes(request)):
        ex = validate(ExampleIn, fields, f"example {ex_id}")
        if ex.dataset_id is not None and ex.dataset_id != dataset_id:
            raise ApiError(422, "invalid_input",
                           f"example {ex_id}: dataset_id differs from the URL")
        items.append((str(dataset_id), _with_source_run(store, ex, ex.item())))
        files.append((ex_id, _source_files(store, ex, fields) + uploads))
    with store.transaction():
        made = _create_grouped(store, items)
        store.attachments.add_to_examples(files)
    as_of = store.datasets.version(dataset_id).as_of if made else None
    return ok({"example_ids": [str(e.id) for e in made], "count": len(made),
               "as_of": as_of.isoformat() if as_of else None}, status=201)


@router.patch("/v1/platform/datasets/{dataset_id}/examples")
def patch_examples(request: Request, store: StoreDep, dataset_id: uuid.UUID,
                   parts: Parts) -> JSONResponse:
    updates, files = [], []
    for ex_id, fields, uploads in _example_parts(parts, _max_bytes(request)):
        ops = _ops(fields, ex_id)
        patch = validate(ExamplePatch, fields, f"example {ex_id}")
        updates.append(patch.update(ex_id))
        files.append((ex_id, uploads, ops))
    with store.transaction():
        changed = store.examples.update_many(updates)
        wrong = [str(e.id) for e in changed if e.dataset_id != dataset_id]
        if wrong:
            raise NotFoundError(f"example(s) {', '.join(wrong)} not in dataset {dataset_id}")
        for ex_id, uploads, ops in files:
            _attach(store, ex_id, uploads, ops)
    return ok({"example_ids": [str(e.id) for e in changed], "count": len(changed)})


@router.post("/v1/platform/examples/multipart", status_code=201)
def upsert_examples(request: Request, store: StoreDep, parts: Parts) -> JSONResponse:
    """Create or update examples of any of the caller's datasets (``dataset_id`` per example)."""
    creates: list[tuple[str, dict[str, Any]]] = []
    updates: list[dict[str, Any]] = []
    files = []
    for ex_id, fields, uploads in _example_parts(parts, _max_bytes(request)):
        ops = _ops(fields, ex_id)
        ex = validate(ExampleIn, fields, f"example {ex_id}")
        if ex.dataset_id is None:
            raise ApiError(422, "invalid_input", f"example {ex_id}: dataset_id is required")
        if store.examples.list(example_ids=[ex_id]):
            updates.append(ExamplePatch.model_validate(fields).update(ex_id))
            files.append((ex_id, uploads, ops))
        else:
            creates.append((str(ex.dataset_id), _with_source_run(store, ex, ex.item())))
            files.append((ex_id, _source_files(store, ex, fields) + uploads, None))
    with store.transaction():
        made = _create_grouped(store, creates) if creates else []
        changed = store.examples.update_many(updates) if updates else []
        for ex_id, uploads, ops in files:
            _attach(store, ex_id, uploads, ops)
    ids = [str(e.id) for e in made] + [str(e.id) for e in changed]
    return ok({"example_ids": ids, "count": len(ids)}, status=201)


# -- downloads -----------------------------------------------------------------------------
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _range(header: str | None, size: int) -> tuple[int, int] | None:
    """A single ``bytes=a-b`` / ``a-`` / ``-n`` range as [start, end), None for the whole
    blob (no header, or several ranges, which RFC 9110 lets a server answer in full)."""
    if not header or "," in header:
        return None
    m = _RANGE.match(header.strip())
    if m is None or (not m.group(1) and not m.group(2)):
        raise ApiError(416, "range_not_satisfiable", f"invalid Range header {header!r}",
                       size=size)
    first, last = m.group(1), m.group(2)
    if first:
        start = int(first)
        end = min(int(last) + 1, size) if last else size
        if last and int(last) < start:
            raise ApiError(416, "range_not_satisfiable", f"invalid Range header {header!r}",
                           size=size)
    else:
        start, end = max(size - int(last), 0), size
    if start >= size or end <= start:
        raise ApiError(416, "range_not_satisfiable",
                       f"range {header!r} is outside the attachment's {size} bytes", size=size)
    return start, end


@router.get("/attachments/{token}")
def download(request: Request, token: str) -> Response:
    """The bytes of one attachment, by a signed URL (no API key: the SDKs send none)."""
    claims = verify_token(request, token)
    store: Store = request.app.state.store.for_tenant(claims["t"])
    headers = {"Accept-Ranges": "bytes", "ETag": f'"{claims["h"]}"',
               "Cache-Control": "private, max-age=3600",
               "Content-Disposition": f"inline; filename*=UTF-8''{quote(claims.get('n', ''))}",
               "X-Content-Type-Options": "nosniff"}
    asked = request.headers.get("range")
    spans: list[tuple[int, int] | None] = []

    def span(size: int) -> tuple[int, int] | None:
        spans.append(_range(asked, size))
        return spans[0]

    try:
        size, data = store.attachments.read_span(claims["h"], span if asked else None)
    except ApiError as exc:
        if exc.status == 416:
            return Response(status_code=416, headers={
                "Content-Range": f"bytes */{exc.extra.get('size', '*')}"})
        raise
    if not spans or spans[0] is None:
        return Response(data, media_type=claims["m"], headers=headers)
    start, end = spans[0]
    headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    return Response(data, status_code=206, media_type=claims["m"], headers=headers)
