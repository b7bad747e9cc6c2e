"""The fold's fast path: journaled posts of new, finished, plain runs straight to row tuples.

Almost every run the fold applies is a new run, posted once with its end (the tracing writer
merges a quick run's start and end), that carries no token usage to derive: a chain, a tool, a
target, an evaluator. Through ``RunRepo._upsert`` such a run went through four dicts (the
post, its clean copy, the merged row, the finished row) before its values reached the driver:
three quarters of the fold's time, while SQLite's own insert with every index was the rest.
Here it goes from the post to the tuple of its column values in one step, with the same
values ``_clean`` and ``_finish`` would give it (a test compares every column of both paths),
and the batch's statistics are added per session as ``RunDeltas`` would.

What ``derive_usage`` reads is looked at here as its cheap test does (``_has_no_usage``);
the posts come from the tracing writer (``RunTree.ROW_COLUMNS``) or ``Journal.admit`` (the
fields ``_clean`` keeps), so no usage can hide in a top-level key. Everything else keeps the
general path, whole: a run already stored (or twice in the batch), a
patch, an llm run or any with usage or events, a post missing what a new run needs (which the
general path reports by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import _json
from .._ids import dotted_segment_us, new_id_text, uuid_text
from .._json import escape_text
from ._aggregates import _ZERO, FeedbackDeltas, RunDeltas, adopt_pending_feedback
from ._tables import runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._feedback import FeedbackRepo
    from ._runs import RunRepo

__all__ = ["SCORE_COLUMNS", "insert_new", "score_rows"]

_ORDER = tuple(sorted(c.name for c in runs.columns))  # as RunRepo writes a row (_finish)
_AT = {name: i for i, name in enumerate(_ORDER)}
_JSON_COLUMNS = ("inputs", "outputs", "extra", "events", "tags", "serialized")
_INPUTS, _OUTPUTS, _EXTRA, _SERIALIZED = (_AT[k] for k in ("inputs", "outputs", "extra",
                                                            "serialized"))
_LISTS = (("events", _AT["events"]), ("tags", _AT["tags"]))
_BLANK: list[Any] = [None] * len(_ORDER)
for _k in _JSON_COLUMNS:
    _BLANK[_AT[_k]] = "null"
_EMPTY_JSON = {dict: "{}", list: "[]"}
_CHUNK = 500


def _escaped(value: str) -> str:
    """As ``_clean`` stores free text: NUL and lone surrogates in their escaped form."""
    if "\x00" in value or not value.isascii():
        return escape_text(value)
    return value


def _json_text(value: Any, dumps: Any = _json.dumps_column) -> str:
    if value is None:
        return "null"  # JSON null, as SQLAlchemy writes None into a JSON column
    if not value:
        empty = _EMPTY_JSON.get(value.__class__)
        if empty is not None:
            return empty
    return dumps(value)  # type: ignore[no-any-return]  # str


def _existing(conn: Connection, ids: list[str]) -> set[str]:
    """Which of ``ids`` any workspace has stored (ids are global keys)."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    found: set[str] = set()
    for i in range(0, len(ids), _CHUNK):
        part = ids[i : i + _CHUNK]
        sql = f"SELECT id FROM runs WHERE id IN ({', '.join([mark] * len(part))})"
        found.update(r[0] for r in conn.exec_driver_sql(sql, tuple(part)))
    return found


def _insert(conn: Connection, rows: list[list[Any]]) -> None:
    """The rows in one statement: PostgreSQL's ``COPY`` (the driver formats each row in C,
    where an executemany costs a pipelined statement per row), SQLite's executemany."""
    quote = conn.dialect.identifier_preparer.quote
    names = ", ".join(quote(c) for c in _ORDER)
    if conn.dialect.name == "postgresql":
        raw: Any = conn.connection.driver_connection  # in this transaction (and savepoint)
        with raw.cursor() as cur, cur.copy(f"COPY runs ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    conn.exec_driver_sql(f"INSERT INTO runs ({names}) VALUES ({', '.join([mark] * len(_ORDER))})",
                         [tuple(r) for r in rows])


