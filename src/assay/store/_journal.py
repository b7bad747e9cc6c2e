"""The journal: batches of runs and feedback made durable now, indexed before the next read.

A row of ``runs`` costs tens of microseconds to write (30 columns, eight indexes, the session
aggregates), more than a no-op target and its evaluator cost to run. assay's own bulk writers
(the tracing writer and ``evaluate()``'s feedback sink) therefore append each batch as one JSON
row here: about a microsecond per run, committed, so a crash loses nothing. ``fold`` then
applies the journal in order through the same code as a direct write (``RunRepo._upsert``,
``FeedbackRepo._insert``) and deletes what it applied, in one transaction per chunk.

Every read of runs, feedback, projects or statistics calls ``settle`` first, which folds when
the journal is not empty (one indexed probe when it is). So readers always see what was
appended before they asked, whichever process appended it; a process killed between append and
fold leaves its batches for the next reader. Folds are serialized (SQLite's write lock, a
PostgreSQL advisory lock), so a batch is applied exactly once.

Entries are trusted: they come from assay's writers, not from the wire. Should one still fail
(say, a run whose post never names a start time), it is applied item by item and only what
fails is dropped, with a logged warning and a count in ``dropped``; the journal never blocks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic_core
from sqlalchemy import delete, func, insert, select, text

from .. import _json
from .._time import to_micros, utcnow
from ._tables import journal

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["Journal"]

log = logging.getLogger("assay.store")

RUNS, FEEDBACK = "runs", "feedback"
_CHUNK = 20  # journal rows per fold transaction: a long fold does not starve other writers
_PG_LOCK = 0x617373617901  # "assay\1": one folder at a time


def _size(kind: str, payload: dict[str, Any]) -> int:
    if kind == RUNS:
        return len(payload["posts"]) + len(payload["patches"])
    return len(payload["items"])


def _halves(kind: str, payload: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Two batches with the items of ``payload`` in order, second half first: ``_append`` pops
    from the end, so rows come out first half first (posts still before patches)."""
    if kind == RUNS:
        runs = [("posts", p) for p in payload["posts"]] + [("patches", p) for p in
                                                             payload["patches"]]
        mid = len(runs) // 2
        out = []
        for part in (runs[mid:], runs[:mid]):
            out.append((RUNS, {"posts": [r for k, r in part if k == "posts"],
                               "patches": [r for k, r in part if k == "patches"],
                               "default_project": payload["default_project"]}))
        return out
    items = payload["items"]
    mid = len(items) // 2
    return [(FEEDBACK, {**payload, "items": items[mid:]}),
            (FEEDBACK, {**payload, "items": items[:mid]})]


