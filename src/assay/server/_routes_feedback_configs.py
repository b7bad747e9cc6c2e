"""Feedback configs (``/feedback-configs``): create, list, update (categories too), delete."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ._deps import JsonBody, StoreDep, ok
from ._errors import ApiError
from ._wire import validate

__all__ = ["router"]

router = APIRouter()


class ConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feedback_key: str = Field(min_length=1)
    feedback_config: dict[str, Any]
    is_lower_score_better: bool | None = None
    is_enforced: bool = False


class ConfigPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feedback_key: str = Field(min_length=1)
    id: uuid.UUID | None = None
    feedback_config: dict[str, Any] | None = None
    is_lower_score_better: bool | None = None
    add_categories: list[dict[str, Any]] | None = None
    remove_categories: list[float] | None = None


@router.post("/feedback-configs")
def create_config(store: StoreDep, body: JsonBody) -> JSONResponse:
    c = validate(ConfigIn, body)
    return ok(store.feedback_configs.create(
        c.feedback_key, c.feedback_config, is_lower_score_better=c.is_lower_score_better,
        is_enforced=c.is_enforced))


@router.get("/feedback-configs")
def list_configs(
    store: StoreDep,
    key: Annotated[list[str] | None, Query()] = None,
    name_contains: str | None = None,
    include_all_configs: bool = False,
    is_enforced: bool | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    return ok(store.feedback_configs.list(
        feedback_keys=key, name_contains=name_contains, include_all_configs=include_all_configs,
        is_enforced=is_enforced, offset=offset, limit=limit))


@router.patch("/feedback-configs")
def update_config(store: StoreDep, body: JsonBody) -> JSONResponse:
    p = validate(ConfigPatch, body)
    return ok(store.feedback_configs.update(
        p.feedback_key, feedback_config=p.feedback_config,
        is_lower_score_better=p.is_lower_score_better, config_id=p.id,
        add_categories=p.add_categories, remove_categories=p.remove_categories))


@router.delete("/feedback-configs")
def delete_config(store: StoreDep, feedback_key: str | None = None,
                  id: uuid.UUID | None = None) -> JSONResponse:
    if (feedback_key is None) == (id is None):
        raise ApiError(422, "invalid_input", "give exactly one of the query parameters "
                       "feedback_key or id")
    n = store.feedback_configs.delete(feedback_key, config_id=id)
    return ok({"deleted": n})
