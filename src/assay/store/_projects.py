"""Projects (LangSmith "sessions"); an experiment is a project tied to a dataset."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, func, select, text, update
from sqlalchemy.exc import IntegrityError

from .._ids import as_uuid, new_id_text, utcnow
from ..errors import ConflictError, InvalidInputError, NotFoundError
from ..schemas import TracerSession, TracerSessionResult
from ._aggregates import FEEDBACK_RETURNING, FeedbackDeltas, drop_session
from ._bulk import insert_many
from ._driver import marked
from ._tables import feedback, runs, sessions, shares
from ._types import from_micros, to_micros

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["ProjectRepo"]

# an experiment's last write, after its last example: SQL, not a Core statement whose first
# compile in the process would add most of a millisecond to its end
_END_SQL = text("UPDATE sessions SET end_time = :e WHERE tenant_id = :t AND id = :id")


def _model(row: Any) -> TracerSession:
    return TracerSession(
        id=row.id,
        name=row.name,
        description=row.description,
        start_time=row.start_time,
        end_time=row.end_time,
        extra=row.extra,
        reference_dataset_id=row.reference_dataset_id,
        default_dataset_id=row.default_dataset_id,
        tenant_id=row.tenant_id,
        trace_tier=row.trace_tier,
    )


# the fold's look-up of a batch's project, built once (made anew, its expression cost more
# than the query)
_ID_BY_NAME = select(sessions.c.id).where(sessions.c.tenant_id == bindparam("tenant"),
                                          sessions.c.name == bindparam("name"))
# to the driver as SQL text (``marked``): Core statements each process's first store compiled
_WORKSPACE_OF = "SELECT tenant_id FROM sessions WHERE id = ?"
_CLASHES = "SELECT id, name, tenant_id FROM sessions WHERE (tenant_id = ? AND name = ?) OR id = ?"


def _workspace_of(conn: Connection, sid: str) -> str | None:
    """The workspace of the project ``sid``, or None when there is no such project."""
    found: str | None = conn.exec_driver_sql(marked(conn, _WORKSPACE_OF), (sid,)).scalar()
    return found


class ProjectRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def _tenant(self) -> Any:
        return sessions.c.tenant_id == self.store.tenant_id

    def create(
        self,
        name: str,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        reference_dataset_id: uuid.UUID | str | None = None,
        id: uuid.UUID | str | None = None,
        start_time: datetime | None = None,
        end_time: datetime | None = None,
        upsert: bool = False,
    ) -> TracerSession:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("project name must be a non-empty string")
        extra_d = dict(extra or {})
        if metadata is not None:
            extra_d["metadata"] = {**(extra_d.get("metadata") or {}), **dict(metadata)}
        row: dict[str, Any] = {
            "id": str(as_uuid(id, "project id")) if id else new_id_text(),
            "tenant_id": self.store.tenant_id,
            "name": name,
            "description": description,
            "start_time": start_time or utcnow(),
            "end_time": end_time,
            "extra": extra_d or None,
            "reference_dataset_id": (
                str(as_uuid(reference_dataset_id, "reference_dataset_id"))
                if reference_dataset_id else None
            ),
        }
        # a project named only by journaled runs exists once they are folded: a clash with it
        # must be seen
        self.store.settle()
        try:
            with self.store.write() as conn:
                if row["reference_dataset_id"]:
                    self.store.datasets._resolve(conn, row["reference_dataset_id"], None)
                # one look for both clashes: this workspace's project of that name, any
                # workspace's project of that id
                found = conn.exec_driver_sql(marked(conn, _CLASHES),
                                             (self.store.tenant_id, name, row["id"])).all()
                for found_id, found_name, tenant in found:
                    if found_name == name and tenant == self.store.tenant_id:
                        if upsert:
                            return self.read(project_id=found_id, settle=False)
                        raise ConflictError(f"a project named {name!r} already exists")
                if found:
                    raise ConflictError(f"a project with id {row['id']} already exists")
                insert_many(conn, sessions, [row])
        except IntegrityError as exc:
            raise ConflictError(f"a project named {name!r} already exists") from exc
        # what read() would give, without reading it back (times as the column stores them)
        return _model(SimpleNamespace(**{
            **row, "default_dataset_id": None, "trace_tier": None,
            "start_time": from_micros(to_micros(row["start_time"])),
            "end_time": from_micros(to_micros(row["end_time"]))}))

    def _resolve(self, conn: Connection, project_id: Any, project_name: str | None) -> Any:
        if project_id is not None:
            pid = str(as_uuid(project_id, "project_id"))
            row = conn.execute(select(sessions).where(self._tenant, sessions.c.id == pid)).first()
            if row is None:
                raise NotFoundError(f"project {pid} not found")
            return row
        if project_name is not None:
            row = conn.execute(
                select(sessions).where(self._tenant, sessions.c.name == project_name)
            ).first()
            if row is None:
                raise NotFoundError(f"project {project_name!r} not found")
            return row
        raise InvalidInputError("give project_id or project_name")

    def _get_or_create(self, conn: Connection, name: str) -> str:
        """Inside a write transaction: the id of the project named ``name``, created if new."""
        found = self._existing(conn, ("name", name))
        if found is not None:
            return found
        sid = new_id_text()
        conn.execute(sessions.insert().values(
            id=sid, tenant_id=self.store.tenant_id, name=name, start_time=utcnow()))
        return sid

    def _existing(self, conn: Connection, key: tuple[str, str]) -> str | None:
        """The id of the project ``key`` names (``("id", id)`` or ``("name", name)``) when it
        exists in this workspace, else None (``_ensure_id`` and ``_get_or_create`` would write,
        or refuse an id of another workspace: a write transaction then decides)."""
        if key[0] == "id":
            return key[1] if _workspace_of(conn, key[1]) == self.store.tenant_id else None
        found_id: str | None = conn.execute(
            _ID_BY_NAME, {"tenant": self.store.tenant_id, "name": key[1]}).scalar()
        return found_id

    def _ensure_id(self, conn: Connection, sid: str, name: str | None) -> None:
        found = _workspace_of(conn, sid)
        if found is None:
            conn.execute(sessions.insert().values(
                id=sid, tenant_id=self.store.tenant_id, name=name or f"project-{sid[:8]}",
                start_time=utcnow()))
        elif found != self.store.tenant_id:
            raise NotFoundError(f"project {sid} not found")

    def read(
        self,
        *,
        project_id: uuid.UUID | str | None = None,
        project_name: str | None = None,
        include_stats: bool = False,
        settle: bool = True,
    ) -> TracerSession:
        if settle:  # journaled runs may create projects and change statistics
            self.store.settle()
        with self.store.read() as conn:
            row = self._resolve(conn, project_id, project_name)
            if not include_stats:
                return _model(row)
            from ._stats import session_stats

            data = _model(row).model_dump()
            data.update(session_stats(conn, row))
            return TracerSessionResult.model_validate(data)

    def list(
        self,
        *,
        project_ids: Sequence[uuid.UUID | str] | None = None,
        name: str | None = None,
        name_contains: str | None = None,
        reference_dataset_id: uuid.UUID | str | None = None,
        reference_dataset_name: str | None = None,
        reference_free: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
        include_stats: bool = False,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[TracerSession]:
        self.store.settle()
        q = select(sessions).where(self._tenant)
        if project_ids is not None:
            q = q.where(sessions.c.id.in_([str(as_uuid(p, "project id")) for p in project_ids]))
        if name is not None:
            q = q.where(sessions.c.name == name)
        if name_contains:
            q = q.where(sessions.c.name.contains(name_contains, autoescape=True))
        with self.store.read() as conn:
            if reference_dataset_name is not None:
                reference_dataset_id = self.store.datasets._resolve(
                    conn, None, reference_dataset_name)
            if reference_dataset_id is not None:
                q = q.where(sessions.c.reference_dataset_id == str(
                    as_uuid(reference_dataset_id, "reference_dataset_id")))
            if reference_free is True:
                q = q.where(sessions.c.reference_dataset_id.is_(None))
            elif reference_free is False:
                q = q.where(sessions.c.reference_dataset_id.is_not(None))
            q = q.order_by(sessions.c.start_time.desc(),
                           sessions.c.id.desc()).offset(max(offset, 0))
            if limit is not None:
                q = q.limit(limit)
            rows = conn.execute(q).all()
            if metadata:
                rows = [r for r in rows if all(
                    ((r.extra or {}).get("metadata") or {}).get(k) == v
                    for k, v in metadata.items())]
            if not include_stats:
                return [_model(r) for r in rows]
            from ._stats import session_stats

            out: list[TracerSession] = []
            for r in rows:
                data = _model(r).model_dump()
                data.update(session_stats(conn, r))
                out.append(TracerSessionResult.model_validate(data))
            return out

    def update(
        self,
        project_id: uuid.UUID | str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        end_time: datetime | None = None,
    ) -> TracerSession:
        """Change the given fields; ``None`` means unchanged (as LangSmith's PATCH)."""
        with self.store.write() as conn:
            row = self._resolve(conn, project_id, None)
            values: dict[str, Any] = {}
            if name is not None:
                if conn.execute(select(sessions.c.id).where(
                        self._tenant, sessions.c.name == name, sessions.c.id != row.id)).first():
                    raise ConflictError(f"a project named {name!r} already exists")
                values["name"] = name
            if description is not None:
                values["description"] = description
            if end_time is not None:
                values["end_time"] = end_time
            if extra is not None or metadata is not None:
                new_extra = dict(row.extra or {})
                if extra is not None:
                    new_extra.update(dict(extra))
                if metadata is not None:
                    new_extra["metadata"] = dict(metadata)
                values["extra"] = new_extra
            if values:
                conn.execute(update(sessions).where(sessions.c.id == row.id).values(**values))
        # no settle: closing an experiment must not pay for indexing its journaled runs
        return self.read(project_id=row.id, settle=False)

    def end(self, project_id: uuid.UUID | str, end_time: datetime) -> None:
        """Set the end time: one statement, nothing read back (an experiment's last write)."""
        pid = str(as_uuid(project_id, "project_id"))
        with self.store.write() as conn:
            done = conn.execute(_END_SQL, {"e": to_micros(end_time), "t": self.store.tenant_id,
                                           "id": pid})
            if done.rowcount == 0:
                raise NotFoundError(f"project {pid} not found")

    def delete(
        self, *, project_id: uuid.UUID | str | None = None, project_name: str | None = None
    ) -> None:
        """Delete the project with its runs and feedback."""
        self.store.settle()  # else a journaled run would bring the project back
        with self.store.write() as conn:
            row = self._resolve(conn, project_id, project_name)
            run_ids = select(runs.c.id).where(runs.c.session_id == row.id).scalar_subquery()
            mine = feedback.c.tenant_id == self.store.tenant_id  # never another workspace's rows
            # feedback on this project's runs that was filed under another project: that
            # project's aggregates lose it; everything else summed here goes with drop_session
            elsewhere = FeedbackDeltas()
            elsewhere.add_rows(conn.execute(feedback.delete().where(
                mine, feedback.c.run_id.in_(run_ids), feedback.c.session_id != row.id,
            ).returning(*FEEDBACK_RETURNING)), -1)
            conn.execute(feedback.delete().where(mine, feedback.c.run_id.in_(run_ids)))
            conn.execute(feedback.delete().where(mine, feedback.c.session_id == row.id))
            from ._attachments import forget_runs  # the runs' attachment files go too
            forget_runs(conn, self.store.tenant_id, run_ids)
            conn.execute(runs.delete().where(runs.c.session_id == row.id))
            conn.execute(shares.delete().where(shares.c.tenant_id == self.store.tenant_id,
                                               shares.c.session_id == row.id))
            conn.execute(sessions.delete().where(sessions.c.id == row.id))
            drop_session(conn, row.id, self.store.tenant_id)
            elsewhere.apply(conn)

    def count_for_dataset(self, conn: Connection, dataset_id: str) -> int:
        return conn.execute(
            select(func.count()).where(sessions.c.reference_dataset_id == dataset_id)
        ).scalar() or 0


