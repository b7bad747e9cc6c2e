"""Runs: batched upserts with LangSmith's post/patch semantics, queries and trees.

A post creates a run; a patch completes it (end_time, outputs, error...). They may come merged,
separately, in separate requests, or (with several senders) patch first: a post never overwrites
what a patch already set, and a patch overwrites with every non-null field it carries.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import repeat
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.exc import IntegrityError

from .._gc import build_many
from .._ids import _CANONICAL_UUID, as_uuid, dotted_segment_us, utcnow, uuid_text
from .._json import escape_text, unescape_text
from .._time import _MAX_US, _MIN_US
from .._usage import derive_usage
from ..errors import InvalidInputError, NotFoundError, StoreError
from ..schemas import RUN_TYPES, Run
from . import _run_usage
from ._aggregates import (
    FEEDBACK_RETURNING,
    ORPHAN,
    RUN_RETURNING,
    FeedbackDeltas,
    RunDeltas,
)
from ._bulk import insert_many
from ._fold_rows import apply_new_runs
from ._placing import MAX_DEPTH as _MAX_DEPTH
from ._placing import dotted_orders_of, stored_traces, trace_of
from ._run_filter import compile_filter, text_search
from ._tables import runs, shares
from ._types import sender_micros, to_micros

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["RunRepo", "RUN_FIELDS"]

RUN_FIELDS = (
    "id", "name", "run_type", "start_time", "end_time", "inputs", "outputs", "error", "extra",
    "events", "tags", "serialized", "trace_id", "parent_run_id", "dotted_order",
    "reference_example_id", "status",
)
_IDENTITY = ("name", "run_type", "start_time", "trace_id", "parent_run_id", "dotted_order")
_ID_FIELDS = ("id", "trace_id", "parent_run_id", "reference_example_id")
_ORPHAN = ORPHAN  # a patch stored before its post arrived
_TEXT_FIELDS = ("name", "error")  # free text in text columns (the rest is JSON or ids)
_COLUMN_ORDER = tuple(sorted(c.name for c in runs.columns))
_COLUMNS = frozenset(_COLUMN_ORDER)


def _clean(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate one wire run (post or patch) and keep the fields the store knows."""
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"a run must be an object, got {type(raw).__name__}")
    if raw.get("id") is None:
        raise InvalidInputError("a run needs an 'id'")
    run_id = uuid_text(raw["id"], "run id")
    out: dict[str, Any] = {"id": run_id}
    get = raw.get  # every run the server ingests comes here: plain values checked cheaply
    for key in _KEPT:
        value = get(key)
        if value is not None:
            out[key] = value
    get = out.get
    for key in _ID_FIELDS[1:]:
        value = get(key)
        if value is not None and (value.__class__ is not str or not _canonical(value)):
            out[key] = uuid_text(value, f"run {run_id}: {key}")
    for key in ("start_time", "end_time"):
        value = get(key)
        if value is not None and (value.__class__ is not int or not _MIN_US <= value <= _MAX_US):
            out[key] = sender_micros(value, f"run {run_id}: {key}")  # no datetime: refused
    start, end = get("start_time"), get("end_time")
    if start is not None and end is not None and end < start:  # a negative latency
        raise InvalidInputError(f"run {run_id}: end_time is before its start_time")
    for key, kind in _KINDS:
        value = get(key)
        if value is not None and not isinstance(value, kind):
            raise InvalidInputError(
                f"run {run_id}: {key} must be a{'n object' if kind is dict else ' list'}"
            )
    value = get("error")
    if value is not None and not isinstance(value, str):
        out["error"] = str(value)
    for key in _TEXT_FIELDS:  # NUL and lone surrogates as JSON columns store them (_json)
        value = get(key)
        if value.__class__ is str and ("\x00" in value or not value.isascii()):
            out[key] = escape_text(value)
    for key in _STRINGS:  # else written, then unreadable (or refused by the driver at the fold)
        value = get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"run {run_id}: {key} must be a string")
    value = get("run_type")
    if value is not None and value not in _RUN_TYPES:  # (LangSmith's enum: 422 there too)
        raise InvalidInputError(f"run {run_id}: run_type {value[:80]!r} is not one of "
                                f"{', '.join(RUN_TYPES)}")
    value = get("dotted_order")
    if value is not None and not _dotted_order_of(value, run_id):
        raise InvalidInputError(
            f"run {run_id}: dotted_order {value[:80]!r} is not a dotted order (segments "
            "'<YYYYMMDDTHHMMSSffffff>Z<run id>' joined by '.', the last one this run's id): "
            "its trace could not be read")
    for key, item_kind in _ITEMS:
        value = get(key)
        if value and not all(map(isinstance, value, repeat(item_kind))):  # in C: every ingest
            raise InvalidInputError(f"run {run_id}: each of {key} must be a"
                                    f"{'n object' if item_kind is dict else ' string'}")
    return out


