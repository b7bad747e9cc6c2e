"""The fold's fast path: journaled posts of new runs straight to row tuples.

Almost every run the fold applies is a new run, posted once with its end (the tracing writer
merges a quick run's start and end): a chain, a tool, a target, an evaluator, an llm call.
Through ``RunRepo._upsert`` such a run went through four dicts (the post, its clean
copy, the merged row, the finished row) before its values reached the driver:
three quarters of the fold's time, while SQLite's own insert with every index was the rest.
Here it goes from the post to the tuple of its column values in one step, with the same
values ``_clean`` and ``_finish`` would give it (a test compares every column of both paths),
and the batch's statistics are added per session (and hour) as ``RunDeltas`` would. The rows
leave out the usage columns such a run never has (each bound value costs SQLite's driver), and
on PostgreSQL stream into a ``COPY`` while the next are built, so the server's indexing of
them overlaps this process's work instead of following it.

An llm run, or any whose outputs, metadata or events may carry usage or a first token (what
``derive_usage``'s cheap test looks at), gets the usage columns too, from ``derive_usage`` on
its post as ``_finish`` derives them, in a statement of its own (``_FULL_ORDER``): agents'
traces are mostly llm runs, which the general path folded at ~50 us each (now ~40, tokens and
genai-prices cost included). The posts come from the tracing writer (``RunTree.ROW_COLUMNS``)
or ``Journal.admit`` (the fields ``_clean`` keeps), so no usage can hide in a top-level key.
Everything else keeps the general path, whole: a run already stored (or twice in the batch), a
patch, a post missing what a new run needs (which the general path reports by name).

The tracing writer's plain runs do not come here: ``_fold_columns`` makes their rows from the
journaled value lists themselves, and hands on (as posts) only what needs this path or the
general one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import pydantic_core
from sqlalchemy.exc import DBAPIError

from .. import _json
from .._compiled import compiled
from .._ids import dotted_segment_us, uuid_text
from .._json import escape_text
from ._aggregates import FeedbackDeltas, RunDeltas, adopt_pending_feedback
from ._driver import in_marks, sqlite
from ._fold_usage import names_usage, usage_columns
from ._multirow import insert_many
from ._pg_copy import CopyRows
from ._placing import place_waiting
from ._tables import runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._runs import RunRepo

__all__ = ["TEXT_COLUMNS", "TEXT_KEYS", "FoldScope", "admitted_as_text", "apply_new_runs",
           "batch_literal", "executemany", "from_text", "insert_new", "prebuilt_rows", "stored_ids"]

# Never set for a run this path takes (no usage, no first token): left out of the insert, so
# NULL as the general path stores them. Each bound value costs SQLite's driver ~0.3 us.
_USAGE = frozenset(("first_token_time", "first_token_us", "prompt_tokens", "completion_tokens",
                    "total_tokens", "prompt_cost", "completion_cost", "total_cost"))
_ORDER = tuple(sorted(c.name for c in runs.columns if c.name not in _USAGE))
# an llm run's row (or any with usage or a first token): the same columns, then the usage ones
_USAGE_ORDER = ("first_token_time", "first_token_us", "prompt_tokens", "completion_tokens",
                "total_tokens", "prompt_cost", "completion_cost", "total_cost")
_FULL_ORDER = _ORDER + _USAGE_ORDER
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
(_ID, _TENANT, _SESSION, _TRACE, _PARENT, _REF, _DOTTED, _NAME, _RUN_TYPE, _START, _END, _ERROR,
 _IS_ROOT, _LATENCY, _STATUS) = (_AT[k] for k in (
    "id", "tenant_id", "session_id", "trace_id", "parent_run_id", "reference_example_id",
    "dotted_order", "name", "run_type", "start_time", "end_time", "error", "is_root",
    "latency_us", "status"))
_ESC_UTF8 = _json._ESC_UTF8
_to_json = pydantic_core.to_json
_SerializationError = pydantic_core.PydanticSerializationError


def _escaped(value: str) -> str:
    """As ``_clean`` stores free text: NUL and lone surrogates in their escaped form."""
    if "\x00" in value or not value.isascii():
        return escape_text(value)
    return value


def _json_text(value: Any, dumps: Any = _json.dumps_column) -> str:
    """``dumps_column(value)``: the values here are decoded JSON, so pydantic-core writes them
    without a fallback; anything ``dumps_column`` would escape goes through it."""
    if value is None:
        return "null"  # JSON null, as SQLAlchemy writes None into a JSON column
    if not value:
        empty = _EMPTY_JSON.get(value.__class__)
        if empty is not None:
            return empty
    try:
        out = _to_json(value)
    except _SerializationError:
        return dumps(value)  # type: ignore[no-any-return]  # str
    if b"\\u0000" in out or (not out.isascii() and _ESC_UTF8 in out):
        return dumps(value)  # type: ignore[no-any-return]  # str
    return out.decode()


def stored_ids(conn: Connection, table: str, ids: Sequence[str], *,
               not_tenant: str | None = None, first: bool = False) -> list[str]:
    """Which of ``ids`` ``table`` holds (ids are global keys), in any workspace or, with
    ``not_tenant``, in any other one; ``first``: only the smallest of them.

    SQL text for the driver: building and compiling an ``IN`` of a hundred ids through
    SQLAlchemy cost ~3 us an id, more than the probe. PostgreSQL: the ids (canonical uuid
    text: no commas) as one text parameter split by the server (a placeholder each, or an
    array parameter, cost the driver ten times more CPU than the probe itself)."""
    if not ids:
        return []
    name = conn.dialect.identifier_preparer.quote(table)
    pg = conn.dialect.name == "postgresql"
    mark = "%s" if pg or conn.dialect.paramstyle != "qmark" else "?"
    where = "" if not_tenant is None else f" AND tenant_id != {mark}"
    tenant = () if not_tenant is None else (not_tenant,)
    tail = " ORDER BY id LIMIT 1" if first else ""
    if pg:
        return [r[0] for r in conn.exec_driver_sql(
            f"SELECT id FROM {name} WHERE id = ANY(string_to_array(%s, ','))" + where + tail,
            (",".join(ids), *tenant))]
    found: list[str] = []
    ids = sorted(ids) if first else ids  # chunks in order: the first hit is the smallest
    for i in range(0, len(ids), _CHUNK):
        cond, part = in_marks(ids[i : i + _CHUNK])
        found.extend(r[0] for r in conn.exec_driver_sql(
            f"SELECT id FROM {name} WHERE id {cond}" + where + tail, (*part, *tenant)))
        if first and found:
            break
    return found


def _existing(conn: Connection, ids: list[str]) -> set[str]:
    """Which of the runs ``ids`` any workspace has stored."""
    return set(stored_ids(conn, "runs", ids))


def _insert(conn: Connection, rows: Sequence[Sequence[Any]],
            order: tuple[str, ...] = _ORDER) -> None:
    """The rows in one statement: PostgreSQL's ``COPY`` (``_pg_copy``: where an executemany
    costs a pipelined statement per row), SQLite's executemany, where a
    column with one value in every row of the batch (the workspace, the project, empty tags
    and events, the batch's shared ``extra``...) is written into the statement once instead of
    bound per row: each bound value costs the driver ~0.3 us, and a ``None`` or a ``bool``
    about three times that (the driver looks for an adapter for them and fails: Python 3.11's
    ``sqlite3`` binds only ``int``, ``float``, ``str`` and ``bytearray`` directly). So on
    SQLite the roots and the other runs go in two statements: in each, ``is_root`` is one
    value, and a root's ``parent_run_id`` is NULL written once."""
    if conn.dialect.name == "postgresql":
        with CopyRows(conn, order) as copy:
            copy.write_all(rows)
        return
    quote = conn.dialect.identifier_preparer.quote
    names = ", ".join(quote(c) for c in order)
    sql = f"INSERT INTO runs ({names}) VALUES "
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    candidates, parent = _candidates(order)
    roots = [r for r in rows if r[parent] is None]
    if not roots or len(roots) == len(rows):
        _executemany(conn, sql, mark, rows, candidates)
        return
    _executemany(conn, sql, mark, roots, candidates)
    _executemany(conn, sql, mark, [r for r in rows if r[parent] is not None], candidates)


def _executemany(conn: Connection, sql: str, mark: str, rows: Sequence[Sequence[Any]],
                 candidates: tuple[int, ...]) -> None:
    """SQLite: ``rows`` in one executemany, the ``candidates`` holding one value in all of
    them written into the statement (``sql`` up to its ``VALUES``) as literals."""
    values: list[str] = [mark] * len(rows[0])
    bound = list(range(len(values)))
    if len(rows) > 1:
        for at in candidates:
            if rows[0][at] != rows[-1][at]:
                continue  # two values: not one for the whole batch (no pass over it)
            literal = batch_literal(list(map(itemgetter(at), rows)))
            if literal is not None:
                values[at] = literal
                bound.remove(at)
    pick: Any = itemgetter(*bound) if len(bound) > 1 else (lambda r: (r[bound[0]],))
    executemany(conn, f"{sql}({', '.join(values)})", map(pick, rows))


def batch_literal(column: Sequence[Any]) -> str | None:
    """The SQL literal of the one value every row of a batch has in ``column``, or None: it
    has several (its first and last differ, or a count says so), or one better bound
    (``_sql_literal``)."""
    first = column[0]
    if column[-1] != first or column.count(first) != len(column):
        return None
    return _sql_literal(first)


def executemany(conn: Connection, sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """SQLite: ``sql`` for each of ``rows`` on the driver's connection (in ``conn``'s
    transaction). ``rows`` may be an iterator: each row is made as the driver binds it, never a
    list of them all alive at once (SQLAlchemy's ``exec_driver_sql`` wants that list; making it
    cost ~0.5 us a row of a fold's ~12). The driver's failures are raised as SQLAlchemy
    raises them (``IntegrityError`` for a duplicate key, ...), so callers see no difference."""
    raw: Any = conn.connection.driver_connection
    try:
        insert_many(raw, sql, rows)  # several rows a statement (``_multirow``)
    except sqlite.Error as exc:
        raise DBAPIError.instance(sql, None, exc, sqlite.Error) from exc


# columns often the same in a whole batch (see ``_insert``)
_SAME_CANDIDATES = frozenset((
    "tenant_id", "session_id", "run_type", "status", "events", "tags", "serialized", "extra",
    "reference_example_id", "error", "end_time", "outputs", "is_root", "parent_run_id",
    "first_token_time", "first_token_us", "prompt_cost", "completion_cost", "total_cost"))


@lru_cache(maxsize=8)
def _candidates(order: tuple[str, ...]) -> tuple[tuple[int, ...], int]:
    """Where in ``order`` the ``_SAME_CANDIDATES`` are, and ``parent_run_id``."""
    return (tuple(i for i, name in enumerate(order) if name in _SAME_CANDIDATES),
            order.index("parent_run_id"))


def _sql_literal(value: Any) -> str | None:
    """``value`` as an SQL literal that stores what binding it would, or None when it is
    better bound (text with NUL or outside ASCII, anything unusual)."""
    if value is None:
        return "NULL"
    if value.__class__ is bool:
        return "1" if value else "0"
    if value.__class__ is int:
        return str(value)
    if value.__class__ is str and value.isascii() and "\x00" not in value:
        return "'" + value.replace("'", "''") + "'"
    return None


# JSON columns of an admitted post journaled as the text to store (``Journal.admit``), with
# what that text must start with: the object or list ``_clean`` let through
TEXT_COLUMNS = (("inputs", _INPUTS, "{"), ("outputs", _OUTPUTS, "{"), ("extra", _EXTRA, "{"),
                ("events", _AT["events"], "["), ("tags", _AT["tags"], "["),
                ("serialized", _SERIALIZED, "{"))
TEXT_KEYS = tuple(k for k, _, _ in TEXT_COLUMNS)
_from_column = _json.from_json_column


def _compiled_rows() -> Any:
    """``_cencode.admitted_row`` set up with this module's row layout; None where the C module
    is not built (``_row`` builds every row)."""
    module = compiled("assay.store._cencode")
    if module is None or not hasattr(module, "admitted_row"):
        return None
    names = ("inputs", "outputs", "extra", "events", "tags", "serialized", "id", "tenant_id",
             "session_id", "trace_id", "parent_run_id", "reference_example_id", "dotted_order",
             "name", "run_type", "start_time", "end_time", "error", "is_root", "latency_us",
             "status")
    module.row_layout(_BLANK, tuple(_AT[k] for k in names), dotted_segment_us)
    return module.admitted_row


_CROW: Any = _compiled_rows()


def from_text(post: Any, keys: Sequence[str] = TEXT_KEYS) -> Any:
    """A post journaled with JSON columns as text (``keys``) with their values back: a copy,
    for the general path (a batch retried item by item decodes again); anything but a dict
    as it is (the general path names what is wrong)."""
    if post.__class__ is not dict:
        return post
    out = dict(post)
    for key in keys:
        value = out.get(key)
        if value.__class__ is str:
            out[key] = _from_column(value)
    return out


def _text_row(post: Mapping[str, Any], row: list[Any], usage: bool) -> bool | None:
    """Put an admitted post's JSON text (``TEXT_COLUMNS``) into ``row`` as it is; return
    whether the run has usage or a first token to derive (as ``_row`` judges the values: the
    text is decoded only where it names ``usage_metadata`` or ``llm_output``), or None when it
    needs the general path."""
    get = post.get
    for key, at, opening in TEXT_COLUMNS:
        value = get(key)
        if value is None:
            continue
        if value.__class__ is not str or not value.startswith(opening):
            return None
        row[at] = value
    events = row[_AT["events"]]
    return usage or (events != "null" and events != "[]") or _named_usage(row)


def _named_usage(row: list[Any]) -> bool:
    """Whether a row's JSON text (``_text_row``'s) holds usage where ``derive_usage`` looks for
    it: decoded only where the text names it."""
    outputs, extra = row[_OUTPUTS], row[_EXTRA]
    if names_usage(outputs):
        found = _from_column(outputs)
        if "usage_metadata" in found or "llm_output" in found:
            return True
    if '"usage_metadata"' in extra:
        meta = _from_column(extra).get("metadata")
        return meta.__class__ is dict and "usage_metadata" in meta
    return False


def _row(post: Mapping[str, Any], rid: str, tenant: str, sid: str, clean: bool,
         extra_text: dict[int, str], texts: bool = False) -> list[Any] | None:
    """The run's column values in ``_ORDER``, or None when it needs the general path; with the
    usage columns (``_FULL_ORDER``) when it has usage or a first token to derive. ``texts``:
    the post's JSON columns are the text to store (``TEXT_COLUMNS``)."""
    if texts and _CROW is not None:  # its columns set in C; what C declines, built below
        got = _CROW(post, tenant, sid)
        if got is not None:
            return _with_usage(post, *got) if got[1] else got[0]
    get = post.get
    run_type, start, end = get("run_type"), get("start_time"), get("end_time")
    if (run_type.__class__ is not str or start.__class__ is not int
            or (end is not None and end.__class__ is not int) or get("status") is not None):
        return None
    if texts:
        return _admitted_row(post, rid, tenant, sid, run_type, start, end)
    usage = run_type == "llm" or bool(get("events"))  # what derive_usage's cheap test asks
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
        if value.__class__ is not dict:
            return None
        usage = usage or "usage_metadata" in value or "llm_output" in value
        row[_OUTPUTS] = _json_text(value)
    value = get("extra")
    if value is not None:
        text = extra_text.get(id(value))  # the batch's shared extra: dumped once
        if text is None:
            if value.__class__ is not dict:
                return None
            meta = value.get("metadata")
            usage = usage or (meta.__class__ is dict and "usage_metadata" in meta)
            text = _json_text(value)
        row[_EXTRA] = text
    for key, at in _LISTS:  # events and tags
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
    return _fill(row, post if usage else None, rid, tenant, sid, trace, parent, ref,
                 get("dotted_order"), name, run_type, start, end, error)


def _fill(row: list[Any], usage: Mapping[str, Any] | None, rid: str, tenant: str, sid: str,
          trace: str, parent: str | None, ref: str | None, dotted: str | None,
          name: str | None, run_type: str, start: int, end: int | None,
          error: str | None) -> list[Any]:
    """The row's own and derived columns, as ``_finish`` derives them; the usage columns
    (``_FULL_ORDER``) from ``usage``, the values ``derive_usage`` reads, when given."""
    if not dotted and parent is None:
        dotted = dotted_segment_us(start, rid)
    row[_ID] = rid
    row[_TENANT] = tenant
    row[_SESSION] = sid
    row[_TRACE] = trace
    row[_PARENT] = parent
    row[_REF] = ref
    row[_DOTTED] = dotted
    row[_NAME] = "" if name is None else name
    row[_RUN_TYPE] = run_type
    row[_START] = start
    row[_END] = end
    row[_ERROR] = error
    row[_IS_ROOT] = parent is None
    row[_LATENCY] = None if end is None else end - start
    row[_STATUS] = "error" if error else ("success" if end is not None else "pending")
    if usage is not None:
        row.extend(usage_columns(usage, start))
    return row


def _admitted_row(post: Mapping[str, Any], rid: str, tenant: str, sid: str, run_type: str,
                  start: int, end: int | None) -> list[Any] | None:
    """``_row`` of a post ``Journal.admit`` cleaned and journaled with its JSON columns as
    text: the same values, the text stored as it is."""
    get = post.get
    trace, parent = get("trace_id"), get("parent_run_id")
    if trace is None:
        if parent is not None:
            return None  # the general path names what is missing
        trace = rid
    row: list[Any] = _BLANK.copy()
    usage = _text_row(post, row, run_type == "llm")
    if usage is None:
        return None
    _fill(row, None, rid, tenant, sid, trace, parent, get("reference_example_id"),
          get("dotted_order"), get("name"), run_type, start, end, get("error"))
    if usage:
        row.extend(usage_columns(post, start, texts=True))
    return row


def _with_usage(post: Mapping[str, Any], row: list[Any], usage: int) -> list[Any]:
    """A row ``_cencode.admitted_row`` built, with its usage derived where C says (1) or the
    text it names decides (2)."""
    if usage == 2:
        usage = _named_usage(row)
    if usage:
        row.extend(usage_columns(post, row[_START], texts=True))
    return row


def insert_new(repo: RunRepo, conn: Connection, posts: list[Mapping[str, Any]],
               patched: set[str], default_project: str, *, clean: bool,
               shared_extra: Any = None, texts: bool = False, probe: bool = True,
               scope: FoldScope | None = None) -> tuple[int, list[Mapping[str, Any]]]:
    """Insert the posts that qualify (see the module docstring); return how many, and the
    posts left for the general path (in their order). ``texts``: cleaned posts whose JSON
    columns are the text to store (``TEXT_COLUMNS``; those left are handed back so).
    ``probe``: look up which runs are stored already (without: the fold's first try, which a
    stored run fails on the primary key, see ``Journal._whole_or_each``); ``scope``: what the
    fold transaction's batches share (``FoldScope``)."""
    if not posts:
        return 0, []
    try:
        ids = [p["id"] if clean else uuid_text(p["id"], "run id") for p in posts]
    except Exception:  # noqa: BLE001 - the general path raises it by name
        return 0, list(posts)
    if len(set(ids)) != len(ids):
        return 0, list(posts)
    stored = _existing(conn, ids) if probe else set()
    tenant = repo.store.tenant_id
    extra_text: dict[int, str] = {}
    if shared_extra is not None:
        extra_text[id(shared_extra)] = _json_text(shared_extra)
    cache: dict[Any, str] = {} if scope is None else scope.projects_of(tenant)
    ready = None if scope is None or not (clean and texts) else scope.rows
    sessions: dict[tuple[Any, Any], str] = {}  # (session_id, session_name) as posted -> id
    rest: list[tuple[int, Mapping[str, Any]]] = []  # with their place in ``posts``
    # first the projects (which may write), then the rows: on PostgreSQL they stream into a
    # COPY as they are made, so the server indexes them while this builds the next ones
    candidates: list[tuple[int, Mapping[str, Any], str, str]] = []
    for i, (post, rid) in enumerate(zip(posts, ids, strict=True)):
        if rid in stored or rid in patched or (
                not post.get("dotted_order") and post.get("parent_run_id") is not None):
            rest.append((i, post))  # a child without a dotted order: the general path derives it
            continue
        try:
            key = (post.get("session_id"), post.get("session_name"))
            sid = sessions.get(key)
            if sid is None:
                sid = sessions[key] = repo._session_of(conn, post, cache, default_project)
        except Exception:  # noqa: BLE001 - the general path raises it by name
            rest.append((i, post))
            continue
        candidates.append((i, post, rid, sid))
    deltas = RunDeltas()
    roots: list[tuple[str, int, bool, bool]] = []  # new roots without usage: counted at once
    posted: dict[str, list[str]] = {}
    n = 0
    full: list[list[Any]] = []  # rows with usage columns: their own statement after
    width = len(_ORDER)
    with _Rows(conn) as out:
        for i, post, rid, sid in candidates:
            row = ready.get(id(post)) if ready else None
            if row is not None:  # built before the write lock (``prebuilt_rows``)
                row = row.copy()
                row[_SESSION] = sid
            else:
                try:
                    row = _row(post, rid, tenant, sid, clean, extra_text, texts)
                except Exception:  # noqa: BLE001 - the general path raises it by name
                    row = None
            if row is None:
                rest.append((i, post))
                continue
            n += 1
            posted.setdefault(sid, []).append(rid)
            if len(row) > width:
                full.append(row)
                deltas.add(dict(zip(_FULL_ORDER, row, strict=True)), 1)
                continue
            out.write(row)
            if row[_IS_ROOT]:  # RunDeltas.add for a run without usage or first token
                roots.append((sid, row[_START], row[_LATENCY] is not None,
                              row[_ERROR] is not None))
    deltas.add_root_rows(tenant, roots)
    if full:
        _insert(conn, full, _FULL_ORDER)
    rest.sort(key=lambda item: item[0])
    left = [post for _, post in rest]
    if not n:
        return 0, left
    apply_new_runs(conn, tenant, deltas, posted, scope)
    return n, left


def admitted_as_text(payload: Mapping[str, Any]) -> bool:
    """Whether a journaled batch's posts are ``Journal.admit``'s with their JSON columns as the
    text to store (``TEXT_KEYS``): what ``insert_new(..., clean=True, texts=True)`` takes, and
    ``prebuilt_rows`` builds ahead."""
    return (payload.get("clean") is True and not payload.get("columns")
            and tuple(payload.get("json") or ()) == TEXT_KEYS)


def prebuilt_rows(posts: Sequence[Mapping[str, Any]], tenant: str,
                  into: dict[int, list[Any]]) -> None:
    """The rows ``insert_new`` would make of admitted posts (cleaned, JSON columns as text),
    made ahead, outside the fold's transaction: by ``id(post)`` into ``into``, their session
    left for ``insert_new`` to fill. Only what is a function of the post alone (its columns,
    tokens, cost, first token): a post whose row needs the database or the general path is
    left out and built as before. On SQLite the fold holds the one write lock while it
    builds rows, about half its time (``_fold_ready.prepare``)."""
    for post in posts:
        try:
            row = _row(post, post["id"], tenant, "", True, {}, True)
        except Exception:  # noqa: BLE001 - built (or refused by name) in the transaction
            continue
        if row is not None:
            into[id(post)] = row


class FoldScope:
    """What the fast paths' batches of one fold transaction share: the new runs' statistics,
    staged to be written once (``apply_new_runs``, ``write``), and the projects already looked
    up, by workspace (every batch names the same few). A batch whose savepoint rolls back takes
    back what it added (``attempt``): a project it created went with it."""

    __slots__ = ("projects", "rows", "staged")

    def __init__(self, rows: dict[int, list[Any]] | None = None) -> None:
        self.staged: list[tuple[str, RunDeltas, Mapping[str, list[str]]]] = []
        self.projects: dict[str, dict[Any, str]] = {}
        # admitted posts' rows built before the transaction, by id(post): ``prebuilt_rows``
        self.rows: dict[int, list[Any]] = {} if rows is None else rows

    def projects_of(self, tenant: str) -> dict[Any, str]:
        """The workspace's looked-up projects (``RunRepo._session_of``'s cache)."""
        got = self.projects.get(tenant)
        if got is None:
            got = self.projects[tenant] = {}
        return got

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        """A batch's try (inside its savepoint): if it raises, what it added is taken back."""
        staged, projects = len(self.staged), {t: dict(c) for t, c in self.projects.items()}
        try:
            yield
        except BaseException:
            del self.staged[staged:]
            self.projects = projects
            raise

    def write(self, conn: Connection) -> None:
        """Write what the batches staged at once, a workspace at a time: a statement per
        table for them all, not per batch (a fold transaction takes up to 20 journal batches;
        the server's hold 100 runs each). The sums add up, so their order does not matter;
        the feedback waiting for the runs is adopted the same, only later in the
        transaction."""
        merged: dict[str, tuple[RunDeltas, dict[str, list[str]]]] = {}
        for tenant, deltas, posted in self.staged:
            got = merged.get(tenant)
            if got is None:
                merged[tenant] = (deltas, {sid: list(ids) for sid, ids in posted.items()})
                continue
            got[0].merge(deltas)
            for sid, ids in posted.items():
                got[1].setdefault(sid, []).extend(ids)
        self.staged.clear()
        for tenant, (deltas, posted) in merged.items():
            apply_new_runs(conn, tenant, deltas, posted)


def apply_new_runs(conn: Connection, tenant: str, deltas: RunDeltas,
                   posted: Mapping[str, list[str]], scope: FoldScope | None = None, *,
                   placed: Iterable[str] | None = None) -> None:
    """The statistics of a batch of new runs written by a fast path (``deltas``), and the
    feedback and the runs that were waiting for them (``posted``: run ids by session;
    ``place_waiting``; ``placed``: the runs that have their dotted order now, when more than
    those posted: the general path's updates may give a stored run its order). With ``scope``:
    staged there instead, written by ``FoldScope.write``."""
    if scope is not None:
        scope.staged.append((tenant, deltas, posted))
        return
    deltas.apply(conn)
    if posted:
        fb = FeedbackDeltas()
        adopt_pending_feedback(conn, tenant, posted, fb)
        fb.apply(conn)
    place_waiting(conn, tenant,
                  (rid for ids in posted.values() for rid in ids) if placed is None else placed)


class _Rows:
    """Where ``insert_new`` puts its rows: PostgreSQL's ``COPY``, opened at the first row and
    fed as they come (``CopyRows``); SQLite's executemany at the end (``_insert``)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.rows: list[Sequence[Any]] = []
        self._copy = CopyRows(conn, _ORDER) if conn.dialect.name == "postgresql" else None
        self.write = self.rows.append if self._copy is None else self._copy.write

    def __enter__(self) -> _Rows:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._copy is not None:
            self._copy.__exit__(*exc)  # ends the COPY (fails it on an exception)
        elif exc[0] is None and self.rows:
            _insert(self.conn, self.rows)
