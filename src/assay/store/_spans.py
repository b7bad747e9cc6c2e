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
  (a root's run id is its trace's) are pointed at the root;
- a trace may have several root spans: the first takes the trace's id, the others keep their
  span's (``_second_roots``), each with its own subtree.

A root, and only a root, has no parent, so adoption never changes which runs are roots and the
project statistics kept per write stay right. On PostgreSQL a transaction-scoped advisory lock
per trace serializes batches of the same trace (a child committed while its parent's batch was
looking for children would otherwise stay orphaned); SQLite's write lock already does.

Cost: almost every span of an export is a new run, so those go from their post straight to the
row (``_span_rows``, the same column values ``RunRepo`` would write) in one multi-row insert,
with three indexed lookups per batch (which ids and parents are stored, which stored runs wait
for one of the batch); a span sent again, and a second copy within one batch, take the general
``RunRepo`` path, which fills in only what the stored run is missing.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, literal, or_, update
from sqlalchemy.exc import IntegrityError

from .. import _json
from .._ids import dotted_segment_us
from ..errors import StoreError
from ._driver import in_marks
from ._span_rows import insert_span_rows
from ._tables import runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["SpanRun", "store_spans"]

_CHUNK = 400


@dataclass(slots=True)
class SpanRun:
    """One span to store: its run post (``id``, ``trace_id``, ``start_time``/``end_time`` as
    epoch microseconds, fields; no parent or dotted order) and where it sits in its trace.

    ``parent_id`` is the id the parent span's run has if it is not a root; ``alias_id`` is the id
    this run would have were it not a root (children that arrived first point there).
    ``values``: the post's ``span_values``, when the caller computed them before queueing for
    the write lock (the server does, on the request's thread).
    """

    post: dict[str, Any]
    span_id: str
    parent_span_id: str | None
    parent_id: str | None
    alias_id: str
    values: dict[str, Any] | None = None


def _lock_traces(conn: Connection, trace_ids: Sequence[str]) -> None:
    """PostgreSQL: a transaction-scoped advisory lock per trace, taken in one statement, in
    key order (two batches sharing traces lock them in the same order: no deadlock)."""
    if conn.dialect.name != "postgresql":
        return
    keys = sorted({zlib.crc32(tid.encode()) - (1 << 31) for tid in trace_ids})  # signed 32-bit
    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(k) FROM unnest(%s::bigint[]) AS k",
                         (keys,)).all()


def _in(conn: Connection, column: str, values: list[str]) -> tuple[str, tuple[Any, ...]]:
    """``column`` among ``values`` as SQL text and its parameters: one array parameter on
    PostgreSQL (a statement the driver parses once, whatever the count), placeholders on
    SQLite."""
    if conn.dialect.name == "postgresql":
        return f"{column} = ANY(%s)", (values,)
    cond, bound = in_marks(values)
    return f"{column} {cond}", tuple(bound)


def _select(conn: Connection, columns: str, column: str, values: set[str] | list[str],
            tenant: str, where: str = "") -> list[Any]:
    """``SELECT columns FROM runs`` of the workspace where ``column`` is among ``values``
    (SQL text: no statement to build per batch; chunked under SQLite's parameter limit)."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    wanted = sorted(values)
    out: list[Any] = []
    for i in range(0, len(wanted), _CHUNK):
        cond, params = _in(conn, column, wanted[i:i + _CHUNK])
        out += conn.exec_driver_sql(
            f"SELECT {columns} FROM runs WHERE {cond} AND tenant_id = {mark}{where}",
            (*params, tenant)).all()
    return out


def _known(conn: Connection, tenant: str, ids: set[str]) -> dict[str, str | None]:
    """Stored runs among ``ids``: id -> dotted order (a primary-key probe each)."""
    return dict(_select(conn, "id, dotted_order", "id", ids, tenant))


def _root_spans(conn: Connection, tenant: str, roots: set[str]) -> dict[str, str | None]:
    """The span id each stored root among ``roots`` was made from (kept in its metadata).
    Asked only for a child whose parent is not found by id: a root that came before it."""
    out: dict[str, str | None] = {}
    for rid, extra in _select(conn, "id, extra", "id", roots, tenant):
        if isinstance(extra, str):
            extra = _json.loads_column(extra)
        meta = (extra or {}).get("metadata") if isinstance(extra, dict) else None
        out[rid] = meta.get("otel_span_id") if isinstance(meta, dict) else None
    return out


def _second_roots(conn: Connection, tenant: str, items: Sequence[SpanRun],
                  stored: dict[str, str | None]) -> bool:
    """A trace's run id goes to its first root span; another parentless span of the same
    trace (OTLP allows several) keeps the id its span gives it (``alias_id``), or it would be
    taken for the first one sent again and dropped, its children moved under the other root.
    The first is the one stored, else the batch's first; returns whether any run changed id."""
    parentless = [i for i in items if i.parent_span_id is None]
    if not parentless:
        return False
    kept = {i.post["id"] for i in parentless if i.post["id"] in stored}
    owners = {rid: span for rid, span in _root_spans(conn, tenant, kept).items()
              if span} if kept else {}
    changed = False
    for item in parentless:
        rid = item.post["id"]
        if owners.setdefault(rid, item.span_id) != item.span_id and item.alias_id != rid:
            item.post["id"] = item.alias_id
            item.values = None  # computed with the old id
            changed = True
    return changed