_STRINGS = ("name", "run_type", "dotted_order", "status")
_RUN_TYPES = frozenset(RUN_TYPES)
# a segment: the run's start (UTC, 6 to 12 digits after the seconds' start) and its id
_HEX = "[0-9a-fA-F]"
_SEGMENT = rf"\d{{8}}T\d{{6,12}}Z{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_DOTTED = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")


def _dotted_order_of(value: str, run_id: str) -> bool:
    """Whether ``value`` is a dotted order ending in ``run_id``'s segment (what
    ``_cencode.admitted_post`` also checks, before the Python is asked)."""
    return (value.isascii() and _DOTTED.fullmatch(value) is not None
            and value[-36:].lower() == run_id)


_ITEMS = (("events", dict), ("tags", str))  # what a stored run's lists hold (schemas.Run)


_KEPT = RUN_FIELDS[1:]
_KINDS = (("inputs", dict), ("outputs", dict), ("extra", dict), ("events", list),
          ("tags", list), ("serialized", dict))
_canonical = _CANONICAL_UUID.fullmatch


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    """Fill the derived columns of a merged run row."""
    row["is_root"] = row.get("parent_run_id") is None
    start, end = row.get("start_time"), row.get("end_time")
    row["latency_us"] = end - start if start is not None and end is not None else None
    usage = derive_usage(row)
    ft = usage.pop("first_token_time")
    row.update(usage)
    row["first_token_time"] = to_micros(ft) if ft is not None else None
    row["first_token_us"] = (
        row["first_token_time"] - start if row["first_token_time"] is not None and start else None
    )
    if row.get("status") != _ORPHAN:
        if row.get("error"):
            row["status"] = "error"
        elif end is not None:
            row["status"] = "success"
        else:
            row["status"] = row.get("status") or "pending"
    if not row.get("dotted_order") and start is not None and row.get("parent_run_id") is None:
        row["dotted_order"] = dotted_segment_us(start, row["id"])
    return {c: row.get(c) for c in _COLUMN_ORDER}


_UPDATABLE = tuple(c for c in _COLUMN_ORDER if c not in ("id", "tenant_id"))
_UPDATE = (
    update(runs)
    .where(runs.c.id == bindparam("_id"))
    .values({c: bindparam(c, type_=runs.c[c].type) for c in _UPDATABLE})
)


def _row_to_run(row: Any) -> Run:
    data = dict(row._mapping)
    for k in ("is_root", "latency_us", "first_token_us", "tenant_id"):
        data.pop(k, None)
    data["inputs"] = data.get("inputs") or {}
    for key in _TEXT_FIELDS:
        value = data.get(key)
        if value:
            data[key] = unescape_text(value)
    if data.get("status") == _ORPHAN:
        data["status"] = "pending"
    return Run.model_validate(data)


class RunRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    def upsert(
        self,
        posts: Iterable[Mapping[str, Any]] = (),
        patches: Iterable[Mapping[str, Any]] = (),
        *,
        default_project: str = "default",
    ) -> int:
        """Store posts and patches in one transaction; return how many runs were touched.

        Each run names its project by ``session_id`` or ``session_name`` (created if missing).
        """
        post_pairs = [(_clean(r), r) for r in posts]
        patch_pairs = [(_clean(r), r) for r in patches]
        if not post_pairs and not patch_pairs:
            return 0
        for attempt in range(3):
            try:
                with self.store.write() as conn:
                    return self._upsert(conn, post_pairs, patch_pairs, default_project)
            except StoreError as exc:
                # a concurrent writer inserted one of our ids (or projects) first: read again.
                # Not inside an enclosing transaction(), which the failure has spoilt.
                if (not isinstance(exc.__cause__, IntegrityError) or attempt == 2
                        or self.store._active() is not None):
                    raise
        return 0  # pragma: no cover

    def _apply(self, conn: Connection, posts: Iterable[Mapping[str, Any]],
               patches: Iterable[Mapping[str, Any]], default_project: str, *,
               clean: bool = False) -> int:
        """``upsert`` in the caller's transaction (the journal's fold). ``clean``: the runs
        already went through ``_clean`` (``Journal.admit``), so they are their own clean form."""
        if clean:
            return self._upsert(conn, [(r, r) for r in posts],
                                [(r, r) for r in patches], default_project)
        return self._upsert(conn, [(_clean(r), r) for r in posts],
                            [(_clean(r), r) for r in patches], default_project)

    def _session_of(self, conn: Connection, raw: Mapping[str, Any], cache: dict[Any, str],
                    default_project: str) -> str:
        projects = self.store.projects
        given = raw.get("session_id")
        if given:
            key = ("id", given if given.__class__ is str else str(given))
            sid = cache.get(key)
            if sid is None:
                sid = cache[key] = str(as_uuid(given, "session_id"))
                projects._ensure_id(conn, sid, raw.get("session_name"))
            return sid
        name = raw.get("session_name") or default_project
        if not isinstance(name, str):
            raise InvalidInputError("session_name must be a string")
        if name not in cache:
            cache[name] = projects._get_or_create(conn, name)
        return cache[name]

    def _upsert(self, conn: Connection,
                posts: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                patches: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                default_project: str) -> int:
        ids = sorted({r["id"] for r, _ in posts} | {r["id"] for r, _ in patches})
        existing: dict[str, dict[str, Any]] = {}
        deltas = RunDeltas()
        was_orphan: set[str] = set()
        for i in range(0, len(ids), 500):
            # FOR UPDATE (PostgreSQL; SQLite's write lock already serializes): a concurrent
            # writer of the same run waits, so the old values the deltas subtract are current
            for row in conn.execute(
                select(runs).where(runs.c.id.in_(ids[i : i + 500]),
                                   runs.c.tenant_id == self.store.tenant_id).with_for_update()
            ):
                old = {k: (to_micros(v) if isinstance(v, datetime) else v)
                       for k, v in row._mapping.items()}
                deltas.add(old, -1)
                if old["status"] == _ORPHAN:
                    was_orphan.add(row.id)
                existing[row.id] = old
        fresh: set[str] = set()
        cache: dict[Any, str] = {}
        for clean, raw in posts:
            cur = existing.get(clean["id"])
            if cur is None:
                cur = {"tenant_id": self.store.tenant_id,
                       "session_id": self._session_of(conn, raw, cache, default_project)}
                cur.update(clean)
                existing[clean["id"]] = cur
                fresh.add(clean["id"])
            elif cur.get("status") == _ORPHAN:
                for k, v in clean.items():
                    if k in _IDENTITY or cur.get(k) is None:
                        cur[k] = v
                cur["status"] = None
                cur["session_id"] = self._session_of(conn, raw, cache, default_project)
            else:
                for k, v in clean.items():
                    if cur.get(k) is None:
                        cur[k] = v
        for clean, raw in patches:
            cur = existing.get(clean["id"])
            if cur is None:  # patch before post: keep it, the post fills in the rest
                start = clean.get("start_time") or clean.get("end_time") or to_micros(utcnow())
                cur = {"tenant_id": self.store.tenant_id,
                       "session_id": self._session_of(conn, raw, cache, default_project),
                       "name": clean.get("name", ""), "run_type": clean.get("run_type", "chain"),
                       "start_time": start, "trace_id": clean.get("trace_id", clean["id"]),
                       "status": _ORPHAN}
                existing[clean["id"]] = cur
                fresh.add(clean["id"])
            for k, v in clean.items():
                if k != "status" and k != "session_id":  # a patch never moves a run
                    cur[k] = v
        self._derive_dotted_orders(conn, existing)
        untraced = [r for r in existing.values() if r.get("trace_id") is None
                    and r.get("parent_run_id") is not None]
        above = stored_traces(conn, self.store.tenant_id,
                              {str(r["parent_run_id"]) for r in untraced} - existing.keys()
                              ) if untraced else {}
        for got in untraced:  # its parent's trace (LangSmith's create_run names no trace)
            got["trace_id"] = trace_of(got["id"], existing, above)
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        posted: dict[str, list[str]] = {}  # session -> runs whose post is now stored
        for run_id in ids:
            cur = existing[run_id]
            for need in ("name", "run_type", "start_time", "trace_id"):
                if cur.get(need) is None:
                    if need == "trace_id":  # a root (a child's is found above)
                        cur["trace_id"] = run_id
                    elif need == "name":
                        cur["name"] = ""
                    else:
                        raise InvalidInputError(f"run {run_id}: missing required field {need!r}")
            merged = _finish(cur)
            deltas.add(merged, 1)
            if merged["status"] != _ORPHAN and (run_id in fresh or run_id in was_orphan):
                posted.setdefault(merged["session_id"], []).append(run_id)
            (inserts if run_id in fresh else updates).append(merged)
        if inserts:
            insert_many(conn, runs, inserts)
        if updates:  # one executemany for every completed run (patches sent apart from posts)
            conn.execute(_UPDATE,
                         [{"_id": r["id"], **{c: r[c] for c in _UPDATABLE}} for r in updates])
        # the statistics, the feedback waiting for these runs, and the runs stored earlier
        # waiting for one of these as their parent (placed only now, perhaps, by an update)
        apply_new_runs(conn, self.store.tenant_id, deltas, posted,
                       placed=[r["id"] for r in existing.values() if r.get("dotted_order")])
        return len(ids)

    def _derive_dotted_orders(self, conn: Connection, rows: dict[str, dict[str, Any]]) -> None:
        """A run posted with a parent but no dotted order (``create_run(parent_run_id=...)``,
        LangSmith's single-run API) gets its parent's order and its own segment, as LangSmith
        derives it: trees and the chain roll-ups read by dotted order. The parent is in the
        batch or stored; unknown yet, the run keeps none and nests by its parent on reads."""
        need = [r for r in rows.values() if not r.get("dotted_order")
                and r.get("parent_run_id") is not None and r.get("start_time") is not None
                and r.get("status") != _ORPHAN]  # a patch's placeholder start: not yet
        if not need:
            return
        stored = dotted_orders_of(conn, self.store.tenant_id,
                                  {str(r["parent_run_id"]) for r in need} - rows.keys())

        def order_of(run_id: str, depth: int = 0) -> str | None:
            row = rows.get(run_id)
            if row is None:
                return stored.get(run_id)
            have: str | None = row.get("dotted_order")
            if have or depth > _MAX_DEPTH or row.get("start_time") is None:
                return have
            own = dotted_segment_us(row["start_time"], run_id)
            parent = row.get("parent_run_id")
            above = None if parent is None else order_of(str(parent), depth + 1)
            if parent is not None and above is None:
                return None
            row["dotted_order"] = have = own if above is None else f"{above}.{own}"
            return have

        for row in need:
            order_of(row["id"])

    # -- queries ------------------------------------------------------------------------------
    def read(self, run_id: uuid.UUID | str, *, load_child_runs: bool = False) -> Run:
        rid = str(as_uuid(run_id, "run_id"))
        self.store.settle()
        with self.store.read() as conn:
            row = conn.execute(
                select(runs).where(runs.c.id == rid, runs.c.tenant_id == self.store.tenant_id)
            ).first()
            if row is None:
                raise NotFoundError(f"run {rid} not found")
            run = _row_to_run(row)
            if load_child_runs:
                q = select(runs).where(
                    runs.c.trace_id == row.trace_id, runs.c.tenant_id == self.store.tenant_id
                )
                if row.dotted_order:  # a run posted with a parent but no dotted order
                    # (``create_run(parent_run_id=...)``) has none: it nests by its parent
                    q = q.where(or_(runs.c.dotted_order.startswith(row.dotted_order + ".",
                                                                   autoescape=True),
                                    runs.c.dotted_order.is_(None)))
                desc = [_row_to_run(r) for r in conn.execute(q.order_by(runs.c.dotted_order))]
                _attach(run, desc)
        return run

    def conditions(
        self,
        *,
        project_ids: Sequence[str] | None = None,
        run_type: str | None = None,
        trace_id: uuid.UUID | str | None = None,
        parent_run_id: uuid.UUID | str | None = None,
        is_root: bool | None = None,
        error: bool | None = None,
        reference_example_ids: Sequence[uuid.UUID | str] | None = None,
        run_ids: Sequence[uuid.UUID | str] | None = None,
        start_time: datetime | str | None = None,
        start_before: datetime | str | None = None,
        filter: str | None = None,
        trace_filter: str | None = None,
        tree_filter: str | None = None,
        query: str | None = None,
    ) -> list[Any]:
        """The WHERE terms on ``runs`` of ``list``'s filters (``stats`` shares them)."""
        tenant = self.store.tenant_id
        dialect = self.store.engine.dialect.name
        conds: list[Any] = [runs.c.tenant_id == tenant]
        if query is not None:
            if not isinstance(query, str):
                raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
            conds.append(text_search(query, runs))
        if filter is not None:
            conds.append(compile_filter(filter, runs, dialect))
        if trace_filter is not None:
            root = runs.alias("trace_root")
            conds.append(runs.c.trace_id.in_(select(root.c.id).where(
                root.c.tenant_id == tenant, root.c.is_root.is_(True),
                compile_filter(trace_filter, root, dialect))))
        if tree_filter is not None:
            other = runs.alias("tree_run")
            conds.append(runs.c.trace_id.in_(select(other.c.trace_id).where(
                other.c.tenant_id == tenant, compile_filter(tree_filter, other, dialect))))
        if start_time is not None:
            conds.append(runs.c.start_time >= sender_micros(start_time, "run filter: start_time"))
        if start_before is not None:
            conds.append(runs.c.start_time <= sender_micros(start_before,
                                                            "run filter: start_before"))
        if project_ids is not None:
            conds.append(runs.c.session_id.in_([str(p) for p in project_ids]))
        if run_type is not None:
            conds.append(runs.c.run_type == run_type)
        if trace_id is not None:
            conds.append(runs.c.trace_id == str(as_uuid(trace_id, "trace_id")))
        if parent_run_id is not None:
            conds.append(runs.c.parent_run_id == str(as_uuid(parent_run_id, "parent_run_id")))
        if is_root is not None:
            conds.append(runs.c.is_root.is_(bool(is_root)))
        if error is not None:
            conds.append(runs.c.error.is_not(None) if error else runs.c.error.is_(None))
        if reference_example_ids is not None:
            conds.append(runs.c.reference_example_id.in_(
                [str(as_uuid(i, "reference_example_id")) for i in reference_example_ids]))
        if run_ids is not None:
            conds.append(runs.c.id.in_([str(as_uuid(i, "run id")) for i in run_ids]))
        return conds

    def list(
        self,
        *,
        project_ids: Sequence[str] | None = None,
        run_type: str | None = None,
        trace_id: uuid.UUID | str | None = None,
        parent_run_id: uuid.UUID | str | None = None,
        is_root: bool | None = None,
        error: bool | None = None,
        reference_example_ids: Sequence[uuid.UUID | str] | None = None,
        run_ids: Sequence[uuid.UUID | str] | None = None,
        start_time: datetime | str | None = None,
        start_before: datetime | str | None = None,
        filter: str | None = None,
        trace_filter: str | None = None,
        tree_filter: str | None = None,
        query: str | None = None,
        order: str = "asc",
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Run]:
        """Runs matching every filter; ``start_time``: runs that started at or after it,
        ``start_before``: at or before it.

        ``filter`` is LangSmith's filter language (``_run_filter``) on the run itself,
        ``trace_filter`` on the root of its trace, ``tree_filter`` on any run of its trace;
        ``query`` is a case-insensitive text search of the name, error, inputs and outputs.
        """
        q = select(runs).where(*self.conditions(
            project_ids=project_ids, run_type=run_type, trace_id=trace_id,
            parent_run_id=parent_run_id, is_root=is_root, error=error,
            reference_example_ids=reference_example_ids, run_ids=run_ids, start_time=start_time,
            start_before=start_before, filter=filter, trace_filter=trace_filter,
            tree_filter=tree_filter, query=query))
        if trace_id is not None:
            q = q.order_by(runs.c.dotted_order)
        elif order == "desc":
            q = q.order_by(runs.c.start_time.desc(), runs.c.id.desc())
        else:
            q = q.order_by(runs.c.start_time, runs.c.id)
        q = q.offset(max(offset, 0))
        if limit is not None:
            q = q.limit(limit)
        self.store.settle()
        with self.store.read() as conn:
            rows = conn.execute(q).all()
        return build_many(_row_to_run, rows)

    def stats(self, **filters: Any) -> dict[str, Any]:
        """Statistics of the runs ``list(**filters)`` would return (``_run_stats``), as
        LangSmith's ``get_run_stats`` answers them."""
        from ._run_stats import run_stats

        where = and_(*self.conditions(**filters))
        self.store.settle()
        with self.store.read() as conn:
            return run_stats(conn, where, self.store.tenant_id)

    def feedback_stats(self, run_ids: Sequence[uuid.UUID | str], *,
                       comparative_experiment_id: uuid.UUID | str | None = None,
                       group_of: Mapping[str, str] | None = None,
                       ) -> dict[str, dict[str, Any]]:
        """Each run's feedback per key, as LangSmith's run answers carry it: ``{run id: {key:
        {n, avg, min, max, stdev, values, comments}}}``; ``stdev`` is the sample deviation
        (None under two scores), ``values`` counts the labels ``read_project`` counts. The
        run's own feedback, or with ``comparative_experiment_id`` that comparison's scores of
        it (LangSmith's pairwise view). ``group_of`` (run id -> group) pools the runs of each
        group instead: ``{group: {key: ...}}`` (a thread's turns)."""
        import statistics

        from ._feedback import feedback_label

        out: dict[str, dict[str, Any]] = {}
        scores: dict[tuple[str, str], list[float]] = {}
        found = self.store.feedback.list(run_ids=list(run_ids),
                                         pairwise=comparative_experiment_id is not None)
        cid = str(comparative_experiment_id) if comparative_experiment_id else None
        for fb in found:
            if cid is not None and str(fb.comparative_experiment_id) != cid:
                continue
            rid = str(fb.run_id) if group_of is None else group_of[str(fb.run_id)]
            entry = out.setdefault(rid, {}).setdefault(fb.key, {
                "n": 0, "values": {}, "comments": []})
            entry["n"] += 1
            if fb.score is not None:
                scores.setdefault((rid, fb.key), []).append(fb.score)
            label = feedback_label(fb.value)
            if label is not None:
                entry["values"][label] = entry["values"].get(label, 0) + 1
            if fb.comment:
                entry["comments"].append(fb.comment)
        for rid, per_key in out.items():
            for key, entry in per_key.items():
                got = scores.get((rid, key), [])
                entry.update(avg=statistics.fmean(got) if got else None,
                             min=min(got, default=None), max=max(got, default=None),
                             stdev=statistics.stdev(got) if len(got) > 1 else None)
        return out

    def subtree_usage(self, run_ids: Sequence[uuid.UUID | str]) -> dict[str, dict[str, Any]]:
        """Tokens, cost and earliest first token of the llm runs in each run's subtree (see
        ``_run_usage.subtree_usage``)."""
        return _run_usage.subtree_usage(self.store, run_ids)

    def roll_up_usage(self, found: Sequence[Run]) -> Sequence[Run]:
        """``found`` with each chain's usage that of the llm calls under it, as LangSmith's
        reads give it (see ``_run_usage.roll_up_usage``)."""
        return _run_usage.roll_up_usage(self.store, found)

    def delete_traces(
        self,
        project_id: uuid.UUID | str,
        *,
        trace_ids: Iterable[uuid.UUID | str] | None = None,
        keep: Iterable[uuid.UUID | str] | None = None,
    ) -> int:
        """Delete whole traces of a project (every run in them and feedback on those runs):
        the ``trace_ids`` given, or all but those in ``keep``. Feedback in the project whose run
        no longer exists goes too. One transaction; returns how many runs were deleted.

        Resuming an interrupted experiment uses it to drop what the killed process left half
        written, so every (example, repetition) ends with exactly one trace.
        """
        from ._tables import feedback

        if (trace_ids is None) == (keep is None):
            raise InvalidInputError("give exactly one of trace_ids or keep")
        sid = str(as_uuid(project_id, "project_id"))
        tenant = runs.c.tenant_id == self.store.tenant_id
        in_project = runs.c.session_id == sid
        runs_gone, feedback_gone = RunDeltas(), FeedbackDeltas()
        self.store.settle()
        with self.store.write() as conn:
            if keep is not None:
                kept = {str(as_uuid(t, "trace id")) for t in keep}
                present = conn.execute(
                    select(runs.c.trace_id).where(tenant, in_project).distinct()).scalars()
                doomed = sorted(t for t in present if t not in kept)
            else:
                doomed = sorted({str(as_uuid(t, "trace id")) for t in trace_ids or ()})
            gone_ids: list[str] = []
            for i in range(0, len(doomed), 500):
                chunk = doomed[i : i + 500]
                for row in conn.execute(runs.delete().where(
                        tenant, in_project, runs.c.trace_id.in_(chunk)).returning(*RUN_RETURNING)):
                    runs_gone.add(row._mapping, -1)
                    gone_ids.append(row.id)
                conn.execute(shares.delete().where(  # a shared link of them opens nothing
                    shares.c.tenant_id == self.store.tenant_id, shares.c.kind == "trace",
                    shares.c.target_id.in_(chunk)))
            deleted = len(gone_ids)
            from ._attachments import forget_runs  # the runs' attachment files go too
            forget_runs(conn, self.store.tenant_id, gone_ids)
            # the same lock order as upsert: runs, run aggregates, feedback, feedback aggregates
            runs_gone.apply(conn)
            runs_gone.drop_empty_streams(conn)
            gone_ids.sort()
            for j in range(0, len(gone_ids), 500):
                feedback_gone.add_rows(conn.execute(feedback.delete().where(
                    feedback.c.run_id.in_(gone_ids[j : j + 500])
                ).returning(*FEEDBACK_RETURNING)), -1)
            feedback_gone.add_rows(conn.execute(feedback.delete().where(
                feedback.c.tenant_id == self.store.tenant_id,
                feedback.c.session_id == sid,
                feedback.c.run_id.is_not(None),
                feedback.c.run_id.not_in(select(runs.c.id).where(tenant, in_project)),
            ).returning(*FEEDBACK_RETURNING)), -1)
            feedback_gone.apply(conn)
        return deleted




def _attach(root: Run, descendants: list[Run]) -> None:
    """Nest descendants (in dotted order; those without one anywhere) under their parents;
    siblings by start time where some have no dotted order. A run of the trace not under
    ``root`` stays out."""
    descendants = [r for r in descendants if r.id != root.id]
    by_id: dict[Any, Run] = {root.id: root}
    root.child_runs = []
    for run in descendants:
        run.child_runs = []
        by_id[run.id] = run
    unordered: set[Any] = set()
    for run in descendants:
        parent = by_id.get(run.parent_run_id)
        if parent is not None:
            parent.child_runs.append(run)  # type: ignore[union-attr]  # set to [] above
            if run.dotted_order is None:
                unordered.add(parent.id)
    for pid in unordered:
        by_id[pid].child_runs.sort(  # type: ignore[union-attr]  # set to [] above
            key=lambda r: (r.start_time, r.dotted_order or ""))
