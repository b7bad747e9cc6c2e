"""Shared traces and datasets (``store/_shares.py``). With the API key: the SDKs'
``share_run`` / ``unshare_run`` / ``read_run_shared_link`` (``/runs/{id}/share``),
``client.runs.share`` (``/api/v2/runs/{id}/share``) and ``share_dataset`` /
``unshare_dataset`` / ``read_dataset_shared_schema`` (``/datasets/{id}/share``). Without it,
what a share token opens: ``read_shared_run`` (``/public/{token}/run[/{run_id}]``),
``list_shared_runs`` (``/public/{token}/runs/query``), ``client.public.runs``
(``/api/v2/public/...``); ``read_shared_dataset`` (``/public/{token}/datasets``),
``list_shared_examples`` (``/public/{token}/examples``) and ``list_shared_projects``
(``/public/{token}/datasets/sessions``). The web UI's pages are ``/public/{token}/r`` (a trace)
and ``/public/{token}/d`` (a dataset), the links the SDKs build.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from ..store import Store
from ._attachments import with_attachment_urls, with_run_attachment_urls
from ._deps import JsonBody, StoreDep, ok
from ._errors import ApiError
from ._routes_runs import derived_fields
from ._routes_runs_v2 import checked_selects, cursor_offset, next_cursor, select_items

__all__ = ["router"]

router = APIRouter()

_PAGE = 100  # runs of a shared trace a page


def _v1(share: Any) -> dict[str, Any]:
    return {"run_id": str(share.run_id), "share_token": str(share.share_token)}


def _object(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_input", "the body must be a JSON object")
    return body


@router.put("/runs/{run_id}/share")
def share_run(store: StoreDep, run_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    """Share the run's trace; its token (``share_token`` in the body is the one wanted)."""
    return ok(_v1(store.shares.share_run(run_id, _object(body).get("share_token"))))


@router.get("/runs/{run_id}/share")
def read_run_share(store: StoreDep, run_id: uuid.UUID) -> JSONResponse:
    share = store.shares.of_run(run_id)
    return ok(None if share is None else _v1(share))


@router.delete("/runs/{run_id}/share")
def unshare_run(store: StoreDep, run_id: uuid.UUID) -> JSONResponse:
    store.shares.unshare_run(run_id)
    return ok({})


