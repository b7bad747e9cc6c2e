"""Runs: ingestion (single, batch, multipart), read, and ``/runs/query``."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from . import _ingest
from ._deps import FolderDep, JsonBody, Parts, StoreDep, ok
from ._errors import ApiError
from ._wire import RunQuery, TraceDelete, run_in, validate

__all__ = ["router"]

router = APIRouter()


_PAGE = 100


@router.post("/runs/multipart", status_code=202)
def ingest_multipart(store: StoreDep, parts: Parts, folder: FolderDep) -> JSONResponse:
    batch = _ingest.from_parts(parts)
    _ingest.write(store, batch, folder)
    return ok({"ingested": batch.counts()}, status=202)


@router.post("/runs/batch", status_code=202)
def ingest_batch(store: StoreDep, body: JsonBody, folder: FolderDep) -> JSONResponse:
    batch = _ingest.from_json(body)
    _ingest.write(store, batch, folder)
    return ok({"ingested": batch.counts()}, status=202)


@router.post("/runs", status_code=202)
def create_run(store: StoreDep, body: JsonBody, folder: FolderDep) -> JSONResponse:
    run = run_in(body)
    _ingest.write(store, _ingest.Batch(posts=[run]), folder)
    return ok({"id": str(run["id"])}, status=202)


@router.patch("/runs/{run_id}", status_code=202)
def update_run(store: StoreDep, run_id: uuid.UUID, body: JsonBody,
               folder: FolderDep) -> JSONResponse:
    if isinstance(body, dict):
        if body.get("id") not in (None, str(run_id)):
            raise ApiError(422, "invalid_input", f"body id {body['id']!r} differs from the URL")
        body = {**body, "id": str(run_id)}
    _ingest.write(store, _ingest.Batch(patches=[run_in(body)]), folder)
    return ok({"id": str(run_id)}, status=202)


@router.post("/runs/delete")
def delete_traces(store: StoreDep, body: JsonBody) -> JSONResponse:
    """Delete whole traces of a session: ``trace_ids``, or all but ``keep_trace_ids``."""
    q = validate(TraceDelete, body)
    n = store.runs.delete_traces(q.session_id, trace_ids=q.trace_ids, keep=q.keep_trace_ids)
    return ok({"deleted": n})


@router.get("/runs/{run_id}")
def read_run(store: StoreDep, run_id: uuid.UUID, load_child_runs: bool = False) -> JSONResponse:
    return ok(store.runs.read(run_id, load_child_runs=load_child_runs))


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        value = int(cursor)
    except ValueError:
        value = -1
    if value < 0:
        raise ApiError(422, "invalid_input", f"cursor {cursor!r} is not one this server issued")
    return value


@router.post("/runs/query")
def query_runs(store: StoreDep, body: JsonBody) -> JSONResponse:
    q = validate(RunQuery, body)
    if q.order not in (None, "asc", "desc"):
        raise ApiError(422, "invalid_input", "order must be 'asc' or 'desc'")
    offset = _offset(q.cursor)
    page = min(q.limit or _PAGE, _PAGE)
    found = store.runs.list(
        project_ids=[str(s) for s in q.session] if q.session is not None else None,
        run_type=q.run_type, trace_id=q.trace, parent_run_id=q.parent_run, is_root=q.is_root,
        error=q.error, reference_example_ids=q.reference_example, run_ids=q.id,
        start_time=q.start_time, filter=q.filter, trace_filter=q.trace_filter,
        tree_filter=q.tree_filter, query=q.query, order=q.order or "desc", offset=offset,
        limit=page + 1)
    more = len(found) > page
    return ok({"runs": [r.model_dump(mode="json") for r in found[:page]],
               "cursors": {"next": str(offset + page) if more else None}})
