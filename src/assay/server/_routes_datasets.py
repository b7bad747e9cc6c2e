"""Datasets, their versions and tags, and examples (JSON and the multipart upload endpoints)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from .._json import model_jsonable
from ..errors import ExampleValidationError, InvalidInputError
from ..store import Store
from ..store._examples import normalize_example
from ._attachments import with_attachment_urls
from ._deps import JsonBody, StoreDep, ok
from ._deps import json_query as _json_query
from ._errors import ApiError
from ._wire import DatasetIn, DatasetPatch, ExampleIn, ExamplePatch, SplitsIn, TagIn, validate

__all__ = ["router"]

router = APIRouter()

Ids = Annotated[list[uuid.UUID] | None, Query()]
M = TypeVar("M", bound=BaseModel)


# -- datasets ---------------------------------------------------------------------------------
@router.post("/datasets")
def create_dataset(store: StoreDep, body: JsonBody) -> JSONResponse:
    ds = validate(DatasetIn, body)
    return ok(store.datasets.create(
        ds.name, description=ds.description, data_type=ds.data_type or "kv", metadata=ds.meta(),
        inputs_schema=ds.inputs_schema_definition, outputs_schema=ds.outputs_schema_definition,
        id=ds.id))


@router.get("/datasets")
def list_datasets(
    store: StoreDep,
    id: Ids = None,
    name: str | None = None,
    name_contains: str | None = None,
    metadata: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    return ok(store.datasets.list(
        dataset_ids=id, dataset_name=name, dataset_name_contains=name_contains,
        metadata=_json_query(metadata, "metadata"), offset=offset, limit=limit))


@router.get("/datasets/{dataset_id}")
def read_dataset(store: StoreDep, dataset_id: uuid.UUID) -> JSONResponse:
    return ok(store.datasets.read(dataset_id=dataset_id))


@router.patch("/datasets/{dataset_id}")
def update_dataset(store: StoreDep, dataset_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    patch = validate(DatasetPatch, body)
    extra = patch.model_extra or {}  # LangSmith's names for the dataset's JSON Schemas
    return ok(store.datasets.update(dataset_id, name=patch.name, description=patch.description,
                                    metadata=patch.metadata,
                                    inputs_schema=extra.get("inputs_schema_definition"),
                                    outputs_schema=extra.get("outputs_schema_definition")))


@router.delete("/datasets/{dataset_id}")
def delete_dataset(store: StoreDep, dataset_id: uuid.UUID) -> JSONResponse:
    store.datasets.delete(dataset_id=dataset_id)
    return ok({"id": str(dataset_id), "deleted": True})


@router.get("/datasets/{dataset_id}/versions")
def list_versions(
    store: StoreDep,
    dataset_id: uuid.UUID,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    return ok(store.datasets.list_versions(dataset_id)[offset: offset + limit])


@router.get("/datasets/{dataset_id}/version")
def read_version(store: StoreDep, dataset_id: uuid.UUID, as_of: str | None = None,
                 tag: str | None = None) -> JSONResponse:
    if (as_of is None) == (tag is None):
        raise ApiError(422, "invalid_input",
                       "give exactly one of the query parameters as_of or tag")
    return ok(store.datasets.version(dataset_id, as_of if as_of is not None else tag))


@router.put("/datasets/{dataset_id}/tags")
def tag_version(store: StoreDep, dataset_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    tag = validate(TagIn, body)
    return ok(store.datasets.tag(dataset_id, tag.tag, tag.as_of))


@router.get("/datasets/{dataset_id}/splits")
def list_splits(store: StoreDep, dataset_id: uuid.UUID, as_of: str | None = None) -> JSONResponse:
    return ok(store.examples.splits(dataset_id=dataset_id, as_of=as_of))


@router.put("/datasets/{dataset_id}/splits")
def update_splits(store: StoreDep, dataset_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    """LangSmith's ``update_dataset_splits``: examples into a split, or out of it."""
    upd = validate(SplitsIn, body)
    return ok(store.examples.update_splits(upd.split_name, upd.examples, dataset_id=dataset_id,
                                           remove=upd.remove))