@router.post("/api/v2/runs/{run_id}/share")
def share_run_v2(store: StoreDep, run_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    """``client.runs.share.create(run_id, session_id=..., trace_id=...)``."""
    fields = _object(body)
    run = store.runs.read(run_id)
    for name, have in (("session_id", run.session_id), ("trace_id", run.trace_id)):
        given = fields.get(name)
        if given is not None and str(given) != str(have):
            raise ApiError(404, "not_found", f"run {run_id} not found with {name} {given}")
    return ok({"share_token": str(store.shares.share_run(run_id).share_token)})


@router.delete("/api/v2/runs/{trace_id}/share")
def unshare_trace_v2(store: StoreDep, trace_id: uuid.UUID) -> Response:
    """``client.runs.share.delete(trace_id, session_id=...)``: 204 whether or not it was
    shared."""
    store.shares.unshare_trace(trace_id)
    return Response(status_code=204)


def _dataset_share(share: Any) -> dict[str, Any]:
    return {"dataset_id": str(share.dataset_id), "share_token": str(share.share_token)}


@router.put("/datasets/{dataset_id}/share")
def share_dataset(store: StoreDep, dataset_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    """Share the dataset (examples and experiments); its token."""
    wanted = _object(body).get("share_token")
    return ok(_dataset_share(store.shares.share_dataset(dataset_id, share_token=wanted)))


@router.get("/datasets/{dataset_id}/share")
def read_dataset_share(store: StoreDep, dataset_id: uuid.UUID) -> JSONResponse:
    share = store.shares.of_dataset(dataset_id)
    if share is None:  # (null would break both SDKs, which add a url to the answer)
        raise ApiError(404, "not_found", f"dataset {dataset_id} is not shared")
    return ok(_dataset_share(share))


@router.delete("/datasets/{dataset_id}/share")
def unshare_dataset(store: StoreDep, dataset_id: uuid.UUID) -> JSONResponse:
    store.shares.unshare_dataset(dataset_id)
    return ok({})


# --- the public side: the token is the key ----------------------------------------------------


def _base(request: Request) -> Store:
    return request.app.state.store


@router.get("/public/{share_token}/run")
@router.get("/public/{share_token}/run/{run_id}")
async def read_shared_run(request: Request, share_token: uuid.UUID,
                          run_id: uuid.UUID | None = None) -> JSONResponse:
    def work() -> dict[str, Any]:
        view, run = _base(request).shares.shared_run(share_token, run_id)
        return derived_fields(run, with_run_attachment_urls(request, view, run))

    return ok(await run_in_threadpool(work))


@router.post("/public/{share_token}/runs/query")
async def list_shared_runs(request: Request, share_token: uuid.UUID,
                           body: JsonBody) -> JSONResponse:
    fields = _object(body)
    ids = fields.get("id")
    if ids is not None and not isinstance(ids, list):
        raise ApiError(422, "invalid_input", "id must be a list of run ids")
    offset = cursor_offset(fields.get("cursor"))

    def work() -> dict[str, Any]:
        view, found = _base(request).shares.shared_runs(share_token, ids, offset=offset,
                                                        limit=_PAGE + 1)
        page = found[:_PAGE]
        runs = [derived_fields(r, out) for r, out in
                zip(page, with_run_attachment_urls(request, view, page), strict=True)]
        return {"runs": runs,
                "cursors": {"next": next_cursor(offset + _PAGE) if len(found) > _PAGE else None}}

    return ok(await run_in_threadpool(work))


@router.get("/api/v2/public/{share_token}/run/{run_id}")
async def read_shared_run_v2(request: Request, share_token: uuid.UUID, run_id: uuid.UUID,
                             selects: Annotated[list[str] | None, Query()] = None,
                             start_time: str | None = None) -> JSONResponse:
    """``client.public.runs.retrieve``; ``start_time`` narrows LangSmith's scan only."""
    del start_time
    chosen = checked_selects(selects)

    def work() -> dict[str, Any]:
        view, run = _base(request).shares.shared_run(share_token, run_id)
        return select_items(request, view, [run], chosen)[0]

    return ok(await run_in_threadpool(work))


@router.post("/api/v2/public/{share_token}/runs/query")
async def query_shared_runs_v2(request: Request, share_token: uuid.UUID,
                               body: JsonBody) -> JSONResponse:
    """``client.public.runs.query``: every run of the shared trace, in start order."""
    chosen = checked_selects(_object(body).get("selects"))

    def work() -> dict[str, Any]:
        view, found = _base(request).shares.shared_runs(share_token)
        return {"items": select_items(request, view, found, chosen)}

    return ok(await run_in_threadpool(work))


@router.get("/public/{share_token}/datasets")
async def read_shared_dataset(request: Request, share_token: uuid.UUID) -> JSONResponse:
    return ok(await run_in_threadpool(lambda: _base(request).shares.shared_dataset(share_token)[1]))


@router.get("/public/{share_token}/examples")
async def list_shared_examples(request: Request, share_token: uuid.UUID,
                               id: Annotated[list[uuid.UUID] | None, Query()] = None,
                               offset: Annotated[int, Query(ge=0)] = 0,
                               limit: Annotated[int, Query(ge=1, le=10000)] = 100,
                               ) -> JSONResponse:
    def work() -> Any:
        view, found = _base(request).shares.shared_examples(share_token, list(id or ()) or None,
                                                            offset=offset, limit=limit)
        return with_attachment_urls(request, view, found, None)

    return ok(await run_in_threadpool(work))


@router.get("/public/{share_token}/datasets/sessions")
async def list_shared_projects(request: Request, share_token: uuid.UUID,
                               id: Annotated[list[uuid.UUID] | None, Query()] = None,
                               name: str | None = None, name_contains: str | None = None,
                               offset: Annotated[int, Query(ge=0)] = 0,
                               limit: Annotated[int, Query(ge=1, le=10000)] = 100,
                               ) -> JSONResponse:
    """The experiments on the shared dataset, with their statistics."""
    def work() -> Any:
        return _base(request).shares.shared_experiments(
            share_token, project_ids=list(id or ()) or None, name=name,
            name_contains=name_contains, offset=offset, limit=limit)[1]

    return ok(await run_in_threadpool(work))
