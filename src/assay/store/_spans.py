"""OpenTelemetry spans as runs: parents that arrive after their children, retried exports.

OTLP exporters send spans as they end, so a child usually arrives before its parent (often in
another request), a trace may be split over many exports, and a retrying exporter sends the
same span twice. A run's tree position (its parent and dotted order) is therefore settled here,
in the transaction that stores a batch:

- a run's id is derived from its span (the caller does that), so a span sent again is the same
  run (stored once: a repeated post only fills what is missing);
- a run whose parent is known (in this batch or stored) gets its dotted order below the parent's;
  one whose parent is not known yet is kept as the top of its own subtree (its order is its own
  segment) with its parent's id already set: visible at once, even if its parent never comes;
- when a run arrives, stored runs that name it as parent and are not below it yet are moved
  under it (their subtree's orders rewritten), and runs that named a root span by its span id
  (a root's run id is its trace's) are pointed at the root.

A root, and only a root, has no parent, so adoption never changes which runs are roots and the
project statistics kept per write stay right. On PostgreSQL a transaction-scoped advisory lock
per trace serializes batches of the same trace (a child committed while its parent's batch was
looking for children would otherwise stay orphaned); SQLite's write lock already does.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, literal, or_, select, text, update

from .._ids import dotted_segment_us
from .._time import to_micros
from ._tables import runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["SpanRun", "store_spans"]


@dataclass
class SpanRun:
    """One span to store: its run post (``id``, ``trace_id``, times, fields; no parent or
    dotted order) and where it sits in its trace.

    ``parent_id`` is the id the parent span's run has if it is not a root; ``alias_id`` is the id
    this run would have were it not a root (children that arrived first point there).
    """

    post: dict[str, Any]
    span_id: str
    parent_span_id: str | None
    parent_id: str | None
    alias_id: str


def _lock_traces(conn: Connection, trace_ids: Sequence[str]) -> None:
    if conn.dialect.name != "postgresql":
        return
    for tid in sorted(set(trace_ids)):
        key = zlib.crc32(tid.encode()) - (1 << 31)  # a signed 32-bit key per trace
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})


def _known(conn: Connection, tenant: str, ids: set[str]) -> dict[str, tuple[str | None, Any]]:
    """Stored runs among ``ids``: id -> (dotted order, extra)."""
    found: dict[str, tuple[str | None, Any]] = {}
    wanted = sorted(ids)
    for i in range(0, len(wanted), 500):
        for row in conn.execute(select(runs.c.id, runs.c.dotted_order, runs.c.extra).where(
                runs.c.tenant_id == tenant, runs.c.id.in_(wanted[i:i + 500]))):
            found[row.id] = (row.dotted_order, row.extra)
    return found


def _root_span(extra: Any) -> str | None:
    meta = (extra or {}).get("metadata") if isinstance(extra, dict) else None
    return meta.get("otel_span_id") if isinstance(meta, dict) else None


def _place(items: Sequence[SpanRun], stored: dict[str, tuple[str | None, Any]]) -> None:
    """Give every post its parent and dotted order (provisional where the parent is unknown)."""
    orders: dict[str, str] = {i: o for i, (o, _) in stored.items() if o}
    root_spans = {i: _root_span(e) for i, (_, e) in stored.items()}
    for item in items:
        if item.parent_span_id is None:
            root_spans[item.post["id"]] = item.span_id
    todo = sorted(items, key=lambda it: it.post["start_us"])
    while todo:
        waiting = []
        for item in todo:
            post = item.post
            seg = dotted_segment_us(post["start_us"], post["id"])
            if item.parent_span_id is None:
                post["parent_run_id"] = None
                orders[post["id"]] = post["dotted_order"] = seg
                continue
            parent = None
            if item.parent_id in orders:
                parent = item.parent_id
            elif root_spans.get(post["trace_id"]) == item.parent_span_id \
                    and post["trace_id"] in orders:
                parent = post["trace_id"]
            if parent is None:
                waiting.append(item)
                continue
            post["parent_run_id"] = parent
            orders[post["id"]] = post["dotted_order"] = f"{orders[parent]}.{seg}"
        if len(waiting) == len(todo):  # parents not here yet: each tops its own subtree
            for item in waiting:
                post = item.post
                post["parent_run_id"] = item.parent_id
                orders[post["id"]] = post["dotted_order"] = dotted_segment_us(
                    post["start_us"], post["id"])
            return
        todo = waiting


def _adopt(conn: Connection, tenant: str, items: Sequence[SpanRun]) -> int:
    """Move stored runs that wait for a run of this batch under it; return how many moved.

    One query finds every stored run naming a run of the batch (or a root's span alias) as its
    parent; only those not yet below it (the rare out-of-order arrivals) are rewritten."""
    placed = {it.post["id"]: it.post for it in items}
    alias = {it.alias_id: it.post["id"] for it in items
             if it.parent_span_id is None and it.alias_id != it.post["id"]}
    parents = sorted({*placed, *alias})
    traces = sorted({it.post["trace_id"] for it in items})
    waiting: list[tuple[str, str, str | None]] = []
    for i in range(0, len(parents), 400):
        waiting += conn.execute(select(runs.c.id, runs.c.parent_run_id, runs.c.dotted_order).where(
            runs.c.tenant_id == tenant, runs.c.trace_id.in_(traces),
            runs.c.parent_run_id.in_(parents[i:i + 400]))).all()
    moved = 0
    for child_id, parent_id, old in waiting:
        if parent_id in alias:  # it named a root by its span: point it at the root's run
            parent_id = alias[parent_id]
            conn.execute(update(runs).where(runs.c.tenant_id == tenant, runs.c.id == child_id)
                         .values(parent_run_id=parent_id))
        parent = placed[parent_id]
        order, trace = parent["dotted_order"], parent["trace_id"]
        if not old or old.startswith(order + "."):
            continue
        new = f"{order}.{old}"
        conn.execute(update(runs).where(
            runs.c.tenant_id == tenant, runs.c.trace_id == trace,
            or_(runs.c.dotted_order == old,
                runs.c.dotted_order.startswith(old + ".", autoescape=True)),
        ).values(dotted_order=literal(new) + func.substr(runs.c.dotted_order, len(old) + 1)))
        moved += 1
    return moved


def store_spans(store: Store, items: Sequence[SpanRun], default_project: str = "default") -> int:
    """Store the runs of ``items`` in one transaction, placed in their traces; returns how many
    stored runs were moved under a parent that arrived now."""
    if not items:
        return 0
    for item in items:
        item.post["start_us"] = to_micros(item.post["start_time"])
    tenant = store.tenant_id
    with store.write() as conn:
        _lock_traces(conn, [i.post["trace_id"] for i in items])
        wanted = {i.parent_id for i in items if i.parent_id} | {i.post["trace_id"] for i in items}
        _place(items, _known(conn, tenant, wanted))
        posts = []
        for item in items:
            post = dict(item.post)
            post.pop("start_us")
            posts.append(post)
        store.runs._apply(conn, posts, [], default_project)
        return _adopt(conn, tenant, items)
