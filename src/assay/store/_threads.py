"""Threads: the turns of one conversation with an agent, as LangSmith groups them.

A root run belongs to a thread when its metadata names one: ``session_id``, ``thread_id`` or
``conversation_id`` (the first present, LangSmith's rule; LangGraph writes ``thread_id``, chat
apps often ``session_id``). Each such root run is one turn. Nothing is stored for a thread: the
id is read from the runs' metadata (``thread_id_sql`` in SQL, ``thread_of`` in Python), so a
thread is whatever the project's traces say, at once and on both backends.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import and_, func, select

from .._ids import as_uuid
from .._time import to_micros
from ..schemas import Run
from ._run_filter import THREAD_KEYS, compile_filter, names_a_thread, thread_id_sql
from ._stats import quantile
from ._tables import runs
from ._types import from_micros

if TYPE_CHECKING:
    from ._base import Store

__all__ = ["THREAD_KEYS", "ThreadRepo", "ThreadSummary", "preview", "thread_id_sql",
           "thread_of"]

PREVIEW_CHARS = 200  # of a thread's first inputs and last outputs, in a summary
MAX_PAGE = 100
_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_cost",
          "completion_cost", "total_cost")


def thread_of(run: Run) -> str | None:
    """The thread id a run's metadata names, or None."""
    meta = (run.extra or {}).get("metadata")
    if isinstance(meta, Mapping):
        for key in THREAD_KEYS:
            value = meta.get(key)
            if value is not None:
                return str(value).lower() if isinstance(value, bool) else str(value)
    return None


class ThreadSummary(BaseModel):
    """One thread of a project (the fields of LangSmith's v2 ``Thread``)."""

    thread_id: str
    count: int  # turns: root runs
    min_start_time: datetime
    max_start_time: datetime
    first_trace_id: uuid.UUID | None = None
    last_trace_id: uuid.UUID | None = None
    first_inputs: str | None = None
    last_outputs: str | None = None
    last_error: str | None = None
    num_errored_turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_cost: float | None = None
    completion_cost: float | None = None
    total_cost: float | None = None
    latency_p50: float | None = None
    latency_p99: float | None = None
    last_end_time: datetime | None = None
    feedback_stats: dict[str, Any] | None = None


def preview(value: Any) -> str | None:
    """A value as text cut to ``PREVIEW_CHARS`` (a thread's first inputs, last outputs)."""
    if not value:
        return None
    from .. import _json

    text = value if isinstance(value, str) else _json.dumps(value)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


class ThreadRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _where(self, project_id: uuid.UUID | str, *, filter: str | None = None,
               min_start_time: datetime | str | None = None,
               max_start_time: datetime | str | None = None) -> list[Any]:
        dialect = self.store.engine.dialect.name
        conds: list[Any] = [runs.c.tenant_id == self.store.tenant_id,
                            runs.c.session_id == str(as_uuid(project_id, "project_id")),
                            runs.c.is_root.is_(True), names_a_thread(runs.c.extra, dialect),
                            thread_id_sql(runs, dialect).is_not(None)]
        if filter:
            conds.append(compile_filter(filter, runs, dialect))
        if min_start_time is not None:
            conds.append(runs.c.start_time >= to_micros(min_start_time))
        if max_start_time is not None:
            conds.append(runs.c.start_time < to_micros(max_start_time))
        return conds

    def list(self, project_id: uuid.UUID | str, *, filter: str | None = None,
             min_start_time: datetime | str | None = None,
             max_start_time: datetime | str | None = None, offset: int = 0,
             limit: int = 20) -> list[ThreadSummary]:
        """The project's threads, the most recently active first. ``filter`` (LangSmith's
        filter language) picks the turns that count; a thread is listed when one matches."""
        self.store.settle()
        self.store.projects.read(project_id=project_id)  # NotFoundError names it
        conds = self._where(project_id, filter=filter, min_start_time=min_start_time,
                            max_start_time=max_start_time)
        tid = thread_id_sql(runs, self.store.engine.dialect.name).label("tid")
        q = (select(tid).where(*conds).group_by(tid)
             .order_by(func.max(runs.c.start_time).desc(), tid)
             .offset(max(offset, 0)).limit(max(1, min(limit, MAX_PAGE + 1))))
        with self.store.read() as conn:  # (a page and one more: whether another page follows)
            ids = [row.tid for row in conn.execute(q)]
        return self._summaries(project_id, ids, conds)

    def count(self, project_id: uuid.UUID | str, *, filter: str | None = None,
              min_start_time: datetime | str | None = None,
              max_start_time: datetime | str | None = None) -> int:
        """How many threads ``list`` would give over all its pages (no summaries made)."""
        self.store.settle()
        self.store.projects.read(project_id=project_id)
        conds = self._where(project_id, filter=filter, min_start_time=min_start_time,
                            max_start_time=max_start_time)
        tid = thread_id_sql(runs, self.store.engine.dialect.name)
        with self.store.read() as conn:
            return int(conn.execute(select(func.count(func.distinct(tid))).where(*conds))
                       .scalar_one())

    def stats(self, project_id: uuid.UUID | str, thread_id: str) -> ThreadSummary | None:
        """One thread's summary over all its turns, or None when it has none."""
        self.store.settle()
        conds = self._where(project_id)
        found = self._summaries(project_id, [thread_id], conds)
        return found[0] if found else None

    def traces(self, project_id: uuid.UUID | str, thread_id: str, *, filter: str | None = None,
               order: str = "asc", offset: int = 0, limit: int | None = None) -> builtins.list[Run]:
        """A thread's turns (root runs), in time order (``order="desc"``: newest first)."""
        self.store.settle()
        self.store.projects.read(project_id=project_id)
        conds = self._where(project_id, filter=filter)
        tid = thread_id_sql(runs, self.store.engine.dialect.name)
        with self.store.read() as conn:
            ids = [str(r) for r in conn.execute(select(runs.c.id).where(*conds, tid == thread_id))
                   .scalars()]
        if not ids:
            return []
        # (by id alone: with the project's too, SQLite without ANALYZE statistics walks the
        # project's start-time index instead of looking the ids up)
        return self.store.runs.list(run_ids=ids, order="desc" if order == "desc" else "asc",
                                    offset=offset, limit=limit)

    def usage_of(self, root_ids: builtins.list[str]) -> dict[str, dict[str, Any]]:
        """Tokens and cost of each turn: its trace's llm runs summed (a chain root's own row
        carries none; as ``subtree_usage``, without needing dotted orders)."""
        sums = [func.sum(runs.c[c]).label(c) for c in _USAGE]
        out: dict[str, dict[str, Any]] = {}
        with self.store.read() as conn:
            for i in range(0, len(root_ids), 500):
                q = (select(runs.c.trace_id, *sums)
                     .where(runs.c.tenant_id == self.store.tenant_id,
                            runs.c.trace_id.in_(root_ids[i:i + 500]), runs.c.run_type == "llm")
                     .group_by(runs.c.trace_id))
                for row in conn.execute(q):  # PostgreSQL sums integers as numeric
                    out[str(row.trace_id)] = {
                        c: None if row._mapping[c] is None else
                        (float(row._mapping[c]) if c.endswith("cost") else int(row._mapping[c]))
                        for c in _USAGE}
        return out

    def _summaries(self, project_id: uuid.UUID | str, ids: builtins.list[str],
                   conds: builtins.list[Any]) -> builtins.list[ThreadSummary]:
        if not ids:
            return []
        tid = thread_id_sql(runs, self.store.engine.dialect.name)
        cols = [tid.label("tid"), runs.c.id, runs.c.start_time, runs.c.end_time, runs.c.error,
                runs.c.latency_us, runs.c.inputs, runs.c.outputs, runs.c.prompt_tokens,
                runs.c.completion_tokens, runs.c.total_tokens, runs.c.prompt_cost,
                runs.c.completion_cost, runs.c.total_cost]
        turns: dict[str, builtins.list[Any]] = {t: [] for t in ids}
        with self.store.read() as conn:
            # (ordered here, not by an ORDER BY: SQLite without ANALYZE statistics would walk
            # the project's start-time index for it instead of the threads' own entries)
            for row in sorted(conn.execute(select(*cols).where(and_(*conds), tid.in_(ids))),
                              key=lambda r: (r.start_time, str(r.id))):
                turns[row.tid].append(row)
        usage = self.usage_of([str(r.id) for rows in turns.values() for r in rows])
        group = {str(r.id): t for t, rows in turns.items() for r in rows}
        feedback = self.store.runs.feedback_stats(list(group), group_of=group)
        out = []
        for t in ids:
            rows = turns[t]
            if not rows:
                continue
            spent = [usage.get(str(r.id), {}) for r in rows]
            errors = [r for r in rows if r.error]
            latencies = [r.latency_us / 1e6 for r in rows if r.latency_us is not None]
            ends = [r.end_time for r in rows if r.end_time is not None]
            out.append(ThreadSummary(
                thread_id=t, count=len(rows),
                min_start_time=_when(rows[0].start_time),
                max_start_time=_when(rows[-1].start_time),
                first_trace_id=rows[0].id, last_trace_id=rows[-1].id,
                first_inputs=preview(rows[0].inputs), last_outputs=preview(rows[-1].outputs),
                last_error=errors[-1].error if errors else None,
                num_errored_turns=len(errors),
                prompt_tokens=sum(s.get("prompt_tokens") or 0 for s in spent),
                completion_tokens=sum(s.get("completion_tokens") or 0 for s in spent),
                total_tokens=sum(s.get("total_tokens") or 0 for s in spent),
                prompt_cost=_cost(spent, "prompt_cost"),
                completion_cost=_cost(spent, "completion_cost"),
                total_cost=_cost(spent, "total_cost"),
                latency_p50=quantile(latencies, 0.5), latency_p99=quantile(latencies, 0.99),
                last_end_time=from_micros(max(ends)) if ends else None,
                feedback_stats=feedback.get(t) or None))
        return out


def _when(micros: int) -> datetime:
    when = from_micros(micros)
    assert when is not None  # start_time is NOT NULL
    return when


def _cost(spent: Sequence[Mapping[str, Any]], key: str) -> float | None:
    known = [s[key] for s in spent if s.get(key) is not None]
    return float(sum(known)) if known else None

