"""Feedback: create (one or a list), list, read, update, delete."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ..store._feedback import UPDATABLE
from ._deps import JsonBody, StoreDep, ok
from ._wire import FeedbackIn, FeedbackPatch, validate

__all__ = ["router"]

router = APIRouter()


@router.post("/feedback")
def create_feedback(store: StoreDep, body: JsonBody) -> JSONResponse:
    if isinstance(body, list):  # several at once, atomically
        items = [validate(FeedbackIn, raw, f"body[{i}]").item() for i, raw in enumerate(body)]
        return ok(store.feedback.create_many(items))
    return ok(store.feedback.create_many([validate(FeedbackIn, body).item()])[0])


@router.get("/feedback")
def list_feedback(
    store: StoreDep,
    run: Annotated[list[uuid.UUID] | None, Query()] = None,
    session: Annotated[list[uuid.UUID] | None, Query()] = None,
    key: Annotated[list[str] | None, Query()] = None,
    id: Annotated[list[uuid.UUID] | None, Query()] = None,
    source: Annotated[list[str] | None, Query()] = None,  # feedback_source_type(s)
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    return ok(store.feedback.list(run_ids=run, project_ids=session, feedback_key=key,
                                  feedback_ids=id, source_types=source, offset=offset,
                                  limit=limit))


@router.get("/feedback/{feedback_id}")
def read_feedback(store: StoreDep, feedback_id: uuid.UUID) -> JSONResponse:
    return ok(store.feedback.read(feedback_id))


@router.patch("/feedback/{feedback_id}")
def update_feedback(store: StoreDep, feedback_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    """LangSmith's ``update_feedback``: the fields sent change (null clears), others stay."""
    patch = validate(FeedbackPatch, body)
    changes = {k: getattr(patch, k) for k in UPDATABLE if k in patch.model_fields_set}
    return ok(store.feedback.update(feedback_id, **changes))


@router.delete("/feedback/{feedback_id}")
def delete_feedback(store: StoreDep, feedback_id: uuid.UUID) -> JSONResponse:
    store.feedback.delete(feedback_id)
    return ok({"id": str(feedback_id), "deleted": True})
