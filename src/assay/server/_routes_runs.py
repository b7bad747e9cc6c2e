"""Runs: ingestion (single, batch, multipart), read, and ``/runs/query``."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from .._json import model_jsonable
from ..schemas import Run
from ..store._threads import thread_of
from . import _ingest
from ._attachments import with_run_attachment_urls
from ._deps import FolderDep, JsonBody, Parts, StoreDep, ok
from ._errors import ApiError
from ._wire import RunGroupQuery, RunQuery, TraceDelete, run_in, validate

__all__ = ["router"]

router = APIRouter()


_PAGE = 100


@router.post("/runs/multipart", status_code=202)
def ingest_multipart(request: Request, store: StoreDep, parts: Parts,
                     folder: FolderDep) -> JSONResponse:
    batch = _ingest.from_parts(parts, request.app.state.settings.max_attachment_bytes)
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


def derived_fields(run: Run, out: dict[str, Any], feedback_stats: dict[str, Any] | None = None,
                   tenant: str | None = None) -> dict[str, Any]:
    """Add to a run's wire JSON the fields LangSmith answers and its SDKs read that the record
    derives: ``parent_run_ids`` (root first), ``in_dataset``, ``feedback_stats``,
    ``thread_id``, ``app_path`` (the run's page, LangSmith's form: the SDKs' ``run.url``);
    child runs' too."""
    out["parent_run_ids"] = ([segment[-36:] for segment in run.dotted_order.split(".")[:-1]]
                             if run.dotted_order else
                             [str(run.parent_run_id)] if run.parent_run_id else [])
    out["in_dataset"] = run.reference_example_id is not None
    out["feedback_stats"] = feedback_stats
    out["thread_id"] = thread_of(run)  # the conversation its metadata names (list_threads)
    if tenant is not None and run.session_id is not None:
        out["app_path"] = f"/o/{tenant}/projects/p/{run.session_id}/r/{run.id}?" + urlencode(
            {"trace_id": str(run.trace_id), "start_time": run.start_time.isoformat()})
    for child, child_out in zip(run.child_runs or (), out.get("child_runs") or (), strict=True):
        derived_fields(child, child_out, tenant=tenant)
    return out


@router.get("/runs/{run_id}")
def read_run(request: Request, store: StoreDep, run_id: uuid.UUID,
             load_child_runs: bool = False) -> JSONResponse:
    run = store.runs.read(run_id, load_child_runs=load_child_runs)
    store.runs.roll_up_usage([run])  # a chain's tokens and cost: the llm calls under it
    stats = store.runs.feedback_stats([str(run.id)]).get(str(run.id))
    return ok(derived_fields(run, with_run_attachment_urls(request, store, run), stats,
                             store.tenant_id))


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
def query_runs(request: Request, store: StoreDep, body: JsonBody) -> JSONResponse:
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
    found = found[:page]
    store.runs.roll_up_usage(found)  # (in place, as read_run: a chain's usage)
    runs = (with_run_attachment_urls(request, store, found)  # list_runs selects it
            if "s3_urls" in (q.select or ()) else [model_jsonable(r) for r in found])
    # each run's feedback per key, as LangSmith's runs carry it (get_test_results' columns)
    stats = store.runs.feedback_stats([str(r.id) for r in found]) if found else {}
    runs = [derived_fields(r, out, stats.get(str(r.id)), store.tenant_id)
            for r, out in zip(found, runs, strict=True)]
    return ok({"runs": runs,
               "cursors": {"next": str(offset + page) if more else None}})


@router.post("/runs/group")
def group_runs(store: StoreDep, body: JsonBody) -> JSONResponse:
    """The JS SDK's ``listGroupRuns``: a project's turns grouped by conversation (``group_by:
    "conversation"``, the one grouping LangSmith offers), most recently active first, each
    with the summary ``list_threads`` gives and the filter that selects its turns."""
    q = validate(RunGroupQuery, body)
    if q.group_by != "conversation":
        raise ApiError(422, "invalid_input",
                       f"group_by {q.group_by!r}: runs group by 'conversation' (a thread)")
    window: dict[str, Any] = {"filter": q.filter, "min_start_time": q.start_time,
                              "max_start_time": q.end_time}
    found = store.threads.list(q.session_id, **window, offset=q.offset, limit=q.limit)
    groups = [{**model_jsonable(t), "group_key": t.thread_id,
               "filter": f"eq(thread_id, {json.dumps(t.thread_id)})"} for t in found]
    return ok({"groups": groups, "total": store.threads.count(q.session_id, **window)})
