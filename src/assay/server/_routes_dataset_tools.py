"""Dataset endpoints beside the CRUD ones: ``POST /datasets/upload`` (the SDK's
``upload_csv``), ``GET /datasets/{id}/versions/diff`` (``diff_dataset_versions``) and
``GET /datasets/{id}/openai_ft`` (``read_dataset_openai_finetuning``)."""

from __future__ import annotations

import io
import uuid
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from .. import _json
from ..datasets import csv_examples, openai_lines
from ._deps import Parts, StoreDep, ok
from ._errors import ApiError

__all__ = ["parse_csv_upload", "router"]

router = APIRouter()

_FIELDS = ("name", "description", "data_type", "id")


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ApiError(422, "invalid_input", f"{what} is not UTF-8 text: {exc}") from None


def parse_csv_upload(parts: list[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(dataset fields, examples) of the SDK's multipart CSV upload; 422 naming what is wrong
    (a missing part or column, a row with too many cells, a file that is not CSV text)."""
    fields: dict[str, Any] = {}
    keys: dict[str, list[str]] = {"input_keys": [], "output_keys": []}
    file = None
    for part in parts:
        if part.name == "file":
            if file is not None:
                raise ApiError(422, "invalid_input", "send one 'file' part")
            file = part
        elif part.name in keys:
            keys[part.name].append(_text(part.data, f"part {part.name!r}"))
        elif part.name in _FIELDS:
            fields[part.name] = _text(part.data, f"part {part.name!r}")
        else:
            raise ApiError(422, "invalid_input", f"unknown part {part.name!r} in a CSV upload: "
                           "send file, input_keys, output_keys, name, description, data_type")
    if file is None:
        raise ApiError(422, "invalid_input", "a CSV upload needs a 'file' part")
    if not keys["input_keys"]:
        raise ApiError(422, "invalid_input", "a CSV upload needs at least one input_keys part")
    name = fields.get("name") or (file.filename or "").rsplit("/", 1)[-1]
    if not name:
        raise ApiError(422, "invalid_input", "give the dataset a name (or the file a filename)")
    fields["name"] = name
    text = _text(file.data, f"CSV file {file.filename or ''}".strip())
    where = f"CSV file {file.filename}" if file.filename else "CSV file"
    # a bad row or a missing column: 422 naming it (the app's handlers of assay's errors)
    return fields, csv_examples(io.StringIO(text, newline=""), where, keys["input_keys"],
                                keys["output_keys"])


@router.post("/datasets/upload")
def upload_csv(store: StoreDep, parts: Parts) -> JSONResponse:
    """A dataset from a CSV file, created with all its examples or not at all."""
    fields, examples = parse_csv_upload(parts)
    try:
        ds_id = uuid.UUID(fields["id"]) if fields.get("id") else None
    except ValueError:
        raise ApiError(422, "invalid_input", f"id {fields['id']!r} is not a UUID") from None
    with store.transaction():
        ds = store.datasets.create(fields["name"], description=fields.get("description"),
                                   data_type=fields.get("data_type") or "kv", id=ds_id)
        store.examples.create_many(examples, dataset_id=ds.id)
    return ok(store.datasets.read(dataset_id=ds.id))


@router.get("/datasets/{dataset_id}/versions/diff")
def diff_versions(store: StoreDep, dataset_id: uuid.UUID, from_version: str,
                  to_version: str) -> JSONResponse:
    return ok(store.datasets.diff_versions(dataset_id, from_version, to_version))


@router.get("/datasets/{dataset_id}/openai_ft")
def openai_finetuning(store: StoreDep, dataset_id: uuid.UUID,
                      as_of: str | None = None) -> Response:
    """The SDKs' ``read_dataset_openai_finetuning``: JSONL, one conversation an example."""
    ds = store.datasets.read(dataset_id=dataset_id)  # 404 naming it
    examples = store.examples.list(dataset_id=ds.id, as_of=as_of)
    if not examples:
        raise ApiError(422, "invalid_input", f"dataset {ds.name!r} has no examples to export")
    lines = openai_lines(examples)  # an example that is no conversation: 422 naming it
    return Response(b"".join(_json.dumps(line).encode() + b"\n" for line in lines),
                    media_type="application/jsonl")
