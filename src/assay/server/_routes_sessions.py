"""Sessions (projects, experiments): create, list (``read_project`` by name), read, patch, delete.

``GET /sessions?name=X&include_stats=true`` is how both SDKs implement ``read_project``: it
answers with an ARRAY holding the project and its statistics.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ._deps import JsonBody, StoreDep, ok
from ._deps import json_query as _json_query
from ._errors import ApiError
from ._wire import SessionIn, SessionPatch, validate

__all__ = ["router"]

router = APIRouter()


@router.post("/sessions")
def create_session(store: StoreDep, body: JsonBody, upsert: bool = False) -> JSONResponse:
    s = validate(SessionIn, body)
    return ok(store.projects.create(
        s.name, description=s.description, extra=s.extra,
        reference_dataset_id=s.reference_dataset_id, id=s.id, start_time=s.start_time,
        end_time=s.end_time, upsert=upsert))


@router.get("/sessions")
def list_sessions(
    store: StoreDep,
    id: Annotated[list[uuid.UUID] | None, Query()] = None,
    name: str | None = None,
    name_contains: str | None = None,
    reference_dataset: Annotated[list[uuid.UUID] | None, Query()] = None,
    reference_free: bool | None = None,
    include_stats: bool = False,
    metadata: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    if reference_dataset and len(reference_dataset) > 1:
        raise ApiError(422, "unsupported", "give at most one reference_dataset")
    return ok(store.projects.list(
        project_ids=id, name=name, name_contains=name_contains,
        reference_dataset_id=reference_dataset[0] if reference_dataset else None,
        reference_free=reference_free, metadata=_json_query(metadata, "metadata"),
        include_stats=include_stats, offset=offset, limit=limit))


@router.get("/sessions/{session_id}")
def read_session(store: StoreDep, session_id: uuid.UUID,
                 include_stats: bool = False) -> JSONResponse:
    return ok(store.projects.read(project_id=session_id, include_stats=include_stats))


@router.patch("/sessions/{session_id}")
def update_session(store: StoreDep, session_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    p = validate(SessionPatch, body)
    return ok(store.projects.update(session_id, name=p.name, description=p.description,
                                    extra=p.extra, end_time=p.end_time))


@router.delete("/sessions/{session_id}")
def delete_session(store: StoreDep, session_id: uuid.UUID) -> JSONResponse:
    store.projects.delete(project_id=session_id)
    return ok({"id": str(session_id), "deleted": True})
