"""Comparative (pairwise) experiments: two or more experiments on one dataset, and the feedback
that scores their runs against each other.

Such feedback (``comparative_experiment_id`` set) is kept out of each experiment's own feedback
statistics (an experiment's ``ranked_preference`` depends on what it was compared with); it is
counted here, per comparison, key and experiment.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from .._ids import as_uuid, new_id_text, uuid_text
from .._json import jsonable
from .._time import utcnow
from ..errors import ConflictError, InvalidInputError, NotFoundError
from ..schemas import ComparativeExperiment
from ._tables import comparative_experiments as cmp
from ._tables import feedback, sessions
from ._types import sender_micros

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["ComparativeRepo"]

ID = uuid.UUID | str


class ComparativeRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    def create(
        self,
        *,
        name: str | None,
        experiment_ids: Sequence[ID],
        reference_dataset_id: ID | None = None,
        description: str | None = None,
        created_at: datetime | str | None = None,
        extra: dict[str, Any] | None = None,
        id: ID | None = None,
    ) -> ComparativeExperiment:
        """Record a comparison of stored experiments that share one dataset.

        The same id sent again with the same experiments returns the stored comparison (the SDKs
        retry); with other experiments it is a conflict."""
        if isinstance(experiment_ids, (str, uuid.UUID)) or not experiment_ids:
            raise InvalidInputError("experiment_ids must be a non-empty list of experiment ids")
        ids = [uuid_text(e, "experiment_ids") for e in experiment_ids]
        if len(set(ids)) != len(ids):
            raise InvalidInputError(f"experiment_ids names an experiment twice: {ids}")
        if extra is not None and not isinstance(extra, dict):
            raise InvalidInputError("extra must be an object")
        cid = uuid_text(id, "id") if id else new_id_text()
        now = utcnow()
        with self.store.write() as conn:
            found = self._row(conn, cid)
            if found is not None:
                if [str(e) for e in found.experiment_ids] != ids:
                    raise ConflictError(f"comparative experiment {cid} exists and compares "
                                        f"other experiments")
                return self._model(conn, found)
            dataset = self._dataset_of(conn, ids, reference_dataset_id)
            conn.execute(cmp.insert().values(
                id=cid, tenant_id=self.store.tenant_id, name=name, description=description,
                reference_dataset_id=dataset, experiment_ids=ids,
                extra=jsonable(extra) if extra else None,
                created_at=sender_micros(created_at, "created_at") or now, modified_at=now))
            return self._model(conn, self._row(conn, cid))

    def _dataset_of(self, conn: Connection, ids: list[str], given: ID | None) -> str:
        """The dataset every experiment in ``ids`` ran on (errors name what differs)."""
        rows = dict(conn.execute(select(sessions.c.id, sessions.c.reference_dataset_id).where(
            sessions.c.id.in_(ids), sessions.c.tenant_id == self.store.tenant_id)).all())
        missing = [i for i in ids if i not in rows]
        if missing:
            raise NotFoundError(f"experiment {missing[0]} not found")
        datasets = {str(rows[i]) if rows[i] else None for i in ids}
        if None in datasets:
            bare = next(i for i in ids if rows[i] is None)
            raise InvalidInputError(f"project {bare} is not an experiment (it has no dataset); "
                                    f"only experiments on one dataset can be compared")
        if len(datasets) > 1:
            by = ", ".join(f"{i}: {rows[i]}" for i in ids)
            raise InvalidInputError(f"the experiments ran on different datasets ({by}); "
                                    f"only experiments on one dataset can be compared")
        dataset = datasets.pop()
        assert dataset is not None
        if given is not None and uuid_text(given, "reference_dataset_id") != dataset:
            raise InvalidInputError(f"reference_dataset_id {given} is not the experiments' "
                                    f"dataset ({dataset})")
        return dataset

    def _row(self, conn: Connection, cid: str) -> Any:
        return conn.execute(select(cmp).where(
            cmp.c.id == cid, cmp.c.tenant_id == self.store.tenant_id)).first()

    def _model(self, conn: Connection, row: Any) -> ComparativeExperiment:
        return self._models(conn, [row])[0]

    def _models(self, conn: Connection, rows: Sequence[Any]) -> list[ComparativeExperiment]:
        """Records with their experiments' names and their feedback statistics: two queries
        for the whole page."""
        if not rows:
            return []
        exp_ids = sorted({str(e) for r in rows for e in r.experiment_ids})
        names = dict(conn.execute(select(sessions.c.id, sessions.c.name).where(
            sessions.c.id.in_(exp_ids), sessions.c.tenant_id == self.store.tenant_id)).all())
        stats: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        q = (select(feedback.c.comparative_experiment_id, feedback.c.key, feedback.c.session_id,
                    func.count(), func.count(feedback.c.score), func.avg(feedback.c.score))
             .where(feedback.c.comparative_experiment_id.in_([r.id for r in rows]),
                    feedback.c.tenant_id == self.store.tenant_id)
             .group_by(feedback.c.comparative_experiment_id, feedback.c.key,
                       feedback.c.session_id))
        for cid, key, sid, n, n_scored, avg in conn.execute(q):
            stats.setdefault(cid, {}).setdefault(key, {})[str(sid)] = {
                "n": int(n), "avg": float(avg) if n_scored else None}
        return [ComparativeExperiment(
            id=r.id, name=r.name, description=r.description, tenant_id=r.tenant_id,
            created_at=r.created_at, modified_at=r.modified_at,
            reference_dataset_id=r.reference_dataset_id, extra=r.extra,
            # an experiment deleted since is left out
            experiments_info=[{"id": str(e), "name": names[str(e)]}
                              for e in r.experiment_ids if str(e) in names],
            feedback_stats=stats.get(r.id, {}),
        ) for r in rows]

    def read(self, comparative_experiment_id: ID) -> ComparativeExperiment:
        cid = str(as_uuid(comparative_experiment_id, "comparative_experiment_id"))
        self.store.settle()
        with self.store.read() as conn:
            row = self._row(conn, cid)
            if row is None:
                raise NotFoundError(f"comparative experiment {cid} not found")
            return self._model(conn, row)

    def list(self, *, dataset_id: ID, name: str | None = None,
             name_contains: str | None = None, offset: int = 0,
             limit: int | None = None) -> list[ComparativeExperiment]:
        """A dataset's comparisons, newest first."""
        ds = str(as_uuid(dataset_id, "dataset_id"))
        q = select(cmp).where(cmp.c.tenant_id == self.store.tenant_id,
                              cmp.c.reference_dataset_id == ds)
        if name is not None:
            q = q.where(cmp.c.name == name)
        if name_contains:
            q = q.where(cmp.c.name.contains(name_contains, autoescape=True))
        q = q.order_by(cmp.c.created_at.desc(), cmp.c.id).offset(max(offset, 0))
        if limit is not None:
            q = q.limit(limit)
        self.store.settle()
        with self.store.read() as conn:
            return self._models(conn, conn.execute(q).all())

    def delete(self, comparative_experiment_id: ID) -> None:
        """Forget a comparison and its pairwise feedback (the experiments stay)."""
        cid = str(as_uuid(comparative_experiment_id, "comparative_experiment_id"))
        with self.store.write() as conn:
            if self._row(conn, cid) is None:
                raise NotFoundError(f"comparative experiment {cid} not found")
            self._forget(conn, [cid])

    def forget_dataset(self, conn: Connection, dataset_id: str) -> None:
        """A deleted dataset's comparisons and their feedback, in the caller's transaction."""
        ids = list(conn.execute(select(cmp.c.id).where(
            cmp.c.tenant_id == self.store.tenant_id,
            cmp.c.reference_dataset_id == dataset_id)).scalars())
        if ids:
            self._forget(conn, ids)

    def _forget(self, conn: Connection, ids: Sequence[str]) -> None:
        # pairwise rows are in no experiment's statistics (FeedbackDeltas skips them), so a
        # plain delete leaves every aggregate as it was
        conn.execute(feedback.delete().where(feedback.c.comparative_experiment_id.in_(ids),
                                             feedback.c.tenant_id == self.store.tenant_id))
        conn.execute(cmp.delete().where(cmp.c.id.in_(ids)))
