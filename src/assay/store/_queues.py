"""Annotation queues: runs put aside for people to review against a rubric.

LangSmith's ``/annotation-queues``. A queue has a name, a description and a rubric (its
instructions and items, each naming a feedback key whose config, from ``_feedback_configs``,
says how its values read). Runs are added by id (the workspace's own runs only), read back in
the order they were added, marked done when reviewed, or removed. The review page of the web
UI reads the same repository: ``next_run`` is what a reviewer sees next (None when the queue
is done), ``read`` gives the rubric with each key's feedback config, the reviewer's scores are
ordinary feedback (``store.feedback.create``), and ``mark_done`` moves the run to
``completed``. ``size`` counts what is left. The generated client's "items" are the same rows
seen by their queue-run id (``list_items``, ``add_items``, ``remove_items``, ``set_status``).
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import delete, func, or_, select, update

from .._ids import as_uuid, new_id_text, utcnow
from .._json import jsonable
from ..errors import InvalidInputError, NotFoundError
from ..schemas import Run
from ._tables import annotation_queue_runs, annotation_queues, feedback_configs, runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["STATUSES", "AnnotationQueueRecord", "QueueRepo", "QueuedRun"]

# LangSmith's review states; assay has one reviewer per workspace, so "needs_others_review"
# is always empty.
STATUSES = ("needs_my_review", "needs_others_review", "completed")
_RUBRIC_FIELDS = frozenset((
    "feedback_key", "description", "value_descriptions", "score_descriptions", "is_required",
    "required_if", "visible_if", "is_assertion", "regex_validator", "feedback_config_id",
    "feedback_config"))


class AnnotationQueueRecord(BaseModel):
    """A queue, shaped as LangSmith's ``AnnotationQueueWithDetails``."""

    id: uuid.UUID
    name: str
    description: str | None = None
    created_at: datetime
    updated_at: datetime
    tenant_id: uuid.UUID
    queue_type: str = "single"
    rubric_instructions: str | None = None
    rubric_items: list[dict[str, Any]] | None = None


class QueuedRun(Run):
    """A run in a queue (LangSmith's ``RunWithAnnotationQueueInfo``)."""

    queue_run_id: uuid.UUID
    added_at: datetime
    last_reviewed_time: datetime | None = None
    completed_at: datetime | None = None  # when it was marked reviewed (None: to review)


def _rubric(items: Any) -> builtins.list[dict[str, Any]] | None:
    """Rubric items as stored: checked, the read-only ``feedback_config`` dropped."""
    if items is None:
        return None
    if not isinstance(items, (list, tuple)):
        raise InvalidInputError("rubric_items must be a list of objects with a feedback_key")
    out, keys = [], set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInputError(f"rubric_items[{i}] must be an object")
        key = item.get("feedback_key")
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"rubric_items[{i}].feedback_key must be a non-empty string")
        if key in keys:
            raise InvalidInputError(f"rubric_items[{i}]: feedback_key {key!r} appears twice")
        keys.add(key)
        unknown = sorted(set(item) - _RUBRIC_FIELDS)
        if unknown:
            raise InvalidInputError(f"rubric_items[{i}]: unknown field(s) {unknown}")
        out.append(jsonable({k: v for k, v in item.items() if k != "feedback_config"}))
    return out


class QueueRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def _tenant(self) -> Any:
        return annotation_queues.c.tenant_id == self.store.tenant_id

    # -- queues -----------------------------------------------------------------------------
    def create(self, name: str, *, description: str | None = None,
               rubric_instructions: str | None = None,
               rubric_items: Sequence[Mapping[str, Any]] | None = None,
               id: uuid.UUID | str | None = None) -> AnnotationQueueRecord:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("an annotation queue needs a non-empty name")
        now = utcnow()
        row = {"id": str(as_uuid(id, "queue id")) if id else new_id_text(),
               "tenant_id": self.store.tenant_id, "name": name, "description": description,
               "rubric_instructions": rubric_instructions,
               "rubric_items": _rubric(rubric_items),
               "created_at": now, "updated_at": now}
        with self.store.write() as conn:
            conn.execute(annotation_queues.insert().values(**row))
        return self.read(str(row["id"]))

    def _row(self, conn: Connection, queue_id: uuid.UUID | str) -> Any:
        qid = str(as_uuid(queue_id, "queue_id"))
        row = conn.execute(select(annotation_queues).where(
            self._tenant, annotation_queues.c.id == qid)).first()
        if row is None:
            raise NotFoundError(f"annotation queue {qid} not found")
        return row

    def _model(self, conn: Connection, row: Any, details: bool) -> AnnotationQueueRecord:
        items = None
        if details and row.rubric_items:
            keys = [i["feedback_key"] for i in row.rubric_items]
            configs = {r.feedback_key: r for r in conn.execute(select(feedback_configs).where(
                feedback_configs.c.tenant_id == self.store.tenant_id,
                feedback_configs.c.is_deleted.is_(False),
                feedback_configs.c.feedback_key.in_(keys)))}
            items = []
            for item in row.rubric_items:
                cfg = configs.get(item["feedback_key"])
                items.append({**item, "feedback_config": None if cfg is None else {
                    "id": cfg.id, "feedback_key": cfg.feedback_key,
                    "feedback_config": cfg.feedback_config, "tenant_id": cfg.tenant_id,
                    "modified_at": cfg.modified_at.isoformat(),
                    "is_lower_score_better": cfg.is_lower_score_better,
                    "is_enforced": False, "is_first": True, "is_deleted": False}})
        return AnnotationQueueRecord(
            id=row.id, name=row.name, description=row.description, created_at=row.created_at,
            updated_at=row.updated_at, tenant_id=row.tenant_id,
            rubric_instructions=row.rubric_instructions,
            rubric_items=items if details else None)

    def read(self, queue_id: uuid.UUID | str) -> AnnotationQueueRecord:
        """The queue with its rubric, each item with its key's feedback config."""
        with self.store.read() as conn:
            return self._model(conn, self._row(conn, queue_id), details=True)

    def list(self, *, queue_ids: Sequence[uuid.UUID | str] | None = None,
             name: str | None = None, name_contains: str | None = None, offset: int = 0,
             limit: int | None = None) -> builtins.list[AnnotationQueueRecord]:
        q = select(annotation_queues).where(self._tenant)
        if queue_ids is not None:
            q = q.where(annotation_queues.c.id.in_(
                [str(as_uuid(i, "queue id")) for i in queue_ids]))
        if name is not None:
            q = q.where(annotation_queues.c.name == name)
        if name_contains:
            q = q.where(annotation_queues.c.name.contains(name_contains, autoescape=True))
        q = q.order_by(annotation_queues.c.created_at.desc(),
                       annotation_queues.c.id).offset(max(offset, 0))
        if limit is not None:
            q = q.limit(limit)
        with self.store.read() as conn:
            return [self._model(conn, r, details=False) for r in conn.execute(q)]

    def update(self, queue_id: uuid.UUID | str, *, name: str | None = None,
               description: str | None = None, rubric_instructions: str | None = None,
               rubric_items: Sequence[Mapping[str, Any]] | None = None
               ) -> AnnotationQueueRecord:
        """Change what is given; ``rubric_items`` replaces the whole rubric."""
        values: dict[str, Any] = {"updated_at": utcnow()}
        if name is not None:
            if not isinstance(name, str) or not name.strip():
                raise InvalidInputError("an annotation queue needs a non-empty name")
            values["name"] = name
        if description is not None:
            values["description"] = description
        if rubric_instructions is not None:
            values["rubric_instructions"] = rubric_instructions
        if rubric_items is not None:
            values["rubric_items"] = _rubric(rubric_items)
        with self.store.write() as conn:
            row = self._row(conn, queue_id)
            conn.execute(update(annotation_queues).where(annotation_queues.c.id == row.id)
                         .values(**values))
        return self.read(queue_id)

    def delete(self, queue_id: uuid.UUID | str) -> None:
        with self.store.write() as conn:
            row = self._row(conn, queue_id)
            # explicit, so it works where a driver ignores ON DELETE CASCADE
            conn.execute(delete(annotation_queue_runs)
                         .where(annotation_queue_runs.c.queue_id == row.id))
            conn.execute(delete(annotation_queues).where(annotation_queues.c.id == row.id))

    # -- the runs of a queue ----------------------------------------------------------------
    def add_runs(self, queue_id: uuid.UUID | str, run_ids: Sequence[uuid.UUID | str]) -> int:
        """Queue the workspace's runs (all or none); a run already queued stays where it is.
        Returns how many were added."""
        ids = list(dict.fromkeys(str(as_uuid(r, "run id")) for r in run_ids))
        self.store.settle()  # runs the server has journaled but not yet folded
        with self.store.write() as conn:
            row = self._row(conn, queue_id)
            known = set()
            for i in range(0, len(ids), 500):
                known |= set(conn.execute(select(runs.c.id).where(
                    runs.c.id.in_(ids[i:i + 500]), runs.c.tenant_id == self.store.tenant_id,
                    runs.c.status != "orphan")).scalars())
            missing = [r for r in ids if r not in known]
            if missing:
                raise NotFoundError(f"run(s) not found: {', '.join(missing[:10])}"
                                    + (f" and {len(missing) - 10} more" if len(missing) > 10
                                       else ""))
            queued = set(conn.execute(select(annotation_queue_runs.c.run_id).where(
                annotation_queue_runs.c.queue_id == row.id,
                annotation_queue_runs.c.run_id.in_(ids))).scalars()) if ids else set()
            now = utcnow()
            fresh = [{"id": new_id_text(), "queue_id": row.id, "run_id": r, "added_at": now}
                     for r in ids if r not in queued]
            if fresh:
                conn.execute(annotation_queue_runs.insert(), fresh)
                conn.execute(update(annotation_queues).where(annotation_queues.c.id == row.id)
                             .values(updated_at=now))
        return len(fresh)

    # -- the generated client's "items" (a queued run with its queue-run id) ----------------
    def list_items(self, queue_id: uuid.UUID | str, *, status: str | None = None,
                   item_ids: Sequence[uuid.UUID | str] | None = None, offset: int = 0,
                   limit: int | None = None) -> builtins.list[dict[str, Any]]:
        """Queued runs as items (ids, times, the run's project): no run payloads."""
        cond = self._status("completed" if status == "archived" else status)
        with self.store.read() as conn:
            row = self._row(conn, queue_id)
            q = (select(annotation_queue_runs, runs.c.session_id, runs.c.start_time)
                 .join(runs, runs.c.id == annotation_queue_runs.c.run_id, isouter=True)
                 .where(annotation_queue_runs.c.queue_id == row.id))
            if cond is not None:
                q = q.where(cond)
            if item_ids is not None:
                q = q.where(annotation_queue_runs.c.id.in_(
                    [str(as_uuid(i, "item id")) for i in item_ids]))
            q = q.order_by(annotation_queue_runs.c.added_at,
                           annotation_queue_runs.c.id).offset(max(offset, 0))
            if limit is not None:
                q = q.limit(limit)
            found = conn.execute(q).all()
        return [{"id": r.id, "queue_id": r.queue_id, "run_id": r.run_id, "item_type": "RUN",
                 "project_id": r.session_id, "start_time": r.start_time, "added_at": r.added_at,
                 "last_reviewed_time": r.last_reviewed_time,
                 "completed_at": r.completed_at} for r in found]

    def add_items(self, queue_id: uuid.UUID | str,
                  run_ids: Sequence[uuid.UUID | str]) -> builtins.list[dict[str, Any]]:
        """``add_runs``, answering with the item of each run (new or already queued)."""
        self.add_runs(queue_id, run_ids)
        want = [str(as_uuid(r, "run id")) for r in run_ids]
        by_run = {i["run_id"]: i for i in self.list_items(queue_id) if i["run_id"] in set(want)}
        return [by_run[r] for r in dict.fromkeys(want)]

    def remove_items(self, queue_id: uuid.UUID | str,
                     item_ids: Sequence[uuid.UUID | str]) -> int:
        """Take items out of the queue by queue-run id, all or none."""
        ids = list(dict.fromkeys(str(as_uuid(i, "item id")) for i in item_ids))
        with self.store.write() as conn:
            row = self._row(conn, queue_id)
            found = set(conn.execute(select(annotation_queue_runs.c.id).where(
                annotation_queue_runs.c.queue_id == row.id,
                annotation_queue_runs.c.id.in_(ids))).scalars()) if ids else set()
            missing = [i for i in ids if i not in found]
            if missing:
                raise NotFoundError(f"item(s) not in annotation queue {row.id}: "
                                    f"{', '.join(missing[:10])}")
            if ids:
                conn.execute(delete(annotation_queue_runs)
                             .where(annotation_queue_runs.c.id.in_(ids)))
        return len(ids)

    def _status(self, status: str | None) -> Any:
        if status is None:
            return None
        if status not in STATUSES:
            raise InvalidInputError(f"status must be one of {', '.join(STATUSES)}, "
                                    f"got {status!r}")
        if status == "completed":
            return annotation_queue_runs.c.completed_at.is_not(None)
        if status == "needs_others_review":
            return annotation_queue_runs.c.id.is_(None)  # nobody else reviews in assay
        return annotation_queue_runs.c.completed_at.is_(None)

    def list_runs(self, queue_id: uuid.UUID | str, *, status: str | None = None,
                  offset: int = 0, limit: int | None = None) -> builtins.list[QueuedRun]:
        """The queued runs in the order they were added (``status``: only those)."""
        cond = self._status(status)
        self.store.settle()
        with self.store.read() as conn:
            row = self._row(conn, queue_id)
            q = select(annotation_queue_runs).where(annotation_queue_runs.c.queue_id == row.id)
            if cond is not None:
                q = q.where(cond)
            q = q.order_by(annotation_queue_runs.c.added_at,
                           annotation_queue_runs.c.id).offset(max(offset, 0))
            if limit is not None:
                q = q.limit(limit)
            queued = conn.execute(q).all()
        found = {str(r.id): r for r in self.store.runs.list(
            run_ids=[item.run_id for item in queued])} if queued else {}
        out = []
        for item in queued:
            run = found.get(item.run_id)
            if run is None:  # the run's trace was deleted since: nothing left to review
                continue
            out.append(QueuedRun(**dict(run), queue_run_id=item.id, added_at=item.added_at,
                                 last_reviewed_time=item.last_reviewed_time,
                                 completed_at=item.completed_at))
        return out

    def get_run(self, queue_id: uuid.UUID | str, index: int) -> QueuedRun:
        """The run at ``index`` among those still to review (0: the next one)."""
        if not isinstance(index, int) or index < 0:
            raise InvalidInputError(f"index must be a non-negative integer, got {index!r}")
        found = self.list_runs(queue_id, status="needs_my_review", offset=index, limit=1)
        if not found:
            raise NotFoundError(f"annotation queue {queue_id} has no run to review at index "
                                f"{index}")
        return found[0]

    def next_run(self, queue_id: uuid.UUID | str) -> QueuedRun | None:
        """What a reviewer sees next, or None when the queue is done."""
        try:
            return self.get_run(queue_id, 0)
        except NotFoundError:
            self.read(queue_id)  # a missing queue still raises
            return None

    def size(self, queue_id: uuid.UUID | str, *, status: str | None = "needs_my_review") -> int:
        cond = self._status(status)
        with self.store.read() as conn:
            row = self._row(conn, queue_id)
            q = select(func.count()).select_from(annotation_queue_runs).where(
                annotation_queue_runs.c.queue_id == row.id)
            if cond is not None:
                q = q.where(cond)
            return int(conn.execute(q).scalar() or 0)

    def _queued(self, conn: Connection, queue_id: uuid.UUID | str,
                run_id: uuid.UUID | str) -> Any:
        row = self._row(conn, queue_id)
        rid = str(as_uuid(run_id, "run_id"))
        found = conn.execute(select(annotation_queue_runs).where(  # the JS SDK names the
            annotation_queue_runs.c.queue_id == row.id,               # queue-run id instead
            or_(annotation_queue_runs.c.run_id == rid, annotation_queue_runs.c.id == rid))
        ).first()
        if found is None:
            raise NotFoundError(f"run {rid} is not in annotation queue {row.id}")
        return found

    def remove_run(self, queue_id: uuid.UUID | str, run_id: uuid.UUID | str) -> None:
        """Take a run out of the queue (``run_id``: the run's id or its queue-run id)."""
        with self.store.write() as conn:
            found = self._queued(conn, queue_id, run_id)
            conn.execute(delete(annotation_queue_runs)
                         .where(annotation_queue_runs.c.id == found.id))

    def remove_runs(self, queue_id: uuid.UUID | str, *,
                    run_ids: Sequence[uuid.UUID | str] | None = None, every: bool = False,
                    keep: Sequence[uuid.UUID | str] = ()) -> int:
        """Take several runs out (``every``: all of them but ``keep``); returns how many."""
        if (run_ids is None) == (not every):
            raise InvalidInputError("give run_ids, or delete_all with optional exclude_run_ids")
        with self.store.write() as conn:
            row = self._row(conn, queue_id)
            q = delete(annotation_queue_runs).where(annotation_queue_runs.c.queue_id == row.id)
            if run_ids is not None:
                q = q.where(annotation_queue_runs.c.run_id.in_(
                    [str(as_uuid(r, "run id")) for r in run_ids]))
            if keep:
                q = q.where(annotation_queue_runs.c.run_id.not_in(
                    [str(as_uuid(r, "run id")) for r in keep]))
            return int(conn.execute(q).rowcount or 0)

    def update_run(self, queue_id: uuid.UUID | str, run_id: uuid.UUID | str, *,
                   added_at: Any = None, last_reviewed_time: Any = None) -> None:
        """Move a queued run (``added_at`` orders the queue) or record when it was reviewed."""
        values = {k: v for k, v in (("added_at", added_at),
                                    ("last_reviewed_time", last_reviewed_time)) if v is not None}
        with self.store.write() as conn:
            found = self._queued(conn, queue_id, run_id)
            if values:
                conn.execute(update(annotation_queue_runs)
                             .where(annotation_queue_runs.c.id == found.id).values(**values))

    def mark_done(self, queue_id: uuid.UUID | str, run_id: uuid.UUID | str, *,
                  done: bool = True) -> None:
        """Mark a queued run reviewed (``done=False``: back to review)."""
        with self.store.write() as conn:
            found = self._queued(conn, queue_id, run_id)
            self._set_done(conn, found.id, done)

    def set_status(self, queue_run_id: uuid.UUID | str, status: str) -> None:
        """LangSmith's status by queue-run id (``completed`` or ``needs_my_review``)."""
        if status not in ("completed", "needs_my_review", "viewed"):
            raise InvalidInputError(f"status must be 'completed', 'viewed' or "
                                    f"'needs_my_review', got {status!r}")
        qrid = str(as_uuid(queue_run_id, "annotation_queue_run_id"))
        with self.store.write() as conn:
            found = conn.execute(
                select(annotation_queue_runs.c.id)
                .join(annotation_queues, annotation_queues.c.id == annotation_queue_runs.c.queue_id)
                .where(annotation_queue_runs.c.id == qrid, self._tenant)).first()
            if found is None:
                raise NotFoundError(f"annotation queue run {qrid} not found")
            if status == "viewed":  # seen, still to review
                conn.execute(update(annotation_queue_runs)
                             .where(annotation_queue_runs.c.id == qrid)
                             .values(last_reviewed_time=utcnow()))
            else:
                self._set_done(conn, qrid, status == "completed")

    def _set_done(self, conn: Connection, queue_run_id: str, done: bool) -> None:
        now = utcnow()
        conn.execute(update(annotation_queue_runs)
                     .where(annotation_queue_runs.c.id == queue_run_id)
                     .values(completed_at=now if done else None,
                             last_reviewed_time=now if done else
                             annotation_queue_runs.c.last_reviewed_time))
