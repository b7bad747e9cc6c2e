"""Feedback: scores on runs (evaluators) and on sessions (summary evaluators)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import exists, func, or_, select, text

from .._gc import build_many
from .._ids import as_uuid, new_id_text, utcnow, uuid_text
from .._json import escape_text, jsonable, unescape_text
from ..errors import InvalidInputError, NotFoundError
from ..schemas import Feedback
from ._aggregates import FEEDBACK_RETURNING, FeedbackDeltas
from ._bulk import insert_many
from ._tables import comparative_experiments, feedback, runs
from ._types import sender_micros

# a transaction-scoped lock per feedback id, taken in one order (no two writers deadlock)
_LOCK_IDS = text("SELECT pg_advisory_xact_lock(hashtextextended(x, 0)) FROM "
                 "(SELECT unnest(CAST(:ids AS text[])) AS x ORDER BY 1) AS ids")

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["UPDATABLE", "FeedbackRepo", "feedback_label", "source_kinds"]

UPDATABLE = ("score", "value", "correction", "comment")  # what update_feedback may change


def feedback_label(value: Any) -> str | None:
    """The categorical label counted in feedback_stats.values (None for no/numeric value)."""
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return None
    text = str(value)
    return text[:512] if text else None


def _score(value: Any, fid: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        try:
            score = float(value)
        except OverflowError:  # an int past a float
            return None
        # NaN or infinite: no score, as JSON carries it (evaluate()'s journal, the wire's
        # ``null``), rather than one that turns every average it joins into NaN
        return score if math.isfinite(score) else None
    raise InvalidInputError(f"feedback {fid}: score must be a number or bool, got {value!r}")


def _storable(text: Any) -> Any:
    """Text as a text column can hold it: NUL and lone surrogates escaped (``assay._json``)."""
    return escape_text(text) if isinstance(text, str) else text


def _id_or_none(item: Mapping[str, Any], field: str, fid: str) -> str | None:
    value = item.get(field)
    return uuid_text(value, f"feedback {fid}: {field}") if value else None


def _model(row: Any) -> Feedback:
    data = dict(row._mapping)
    data.pop("tenant_id", None)
    data.pop("label", None)
    if data.get("comment"):
        data["comment"] = unescape_text(data["comment"])
    return Feedback.model_validate(data)


class FeedbackRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _row(self, item: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(item, Mapping):
            raise InvalidInputError(f"feedback must be an object, got {type(item).__name__}")
        fid = uuid_text(item["id"], "feedback id") if item.get("id") else new_id_text()
        key = item.get("key")
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"feedback {fid}: 'key' must be a non-empty string")
        try:  # it names scores in statistics and filters: valid Unicode only
            key.encode()
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"feedback {fid}: key {key!r} holds a lone UTF-16 surrogate "
                f"(U+{ord(key[exc.start]):04X}); feedback keys must be valid Unicode") from None
        run_id = item.get("run_id")
        session_id = item.get("session_id", item.get("project_id"))
        if run_id is None and session_id is None:
            raise InvalidInputError(f"feedback {fid}: give run_id or project_id/session_id")
        value = jsonable(item.get("value"))
        comment, extra = item.get("comment"), item.get("extra")
        if comment is not None and not isinstance(comment, str):  # else stored, unreadable
            raise InvalidInputError(f"feedback {fid}: comment must be a string")
        if extra and not isinstance(extra, Mapping):
            raise InvalidInputError(f"feedback {fid}: extra must be an object")
        source = item.get("feedback_source")
        if source is not None and not isinstance(source, Mapping):
            source = {"type": str(source)}
        now = utcnow()
        return {
            "id": fid,
            "tenant_id": self.store.tenant_id,
            "run_id": uuid_text(run_id, "run_id") if run_id else None,
            "session_id": uuid_text(session_id, "session_id") if session_id else None,
            "trace_id": uuid_text(item["trace_id"], "trace_id") if item.get("trace_id") else None,
            "key": key,
            "score": _score(item.get("score"), fid),
            "value": value,
            "label": _storable(feedback_label(value)),
            "comment": _storable(comment),
            "correction": jsonable(item.get("correction")),
            "feedback_source": jsonable(source) if source is not None else None,
            "extra": jsonable(extra) if extra else None,
            "comparative_experiment_id": _id_or_none(item, "comparative_experiment_id", fid),
            "feedback_group_id": _id_or_none(item, "feedback_group_id", fid),
            "created_at": sender_micros(item.get("created_at"), f"feedback {fid}: created_at")
            or now,
            "modified_at": sender_micros(item.get("modified_at"),
                                         f"feedback {fid}: modified_at") or now,
        }

    def create_many(self, items: Iterable[Mapping[str, Any]], *,
                    return_records: bool = True) -> list[Feedback]:
        """Store feedback atomically; a run's project is filled in when the run is known.

        ``return_records=False`` skips reading the rows back (bulk writers such as
        ``evaluate()`` do not need them) and returns an empty list.
        """
        rows = [self._row(i) for i in items]
        if not rows:
            return []
        with self.store.write() as conn:
            self._insert(conn, rows)
        return self.list(feedback_ids=[r["id"] for r in rows]) if return_records else []

    def _insert(self, conn: Connection, rows: list[dict[str, Any]]) -> int:
        """Write rows made by ``_row`` (a repeated id replaces the earlier row) and their
        aggregates, in the caller's transaction."""
        need = [r["run_id"] for r in rows if r["run_id"] and not r["session_id"]]
        if need:
            found = dict(conn.execute(
                select(runs.c.id, runs.c.session_id).where(
                    runs.c.id.in_(need), runs.c.tenant_id == self.store.tenant_id)
            ).all())
            for r in rows:
                if r["run_id"] in found and not r["session_id"]:
                    r["session_id"] = found[r["run_id"]]
        if any(r["comparative_experiment_id"] for r in rows):
            self._check_pairwise(conn, rows)
        ids = [r["id"] for r in rows]
        if conn.dialect.name == "postgresql":  # one writer of an id at a time (SQLite's write
            # lock already is): two both finding it free would both insert it, one failing
            conn.execute(_LOCK_IDS, {"ids": sorted({str(i) for i in ids})})
        existing = set(conn.execute(select(feedback.c.id).where(feedback.c.id.in_(ids))).scalars())
        fresh = [r for r in rows if r["id"] not in existing]
        deltas = FeedbackDeltas()
        for r in rows:  # the SDKs retry: the same id again replaces the earlier row
            if r["id"] in existing:
                deltas.add_rows(conn.execute(feedback.delete().where(
                    feedback.c.id == r["id"], feedback.c.tenant_id == self.store.tenant_id
                ).returning(*FEEDBACK_RETURNING)), -1)
                fresh.append(r)
        insert_many(conn, feedback, fresh)
        for r in fresh:
            deltas.add_row(r, 1)
        deltas.apply(conn)
        return len(rows)

    def _check_pairwise(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Pairwise feedback names a comparison of this workspace and scores a stored run of
        one of its experiments (whose id becomes the row's session): checked before anything
        is written, so a bad row stores none of its batch."""
        wanted = {r["comparative_experiment_id"] for r in rows if r["comparative_experiment_id"]}
        compared = {cid: {str(e) for e in ids} for cid, ids in conn.execute(
            select(comparative_experiments.c.id, comparative_experiments.c.experiment_ids)
            .where(comparative_experiments.c.id.in_(sorted(wanted)),
                   comparative_experiments.c.tenant_id == self.store.tenant_id))}
        pairwise = [r for r in rows if r["comparative_experiment_id"]]
        run_ids = sorted({r["run_id"] for r in pairwise if r["run_id"]})
        owner = dict(conn.execute(select(runs.c.id, runs.c.session_id).where(
            runs.c.id.in_(run_ids), runs.c.tenant_id == self.store.tenant_id)).all())
        for r in pairwise:
            cid, fid = r["comparative_experiment_id"], r["id"]
            if cid not in compared:
                raise NotFoundError(f"feedback {fid}: comparative experiment {cid} not found")
            if not r["run_id"]:
                raise InvalidInputError(f"feedback {fid}: pairwise feedback needs a run_id")
            session = owner.get(r["run_id"])
            if session is None:
                raise NotFoundError(f"feedback {fid}: run {r['run_id']} not found (pairwise "
                                    f"feedback scores runs of experiments already stored)")
            if session not in compared[cid]:
                raise InvalidInputError(
                    f"feedback {fid}: run {r['run_id']} belongs to none of the experiments "
                    f"compared by {cid}")
            r["session_id"] = session

    def create(self, **item: Any) -> Feedback:
        return self.create_many([item])[0]

    def read(self, feedback_id: uuid.UUID | str) -> Feedback:
        found = self.list(feedback_ids=[feedback_id])
        if not found:
            raise NotFoundError(f"feedback {feedback_id} not found")
        return found[0]

    def list(
        self,
        *,
        run_ids: Sequence[uuid.UUID | str] | None = None,
        project_ids: Sequence[uuid.UUID | str] | None = None,
        feedback_key: Sequence[str] | None = None,
        feedback_ids: Sequence[uuid.UUID | str] | None = None,
        offset: int = 0,
        limit: int | None = None,
        pairwise: bool | None = None,
        source_types: Sequence[Any] | str | None = None,
    ) -> list[Feedback]:
        """Feedback matching every filter given; ``pairwise=False`` leaves out the scores of
        comparisons (a run's own feedback only), ``True`` keeps only them. ``source_types``:
        its source's ``type`` (``api``, ``model``, ``app``; none recorded counts as ``api``,
        the SDKs' default), one or several, in any of the SDKs' spellings (``source_kinds``)."""
        self.store.settle()
        q = select(feedback).where(feedback.c.tenant_id == self.store.tenant_id)
        if run_ids is not None:
            q = q.where(feedback.c.run_id.in_([str(as_uuid(r, "run id")) for r in run_ids]))
        if project_ids is not None:
            pids = [str(as_uuid(p, "project id")) for p in project_ids]
            # a correlated EXISTS (a primary-key probe per row), not ``run_id IN (SELECT ...)``:
            # inside OR, PostgreSQL plans that as an unhashed subplan once the project's run ids
            # outgrow work_mem - quadratic (minutes at 10^5 runs)
            in_project = exists(select(runs.c.id).where(runs.c.id == feedback.c.run_id,
                                                        runs.c.session_id.in_(pids)))
            q = q.where(or_(feedback.c.session_id.in_(pids), in_project))
        if feedback_key is not None:
            q = q.where(feedback.c.key.in_(list(feedback_key)))
        if feedback_ids is not None:
            q = q.where(feedback.c.id.in_([str(as_uuid(f, "feedback id")) for f in feedback_ids]))
        if source_types is not None:
            kind = func.coalesce(feedback.c.feedback_source["type"].as_string(), "api")
            q = q.where(kind.in_(source_kinds(source_types)))
        if pairwise is not None:
            cid = feedback.c.comparative_experiment_id
            q = q.where(cid.is_not(None) if pairwise else cid.is_(None))
        q = q.order_by(feedback.c.created_at, feedback.c.id).offset(max(offset, 0))
        if limit is not None:
            q = q.limit(limit)
        with self.store.read() as conn:
            rows = conn.execute(q).all()
        return build_many(_model, rows)

    def update(self, feedback_id: uuid.UUID | str, **changes: Any) -> Feedback:
        """Change a feedback's ``score``, ``value``, ``correction`` or ``comment``: only the
        fields given change, and None clears one (LangSmith's ``update_feedback``). The
        project's feedback statistics follow in the same transaction."""
        unknown = sorted(set(changes) - set(UPDATABLE))
        if unknown:
            raise InvalidInputError(f"feedback cannot change {', '.join(map(repr, unknown))}: "
                                    f"only {', '.join(UPDATABLE)}")
        fid = str(as_uuid(feedback_id, "feedback_id"))
        comment = changes.get("comment")
        if comment is not None and not isinstance(comment, str):
            raise InvalidInputError(f"feedback {fid}: comment must be a string, got {comment!r}")
        self.store.settle()  # a feedback still in the journal is stored first
        with self.store.write() as conn:
            row = conn.execute(select(feedback).where(
                feedback.c.id == fid, feedback.c.tenant_id == self.store.tenant_id)).first()
            if row is None:
                raise NotFoundError(f"feedback {fid} not found")
            new = dict(row._mapping)
            if "score" in changes:
                new["score"] = _score(changes["score"], fid)
            if "value" in changes:
                new["value"] = jsonable(changes["value"])
                new["label"] = _storable(feedback_label(new["value"]))
            if "correction" in changes:
                new["correction"] = jsonable(changes["correction"])
            if "comment" in changes:
                new["comment"] = _storable(comment)
            new["modified_at"] = utcnow()
            self._insert(conn, [new])  # replaces the row, its statistics with it
        return self.read(fid)

    def example_scores(self, project_id: uuid.UUID | str, key: str) -> dict[str, float]:
        """{example id: mean ``key`` score of the project's root runs on it}: what v2
        experiment runs sort by (``sort={"by": "feedback.<key>"}``), one grouped query."""
        self.store.settle()
        q = (select(runs.c.reference_example_id, func.avg(feedback.c.score))
             .join(runs, runs.c.id == feedback.c.run_id)
             .where(feedback.c.tenant_id == self.store.tenant_id, feedback.c.key == key,
                    feedback.c.score.is_not(None), runs.c.tenant_id == self.store.tenant_id,
                    feedback.c.comparative_experiment_id.is_(None),
                    runs.c.session_id == str(as_uuid(project_id, "project id")),
                    runs.c.is_root.is_(True), runs.c.reference_example_id.is_not(None))
             .group_by(runs.c.reference_example_id))
        with self.store.read() as conn:
            return {str(ex): float(score) for ex, score in conn.execute(q)}

    def delete(self, feedback_id: uuid.UUID | str) -> None:
        fid = str(as_uuid(feedback_id, "feedback_id"))
        self.store.settle()
        with self.store.write() as conn:
            gone = conn.execute(feedback.delete().where(
                feedback.c.id == fid, feedback.c.tenant_id == self.store.tenant_id
            ).returning(*FEEDBACK_RETURNING)).all()
            deltas = FeedbackDeltas()
            deltas.add_rows(gone, -1)
            deltas.apply(conn)
            n = len(gone)
        if not n:
            raise NotFoundError(f"feedback {fid} not found")




def source_kinds(given: Sequence[Any] | str) -> list[str]:
    """Feedback source types as stored, from how callers spell them: one or several, plain
    (``"model"``: JS, assay's ``Client``), LangSmith's enum (its ``.value``), or that enum's
    ``str()``, which the Python SDK sends on the wire (``"FeedbackSourceType.MODEL"``)."""
    items = [given] if isinstance(given, str) or hasattr(given, "value") else list(given)
    return [str(getattr(t, "value", t)).rsplit(".", 1)[-1].lower() for t in items]
