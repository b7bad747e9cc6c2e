"""Versioned examples of a dataset.

Every change closes the current row (``valid_to``) and, unless it is a delete, writes a new one;
``as_of`` T reads the rows with ``modified_at <= T < coalesce(valid_to, +inf)``.
"""

from __future__ import annotations

import builtins
import functools
import uuid
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, Text, and_, case, func, or_, select, text, type_coerce, update

from .._gc import build_many
from .._ids import as_uuid, new_id_text, utcnow
from .._json import escape_text, from_json_column
from ..errors import ExampleValidationError, InvalidInputError, NotFoundError
from ..schemas import Example
from ._attachments import AttachmentRepo
from ._tables import datasets, examples
from ._types import Micros, from_micros, to_micros

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["ExampleRepo", "StoredExample", "example_model", "normalize_example", "now_us"]

def now_us(conn: Connection, dataset_id: str) -> int:
    """A timestamp strictly after the dataset's last change, so versions never collide."""
    now = to_micros(utcnow()) or 0
    last = conn.execute(select(datasets.c.modified_at).where(datasets.c.id == dataset_id)).scalar()
    last_us = to_micros(last) if last is not None else 0
    return max(now, (last_us or 0) + 1)

def _split_list(value: Any, index: int | None = None) -> list[str]:
    if value is None:
        return ["base"]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) and s for s in value):
        raise _bad(index, f"split must be a non-empty string or list of strings, got {value!r}")
    if any("," in s for s in value):
        raise _bad(index, f"split names cannot contain ',': {value!r}")
    return list(dict.fromkeys(value))


def _in_splits(splits: Sequence[str]) -> Any:
    """Rows in any of ``splits``."""
    return or_(*[examples.c.split_key.contains(f",{s},", autoescape=True) for s in splits])


def _bad(index: int | None, problem: str) -> InvalidInputError:
    return (ExampleValidationError(index, problem) if index is not None
            else InvalidInputError(problem))


def normalize_example(item: Any, index: int | None = None) -> dict[str, Any]:
    """Validate one example given as a mapping (or an Example) and return storable fields."""
    if isinstance(item, Example):
        item = item.model_dump()
    if not isinstance(item, Mapping):
        raise _bad(index, f"expected a mapping with 'inputs', got {type(item).__name__}")
    unknown = set(item) - {
        "inputs", "outputs", "metadata", "split", "splits", "id", "source_run_id",
        "created_at", "dataset_id", "modified_at", "attachments", "attachment_urls",
    }
    if unknown:
        hint = ("" if "inputs" in item else
                ': an example is {"inputs": {...}, "outputs": {...}} (a CSV with plain '
                "columns takes input_keys/output_keys)")
        raise _bad(index, f"unknown field(s) {sorted(unknown)}{hint}")
    inputs = item.get("inputs")
    if not isinstance(inputs, Mapping):
        raise _bad(index, f"'inputs' must be a mapping, got {type(inputs).__name__}")
    outputs = item.get("outputs")
    if outputs is not None and not isinstance(outputs, Mapping):
        raise _bad(index, f"'outputs' must be a mapping or None, got {type(outputs).__name__}")
    meta = item.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise _bad(index, f"'metadata' must be a mapping or None, got {type(meta).__name__}")
    meta = dict(meta) if meta is not None else None
    split_value = item.get("split", item.get("splits"))
    if split_value is None and meta and "dataset_split" in meta:
        split_value = meta["dataset_split"]
    splits = _split_list(split_value, index)
    ex_id = item.get("id")
    try:
        ex_id = str(as_uuid(ex_id, "id")) if ex_id is not None else new_id_text()
    except InvalidInputError as exc:
        raise _bad(index, str(exc)) from None
    return {
        "id": ex_id,
        "inputs": dict(inputs),
        "outputs": dict(outputs) if outputs is not None else None,
        "metadata": meta,
        "splits": splits,
        "split_key": "," + ",".join(splits) + ",",
        "source_run_id": str(item["source_run_id"]) if item.get("source_run_id") else None,
    }

_EXAMPLE_SET = frozenset(("id", "dataset_id", "inputs", "outputs", "metadata", "split",
                          "source_run_id", "created_at", "modified_at"))


def _uuid(value: Any) -> uuid.UUID | None:
    if value is None or value.__class__ is uuid.UUID:
        return value
    return uuid.UUID(str(value))