def _place(items: Sequence[SpanRun], orders: dict[str, str],
           root_spans: dict[str, str | None]) -> None:
    """Give every post its parent and dotted order (provisional where the parent is unknown).
    ``orders`` holds the stored runs' orders (and gets the batch's); ``root_spans`` the span id
    of stored roots that a child may name by span."""
    for item in items:
        if item.parent_span_id is None:
            root_spans[item.post["id"]] = item.span_id
    todo = sorted(items, key=lambda it: it.post["start_time"])
    while todo:
        waiting = []
        for item in todo:
            post = item.post
            seg = dotted_segment_us(post["start_time"], post["id"])
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
                    post["start_time"], post["id"])
            return
        todo = waiting


def _adopt(conn: Connection, tenant: str, items: Sequence[SpanRun]) -> int:
    """Move stored runs that wait for a run of this batch under it; return how many moved.

    A run waiting for its parent tops its own subtree: its dotted order is one segment (no
    dot). One indexed query (``parent_run_id``) finds those naming a run of the batch (or a
    root's span alias) as parent; the rest of the batch's children are below their parents
    already and not even read."""
    placed = {it.post["id"]: it.post for it in items}
    alias = {it.alias_id: it.post["id"] for it in items
             if it.parent_span_id is None and it.alias_id != it.post["id"]}
    waiting = _select(conn, "id, parent_run_id, dotted_order", "parent_run_id",
                      {*placed, *alias}, tenant, " AND dotted_order NOT LIKE '%%.%%'")
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
    stored runs were moved under a parent that arrived now.

    A concurrent writer (another worker process) that stored one of these runs, or created
    their project, first makes the insert fail: the transaction is rolled back and tried again,
    finding what it wrote (as ``RunRepo.upsert`` does)."""
    if not items:
        return 0
    for attempt in range(3):
        try:
            return _store_once(store, items, default_project)
        except StoreError as exc:
            if (not isinstance(exc.__cause__, IntegrityError) or attempt == 2
                    or store._active() is not None):
                raise
    return 0  # pragma: no cover


def _store_once(store: Store, items: Sequence[SpanRun], default_project: str) -> int:
    tenant = store.tenant_id
    with store.write() as conn:
        _lock_traces(conn, [i.post["trace_id"] for i in items])
        ids = {i.post["id"] for i in items}
        wanted = ids | {i.parent_id for i in items if i.parent_id} | {
            i.post["trace_id"] for i in items}
        stored = _known(conn, tenant, wanted)
        if _second_roots(conn, tenant, items, stored):  # rare: re-read with their new ids
            ids = {i.post["id"] for i in items}
            stored = _known(conn, tenant, wanted | ids)
        orders = {k: v for k, v in stored.items() if v}
        # a child whose parent is not found by id may name a stored root by its span id
        roots = {i.post["trace_id"] for i in items
                 if i.parent_id and i.parent_id not in stored and i.parent_id not in ids
                 and i.post["trace_id"] in stored and i.post["trace_id"] not in ids}
        _place(items, orders, _root_spans(conn, tenant, roots) if roots else {})
        new: list[dict[str, Any]] = []
        values: list[dict[str, Any] | None] = []
        again: list[dict[str, Any]] = []  # stored already, or twice in the batch
        seen: set[str] = set()
        for item in items:
            rid = item.post["id"]
            if rid in stored or rid in seen:
                again.append(item.post)
            else:
                new.append(item.post)
                values.append(item.values)
            seen.add(rid)
        insert_span_rows(store, conn, new, default_project, values)
        if again:
            store.runs._apply(conn, again, [], default_project)
        return _adopt(conn, tenant, items)
