"""The generated client's annotation queue items (``client.annotation_queues.items``,
``/api/v1/platform/annotation-queues/...``): an item is a queued run, named by its queue-run id.

Served: create (RUN items), list by review section (cursor pages), count, status (viewed /
completed) and delete. Refused by name: THREAD items, multi-reviewer agreement, finals,
placement and item updates (assay has one reviewer per workspace and no threads in queues).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from ._deps import JsonBody, StoreDep, ok
from ._errors import ApiError
from ._wire import validate

__all__ = ["router"]

router = APIRouter()

BASE = "/api/v1/platform/annotation-queues"
_SECTIONS = ("needs_my_review", "needs_others_review", "archived")


class ItemIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    item_type: str = "RUN"
    run_id: uuid.UUID | None = None
    thread_id: str | None = None


class ItemsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[ItemIn]
    extend_trace_retention: bool | None = None


class ItemStatusIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: str
    override_added_at: str | None = None


class ItemsDelete(BaseModel):
    model_config = ConfigDict(extra="forbid")

    item_ids: list[uuid.UUID]


def _wire(item: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in item.items() if k != "completed_at"}
    for key in ("start_time", "added_at", "last_reviewed_time"):
        out[key] = out[key].isoformat() if out.get(key) is not None else None
    return out


def _section(status: str) -> str:
    if status not in _SECTIONS:
        raise ApiError(422, "invalid_input", f"status must be one of {', '.join(_SECTIONS)}, "
                       f"got {status!r}")
    return status


@router.post(f"{BASE}/items/{{item_id}}/status")
def set_item_status(store: StoreDep, item_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    s = validate(ItemStatusIn, body)
    if s.status not in ("viewed", "completed"):
        raise ApiError(422, "invalid_input", f"status must be 'viewed' or 'completed', got "
                       f"{s.status!r}")
    store.queues.set_status(item_id, s.status)
    return ok({"queue_item_id": str(item_id), "status": s.status,
               "is_archived": s.status == "completed", "override_added_at": None})


@router.post(f"{BASE}/{{queue_id}}/items")
def create_items(store: StoreDep, queue_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    req = validate(ItemsIn, body)
    run_ids = []
    for i, item in enumerate(req.items):
        if item.item_type != "RUN" or item.thread_id is not None:
            raise ApiError(422, "unsupported", f"items[{i}]: {item.item_type} items are not "
                           "served by assay: annotation queues hold runs (item_type RUN)")
        if item.run_id is None:
            raise ApiError(422, "invalid_input", f"items[{i}]: a RUN item needs run_id")
        run_ids.append(item.run_id)
    return ok({"items": [_wire(i) for i in store.queues.add_items(queue_id, run_ids)]})


@router.get(f"{BASE}/{{queue_id}}/items/count")
def count_items(store: StoreDep, queue_id: uuid.UUID, status: str) -> JSONResponse:
    section = _section(status)
    return ok({"count": store.queues.size(
        queue_id, status="completed" if section == "archived" else section)})


@router.post(f"{BASE}/{{queue_id}}/items/delete")
def delete_items(store: StoreDep, queue_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    req = validate(ItemsDelete, body)
    n = store.queues.remove_items(queue_id, req.item_ids)
    return ok({"deleted": str(n)})


@router.get(f"{BASE}/{{queue_id}}/items")
def list_items(
    store: StoreDep,
    queue_id: uuid.UUID,
    status: str,
    cursor: str | None = None,
    page_size: Annotated[int, Query(ge=1, le=100)] = 100,
    item_type: str | None = None,
    direction: str | None = None,
) -> JSONResponse:
    section = _section(status)
    if direction == "backward":
        raise ApiError(422, "unsupported", "direction=backward is not served by assay: page "
                       "forward with next_cursor")
    if item_type == "THREAD":
        return ok({"items": [], "next_cursor": None})
    try:
        offset = int(cursor) if cursor else 0
    except ValueError:
        offset = -1
    if offset < 0:
        raise ApiError(422, "invalid_input", f"cursor {cursor!r} is not one this server issued")
    found = store.queues.list_items(queue_id, status=section, offset=offset,
                                    limit=page_size + 1)
    more = len(found) > page_size
    return ok({"items": [_wire(i) for i in found[:page_size]],
               "next_cursor": str(offset + page_size) if more else None})


_NOT_SERVED = ("this part of the annotation queue items API (item updates, finals, placement, "
               "multi-reviewer agreement) is not served by assay: it has one reviewer per "
               "workspace; see the README, 'The team server and the LangSmith SDKs'")


@router.api_route(f"{BASE}/{{rest:path}}", methods=["GET", "POST", "PATCH", "PUT", "DELETE"])
def items_not_served(store: StoreDep, rest: str) -> JSONResponse:
    raise ApiError(422, "unsupported", _NOT_SERVED)