class Journal:
    # A batch whose JSON passes this is split in halves (one transaction still): a thousand runs
    # with large inputs would otherwise make one value past what the database takes (1 GB) and
    # hold it all in memory at once.
    max_payload = 16 * 1024 * 1024

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dropped = 0  # items a fold could not apply (logged)

    # -- append (assay's own writers) ---------------------------------------------------------
    def append_runs(self, posts: Sequence[Mapping[str, Any]] = (),
                    patches: Sequence[Mapping[str, Any]] = (), *,
                    default_project: str = "default") -> int:
        """Journal one batch of LangSmith run posts and patches (see ``RunRepo.upsert``).

        Not validated here (the fold does, and drops with a warning what it must): callers are
        assay's own writers, whose runs are well formed by construction."""
        if not posts and not patches:
            return 0
        items = [(RUNS, {"posts": list(posts), "patches": list(patches),
                         "default_project": default_project})]
        return self._append(items)

    def append_feedback(self, items: Sequence[Mapping[str, Any]]) -> int:
        """Journal one batch of feedback (see ``FeedbackRepo.create_many``), stored together;
        trusted as ``append_runs`` is."""
        if not items:
            return 0
        # the batch's time stands for each item's created_at that does not give one
        return self._append([(FEEDBACK, {"items": list(items), "created_at": to_micros(utcnow())})])

    def _append(self, batches: list[tuple[str, dict[str, Any]]]) -> int:
        """Journal batches in one transaction, each as one row (halved while too large)."""
        now = to_micros(utcnow())
        rows: list[dict[str, Any]] = []
        while batches:
            kind, payload = batches.pop()
            data = _json.dumpb(payload)
            n = _size(kind, payload)
            if len(data) > self.max_payload and n > 1:
                batches.extend(_halves(kind, payload))
                continue
            rows.append({"tenant_id": self.store.tenant_id, "kind": kind, "items": n,
                         "payload": data, "created_at": now})
        with self.store.write() as conn:
            conn.execute(insert(journal), rows)
        return sum(r["items"] for r in rows)

    # -- fold -----------------------------------------------------------------------------
    def pending(self) -> int:
        """Items of this workspace waiting in the journal."""
        with self.store.read() as conn:
            return int(conn.execute(
                select(func.coalesce(func.sum(journal.c["items"]), 0))
                .where(journal.c.tenant_id == self.store.tenant_id)).scalar() or 0)

    def settle(self) -> int:
        """Fold the journal if it holds anything; return how many items were applied."""
        with self.store.read() as conn:
            if conn.execute(select(journal.c.seq).limit(1)).first() is None:
                return 0
        return self.fold()

    def fold(self) -> int:
        """Apply every journaled batch in order and delete it; return the items applied."""
        applied = 0
        while True:
            with self.store.write() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK})
                entries = conn.execute(
                    select(journal).order_by(journal.c.seq).limit(_CHUNK)).all()
                if not entries:
                    return applied
                for entry in entries:
                    applied += self._apply(conn, entry)
                conn.execute(delete(journal).where(
                    journal.c.seq.in_([e.seq for e in entries])))

    def _apply(self, conn: Connection, entry: Any) -> int:
        store = self.store.for_tenant(entry.tenant_id)
        try:
            payload = pydantic_core.from_json(entry.payload)
        except ValueError as exc:  # never written by _append; a damaged row is not retried
            self.dropped += entry.items
            log.warning("assay store: journal entry %s is not JSON (%s): dropped", entry.seq, exc)
            return 0
        if entry.kind == RUNS:
            project = payload.get("default_project") or "default"
            runs = [(False, r) for r in payload.get("posts") or []]
            runs += [(True, r) for r in payload.get("patches") or []]

            def apply(batch: list[tuple[bool, Any]]) -> int:
                return store.runs._apply(conn, [r for patch, r in batch if not patch],
                                         [r for patch, r in batch if patch], project)

            return self._whole_or_each(conn, "runs", runs, apply, lambda item: item[1])
        if entry.kind == FEEDBACK:
            created = payload.get("created_at")

            def add(batch: list[Any]) -> int:
                rows = []
                for item in batch:
                    if isinstance(item, dict) and created is not None:
                        item.setdefault("created_at", created)
                        item.setdefault("modified_at", item["created_at"])
                    rows.append(store.feedback._row(item))
                return store.feedback._insert(conn, rows)

            return self._whole_or_each(conn, "feedback", payload.get("items") or [], add,
                                       lambda item: item)
        self.dropped += entry.items
        log.warning("assay store: journal entry %s has unknown kind %r: dropped", entry.seq,
                    entry.kind)
        return 0

    def _whole_or_each(self, conn: Connection, what: str, items: list[Any],
                       apply: Callable[[list[Any]], int], shown: Callable[[Any], Any]) -> int:
        """``apply`` the batch in one savepoint; if that fails, each item in its own, dropping
        (with a warning naming it and why) only the items that fail."""
        try:
            with conn.begin_nested():
                return apply(items)
        except Exception as exc:
            log.warning("assay store: a journaled batch of %d %s failed (%s); applying them one "
                        "by one", len(items), what, exc)
        done = 0
        for item in items:
            try:
                with conn.begin_nested():
                    done += apply([item])
            except Exception as exc:
                self.dropped += 1
                raw = shown(item)
                log.warning("assay store: dropped journaled %s %s: %s", what,
                            raw.get("id") if isinstance(raw, Mapping) else raw, exc)
        return done
