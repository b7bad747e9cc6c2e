"""Where a run posted without a dotted order goes in its trace, once its parent is known.

LangSmith's single-run API (``create_run(parent_run_id=...)``) sends no dotted order; the store
derives it from the parent's (``RunRepo._derive_dotted_orders``, the fold's ``fill_orders``).
A child that arrives before its parent cannot be placed then and is stored without one: reads
nest it by ``parent_run_id``, but a grandparent's roll-up (which reads by dotted order) missed
it. ``place_waiting`` places such runs when their parent is written, and their own waiting
children after them.

Found through a small partial index of the runs without an order (``ix_runs_unplaced``,
migration 0017): one probe per write finds it empty, the common case.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select, update

from .._ids import dotted_segment_us
from ._aggregates import RunDeltas
from ._driver import marked
from ._tables import runs
from ._types import to_micros

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["MAX_DEPTH", "dotted_orders_of", "place_waiting", "stored_traces", "trace_of"]

_CHUNK = 500
MAX_DEPTH = 1000  # a parent chain longer than this is a loop, not a trace
_PROBE = ("SELECT 1 FROM runs WHERE tenant_id = ? AND dotted_order IS NULL "
          "AND parent_run_id IS NOT NULL LIMIT 1")


def _stored(conn: Connection, tenant: Any, run_ids: Iterable[str], *columns: Any,
            where: Any = None) -> dict[str, Any]:
    """``columns`` of the stored runs among ``run_ids`` (id -> row), a chunk at a time."""
    out: dict[str, Any] = {}
    ids = sorted(set(run_ids))
    for i in range(0, len(ids), _CHUNK):
        q = select(runs.c.id, *columns).where(runs.c.id.in_(ids[i:i + _CHUNK]),
                                              runs.c.tenant_id == tenant)
        out.update({str(row[0]): row for row in conn.execute(
            q if where is None else q.where(where))})
    return out


def stored_traces(conn: Connection, tenant: Any, run_ids: Iterable[str]) -> dict[str, Any]:
    """The trace ids of the stored runs among ``run_ids``."""
    return {rid: row.trace_id for rid, row in _stored(conn, tenant, run_ids,
                                                      runs.c.trace_id).items()}


def trace_of(run_id: str, rows: dict[str, dict[str, Any]], stored: dict[str, Any]) -> Any:
    """The trace of a run posted without one (LangSmith's ``create_run(parent_run_id=...)``
    names only the parent): a root's own id; else its parent's trace, the parent in the batch
    (``rows``) or stored (``stored``: ``stored_traces`` of the parents not in the batch); else,
    the parent not stored yet, the parent's id for now (right for a root's child), which
    ``place_waiting`` corrects when it places the run under its parent."""
    row = rows[run_id]
    for _ in range(MAX_DEPTH):
        parent = row.get("parent_run_id")
        if parent is None:
            return row["id"]
        above = rows.get(str(parent))
        if above is None:
            return stored.get(str(parent), parent)
        if above.get("trace_id") is not None:
            return above["trace_id"]
        row = above
    return rows[run_id].get("parent_run_id")


def dotted_orders_of(conn: Connection, tenant: Any, run_ids: set[str]) -> dict[str, str]:
    """The stored dotted orders of ``run_ids`` (those that have one): what a child posted
    without an order is placed under (the writer's rows in the fold, single posts here)."""
    return {rid: row.dotted_order for rid, row in _stored(
        conn, tenant, run_ids, runs.c.dotted_order,
        where=runs.c.dotted_order.is_not(None)).items()}


def place_waiting(conn: Connection, tenant: str, written: Iterable[str]) -> int:
    """Give the stored runs waiting for a run of ``written`` (their parent, now stored) their
    dotted order, then theirs in turn; returns how many were placed. A run stored naming its
    parent alone had its trace guessed (``trace_of``): it takes its parent's, and the trace's
    statistics move with it."""
    if conn.exec_driver_sql(marked(conn, _PROBE), (tenant,)).first() is None:
        return 0  # nothing waits anywhere in the workspace: one probe of an empty index
    placed = 0
    parents = set(written)
    for _ in range(MAX_DEPTH):
        if not parents:
            break
        ids = sorted(parents)
        waiting: list[Any] = []
        for i in range(0, len(ids), _CHUNK):
            waiting += conn.execute(select(runs.c.id, runs.c.parent_run_id, runs.c.start_time,
                                           runs.c.trace_id)
                                    .where(runs.c.tenant_id == tenant,
                                           runs.c.dotted_order.is_(None),
                                           runs.c.parent_run_id.in_(ids[i:i + _CHUNK]))).all()
        if not waiting:
            break
        above = _stored(conn, tenant, {str(w.parent_run_id) for w in waiting},
                        runs.c.dotted_order, runs.c.trace_id)
        rows, moved = [], {}
        for w in waiting:
            parent = above.get(str(w.parent_run_id))
            if parent is not None and parent.dotted_order is not None:  # (else it has no
                # order yet either: placed with it)
                own = dotted_segment_us(to_micros(w.start_time) or 0, str(w.id))  # never NULL
                trace = w.trace_id
                if str(trace) == str(w.parent_run_id) != str(parent.trace_id):
                    trace = moved[str(w.id)] = parent.trace_id  # a guess: the parent's
                rows.append({"_id": w.id, "_order": f"{parent.dotted_order}.{own}",
                             "_trace": trace})
        if not rows:
            break
        deltas = _moving(conn, tenant, moved)
        conn.execute(update(runs).where(runs.c.tenant_id == tenant,
                                        runs.c.id == bindparam("_id"))
                     .values(dotted_order=bindparam("_order"), trace_id=bindparam("_trace")),
                     rows)
        if deltas is not None:
            deltas.apply(conn)
            deltas.drop_empty_streams(conn)
        placed += len(rows)
        parents = {str(r["_id"]) for r in rows}
    return placed


def _moving(conn: Connection, tenant: str, moved: dict[str, Any]) -> RunDeltas | None:
    """The statistics' change of moving runs to other traces (``moved``: id -> new trace):
    each row's part taken away, then put back with its new trace (``trace_streams``)."""
    if not moved:
        return None
    deltas = RunDeltas()
    for row in conn.execute(select(runs).where(runs.c.tenant_id == tenant,
                                               runs.c.id.in_(sorted(moved)))):
        old = {k: (to_micros(v) if isinstance(v, datetime) else v)
               for k, v in row._mapping.items()}
        deltas.add(old, -1)
        deltas.add({**old, "trace_id": moved[str(row.id)]}, 1)
    return deltas