def _row(post: Mapping[str, Any], rid: str, tenant: str, sid: str, clean: bool,
         extra_text: dict[int, str]) -> list[Any] | None:
    """The run's column values in ``_ORDER``, or None when it needs the general path."""
    get = post.get
    run_type, start, end = get("run_type"), get("start_time"), get("end_time")
    if (run_type.__class__ is not str or run_type == "llm" or start.__class__ is not int
            or (end is not None and end.__class__ is not int) or get("status") is not None
            or get("events")):
        return None  # an llm run, or one with events (a first token), may have usage
    trace, parent, ref = get("trace_id"), get("parent_run_id"), get("reference_example_id")
    if not clean:  # the tracing writer's rows: canonical by construction, checked cheaply
        trace = trace if trace is None or trace == rid else uuid_text(trace, "trace_id")
        if parent is not None:
            parent = uuid_text(parent, "parent_run_id")
        if ref is not None:
            ref = uuid_text(ref, "reference_example_id")
    if trace is None:
        if parent is not None:
            return None  # the general path names what is missing
        trace = rid
    row: list[Any] = _BLANK.copy()  # JSON columns "null" (SQL JSON null), the rest NULL
    value = get("inputs")
    if value is not None:
        if value.__class__ is not dict:
            return None
        row[_INPUTS] = _json_text(value)
    value = get("outputs")
    if value is not None:
        if value.__class__ is not dict or "usage_metadata" in value or "llm_output" in value:
            return None
        row[_OUTPUTS] = _json_text(value)
    value = get("extra")
    if value is not None:
        text = extra_text.get(id(value))  # the batch's shared extra: dumped once
        if text is None:
            if value.__class__ is not dict:
                return None
            meta = value.get("metadata")
            if meta.__class__ is dict and "usage_metadata" in meta:
                return None
            text = _json_text(value)
        row[_EXTRA] = text
    for key, at in _LISTS:  # events (empty here, see above) and tags
        value = get(key)
        if value is not None:
            if value.__class__ is not list:
                return None
            row[at] = _json_text(value)
    value = get("serialized")
    if value is not None:
        if value.__class__ is not dict:
            return None
        row[_SERIALIZED] = _json_text(value)
    error, name = get("error"), get("name")
    if not clean:  # as _clean does (admit's posts went through it already)
        if error is not None:
            error = _escaped(error if error.__class__ is str else str(error))
        if name.__class__ is str:
            name = _escaped(name)
    if name is None:
        name = ""
    dotted = get("dotted_order")
    if not dotted and parent is None:
        dotted = dotted_segment_us(start, rid)
    row[_AT["id"]] = rid
    row[_AT["tenant_id"]] = tenant
    row[_AT["session_id"]] = sid
    row[_AT["trace_id"]] = trace
    row[_AT["parent_run_id"]] = parent
    row[_AT["reference_example_id"]] = ref
    row[_AT["dotted_order"]] = dotted
    row[_AT["name"]] = name
    row[_AT["run_type"]] = run_type
    row[_AT["start_time"]] = start
    row[_AT["end_time"]] = end
    row[_AT["error"]] = error
    row[_AT["is_root"]] = parent is None
    row[_AT["latency_us"]] = None if end is None else end - start
    row[_AT["status"]] = "error" if error else ("success" if end is not None else "pending")
    return row