# -- examples (JSON) ----------------------------------------------------------------------------
def _create_grouped(store: Store, items: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Create examples of possibly several datasets in one transaction, indices kept global."""
    for i, (_, item) in enumerate(items):
        normalize_example(item, i)  # every item checked before anything is written
    groups: dict[str, list[int]] = {}
    for i, (ds_id, _) in enumerate(items):
        groups.setdefault(ds_id, []).append(i)
    created: dict[int, Any] = {}
    with store.transaction():
        for ds_id, idx in groups.items():
            try:
                made = store.examples.create_many([items[i][1] for i in idx], dataset_id=ds_id)
            except ExampleValidationError as exc:
                raise ExampleValidationError(idx[exc.index], exc.problem) from None
            created.update(zip(idx, made, strict=True))
    return [created[i] for i in range(len(items))]


def _with_source_run(store: Store, ex: ExampleIn, item: dict[str, Any]) -> dict[str, Any]:
    if ex.use_source_run_io:
        if ex.source_run_id is None:
            raise InvalidInputError("use_source_run_io needs source_run_id")
        run = store.runs.read(ex.source_run_id)
        item = {**item, "inputs": run.inputs or {}, "outputs": run.outputs}
    return item


def _required(item: M, field: str, where: str) -> M:
    """``item`` if its optional-in-the-model ``field`` is set, else a 422 naming where."""
    if getattr(item, field) is None:
        raise ApiError(422, "invalid_input", f"{where}.{field}: field required")
    return item


def _each(body: Any, model: type[M], required: str, what: str) -> Iterator[M]:
    """The elements of a bulk request's JSON array body, validated one at a time.

    Errors name ``body[i]``. Lazy, so whatever the caller does per element (reading a source
    run) happens in order and the first bad element is the one reported.
    """
    if not isinstance(body, list):
        raise ApiError(422, "invalid_input", f"body must be a JSON array of {what}")
    for i, raw in enumerate(body):
        yield _required(validate(model, raw, f"body[{i}]"), required, f"body[{i}]")


@router.post("/examples")
def create_example(store: StoreDep, body: JsonBody) -> JSONResponse:
    ex = _required(validate(ExampleIn, body), "dataset_id", "body")
    made = _create_grouped(store, [(str(ex.dataset_id), _with_source_run(store, ex, ex.item()))])
    return ok(made[0])


@router.post("/examples/bulk")
def create_examples(store: StoreDep, body: JsonBody) -> JSONResponse:
    items = [(str(ex.dataset_id), _with_source_run(store, ex, ex.item()))
             for ex in _each(body, ExampleIn, "dataset_id", "examples")]
    return ok(_create_grouped(store, items))


@router.get("/examples")
def list_examples(
    request: Request,
    store: StoreDep,
    dataset: uuid.UUID | None = None,
    id: Ids = None,
    as_of: str | None = None,
    splits: Annotated[list[str] | None, Query()] = None,
    metadata: str | None = None,
    filter: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=10000)] = 100,
    select: Annotated[list[str] | None, Query()] = None,
) -> JSONResponse:
    if dataset is None and not id:
        raise ApiError(422, "invalid_input", "give the dataset or id query parameter")
    found = store.examples.list(
        dataset_id=dataset, example_ids=id, as_of=as_of, splits=splits,
        metadata=_json_query(metadata, "metadata"), offset=offset, limit=limit,
        filter=filter or None)  # LangSmith's filter language on examples
    if select and "attachment_urls" in select:  # the SDK's include_attachments=True
        return ok(with_attachment_urls(request, store, found, as_of))
    return ok(found)


@router.get("/examples/{example_id}")
def read_example(request: Request, store: StoreDep, example_id: uuid.UUID,
                 as_of: str | None = None) -> JSONResponse:
    return ok(with_attachment_urls(request, store, [store.examples.read(example_id, as_of=as_of)],
                                   as_of)[0])


@router.patch("/examples/bulk")
def update_examples(store: StoreDep, body: JsonBody) -> JSONResponse:
    updates = [p.update(p.id) for p in _each(body, ExamplePatch, "id", "example updates")]
    changed = store.examples.update_many(updates)
    return ok({"message": f"{len(changed)} examples updated", "count": len(changed),
               "examples": [model_jsonable(e) for e in changed]})


@router.patch("/examples/{example_id}")
def update_example(store: StoreDep, example_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    patch = validate(ExamplePatch, body)
    store.examples.read(example_id)  # 404 (not a batch error) when it is not the caller's
    return ok(store.examples.update_many([patch.update(example_id)])[0])


@router.delete("/examples/{example_id}")
def delete_example(store: StoreDep, example_id: uuid.UUID) -> JSONResponse:
    store.examples.delete_many([example_id])
    return ok({"example_ids": [str(example_id)], "count": 1})


@router.delete("/examples")
def delete_examples(store: StoreDep,
                    example_ids: Annotated[list[uuid.UUID], Query()]) -> JSONResponse:
    n = store.examples.delete_many(example_ids)
    return ok({"example_ids": [str(i) for i in example_ids], "count": n})


# -- examples (multipart, with attachments): _routes_attachments.py ----------------------------