@functools.lru_cache(maxsize=256)
def _dataset_uuid(value: Any) -> uuid.UUID | None:
    """The same few dataset ids recur on every row of a read: parse each once."""
    return _uuid(value)


_MODEL_COLUMNS = ("id", "dataset_id", "inputs", "outputs", "metadata", "splits",
                  "source_run_id", "created_at", "modified_at")
_JSON_COLUMNS = frozenset(("inputs", "outputs", "metadata", "splits"))
# The columns as the driver returns them: no SQLAlchemy result processing per value (JSON text
# on SQLite, already decoded JSONB on PostgreSQL; epoch microseconds for times).
_RAW_COLUMNS = tuple(
    type_coerce(examples.c[c], Text if c in _JSON_COLUMNS else
                BigInteger if isinstance(examples.c[c].type, Micros) else examples.c[c].type
                ).label(c)
    for c in _MODEL_COLUMNS)


# An experiment's first example waits for the two statements below (its dataset's current size
# and splits, then its first page), so they are written as SQL: the first use of their Core
# form costs milliseconds of compiling in every process that runs an experiment, the SQL
# almost none. The Core forms (``_at_version``'s pinned branch, ``_query``) say the same.
_LIVE_SQL = text(
    "SELECT split_key, count(*), (SELECT modified_at FROM datasets WHERE id = :ds)"
    " FROM examples WHERE dataset_id = :ds AND valid_to IS NULL GROUP BY split_key")
_PAGES_SQL = text(
    f"SELECT {', '.join(_MODEL_COLUMNS)} FROM examples"
    " WHERE dataset_id = :ds AND modified_at <= :at AND (valid_to IS NULL OR valid_to > :at)"
    " ORDER BY created_at, id")


from_json = from_json_column  # raw SQL bypasses the engine's JSON deserializer (NUL, surrogates)


def _json_value(value: Any) -> Any:
    return from_json(value) if value.__class__ is str else value


def _example_models(rows: Sequence[Any]) -> list[Example]:
    """Examples from raw rows, built without pydantic validation.

    The values are already the right types once decoded (ids canonical UUID text, times epoch
    microseconds, JSON text or JSONB), so validating them again only cost time: reading the
    dataset was the largest part of ``evaluate()``'s overhead per example. Each object is what
    ``Example(**fields)`` gives for the same fields (same ``model_fields_set``).
    """
    times: dict[int, Any] = {}  # examples created together share their timestamps
    return build_many(lambda row: example_model(row, *_inputs_outputs(row), times), rows)


def _inputs_outputs(row: Sequence[Any]) -> tuple[Any, Any]:
    """A raw row's inputs and outputs, decoded (JSON text on SQLite, JSONB already on
    PostgreSQL)."""
    inputs, outputs = row[2], row[3]
    if inputs.__class__ is str:
        inputs = from_json(inputs)
        outputs = None if outputs is None else from_json(outputs)
    return inputs, outputs


def example_model(row: Sequence[Any], inputs: Any, outputs: Any,
                  times: dict[int, Any] | None = None) -> Example:
    """One row's Example, its inputs and outputs already decoded (``_MODEL_COLUMNS`` order)."""
    ex_id, ds_id, _, _, metadata, splits, source_run, created, modified = row
    meta = _json_value(metadata) or {}
    splits = _json_value(splits) or ["base"]
    meta.setdefault("dataset_split", splits)
    times = {} if times is None else times
    created_at = times.get(created)
    if created_at is None:
        created_at = times[created] = from_micros(created)
    modified_at = times.get(modified)
    if modified_at is None and modified is not None:
        modified_at = times[modified] = from_micros(modified)
    ex = Example.__new__(Example)
    setattr_ = object.__setattr__
    setattr_(ex, "__dict__", {
        "id": _uuid(ex_id),
        "dataset_id": _dataset_uuid(ds_id),
        "inputs": inputs or {},
        "outputs": outputs,
        "metadata": meta,
        "split": list(splits),  # its own list, as validation made it
        "source_run_id": _uuid(source_run),
        "created_at": created_at,
        "modified_at": modified_at,
        "attachment_urls": None,
        "attachments": None,
    })
    setattr_(ex, "__pydantic_fields_set__", set(_EXAMPLE_SET))
    setattr_(ex, "__pydantic_extra__", {})
    setattr_(ex, "__pydantic_private__", None)
    return ex


