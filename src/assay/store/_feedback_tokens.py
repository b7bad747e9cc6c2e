"""Presigned feedback tokens: a URL an application's front end calls, without the API key, to
score one run with one feedback key (LangSmith's ``create_presigned_feedback_token``).

The token's id (random, uuid4) is the secret; its row holds the workspace, run, key and expiry,
so ``use`` is answered from the base store with no key. Every use writes the token's one
feedback id: a user who changes their mind replaces their score rather than adding one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import select

from .._ids import as_uuid, uuid_text
from .._time import to_micros, utcnow
from ..errors import ExpiredError, InvalidInputError, NotFoundError
from ..schemas import Feedback
from ._feedback_configs import check_config, misfit
from ._tables import feedback_tokens as tokens
from ._tables import runs

if TYPE_CHECKING:
    from ._base import Store

__all__ = ["FeedbackToken", "FeedbackTokenRepo", "lifetime"]

DEFAULT_LIFETIME = timedelta(hours=3)  # LangSmith's default
MAX_LIFETIME = timedelta(days=366)


class FeedbackToken(BaseModel):
    """LangSmith's ``FeedbackIngestToken``: ``url`` is filled by whoever serves it."""

    id: uuid.UUID
    url: str
    expires_at: datetime
    run_id: uuid.UUID
    feedback_key: str


class FeedbackTokenRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, run_id: uuid.UUID | str, feedback_key: str, *,
               expires_at: datetime | str | None = None, expires_in: timedelta | None = None,
               feedback_config: Mapping[str, Any] | None = None,
               feedback_id: uuid.UUID | str | None = None) -> FeedbackToken:
        """A token for scoring a stored run of this workspace with ``feedback_key``, valid until
        ``expires_at`` (or for ``expires_in``; default 3 hours). A ``feedback_config`` is the
        key's config from then on when it has none yet (as ``create_feedback_config``)."""
        return self.create_many([{
            "run_id": run_id, "feedback_key": feedback_key, "expires_at": expires_at,
            "expires_in": expires_in, "feedback_config": feedback_config,
            "feedback_id": feedback_id}])[0]

    def create_many(self, specs: Sequence[Mapping[str, Any]]) -> list[FeedbackToken]:
        """Several tokens (``create``'s keywords each), all or none: every one is checked
        before any is stored."""
        now = utcnow()
        rows = [self._row(spec, now, f"token {i}" if len(specs) > 1 else "token")
                for i, spec in enumerate(specs)]
        for spec in specs:
            if spec.get("feedback_config") is not None:
                self.store.feedback_configs.create(spec["feedback_key"], spec["feedback_config"])
        with self.store.write() as conn:
            conn.execute(tokens.insert(), rows)
        return [_model(r) for r in rows]

    def _row(self, spec: Mapping[str, Any], now: datetime, where: str) -> dict[str, Any]:
        rid = str(as_uuid(spec["run_id"], f"{where}: run_id"))
        key = spec.get("feedback_key")
        if not isinstance(key, str) or not key.strip():
            raise InvalidInputError(f"{where}: feedback_key must be a non-empty string")
        at, within = spec.get("expires_at"), spec.get("expires_in")
        if at is not None and within is not None:
            raise InvalidInputError(f"{where}: give expires_at or expires_in, not both")
        until = (now + (within if within is not None else DEFAULT_LIFETIME) if at is None
                 else _instant(at))
        if until <= now:
            raise InvalidInputError(f"{where}: it would expire at {until.isoformat()}, which "
                                    f"has passed")
        if until - now > MAX_LIFETIME:
            raise InvalidInputError(f"{where}: a token lives at most {MAX_LIFETIME.days} days")
        if spec.get("feedback_config") is not None:
            check_config(spec["feedback_config"], f"{where}: feedback_config")
        if not _stored(self.store, rid):
            raise NotFoundError(f"{where}: run {rid} not found")
        fid = spec.get("feedback_id")
        return {"id": str(uuid.uuid4()), "tenant_id": self.store.tenant_id, "run_id": rid,
                "feedback_key": key,
                "feedback_id": uuid_text(fid, f"{where}: feedback_id") if fid
                else str(uuid.uuid4()),
                "expires_at": until, "created_at": now}

    def list(self, run_id: uuid.UUID | str) -> list[FeedbackToken]:
        """The run's tokens still valid, newest first."""
        rid = str(as_uuid(run_id, "run_id"))
        with self.store.read() as conn:
            rows = conn.execute(select(tokens).where(
                tokens.c.tenant_id == self.store.tenant_id, tokens.c.run_id == rid,
                tokens.c.expires_at > to_micros(utcnow())).order_by(
                tokens.c.created_at.desc())).all()
        return [_model(dict(r._mapping)) for r in rows]

    def use(self, token_id: uuid.UUID | str, *, score: Any = None, value: Any = None,
            correction: Any = None, comment: str | None = None,
            metadata: Mapping[str, Any] | None = None) -> Feedback:
        """Score the token's run (any workspace: the token says which). Called on the base
        store by the unauthenticated route; ``ExpiredError`` once its time is up."""
        tid = str(as_uuid(token_id, "token"))
        if score is None and value is None and correction is None and comment is None:
            raise InvalidInputError("give a score, value, correction or comment")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInputError("metadata must be an object")
        with self.store.read() as conn:
            row = conn.execute(select(tokens).where(tokens.c.id == tid)).first()
        if row is None:
            raise NotFoundError(f"feedback token {tid} not found")
        if row.expires_at <= utcnow():
            raise ExpiredError(f"feedback token {tid} expired at "
                                    f"{row.expires_at.isoformat()}")
        view = self.store.for_tenant(row.tenant_id)
        if not _stored(view, row.run_id):
            raise NotFoundError(f"the run of feedback token {tid} is no longer stored")
        live = view.feedback_configs.list(feedback_keys=[row.feedback_key])
        if live:
            why = misfit(live[0].feedback_config, score, value)
            if why:
                raise InvalidInputError(f"feedback {row.feedback_key!r}: {why}")
        return view.feedback.create(
            id=row.feedback_id, run_id=row.run_id, key=row.feedback_key, score=score,
            value=value, correction=correction, comment=comment,
            feedback_source={"type": "app", "metadata": {**(metadata or {}),
                                                         "__token": tid}})


def _stored(store: Store, run_id: str) -> bool:
    """Whether the workspace holds the run (one still in the journal is stored first)."""
    store.settle()
    with store.read() as conn:
        return conn.execute(select(runs.c.id).where(
            runs.c.id == run_id, runs.c.tenant_id == store.tenant_id)).first() is not None


def _instant(value: datetime | str) -> datetime:
    got = datetime.fromisoformat(value) if isinstance(value, str) else value
    if not isinstance(got, datetime) or got.tzinfo is None:
        raise InvalidInputError(f"expires_at must be a time with a zone, got {value!r}")
    return got


def _model(row: Mapping[str, Any]) -> FeedbackToken:
    return FeedbackToken(id=row["id"], url=f"/feedback/tokens/{row['id']}",
                         expires_at=row["expires_at"], run_id=row["run_id"],
                         feedback_key=row["feedback_key"])


def lifetime(raw: Mapping[str, Any] | None) -> timedelta | None:
    """LangSmith's ``expires_in`` ({days, hours, minutes}) as a timedelta."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {"days", "hours", "minutes"}:
        raise InvalidInputError("expires_in must be {days, hours, minutes}")
    try:
        return timedelta(**{k: float(v or 0) for k, v in raw.items()})
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"expires_in: {exc}") from None

