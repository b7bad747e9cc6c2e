"""Datasets, their versions and version tags.

A dataset's version is the time of its last change (examples live in ``_examples.py``, versioned
as rows), so ``as_of`` any past time or tag returns exactly what the dataset held then.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError

from .._ids import as_uuid, new_id_text, utcnow
from ..errors import ConflictError, InvalidInputError, NotFoundError
from ..schemas import Dataset, DatasetVersion
from ._dataset_schemas import SchemaCheck, check_schema
from ._tables import dataset_tags, datasets, examples, sessions, shares
from ._types import from_micros, to_micros

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["DatasetRepo"]

# every experiment resolves its dataset before its first example: SQL, not Core statements
# whose first compile in the process would cost a good part of a millisecond there
_BY_ID_SQL = text("SELECT id FROM datasets WHERE tenant_id = :t AND id = :id")
_BY_NAME_SQL = text("SELECT id FROM datasets WHERE tenant_id = :t AND name = :n")


def _dataset_model(row: Any, counts: Mapping[str, Any] | None = None) -> Dataset:
    counts = counts or {}
    return Dataset(
        id=row.id,
        name=row.name,
        description=row.description,
        data_type=row.data_type,
        created_at=row.created_at,
        modified_at=row.modified_at,
        tenant_id=row.tenant_id,
        metadata=row.metadata,
        inputs_schema_definition=row.inputs_schema,
        outputs_schema_definition=row.outputs_schema,
        example_count=counts.get("example_count"),
        session_count=counts.get("session_count"),
        last_session_start_time=counts.get("last_session_start_time"),
    )

class DatasetRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def _tenant(self) -> Any:
        return datasets.c.tenant_id == self.store.tenant_id

    def create(
        self,
        name: str,
        *,
        description: str | None = None,
        data_type: str = "kv",
        metadata: Mapping[str, Any] | None = None,
        inputs_schema: Mapping[str, Any] | None = None,
        outputs_schema: Mapping[str, Any] | None = None,
        id: uuid.UUID | str | None = None,
    ) -> Dataset:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("dataset name must be a non-empty string")
        inputs_schema = check_schema(inputs_schema, "inputs_schema")
        outputs_schema = check_schema(outputs_schema, "outputs_schema")
        now = utcnow()
        row: dict[str, Any] = {
            "id": str(as_uuid(id, "dataset id")) if id else new_id_text(),
            "tenant_id": self.store.tenant_id,
            "name": name,
            "description": description,
            "data_type": data_type or "kv",
            "metadata": dict(metadata) if metadata else None,
            "inputs_schema": dict(inputs_schema) if inputs_schema else None,
            "outputs_schema": dict(outputs_schema) if outputs_schema else None,
            "created_at": now,
            "modified_at": now,
        }
        try:
            with self.store.write() as conn:
                if conn.execute(
                    select(datasets.c.id).where(self._tenant, datasets.c.name == name)
                ).first():
                    raise ConflictError(f"a dataset named {name!r} already exists")
                conn.execute(datasets.insert().values(**row))
        except IntegrityError as exc:  # lost a race with another writer
            raise ConflictError(f"a dataset named {name!r} already exists") from exc
        return self.read(dataset_id=row["id"])

    def resolve_id(
        self, dataset_id: uuid.UUID | str | None = None, dataset_name: str | None = None
    ) -> str:
        with self.store.read() as conn:
            return self._resolve(conn, dataset_id, dataset_name)

    def _resolve(
        self, conn: Connection, dataset_id: uuid.UUID | str | None, dataset_name: str | None
    ) -> str:
        tenant = self.store.tenant_id
        if dataset_id is not None:
            ds_id = str(as_uuid(dataset_id, "dataset_id"))
            found: str | None = conn.execute(_BY_ID_SQL, {"t": tenant, "id": ds_id}).scalar()
            if found is None:
                raise NotFoundError(f"dataset {ds_id} not found")
            return found
        if dataset_name is not None:
            by_name: str | None = conn.execute(_BY_NAME_SQL,
                                               {"t": tenant, "n": dataset_name}).scalar()
            if by_name is None:
                raise NotFoundError(f"dataset {dataset_name!r} not found")
            return by_name
        raise InvalidInputError("give dataset_id or dataset_name")

    def _counts(self, conn: Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {i: {"example_count": 0, "session_count": 0} for i in ids}
        if not ids:
            return out
        for ds_id, n in conn.execute(
            select(examples.c.dataset_id, func.count())
            .where(examples.c.dataset_id.in_(ids), examples.c.valid_to.is_(None))
            .group_by(examples.c.dataset_id)
        ):
            out[ds_id]["example_count"] = n
        for ds_id, n, last in conn.execute(
            select(sessions.c.reference_dataset_id, func.count(), func.max(sessions.c.start_time))
            .where(sessions.c.reference_dataset_id.in_(ids))
            .group_by(sessions.c.reference_dataset_id)
        ):
            out[ds_id]["session_count"] = n
            out[ds_id]["last_session_start_time"] = from_micros(last)
        return out

    def read(
        self, *, dataset_id: uuid.UUID | str | None = None, dataset_name: str | None = None
    ) -> Dataset:
        with self.store.read() as conn:
            ds_id = self._resolve(conn, dataset_id, dataset_name)
            row = conn.execute(select(datasets).where(datasets.c.id == ds_id)).one()
            return _dataset_model(row, self._counts(conn, [ds_id])[ds_id])

    def list(
        self,
        *,
        dataset_ids: Sequence[uuid.UUID | str] | None = None,
        dataset_name: str | None = None,
        dataset_name_contains: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Dataset]:
        q = select(datasets).where(self._tenant)
        if dataset_ids is not None:
            q = q.where(datasets.c.id.in_([str(as_uuid(i, "dataset id")) for i in dataset_ids]))
        if dataset_name is not None:
            q = q.where(datasets.c.name == dataset_name)
        if dataset_name_contains:
            q = q.where(datasets.c.name.contains(dataset_name_contains, autoescape=True))
        q = q.order_by(datasets.c.created_at.desc(), datasets.c.id).offset(max(offset, 0))
        if limit is not None:
            q = q.limit(limit)
        with self.store.read() as conn:
            rows = conn.execute(q).all()
            counts = self._counts(conn, [r.id for r in rows])
        out = [_dataset_model(r, counts[r.id]) for r in rows]
        if metadata:
            out = [d for d in out if _matches(d.metadata, metadata)]
        return out

    def update(
        self,
        dataset_id: uuid.UUID | str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        inputs_schema: Mapping[str, Any] | None = None,
        outputs_schema: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """Change what is given. A new schema must hold for the dataset's current examples
        (the first that breaks it is named, and nothing changes)."""
        values: dict[str, Any] = {}
        if inputs_schema is not None:
            values["inputs_schema"] = check_schema(inputs_schema, "inputs_schema")
        if outputs_schema is not None:
            values["outputs_schema"] = check_schema(outputs_schema, "outputs_schema")
        if name is not None:
            if not name.strip():
                raise InvalidInputError("dataset name must be a non-empty string")
            values["name"] = name
        if description is not None:
            values["description"] = description
        if metadata is not None:
            values["metadata"] = dict(metadata)
        try:
            with self.store.write() as conn:
                ds_id = self._resolve(conn, dataset_id, None)
                if name is not None and conn.execute(
                    select(datasets.c.id).where(
                        self._tenant, datasets.c.name == name, datasets.c.id != ds_id
                    )
                ).first():
                    raise ConflictError(f"a dataset named {name!r} already exists")
                if "inputs_schema" in values or "outputs_schema" in values:
                    self._check_current(conn, ds_id, values)
                if values:
                    conn.execute(update(datasets).where(datasets.c.id == ds_id).values(**values))
        except IntegrityError as exc:
            raise ConflictError(f"a dataset named {name!r} already exists") from exc
        return self.read(dataset_id=ds_id)

    def schema_check(self, conn: Connection, ds_id: str) -> SchemaCheck:
        """The dataset's schemas, ready to validate the examples a write brings."""
        row = conn.execute(select(datasets.c.inputs_schema, datasets.c.outputs_schema)
                           .where(datasets.c.id == ds_id)).first()
        return SchemaCheck(row.inputs_schema if row else None, row.outputs_schema if row else None)

    def _check_current(self, conn: Connection, ds_id: str, values: Mapping[str, Any]) -> None:
        current = self.schema_check(conn, ds_id)
        check = SchemaCheck(values.get("inputs_schema", current._schemas.get("inputs")),
                            values.get("outputs_schema", current._schemas.get("outputs")))
        rows = conn.execute(select(examples.c.id, examples.c.inputs, examples.c.outputs).where(
            examples.c.dataset_id == ds_id, examples.c.valid_to.is_(None)))
        for ex_id, inputs, outputs in rows:
            check.example(None, ex_id, inputs, outputs)

    def delete(
        self, *, dataset_id: uuid.UUID | str | None = None, dataset_name: str | None = None
    ) -> None:
        with self.store.write() as conn:
            ds_id = self._resolve(conn, dataset_id, dataset_name)
            self.store.attachments.forget_dataset(conn, ds_id)  # and blobs nothing else uses
            self.store.comparative.forget_dataset(conn, ds_id)  # and their pairwise feedback
            # explicit, so it works even where a driver ignores ON DELETE CASCADE
            conn.execute(examples.delete().where(examples.c.dataset_id == ds_id))
            conn.execute(dataset_tags.delete().where(dataset_tags.c.dataset_id == ds_id))
            conn.execute(shares.delete().where(  # its shared link opens nothing
                shares.c.tenant_id == self.store.tenant_id, shares.c.kind == "dataset",
                shares.c.target_id == str(ds_id)))
            conn.execute(datasets.delete().where(datasets.c.id == ds_id))

    # -- versions ---------------------------------------------------------------------------
    def version(self, dataset_id: uuid.UUID | str,
                as_of: datetime | str | None = None) -> DatasetVersion:
        """The dataset's version (time of its last change) at ``as_of`` (default: now)."""
        with self.store.read() as conn:
            ds_id = self._resolve(conn, dataset_id, None)
            at = self._version_at(conn, ds_id, as_of)
            tags = conn.execute(
                select(dataset_tags.c.tag).where(
                    dataset_tags.c.dataset_id == ds_id, dataset_tags.c.as_of == at
                )
            ).scalars().all()
        return DatasetVersion(as_of=at, tags=sorted(tags))

    def _version_at(self, conn: Connection, ds_id: str, as_of: datetime | str | None) -> datetime:
        """The time of the dataset's last change at ``as_of``: one statement (it runs before
        every experiment's first example)."""
        bound = self._as_of_us(conn, ds_id, as_of)
        in_ds = examples.c.dataset_id == ds_id
        latest = select(func.max(examples.c.modified_at)).where(
            in_ds, examples.c.modified_at <= bound).scalar_subquery()
        closed = select(func.max(examples.c.valid_to)).where(
            in_ds, examples.c.valid_to <= bound).scalar_subquery()
        row = conn.execute(
            select(latest, closed, datasets.c.created_at).where(datasets.c.id == ds_id)
        ).one()
        latest_change: datetime = max(t for t in row if t is not None)
        return latest_change

    def tag(self, dataset_id: uuid.UUID | str, tag: str,
            as_of: datetime | str | None = None) -> DatasetVersion:
        """Name a version (default: the current one); moving a tag re-points it."""
        if not tag or not isinstance(tag, str):
            raise InvalidInputError("a version tag must be a non-empty string")
        version = self.version(dataset_id, as_of)
        ds_id = self.resolve_id(dataset_id)
        with self.store.write() as conn:
            conn.execute(
                dataset_tags.delete().where(
                    dataset_tags.c.dataset_id == ds_id, dataset_tags.c.tag == tag
                )
            )
            conn.execute(dataset_tags.insert().values(dataset_id=ds_id, tag=tag,
                                                      as_of=version.as_of))
        return self.version(ds_id, version.as_of)

    def list_versions(self, dataset_id: uuid.UUID | str) -> builtins.list[DatasetVersion]:
        """Every version the dataset had, newest first, with their tags."""
        with self.store.read() as conn:
            ds_id = self._resolve(conn, dataset_id, None)
            times = set(
                conn.execute(
                    select(examples.c.modified_at).where(examples.c.dataset_id == ds_id)
                ).scalars()
            ) | set(
                conn.execute(
                    select(examples.c.valid_to).where(
                        examples.c.dataset_id == ds_id, examples.c.valid_to.is_not(None)
                    )
                ).scalars()
            )
            tags: dict[Any, list[str]] = {}
            for tag, at in conn.execute(
                select(dataset_tags.c.tag, dataset_tags.c.as_of).where(
                    dataset_tags.c.dataset_id == ds_id
                )
            ):
                tags.setdefault(at, []).append(tag)
                times.add(at)
        return [DatasetVersion(as_of=t, tags=sorted(tags.get(t, [])))
                for t in sorted(times, reverse=True)]

    def _as_of_us(self, conn: Connection, ds_id: str, as_of: datetime | str | None) -> int:
        if as_of is None or as_of == "latest":
            return 2**62
        if isinstance(as_of, datetime):
            return to_micros(as_of) or 0
        if isinstance(as_of, str):
            at = conn.execute(
                select(dataset_tags.c.as_of).where(
                    dataset_tags.c.dataset_id == ds_id, dataset_tags.c.tag == as_of
                )
            ).scalar()
            if at is not None:
                return to_micros(at) or 0
            try:
                return to_micros(as_of) or 0
            except ValueError:
                raise NotFoundError(f"dataset version tag {as_of!r} not found") from None
        raise InvalidInputError(f"as_of must be a datetime or a version tag, got {as_of!r}")

    def diff_versions(self, dataset_id: uuid.UUID | str, from_version: datetime | str,
                      to_version: datetime | str) -> dict[str, builtins.list[str]]:
        """Examples added, modified and removed between two versions (times or tags), as
        LangSmith's ``diff_dataset_versions`` answers: ids, each list sorted."""
        with self.store.read() as conn:
            ds_id = self._resolve(conn, dataset_id, None)
            rows = {}
            for side, version in (("from", from_version), ("to", to_version)):
                at = self._as_of_us(conn, ds_id, version)
                rows[side] = dict(conn.execute(
                    select(examples.c.id, examples.c.row_id).where(
                        examples.c.dataset_id == ds_id, examples.c.modified_at <= at,
                        (examples.c.valid_to.is_(None)) | (examples.c.valid_to > at))).all())
        old, new = rows["from"], rows["to"]
        return {"examples_added": sorted(set(new) - set(old)),
                "examples_removed": sorted(set(old) - set(new)),
                "examples_modified": sorted(i for i in set(old) & set(new) if old[i] != new[i])}


def _matches(meta: Mapping[str, Any] | None, want: Mapping[str, Any]) -> bool:
    meta = meta or {}
    return all(meta.get(k) == v for k, v in want.items())