class StoredExample:
    """An example as an experiment reads it: id, inputs and outputs at hand, the full
    ``Example`` built on first use (``model()``).

    An experiment needs only these three per example; building the model (ids parsed, metadata
    and splits decoded, times converted) for every one was the largest part of reading a
    dataset, and most rows are never looked at again. ``id`` is the parsed UUID, ``id_text``
    the stored text the run records carry.
    """

    __slots__ = ("_model", "_row", "id_text", "inputs", "outputs")

    def __init__(self, row: Sequence[Any]) -> None:
        inputs, outputs = _inputs_outputs(row)
        self._row = row
        self.id_text: str = str(row[0])
        self.inputs: dict[str, Any] = inputs or {}
        self.outputs: dict[str, Any] | None = outputs
        self._model: Example | None = None

    @property
    def id(self) -> uuid.UUID:
        return self.model().id

    def model(self) -> Example:
        ex = self._model
        if ex is None:
            ex = self._model = example_model(self._row, self.inputs, self.outputs)
        return ex

    def __repr__(self) -> str:
        return f"StoredExample({self.id_text})"


class ExampleRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    def create_many(
        self,
        items: Iterable[Any],
        *,
        dataset_id: uuid.UUID | str | None = None,
        dataset_name: str | None = None,
    ) -> list[Example]:
        """Validate every item first, then store all in one transaction, or none."""
        rows = [normalize_example(item, i) for i, item in enumerate(items)]
        ids = [r["id"] for r in rows]
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            for i, ex_id in enumerate(ids):
                if ex_id in seen:
                    raise ExampleValidationError(i, f"duplicate example id {ex_id} in the batch")
                seen.add(ex_id)
        with self.store.write() as conn:
            ds_id = self.store.datasets._resolve(conn, dataset_id, dataset_name)
            if not rows:
                return []
            check = self.store.datasets.schema_check(conn, ds_id)  # inputs/outputs_schema
            if check:
                for i, r in enumerate(rows):
                    check.example(i, r["id"], r["inputs"], r["outputs"])
            existing = set()
            for chunk in _chunks(ids, 500):
                existing |= set(
                    conn.execute(
                        select(examples.c.id).where(
                            examples.c.id.in_(chunk), examples.c.valid_to.is_(None)
                        )
                    ).scalars()
                )
            if existing:
                i = next(i for i, x in enumerate(ids) if x in existing)
                raise ExampleValidationError(i, f"example id {ids[i]} already exists")
            now = now_us(conn, ds_id)
            for r in rows:
                r.update(dataset_id=ds_id, created_at=now, modified_at=now, valid_to=None)
            conn.execute(examples.insert(), rows)
            conn.execute(update(datasets).where(datasets.c.id == ds_id).values(modified_at=now))
            stored = self._select(conn, ds_id, example_ids=ids)
        order = {x: i for i, x in enumerate(ids)}
        return sorted(stored, key=lambda e: order[str(e.id)])

    def _select(self, conn: Connection, ds_id: str | None, **filters: Any) -> list[Example]:
        """The examples ``_query`` selects, built in one fetch (not one per row)."""
        return _example_models(conn.execute(self._query(ds_id, **filters)).all())

    def _query(
        self,
        ds_id: str | None,
        *,
        as_of_us: int | None = None,
        example_ids: Sequence[str] | None = None,
        splits: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        prefilter: Sequence[tuple[str, str, str | None]] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> Any:
        q = select(*_RAW_COLUMNS)
        for op, key, value in prefilter or ():  # a filter's SQL-checkable part (_example_filter)
            q = q.where(self._metadata_condition(op, key, value))
        if ds_id is not None:
            q = q.where(examples.c.dataset_id == ds_id)
        if as_of_us is None:
            q = q.where(examples.c.valid_to.is_(None))
        else:
            q = q.where(
                examples.c.modified_at <= as_of_us,
                or_(examples.c.valid_to.is_(None), examples.c.valid_to > as_of_us),
            )
        if example_ids is not None:
            q = q.where(examples.c.id.in_(list(example_ids)))
        if splits:
            q = q.where(_in_splits(splits))
        if metadata:
            conds = []
            for key, value in metadata.items():
                field = examples.c.metadata[key]
                if isinstance(value, bool):
                    conds.append(field.as_boolean() == value)
                elif isinstance(value, int):
                    conds.append(field.as_integer() == value)
                elif isinstance(value, float):
                    conds.append(field.as_float() == value)
                elif isinstance(value, str):
                    conds.append(field.as_string() == value)
                else:
                    raise InvalidInputError(
                        f"metadata filter on {key!r} must be a str, int, float or bool"
                    )
            q = q.where(and_(*conds))
        q = q.order_by(examples.c.created_at, examples.c.id).offset(max(offset, 0))
        if limit is not None:
            q = q.limit(limit)
        return q

    def _metadata_condition(self, op: str, key: str, value: str | None) -> Any:
        """``metadata.key`` is set (``exists``), or is the string ``value`` (``eq``; compared in
        its stored form: ``assay._json`` escapes NUL and lone surrogates)."""
        if op == "eq":
            return examples.c.metadata[key].as_string() == escape_text(str(value))
        if self.store.dialect == "postgresql":
            return func.jsonb_exists(examples.c.metadata, key)
        return func.json_type(examples.c.metadata, f'$."{key}"').is_not(None)  # JSON null too

    def stream(self, dataset_id: uuid.UUID | str, *, version: datetime | str | None = None,
               splits: Sequence[str] | None = None, page: int = 256,
               checked: bool = False,
               ) -> tuple[datetime, int, list[str], Generator[list[StoredExample]]]:
        """A dataset's examples at one version, for a reader that starts before the last arrives.

        ``version`` is what ``DatasetRepo.version`` takes (a time, a tag, None for the current
        one); ``checked``: ``dataset_id`` was just resolved in this workspace, not looked up
        again. Returns that version's time, the number of examples, their split names (sorted)
        and an iterator of pages in ``list``'s order, read by one query on one connection (so
        every page sees the same version). Iterate it to the end, or close it, to give the
        connection back. Everything but the pages is one statement: it is time before an
        experiment's first example.
        """
        with self.store.read() as conn:
            ds_id = str(dataset_id) if checked else self.store.datasets._resolve(
                conn, dataset_id, None)
            at, count, names = self._at_version(conn, ds_id, version, splits)
        at_us = to_micros(at)
        q = (self._query(ds_id, as_of_us=at_us, splits=splits) if splits
             else _PAGES_SQL.bindparams(ds=ds_id, at=at_us))

        def pages() -> Generator[list[StoredExample]]:
            with self.store.read() as conn:
                result = conn.execute(q)
                # a first page that fills a typical concurrency bound, read before the rest
                yield [StoredExample(row) for row in result.fetchmany(128)]
                for part in result.partitions(page):
                    yield [StoredExample(row) for row in part]

        return at, count, names, pages()

    def _at_version(self, conn: Connection, ds_id: str, version: datetime | str | None,
                    splits: Sequence[str] | None) -> tuple[datetime, int, list[str]]:
        """The time of ``version`` (the dataset's last change by then), the number of examples
        of ``splits`` in it and their split names: one statement, before an experiment's first
        example.

        The current version is the dataset's ``modified_at`` (every change of an example sets
        it) and its examples are counted on an index alone (``ix_examples_dataset_live``).
        Another version takes one pass over the dataset's rows: nothing changed between its
        time and the bound ``version`` names, so the rows live at the bound are its rows.
        """
        if version is None or version == "latest":
            rows: Sequence[Any] = [(key, n, from_micros(changed))
                    for key, n, changed in conn.execute(_LIVE_SQL, {"ds": ds_id})
                    if not splits or any(f",{s}," in key for s in splits)]  # as _in_splits
        else:
            bound = self.store.datasets._as_of_us(conn, ds_id, version)
            live = or_(examples.c.valid_to.is_(None), examples.c.valid_to > bound)
            if splits:
                live = and_(live, _in_splits(splits))
            created = select(datasets.c.created_at).where(datasets.c.id == ds_id)
            rows = conn.execute(
                select(examples.c.split_key, func.count(case((live, 1))),
                       func.max(examples.c.modified_at),
                       func.max(case((examples.c.valid_to <= bound, examples.c.valid_to))),
                       created.scalar_subquery())
                .where(examples.c.dataset_id == ds_id, examples.c.modified_at <= bound)
                .group_by(examples.c.split_key)).all()
        count, names, times = 0, set[str](), list[datetime]()
        for key, n, *changed in rows:
            times.extend(t for t in changed if t is not None)
            if n:
                count += n  # examples per distinct split list
                names.update(s for s in key.split(",") if s)
        if not count:  # no examples then: the version still names its time
            return self.store.datasets._version_at(conn, ds_id, version), 0, []
        return max(times), count, sorted(names)

    def list(
        self,
        *,
        dataset_id: uuid.UUID | str | None = None,
        dataset_name: str | None = None,
        example_ids: Sequence[uuid.UUID | str] | None = None,
        splits: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        as_of: datetime | str | None = None,
        offset: int = 0,
        limit: int | None = None,
        filter: str | None = None,
    ) -> list[Example]:
        """``filter``: LangSmith's filter language on examples (``_example_filter``), applied
        to the examples the other arguments select, before ``offset``/``limit``."""
        keep, prefilter = None, None
        if filter is not None:
            from ._example_filter import compile_example_filter, metadata_prefilter

            keep = compile_example_filter(filter)  # a bad filter fails before any read
            prefilter = metadata_prefilter(filter)
        with self.store.read() as conn:
            ds_id = None
            if dataset_id is not None or dataset_name is not None:
                ds_id = self.store.datasets._resolve(conn, dataset_id, dataset_name)
            elif example_ids is None:
                raise InvalidInputError("give dataset_id, dataset_name or example_ids")
            as_of_us = None
            if as_of is not None and ds_id is not None:
                as_of_us = self.store.datasets._as_of_us(conn, ds_id, as_of)
            ids = [str(as_uuid(i, "example id")) for i in example_ids] if example_ids else None
            if ids is not None and ds_id is None:
                ids = self._tenant_ids(conn, ids)
            if keep is None:
                return self._select(
                    conn, ds_id, as_of_us=as_of_us, example_ids=ids, splits=splits,
                    metadata=metadata, offset=offset, limit=limit,
                )
            found = [e for e in self._select(
                conn, ds_id, as_of_us=as_of_us, example_ids=ids, splits=splits,
                metadata=metadata, prefilter=prefilter) if keep(e)]
        start = max(offset, 0)
        return found[start:] if limit is None else found[start:start + max(limit, 0)]

    def _tenant_ids(self, conn: Connection, ids: builtins.list[str]) -> builtins.list[str]:
        q = (
            select(examples.c.id)
            .join(datasets, datasets.c.id == examples.c.dataset_id)
            .where(examples.c.id.in_(ids), datasets.c.tenant_id == self.store.tenant_id)
        )
        return list(set(conn.execute(q).scalars()))

    def read(self, example_id: uuid.UUID | str, *, as_of: datetime | str | None = None) -> Example:
        ex_id = str(as_uuid(example_id, "example_id"))
        with self.store.read() as conn:
            if not self._tenant_ids(conn, [ex_id]):
                raise NotFoundError(f"example {ex_id} not found")
            ds_id = conn.execute(
                select(examples.c.dataset_id).where(examples.c.id == ex_id).limit(1)
            ).scalar_one()  # there: checked above, in the same transaction
            as_of_us = self.store.datasets._as_of_us(conn, ds_id, as_of) if as_of else None
            found = self._select(conn, ds_id, as_of_us=as_of_us, example_ids=[ex_id])
        if not found:
            raise NotFoundError(f"example {ex_id} not found" + (f" as of {as_of}" if as_of else ""))
        return found[0]

    def update_many(self, updates: Sequence[Mapping[str, Any]]) -> builtins.list[Example]:
        """Each update is ``{"id": ..., and any of inputs/outputs/metadata/split}``; atomic."""
        if not updates:
            return []
        with self.store.write() as conn:
            changed: list[str] = []
            checks: dict[str, Any] = {}
            for i, upd in enumerate(updates):
                if not isinstance(upd, Mapping) or "id" not in upd:
                    raise ExampleValidationError(i, "an update needs the example 'id'")
                ex_id = str(as_uuid(upd["id"], "example id"))
                if not self._tenant_ids(conn, [ex_id]):
                    raise ExampleValidationError(i, f"example {ex_id} not found")
                cur = conn.execute(
                    select(examples).where(examples.c.id == ex_id, examples.c.valid_to.is_(None))
                ).first()
                if cur is None:
                    raise ExampleValidationError(i, f"example {ex_id} was deleted")
                merged = {
                    "id": ex_id,
                    "inputs": upd.get("inputs", cur.inputs),
                    "outputs": upd.get("outputs", cur.outputs),
                    "metadata": upd.get("metadata", cur.metadata),
                    "split": upd.get("split", upd.get("splits", cur.splits)),
                    "source_run_id": cur.source_run_id,
                }
                row = normalize_example(merged, i)
                if cur.dataset_id not in checks:  # the dataset's inputs/outputs_schema
                    checks[cur.dataset_id] = self.store.datasets.schema_check(conn, cur.dataset_id)
                checks[cur.dataset_id].example(i, ex_id, row["inputs"], row["outputs"])
                now = now_us(conn, cur.dataset_id)
                conn.execute(
                    update(examples).where(examples.c.row_id == cur.row_id).values(valid_to=now)
                )
                row.update(dataset_id=cur.dataset_id, created_at=cur.created_at, modified_at=now)
                inserted = conn.execute(examples.insert().values(**row)).inserted_primary_key
                assert inserted is not None  # a single-row insert has its key
                new_row = inserted[0]
                AttachmentRepo.copy_example(conn, cur.row_id, new_row)  # kept unless changed
                conn.execute(
                    update(datasets).where(datasets.c.id == cur.dataset_id).values(modified_at=now)
                )
                changed.append(ex_id)
            out = self._select(conn, None, example_ids=changed)
        order = {x: i for i, x in enumerate(changed)}
        return sorted(out, key=lambda e: order[str(e.id)])

    def delete_many(self, example_ids: Sequence[uuid.UUID | str]) -> int:
        ids = [str(as_uuid(i, "example id")) for i in example_ids]
        with self.store.write() as conn:
            owned: set[str] = set(self._tenant_ids(conn, ids))
            missing = [i for i in ids if i not in owned]
            if missing:
                raise NotFoundError(f"example(s) not found: {', '.join(missing)}")
            rows = conn.execute(
                select(examples.c.row_id, examples.c.dataset_id).where(
                    examples.c.id.in_(ids), examples.c.valid_to.is_(None)
                )
            ).all()
            for ds_id in {r.dataset_id for r in rows}:
                now = now_us(conn, ds_id)
                conn.execute(
                    update(examples)
                    .where(examples.c.row_id.in_([r.row_id for r in rows if r.dataset_id == ds_id]))
                    .values(valid_to=now)
                )
                conn.execute(update(datasets).where(datasets.c.id == ds_id).values(modified_at=now))
        return len(rows)

    def splits(self, *, dataset_id: uuid.UUID | str | None = None,
               dataset_name: str | None = None,
               as_of: datetime | str | None = None) -> builtins.list[str]:
        """The names of the splits a dataset's examples are in (at ``as_of``), sorted."""
        found = self.list(dataset_id=dataset_id, dataset_name=dataset_name, as_of=as_of)
        return sorted({name for ex in found for name in ex.split or ()})

    def update_splits(self, split_name: str, example_ids: Sequence[uuid.UUID | str], *,
                      dataset_id: uuid.UUID | str | None = None,
                      dataset_name: str | None = None,
                      remove: bool = False) -> builtins.list[Example]:
        """Put examples of one dataset in split ``split_name`` (or take them out): a new
        version of each example whose splits change, in one transaction. An example left in no
        split is in ``base``, as a new one is."""
        if not isinstance(split_name, str) or not split_name.strip():
            raise InvalidInputError("split_name must be a non-empty string")
        ids = list(dict.fromkeys(str(as_uuid(i, "example id")) for i in example_ids))
        with self.store.transaction():
            current = {str(e.id): e for e in self.list(
                dataset_id=dataset_id, dataset_name=dataset_name, example_ids=ids)} if ids else {}
            missing = [i for i in ids if i not in current]
            if missing:
                raise NotFoundError(f"example(s) not in the dataset: {', '.join(missing)}")
            updates = []
            for ex_id in ids:
                now = list(current[ex_id].split or ())
                new = ([s for s in now if s != split_name] if remove
                       else now + ([split_name] if split_name not in now else []))
                if new != now:
                    updates.append({"id": ex_id, "split": new or ["base"]})
            return self.update_many(updates)

    def count(self, dataset_id: uuid.UUID | str, *, as_of: datetime | str | None = None) -> int:
        return len(self.list(dataset_id=dataset_id, as_of=as_of))

def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
