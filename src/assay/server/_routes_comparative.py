"""Comparative (pairwise) experiments: LangSmith's ``/datasets/comparative`` routes.

``evaluate((experiment_a, experiment_b), evaluators=[...])`` in the official SDKs creates one
(``create_comparative_experiment``) and then posts feedback naming it; the dataset's page of
comparisons lists them with their experiments and per-experiment feedback statistics.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ._deps import JsonBody, StoreDep, ok
from ._wire import ComparativeIn, validate

__all__ = ["router"]

router = APIRouter()


@router.post("/datasets/comparative")
def create_comparative(store: StoreDep, body: JsonBody) -> JSONResponse:
    c = validate(ComparativeIn, body)
    return ok(store.comparative.create(
        name=c.name, experiment_ids=c.experiment_ids, reference_dataset_id=c.reference_dataset_id,
        description=c.description, created_at=c.created_at, extra=c.extra, id=c.id))


@router.get("/datasets/{dataset_id}/comparative")
def list_comparative(
    store: StoreDep,
    dataset_id: uuid.UUID,
    name: str | None = None,
    name_contains: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
) -> JSONResponse:
    store.datasets.read(dataset_id=dataset_id)  # an unknown dataset is a 404, not []
    return ok(store.comparative.list(dataset_id=dataset_id, name=name,
                                     name_contains=name_contains, offset=offset, limit=limit))


@router.get("/datasets/comparative/{comparative_experiment_id}")
def read_comparative(store: StoreDep, comparative_experiment_id: uuid.UUID) -> JSONResponse:
    return ok(store.comparative.read(comparative_experiment_id))


@router.delete("/datasets/comparative/{comparative_experiment_id}")
def delete_comparative(store: StoreDep, comparative_experiment_id: uuid.UUID) -> JSONResponse:
    store.comparative.delete(comparative_experiment_id)
    return ok({"id": str(comparative_experiment_id), "deleted": True})
