"""Annotation queues (``/annotation-queues``): the legacy SDK methods and the generated
client's ``/api/v1/annotation-queues`` paths, over ``store.queues``.

The generated client's newer "items" API is in ``_routes_queue_items``.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ._deps import JsonBody, StoreDep, ok
from ._errors import ApiError
from ._wire import Timestamp, validate

__all__ = ["router"]

router = APIRouter()


class QueueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    id: uuid.UUID | None = None
    description: str | None = None
    rubric_instructions: str | None = None
    rubric_items: list[dict[str, Any]] | None = None
    # fields of LangSmith's queue that assay keeps no state for: accepted when left default
    queue_type: str | None = None
    enable_reservations: bool | None = None
    num_reviewers_per_item: int | None = None
    metadata: dict[str, Any] | None = None


class QueuePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str | None = None
    rubric_instructions: str | None = None
    rubric_items: list[dict[str, Any]] | None = None


class StatusIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: str
    override_added_at: str | None = None


def _paths(*paths: str) -> list[str]:
    """Each path as the legacy SDK calls it and under the generated client's ``/api/v1``."""
    return [p for path in paths for p in (path, f"/api/v1{path}")]


def _route(method: str, *paths: str, **kwargs: Any) -> Any:
    def register(func: Any) -> Any:
        for path in _paths(*paths):
            router.add_api_route(path, func, methods=[method], **kwargs)
        return func
    return register


@_route("POST", "/annotation-queues")
def create_queue(store: StoreDep, body: JsonBody) -> JSONResponse:
    q = validate(QueueIn, body)
    if q.queue_type not in (None, "single"):
        raise ApiError(422, "unsupported", f"queue_type {q.queue_type!r} is not served by "
                       "assay: only single-run queues")
    if q.enable_reservations or (q.num_reviewers_per_item or 1) != 1 or q.metadata:
        raise ApiError(422, "unsupported", "reservations, several reviewers per item and queue "
                       "metadata are not served by assay (one reviewer per workspace)")
    return ok(store.queues.create(q.name, description=q.description,
                                  rubric_instructions=q.rubric_instructions,
                                  rubric_items=q.rubric_items, id=q.id))


@_route("GET", "/annotation-queues")
def list_queues(
    store: StoreDep,
    ids: Annotated[list[uuid.UUID] | None, Query()] = None,
    name: str | None = None,
    name_contains: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    return ok(store.queues.list(queue_ids=ids, name=name, name_contains=name_contains,
                                offset=offset, limit=limit))


@_route("GET", "/annotation-queues/{queue_id}")
def read_queue(store: StoreDep, queue_id: uuid.UUID) -> JSONResponse:
    return ok(store.queues.read(queue_id))


@_route("PATCH", "/annotation-queues/{queue_id}")
def update_queue(store: StoreDep, queue_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    p = validate(QueuePatch, body)
    return ok(store.queues.update(queue_id, name=p.name, description=p.description,
                                  rubric_instructions=p.rubric_instructions,
                                  rubric_items=p.rubric_items))


@_route("DELETE", "/annotation-queues/{queue_id}")
def delete_queue(store: StoreDep, queue_id: uuid.UUID) -> JSONResponse:
    store.queues.delete(queue_id)
    return ok({"id": str(queue_id), "deleted": True})


def _run_ids(body: Any, by_key: bool) -> list[str]:
    if not isinstance(body, list):
        raise ApiError(422, "invalid_input", "the body must be a list of run "
                       + ("keys ({run_id, session_id, start_time})" if by_key else "ids"))
    out = []
    for i, item in enumerate(body):
        raw = item.get("run_id") if by_key and isinstance(item, dict) else item
        if by_key and not isinstance(item, dict):
            raise ApiError(422, "invalid_input", f"body[{i}] must be an object with run_id")
        try:
            out.append(str(uuid.UUID(str(raw))))
        except ValueError:
            raise ApiError(422, "invalid_input", f"body[{i}]: {raw!r} is not a run id") from None
    return out


@_route("POST", "/annotation-queues/{queue_id}/runs")
def add_runs(store: StoreDep, queue_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    ids = _run_ids(body, by_key=False)
    store.queues.add_runs(queue_id, ids)
    return ok([{"run_id": r, "queue_id": str(queue_id)} for r in ids])


@_route("POST", "/annotation-queues/{queue_id}/runs/by-key")
def add_runs_by_key(store: StoreDep, queue_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    ids = _run_ids(body, by_key=True)
    store.queues.add_runs(queue_id, ids)
    return ok([{"run_id": r, "queue_id": str(queue_id)} for r in ids])


class RunsDelete(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_ids: list[uuid.UUID] | None = None
    delete_all: bool = False
    exclude_run_ids: list[uuid.UUID] | None = None


class QueueRunPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    added_at: Timestamp | None = None
    last_reviewed_time: Timestamp | None = None


@_route("POST", "/annotation-queues/{queue_id}/runs/delete")
def remove_queue_runs(store: StoreDep, queue_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    req = validate(RunsDelete, body)
    n = store.queues.remove_runs(queue_id, run_ids=req.run_ids, every=req.delete_all,
                                 keep=req.exclude_run_ids or ())
    return ok({"deleted": n})


@_route("PATCH", "/annotation-queues/{queue_id}/runs/{queue_run_id}")
def update_queue_run(store: StoreDep, queue_id: uuid.UUID, queue_run_id: uuid.UUID,
                     body: JsonBody) -> JSONResponse:
    req = validate(QueueRunPatch, body)
    store.queues.update_run(queue_id, queue_run_id, added_at=req.added_at,
                            last_reviewed_time=req.last_reviewed_time)
    return ok({"id": str(queue_run_id)})


@_route("GET", "/annotation-queues/{queue_id}/runs")
def list_queue_runs(
    store: StoreDep,
    queue_id: uuid.UUID,
    status: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    return ok(store.queues.list_runs(queue_id, status=status, offset=offset, limit=limit))


@_route("DELETE", "/annotation-queues/{queue_id}/runs/{run_id}")
def remove_queue_run(store: StoreDep, queue_id: uuid.UUID, run_id: uuid.UUID) -> JSONResponse:
    store.queues.remove_run(queue_id, run_id)
    return ok({"run_id": str(run_id), "deleted": True})


@_route("GET", "/annotation-queues/{queue_id}/run/{index}")
def queue_run_at(store: StoreDep, queue_id: uuid.UUID, index: int) -> JSONResponse:
    return ok(store.queues.get_run(queue_id, index))


@_route("GET", "/annotation-queues/{queue_id}/size")
def queue_size(store: StoreDep, queue_id: uuid.UUID,
               status: str | None = "needs_my_review") -> JSONResponse:
    return ok({"size": store.queues.size(queue_id, status=status)})


@_route("GET", "/annotation-queues/{queue_id}/total_size")
def queue_total_size(store: StoreDep, queue_id: uuid.UUID) -> JSONResponse:
    return ok({"size": store.queues.size(queue_id, status=None)})


@_route("GET", "/annotation-queues/{queue_id}/total_archived")
def queue_total_archived(store: StoreDep, queue_id: uuid.UUID) -> JSONResponse:
    return ok({"size": store.queues.size(queue_id, status="completed")})


@_route("POST", "/annotation-queues/status/{queue_run_id}")
def set_queue_run_status(store: StoreDep, queue_run_id: uuid.UUID,
                         body: JsonBody) -> JSONResponse:
    s = validate(StatusIn, body)
    store.queues.set_status(queue_run_id, s.status)
    return ok({"id": str(queue_run_id), "status": s.status})