def insert_new(repo: RunRepo, conn: Connection, posts: list[Mapping[str, Any]],
               patched: set[str], default_project: str, *, clean: bool,
               shared_extra: Any = None) -> tuple[int, list[Mapping[str, Any]]]:
    """Insert the posts that qualify (see the module docstring); return how many, and the
    posts left for the general path (in their order)."""
    if not posts:
        return 0, []
    try:
        ids = [p["id"] if clean else uuid_text(p["id"], "run id") for p in posts]
    except Exception:  # noqa: BLE001 - the general path raises it by name
        return 0, list(posts)
    if len(set(ids)) != len(ids):
        return 0, list(posts)
    stored = _existing(conn, ids)
    tenant = repo.store.tenant_id
    extra_text: dict[int, str] = {}
    if shared_extra is not None:
        extra_text[id(shared_extra)] = _json_text(shared_extra)
    cache: dict[Any, str] = {}
    sessions: dict[tuple[Any, Any], str] = {}  # (session_id, session_name) as posted -> id
    rows: list[list[Any]] = []
    rest: list[Mapping[str, Any]] = []
    deltas = RunDeltas()
    sums, tenants, added = deltas.sums, deltas.tenants, deltas.added_start
    posted: dict[str, list[str]] = {}
    for post, rid in zip(posts, ids, strict=True):
        if rid in stored or rid in patched:
            rest.append(post)
            continue
        sid: str | None = None
        try:
            key = (post.get("session_id"), post.get("session_name"))
            sid = sessions.get(key)
            if sid is None:
                sid = sessions[key] = repo._session_of(conn, post, cache, default_project)
            row = _row(post, rid, tenant, sid, clean, extra_text)
        except Exception:  # noqa: BLE001 - the general path raises it by name
            row = None
        if row is None or sid is None:
            rest.append(post)
            continue
        rows.append(row)
        posted.setdefault(sid, []).append(rid)
        d = sums.get(sid)
        if d is None:
            d = sums[sid] = list(_ZERO)
            tenants[sid] = tenant
        if row[_AT["is_root"]]:  # RunDeltas.add for a run without usage or first token
            d[0] += 1
            if row[_AT["latency_us"]] is not None:
                d[1] += 1
            if row[_AT["error"]] is not None:
                d[2] += 1
            start = row[_AT["start_time"]]
            cur = added.get(sid)
            if cur is None or start > cur:
                added[sid] = start
    if not rows:
        return 0, rest
    _insert(conn, rows)
    deltas.apply(conn)
    fb = FeedbackDeltas()
    adopt_pending_feedback(conn, tenant, posted, fb)
    fb.apply(conn)
    return len(rows), rest


SCORE_COLUMNS = ("run_id", "trace_id", "key", "score")  # evaluate()'s plain scores (_sink)


def score_rows(repo: FeedbackRepo, items: list[Any], columns: Any, defaults: Any,
               created: Any) -> list[dict[str, Any]] | None:
    """Feedback rows of a batch of plain scores journaled as value lists (``run_id,
    trace_id, key, score``; every other field the batch's ``defaults``), or None when the
    batch is not one (the general path then builds each row with ``FeedbackRepo._row``).

    The first item's row is ``_row``'s own; the others copy it and change only what their
    values give, as ``_row`` would (an id of their own, the ids as canonical text, the score
    as a float)."""
    from ._feedback import _score

    defaults = defaults or {}
    if (tuple(columns or ()) != SCORE_COLUMNS or created is None or "id" in defaults
            or not items or not all(i.__class__ is list for i in items)):
        return None
    first = {**defaults, **dict(zip(SCORE_COLUMNS, items[0], strict=False))}
    first.setdefault("created_at", created)  # as the general path's items get them
    first.setdefault("modified_at", first["created_at"])
    template = repo._row(first)
    out = [template]
    fallback = template["session_id"] is None
    for run_id, trace_id, key, score in items[1:]:
        if key.__class__ is not str or not key or (not run_id and fallback):
            return None  # _row says what is wrong, item by item
        row = dict(template)
        fid = row["id"] = new_id_text()
        row["run_id"] = uuid_text(run_id, "run_id") if run_id else None
        row["trace_id"] = uuid_text(trace_id, "trace_id") if trace_id else None
        row["key"] = key
        row["score"] = _score(score, fid)
        out.append(row)
    return out
