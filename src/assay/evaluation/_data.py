"""Turning ``data=`` into a fixed list of examples and the dataset version they came from.

``data`` may be a dataset name or id, a ``Dataset``, or a list / iterable of ``Example`` objects
or plain dicts (``{"inputs": ..., "outputs": ...}``). A dataset is read at one pinned version
(``as_of``: a time or a version tag; default the current version) and optionally restricted to
``splits``, so the experiment records exactly which examples it ran on and a resumed experiment
sees the same ones. Plain dicts are stored as a new dataset when results are uploaded, so every
run links to a real example.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._ids import new_id, utcnow
from ..errors import InvalidInputError, NotFoundError
from ..schemas import Dataset, Example
from ..store import Store
from ..store._examples import StoredExample
from ._stream import ExampleStream

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["ResolvedData", "dataset_id_of", "load_dataset", "resolve_data"]


@dataclass
class ResolvedData:
    examples: Sequence[Example | StoredExample]  # a list, or an ExampleStream still being read
    dataset_id: str | None = None
    dataset_version: str | None = None
    splits: list[str] = field(default_factory=list)


def _split_names(examples: Sequence[Example]) -> list[str]:
    found: set[str] = set()
    for ex in examples:
        split = ex.split or (ex.metadata or {}).get("dataset_split") or ["base"]
        found.update(split if isinstance(split, list) else [str(split)])
    return sorted(found)


def _parse_as_of(as_of: datetime | str | None) -> tuple[datetime | None, str | None]:
    """(time, tag): an ISO string is a time, anything else a version tag."""
    if as_of is None or isinstance(as_of, datetime):
        return as_of, None
    if isinstance(as_of, str):
        try:
            return datetime.fromisoformat(as_of.replace("Z", "+00:00")), None
        except ValueError:
            return None, as_of
    raise InvalidInputError(
        f"as_of must be a datetime, an ISO time or a version tag, got {as_of!r}")


def load_dataset(
    client: Client, dataset_id: str, *, as_of: datetime | str | None,
    splits: Sequence[str] | None, stream: bool = False, checked: bool = False,
    attachments: bool = False,
) -> ResolvedData:
    """The dataset's examples at one pinned version (the current one by default).

    ``stream``: from a local store, read them in the background (``ExampleStream``) so a fresh
    experiment can start on the first ones; ``checked``: ``dataset_id`` was just resolved
    (``dataset_id_of``), not looked up again; ``attachments``: read the examples' files too
    (a target or evaluator asks for them), which streaming does not."""
    when, tag = _parse_as_of(as_of)
    if when is None and tag is None:
        tag = "latest"
    split_list = [splits] if isinstance(splits, str) else (list(splits) if splits else None)
    backend = getattr(client, "_backend", None)
    if stream and isinstance(backend, Store) and not attachments:
        at, count, names, pages = backend.examples.stream(
            dataset_id, version=when if when is not None else tag, splits=split_list,
            checked=checked)
        if count:
            first = next(pages, [])  # here: the first examples are ready when the run starts
            return ResolvedData(examples=ExampleStream(count, pages, first),
                                dataset_id=str(dataset_id),
                                dataset_version=at.isoformat(), splits=split_list or names)
        pages.close()
        examples: Sequence[Example] = []
    else:
        at = client.read_dataset_version(dataset_id=dataset_id, as_of=when, tag=tag).as_of
        examples = list(client.list_examples(dataset_id=dataset_id, as_of=at, splits=split_list,
                                             include_attachments=attachments))
    if not examples:
        where = f" in split(s) {split_list}" if split_list else ""
        raise InvalidInputError(f"dataset {_dataset_label(client, dataset_id)} has no "
                                f"examples{where} at version {at.isoformat()}")
    return ResolvedData(examples=examples, dataset_id=str(dataset_id),
                        dataset_version=at.isoformat(),
                        splits=split_list or _split_names(examples))


def _dataset_label(client: Client, dataset_id: str) -> str:
    """``'name' (id)``: the name is what the user passed; looked up only for a message."""
    try:
        name = client.read_dataset(dataset_id=dataset_id).name
    except Exception:  # noqa: BLE001 - the message still names the id
        return str(dataset_id)
    return f"{name!r} ({dataset_id})"


def dataset_id_of(client: Client, data: Any) -> str | None:
    """The id of the dataset ``data`` names, or None when ``data`` is not a dataset reference."""
    resolve = client._backend.datasets.resolve_id  # one lookup, not the dataset with its counts
    if isinstance(data, Dataset):
        return str(data.id)
    if isinstance(data, uuid.UUID):
        return str(resolve(dataset_id=data))
    if isinstance(data, str):
        try:
            as_id = uuid.UUID(data)
        except ValueError:
            as_id = None
        if as_id is not None:
            try:
                return str(resolve(dataset_id=as_id))
            except NotFoundError:
                pass
        return str(resolve(dataset_name=data))
    if hasattr(data, "id") and hasattr(data, "name") and not hasattr(data, "inputs"):
        return str(resolve(dataset_id=data.id))  # a LangSmith Dataset
    return None


def _as_example(item: Any, index: int) -> Example | Mapping[str, Any]:
    if isinstance(item, Example):
        return item
    if isinstance(item, Mapping):
        if not isinstance(item.get("inputs"), Mapping):
            raise InvalidInputError(
                f"data item {index}: a dict example needs an 'inputs' mapping, got {dict(item)!r}")
        return item
    if hasattr(item, "inputs") and hasattr(item, "id"):  # e.g. a langsmith Example
        return Example.model_validate(item, from_attributes=True)
    raise InvalidInputError(
        f"data item {index}: expected an Example or a dict with 'inputs', "
        f"got {type(item).__name__}")


def resolve_data(
    client: Client | None,
    data: Any,
    *,
    as_of: datetime | str | None = None,
    splits: Sequence[str] | None = None,
    upload: bool = True,
    dataset_name: str | None = None,
) -> ResolvedData:
    """Fix the examples an experiment runs on (see the module docstring)."""
    if data is None:
        raise InvalidInputError(
            "give data=: a dataset name or id, a Dataset, or a list of examples")
    if isinstance(data, (str, uuid.UUID, Dataset)) or (
        hasattr(data, "id") and hasattr(data, "name") and not isinstance(data, Iterable)
    ):
        if client is None:
            raise InvalidInputError("reading a dataset by name or id needs a client")
        ds_id = dataset_id_of(client, data)
        assert ds_id is not None
        return load_dataset(client, ds_id, as_of=as_of, splits=splits)
    if isinstance(data, (Mapping, bytes)) or not isinstance(data, Iterable):
        raise InvalidInputError(
            f"data must be a dataset name or id, a Dataset, or a list of examples; got "
            f"{type(data).__name__}")
    if as_of is not None or splits:
        raise InvalidInputError(
            "as_of and splits apply to a dataset; data here is a list of examples")
    items = [_as_example(x, i) for i, x in enumerate(data)]
    if not items:
        raise InvalidInputError("data is empty: there is nothing to evaluate")
    dicts = [x for x in items if not isinstance(x, Example)]
    if dicts and len(dicts) != len(items):
        raise InvalidInputError("data mixes Example objects and dicts: use one or the other")
    if dicts:
        return _from_dicts(client, dicts, upload=upload, dataset_name=dataset_name)
    examples = [x for x in items if isinstance(x, Example)]
    ds_ids = {str(d) for d in {e.dataset_id for e in examples}}
    if len(ds_ids) > 1:
        raise InvalidInputError(
            f"the examples come from {len(ds_ids)} datasets: an experiment runs on one dataset")
    ds_id = ds_ids.pop()
    version = None
    if upload:
        if client is None:
            raise InvalidInputError("uploading results needs a client")
        try:
            client.read_dataset(dataset_id=ds_id)
        except NotFoundError:
            raise InvalidInputError(
                f"the examples belong to dataset {ds_id}, which is not in this store; pass dicts "
                "({'inputs': ..., 'outputs': ...}) to store them as a new dataset, or "
                "upload_results=False") from None
        version = client.read_dataset_version(dataset_id=ds_id, tag="latest").as_of.isoformat()
    return ResolvedData(examples=examples, dataset_id=ds_id, dataset_version=version,
                        splits=_split_names(examples))


def _from_dicts(client: Client | None, items: list[Mapping[str, Any]], *, upload: bool,
                dataset_name: str | None) -> ResolvedData:
    if upload:
        if client is None:
            raise InvalidInputError("uploading results needs a client")
        name = dataset_name or f"examples-{new_id().hex[-8:]}"
        ds = client.create_dataset(name, description="examples passed to evaluate() as a list")
        created = client.create_examples(dataset_id=ds.id, examples=[dict(x) for x in items])
        examples = list(created["examples"])  # in the order given
        version = client.read_dataset_version(dataset_id=ds.id, tag="latest").as_of.isoformat()
        return ResolvedData(examples=examples, dataset_id=str(ds.id), dataset_version=version,
                            splits=_split_names(examples))
    ds_id = new_id()
    now = utcnow()
    examples = []
    for x in items:
        split = x.get("split", x.get("splits")) or ["base"]
        split = [split] if isinstance(split, str) else list(split)
        examples.append(Example(
            id=x.get("id") or new_id(), dataset_id=ds_id, inputs=dict(x["inputs"]),
            outputs=dict(x["outputs"]) if x.get("outputs") is not None else None,
            metadata={**(x.get("metadata") or {}), "dataset_split": split}, split=split,
            created_at=now, modified_at=now))
    return ResolvedData(examples=examples, dataset_id=None, dataset_version=None,
                        splits=_split_names(examples))
