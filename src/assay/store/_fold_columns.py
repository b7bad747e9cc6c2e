"""The fold's columnar path: the tracing writer's value lists straight to row tuples.

The tracing writer journals each finished run as the list of its values in ``WRITER_COLUMNS``
order (``RunTree.ROW_COLUMNS``). ``_fold_rows.insert_new`` took them as post dicts, made from
the lists (``_journal.from_values``), their ``extra`` merged with the batch's and the row's
``metadata``, then read back key by key: a third of the fold's Python per run went into making
and reading dicts that lived for one step. Here each list is unpacked once into its 18 values
and the row tuple (``_fold_rows._ORDER``) is written out of them in one expression, with the
values ``_row`` gives the same run (a test compares every stored column with the general
path's). Dotted orders are settled on the lists too (``fill_orders``).

Inputs and outputs come as the JSON text to store (``column_text``, made by the writer's
thread when it journals the batch): the fold neither decodes them from the batch nor encodes
them again, which was a third of its Python for small values and more for large ones.

An llm run, or one with events or usage in its outputs or metadata (agents' traces are mostly
llm runs), is taken too: its row gets the usage columns (``_FULL_ORDER``) from ``derive_usage``
on the few fields it reads, as ``_fold_rows._row`` derives them, and goes in a statement of
its own after the plain rows. Its outputs' text is decoded for that only when it names
``usage_metadata`` or ``llm_output`` (nothing else of the outputs is read), and stored as it is.

Taken is a new run (not stored, not patched in the batch, its id once in the batch) whose ids
are canonical text, with values of the types the writer makes. Every other item is handed
back, in its place, for ``insert_new`` and the general path, exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson
import pydantic_core

from .. import _json
from .._compiled import compiled
from .._ids import _CANONICAL_UUID, all_canonical_uuids, dotted_segment_us
from ._aggregates import RunDeltas
from ._fold_batch import insert_batch, types_of
from ._fold_rows import (
    _FULL_ORDER,
    _ORDER,
    FoldScope,
    _escaped,
    _existing,
    _insert,
    _json_text,
    _Rows,
    apply_new_runs,
)
from ._fold_usage import usage_columns

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._runs import RunRepo

__all__ = ["JSON_COLUMNS", "WRITER_COLUMNS", "column_text", "decoded", "encoded_rows",
           "fill_orders", "insert_rows"]

# RunTree.ROW_COLUMNS (a test checks they agree): a batch in any other order, say an older
# writer's, takes the dict path (``_journal``)
WRITER_COLUMNS = ("id", "trace_id", "parent_run_id", "dotted_order", "name", "run_type",
                  "start_time", "inputs", "extra", "metadata", "tags", "events", "session_id",
                  "session_name", "reference_example_id", "end_time", "outputs", "error")
_WIDTH = len(WRITER_COLUMNS)
# the columns the writer journals as the JSON text the fold stores (``column_text``), named in
# the batch (``json``) so entries of earlier versions, which hold the values, still fold
JSON_COLUMNS = ("inputs", "outputs")
_TEXT_AT = tuple(WRITER_COLUMNS.index(k) for k in JSON_COLUMNS)
_ID, _PARENT, _DOTTED, _START, _SID, _SNAME = (WRITER_COLUMNS.index(k) for k in (
    "id", "parent_run_id", "dotted_order", "start_time", "session_id", "session_name"))
# the tuple ``insert_rows`` writes, in this order; should the table's columns change, the
# path stands aside (every list to the dict path) until it learns them (a test says so)
_ROW_ORDER = ("dotted_order", "end_time", "error", "events", "extra", "id", "inputs", "is_root",
              "latency_us", "name", "outputs", "parent_run_id", "reference_example_id",
              "run_type", "serialized", "session_id", "start_time", "status", "tags",
              "tenant_id", "trace_id")
ENABLED = _ORDER == _ROW_ORDER
# runs with usage to derive (llm, events, usage_metadata / llm_output) taken here too; False
# hands them to ``insert_new`` as before (bench/fold_cost.py's A/B sets it)
USAGE = True
# whole batches of plain runs column by column (``_fold_batch``); False: run by run, as before
BATCH = True
_fullmatch = _CANONICAL_UUID.fullmatch
_dict, _list, _str, _int = dict, list, str, int
_at_sid, _at_sname = itemgetter(_SID), itemgetter(_SNAME)
_dumps, _jsonable, _ESC_UTF8 = orjson.dumps, _json.jsonable, _json._ESC_UTF8
_from_column = _json.from_json_column


def column_text(value: Any) -> str:
    """What the fold stores for ``value`` (a run's inputs or outputs) as a JSON column, made by
    the writer so the fold neither decodes nor encodes it again.

    Before, the writer's orjson wrote the value into the batch, the fold decoded it and
    pydantic-core wrote it again (``_fold_rows._json_text``): pydantic-core's text of what it
    decodes from orjson's is orjson's text itself (a test checks strings, numbers, floats at
    random, non-finite ones, datetimes...), so that text is stored as is. Where orjson refuses
    the value (integers past 64 bits, keys that are not strings, lone surrogates) or the text
    holds what is stored escaped (NUL, U+FDD0), the old route exactly: the batch's encoder,
    decoded, ``_json_text``."""
    try:
        out = _dumps(value, default=_jsonable)
    except TypeError:  # orjson.JSONEncodeError
        out = b"\\u0000"  # i.e. take the old route
    if b"\\u0000" in out or (not out.isascii() and _ESC_UTF8 in out):
        data = _json.dumpb(value)
        try:
            back = pydantic_core.from_json(data)
        except ValueError:  # lone surrogates, as ``_journal._payload`` reads them
            back = _json.loads(data)
        return _json_text(back)
    return out.decode()


_CENCODE: Any = getattr(compiled("assay.store._cencode"), "encoded_rows", None)
# the usual items' dotted orders in C (``_corders.c``); None: the loop below does them all
_FILL: Any = getattr(compiled("assay.store._cencode"), "fill_orders", None)


def encoded_rows(posts: list[Any]) -> list[Any]:
    """The writer's value lists (``WRITER_COLUMNS`` order) with their inputs and outputs as
    ``column_text`` (inlined: the writer thread's cost per run); other posts as they are.
    In C where built (``_cencode.c``: the same steps, ~0.5 us a run less)."""
    if _CENCODE is not None:
        encoded: list[Any] = _CENCODE(posts if posts.__class__ is _list else _list(posts),
                                      _WIDTH, _TEXT_AT, _dumps, _jsonable, column_text,
                                      _ESC_UTF8, _json.Deferred)
        return encoded
    dumps, default, esc, slow = _dumps, _jsonable, _ESC_UTF8, column_text
    out = []
    for post in posts:
        if (post.__class__ is tuple or post.__class__ is _list) and len(post) == _WIDTH:
            post = _list(post)
            for at in _TEXT_AT:
                value = post[at]
                if value is None:
                    continue
                try:
                    data = dumps(value, default=default)
                except TypeError:  # orjson.JSONEncodeError
                    post[at] = slow(value)
                    continue
                if b"\\u0000" in data or (not data.isascii() and esc in data):
                    post[at] = slow(value)
                else:
                    post[at] = data.decode()
        out.append(post)
    return out


def decoded(items: list[Any], at: tuple[int, ...]) -> list[Any]:
    """``items`` with the JSON text of value lists at positions ``at`` back as values (copies:
    a batch retried item by item decodes again), for the dict path; other items as they are."""
    out = []
    for item in items:
        if item.__class__ is _list:
            item = item.copy()
            for i in at:
                if i < len(item) and item[i].__class__ is _str:
                    item[i] = _json.from_json_column(item[i])
        out.append(item)
    return out


def fill_orders(conn: Connection, tenant: str, items: list[Any],
                known: dict[Any, Any] | None = None, *, lookup: bool = True) -> list[Any]:
    """``_journal._fill_orders`` on the batch as journaled (value lists in ``WRITER_COLUMNS``
    order, or post dicts): a root's order from its start and id, a child's from its parent's,
    earlier in the batch or already stored. The usual items are done in C (``_FILL``), which
    hands each other item back to this loop in its turn. ``known``: the orders of runs of
    earlier batches (filled with this batch's). Not ``lookup``: parents neither in the batch
    nor known are not looked up in the store; the items still without an order are returned
    (in their order), else nothing is."""
    if known is None:
        known = {}
    seg = dotted_segment_us

    def settle(item: Any) -> bool:
        """Give ``item`` its order if it can be derived now; False if its parent's is not
        known."""
        if item.__class__ is _list:
            if len(item) < _WIDTH:  # not the writer's: the store checks it as given
                return True
            rid, parent, order, start = item[_ID], item[_PARENT], item[_DOTTED], item[_START]
        elif not isinstance(item, Mapping):
            return True
        else:
            get = item.get
            rid, parent, order, start = (get("id"), get("parent_run_id"),
                                         get("dotted_order"), get("start_time"))
        if order is None:
            if start.__class__ is not _int:  # not a writer's row: the store checks it as given
                return True
            up = "" if parent is None else known.get(parent)
            if up is None:
                return False
            order = f"{up}.{seg(start, rid)}" if up else seg(start, rid)
            if item.__class__ is _list:
                item[_DOTTED] = order
            else:
                item["dotted_order"] = order
        known[rid] = order
        return True

    waiting = []
    fast = _FILL if items.__class__ is _list else None
    at, n = 0, len(items)
    while at < n:
        if fast is not None:  # the usual items in C, up to the first it does not take
            at = fast(items, known, at, _WIDTH, _ID, _PARENT, _DOTTED, _START)
            if at >= n:
                break
        item = items[at]
        at += 1
        # a value list's order inline: nearly every run of a batch
        if (item.__class__ is _list and len(item) == _WIDTH and item[_DOTTED] is None
                and item[_START].__class__ is _int):
            rid, parent = item[_ID], item[_PARENT]
            if parent is None:
                known[rid] = item[_DOTTED] = seg(item[_START], rid)
                continue
            up = known.get(parent)
            if up:
                known[rid] = item[_DOTTED] = f"{up}.{seg(item[_START], rid)}"
                continue
        if not settle(item):
            waiting.append(item)
    if not waiting:
        return []
    if not lookup:  # their parents may have come later in the batch
        return [item for item in waiting if not settle(item)]
    from ._journal import log
    from ._placing import dotted_orders_of

    known.update(dotted_orders_of(conn, tenant, {_parent_of(i) for i in waiting}
                                  - known.keys()))

    for item in waiting:  # in order: a child of a waiting run comes after it
        if not settle(item):  # its parent never reached the store: kept without an order
            log.warning("assay store: run %s: parent %s not stored, no dotted order",
                        _id_of(item), _parent_of(item))
    return []


def _parent_of(item: Any) -> Any:
    return item[_PARENT] if item.__class__ is _list else item.get("parent_run_id")


def _id_of(item: Any) -> Any:
    return item[_ID] if item.__class__ is _list else item.get("id")


def _other_id(item: Any) -> Any:
    if isinstance(item, Mapping):
        return item.get("id")
    return item[_ID] if item.__class__ is _list and item else None


def insert_rows(repo: RunRepo, conn: Connection, items: list[Any], patched: set[Any],
                default_project: str, shared: Mapping[str, Any] | None, *,
                encoded: bool = False, probe: bool = True,
                scope: FoldScope | None = None) -> tuple[int, list[Any]]:
    """Insert the value lists that qualify (see the module docstring); return how many, and the
    items left (in their order) for ``insert_new`` and the general path. ``encoded``: their
    inputs and outputs are JSON text (``column_text``), stored as they are. ``probe``: look
    up which runs are stored already (as ``_fold_rows.insert_new``); ``scope``: what the fold
    transaction's batches share (``FoldScope``)."""
    if not ENABLED:
        return 0, items
    whole = types_of(items) == {_list} and set(map(len, items)) == {_WIDTH}
    lists: Any = range(len(items)) if whole else [
        i for i, item in enumerate(items) if item.__class__ is _list and len(item) == _WIDTH]
    if not lists:
        return 0, items
    ids = [item[_ID] for item in items] if whole else [items[i][_ID] for i in lists]
    if not all_canonical_uuids(ids):
        ok = [i for i, rid in zip(lists, ids, strict=True)
              if rid.__class__ is _str and _fullmatch(rid)]
        lists, ids = ok, [items[i][_ID] for i in ok]
    canon = set(ids)
    if len(canon) != len(ids):
        return 0, items  # one id twice: the general path settles it
    skip = set(patched)  # and ids of other items: a run with a patch or a post beside it
    if not whole:
        try:
            skip.update(_other_id(item) for item in items
                        if item.__class__ is not _list or len(item) != _WIDTH)
        except TypeError:  # an unhashable id: the general path names it
            return 0, items
    if probe:
        skip.update(_existing(conn, ids))
    tenant = repo.store.tenant_id
    # the projects first (they may write): on PostgreSQL no statement may run inside the COPY
    sessions: dict[tuple[Any, Any], str | None] = {}
    cache: dict[Any, str] = {} if scope is None else scope.projects_of(tenant)
    unusual: set[int] = set()
    try:  # the batch's few sessions, each once (the loop below only resolves them)
        pairs: Any = (set(zip(map(_at_sid, items), map(_at_sname, items), strict=True))
                      if whole else lists)
    except TypeError:  # unhashable: found item by item below
        pairs = lists
    for i in pairs:
        try:
            key = i if pairs is not lists else (items[i][_SID], items[i][_SNAME])
            if key not in sessions:
                sessions[key] = None  # the general path raises it by name
                sessions[key] = repo._session_of(
                    conn, {"session_id": key[0], "session_name": key[1]}, cache,
                    default_project)
        except TypeError:  # unhashable: the general path's
            unusual.add(i)
        except Exception:  # noqa: BLE001 - the general path raises it by name
            pass
    if unusual:
        lists = [i for i in lists if i not in unusual]
    jtext, esc = _json_text, _escaped
    shared = shared or {}
    merge_meta = "metadata" not in shared
    # the extra of a row without extra or metadata of its own: the batch's, once
    common = jtext({**shared, "metadata": {}})
    lane: list[int] = []  # items the batch lane took (a mixed batch's plain runs)
    if BATCH and encoded:
        tried = False  # the whole batch, by the lane
        if whole and not unusual and len(lists) == len(items) and skip.isdisjoint(canon):
            done = insert_batch(conn, items, sessions, tenant, shared, common, scope)
            if done is not None:
                return done, []
            tried = True
        lane, lists = _plain_part(conn, items, lists, skip, sessions, tenant, shared, common,
                                  scope, tried)
    deltas = RunDeltas()
    roots: list[tuple[str, int, bool, bool]] = []  # new roots without usage: counted at once
    posted: dict[str, list[str]] = {}
    taken: set[int] = set()
    full: list[tuple[Any, ...]] = []  # rows with the usage columns: their own statement after
    usage_ok = USAGE
    with _Rows(conn) as out:
        write = out.write  # SQLite's: the list's append, no call in between
        for i in lists:
            (rid, trace, parent, dotted, name, run_type, start, inputs, extra, meta, tags,
             events, sid, sname, ref, end, outputs, error) = items[i]
            if (rid in skip or run_type.__class__ is not _str
                    or start.__class__ is not _int
                    or (end is not None and end.__class__ is not _int)
                    or (events is not None and events.__class__ is not _list)):
                continue  # stored, patched, or unusual
            # what derive_usage's cheap test asks (_fold_rows._row): llm, events, and below
            # usage named in the outputs or the metadata
            usage = run_type == "llm" or bool(events)
            if usage and not usage_ok:
                continue
            sid = sessions[(sid, sname)]
            if sid is None:
                continue
            if trace is None:
                if parent is not None:
                    continue  # the general path names what is missing
                trace = rid
            elif trace != rid and not (trace.__class__ is _str
                                       and (trace in canon or _fullmatch(trace))):
                continue
            if parent is not None and not (parent.__class__ is _str
                                           and (parent in canon or _fullmatch(parent))):
                continue
            if ref is not None and not (ref.__class__ is _str and _fullmatch(ref)):
                continue
            if inputs is None:
                inputs = "null"
            elif encoded:  # an object's text (as a dict's value), or the dict path's
                if inputs.__class__ is not _str or not inputs.startswith("{"):
                    continue
            elif inputs.__class__ is _dict:
                inputs = jtext(inputs)
            else:
                continue
            found = None  # the outputs as derive_usage reads them: only their usage keys
            if outputs is None:
                outputs = "null"
            elif encoded:  # usage named anywhere in the text: decoded, its keys looked at
                if outputs.__class__ is not _str or not outputs.startswith("{"):
                    continue
                if '"usage_metadata"' in outputs or '"llm_output"' in outputs:
                    if not usage_ok:
                        continue
                    found = _from_column(outputs)
                    usage = usage or "usage_metadata" in found or "llm_output" in found
            elif outputs.__class__ is _dict:
                if "usage_metadata" in outputs or "llm_output" in outputs:
                    if not usage_ok:
                        continue
                    usage = True
                found = outputs
                outputs = jtext(outputs)
            else:
                continue
            own = extra
            if extra is None and meta is None:
                extra = common
            else:
                if ((extra is not None and extra.__class__ is not _dict)
                        or (meta is not None and meta.__class__ is not _dict)):
                    continue
                if meta and "usage_metadata" in meta:
                    if not usage_ok:
                        continue
                    usage = True
                if extra:
                    extra = jtext({**shared, **extra, "metadata": meta or {}})
                elif meta:
                    if merge_meta:  # the same text, spliced
                        extra = f"{common[:-3]}{jtext(meta)}}}"
                    else:
                        extra = jtext({**shared, "metadata": meta})
                else:
                    extra = common
            if tags is None or tags == []:
                tags = "[]"
            elif tags.__class__ is _list:
                tags = jtext(tags)
            else:
                continue
            if name.__class__ is _str:
                if "\x00" in name or not name.isascii():
                    name = esc(name)
            elif name is None:
                name = ""
            else:
                continue
            if error is not None:
                error = esc(error if error.__class__ is _str else str(error))
            if not dotted and parent is None:
                dotted = dotted_segment_us(start, rid)
            events_text = "[]"
            if usage:  # as _fold_rows._row derives them, from the fields derive_usage reads
                try:
                    ft_us, ft_since, pt, ct, tt, pc, cc, tc = usage_columns({
                        "run_type": run_type, "events": events, "outputs": found,
                        "extra": {**shared, **(own or {}), "metadata": meta or {}}}, start)
                    if events:
                        events_text = jtext(events)
                except Exception:  # noqa: BLE001 - the general path raises it by name
                    continue
            row: tuple[Any, ...] = (
                dotted, end, error, events_text, extra, rid, inputs, parent is None,
                None if end is None else end - start, name, outputs, parent, ref, run_type,
                "null", sid, start,
                "error" if error else ("success" if end is not None else "pending"), tags,
                tenant, trace)
            taken.add(i)
            ids_of = posted.get(sid)
            if ids_of is None:
                ids_of = posted[sid] = []
            ids_of.append(rid)
            if usage:
                full.append((*row, ft_us, ft_since, pt, ct, tt, pc, cc, tc))
                # RunDeltas.add, given the columns it reads (not the row's 29: ~1 us less)
                deltas.add({"session_id": sid, "tenant_id": tenant, "start_time": start,
                            "run_type": run_type, "is_root": parent is None, "error": error,
                            "latency_us": None if end is None else end - start,
                            "first_token_us": ft_since, "trace_id": trace,
                            "total_tokens": tt, "prompt_tokens": pt, "completion_tokens": ct,
                            "total_cost": tc, "prompt_cost": pc, "completion_cost": cc}, 1)
                continue
            write(row)
            if parent is None:  # RunDeltas.add for a run without usage or first token
                roots.append((sid, start, end is not None, error is not None))
    deltas.add_root_rows(tenant, roots)
    if full:
        _insert(conn, full, _FULL_ORDER)
    n = len(taken)
    if n:
        apply_new_runs(conn, tenant, deltas, posted, scope)
    if lane:
        n += len(lane)
        taken.update(lane)
    if not n:
        return 0, items
    if n == len(items):
        return n, []
    return n, [item for i, item in enumerate(items) if i not in taken]


_RUN_TYPE, _EXTRA, _EVENTS = (WRITER_COLUMNS.index(k) for k in ("run_type", "extra", "events"))
# plain runs in a mixed batch past which they go through the batch lane (fewer: the loop)
LANE_MIN = 8


def _plain_part(conn: Connection, items: list[Any], lists: Any, skip: set[Any],
                sessions: Mapping[Any, Any], tenant: str, shared: Mapping[str, Any],
                common: str, scope: FoldScope | None, tried: bool) -> tuple[list[int], list[int]]:
    """The value lists at ``lists`` of a batch the lane did not take whole (an agent's trace:
    its llm runs beside chain and tool runs, which are most of its runs; a batch with a post
    or a patch beside the lists, as a long run's start and end journaled apart): their runs
    without usage to derive through the lane (``insert_batch``, which checks them all again
    and takes them all or none), the others left to the loop. ``tried``: the lane refused
    the whole batch already. Returns (the indexes the lane took, the indexes left), in order."""
    plain = [i for i in lists
             if items[i][_RUN_TYPE] != "llm" and not items[i][_EVENTS]
             and items[i][_EXTRA] is None and items[i][_ID] not in skip]
    everything = list(lists)
    if len(plain) < LANE_MIN or (tried and len(plain) == len(items)):
        return [], everything
    done = insert_batch(conn, [items[i] for i in plain], sessions, tenant, shared, common,
                        scope)
    if done is None:
        return [], everything
    took = set(plain)
    return plain, [i for i in everything if i not in took]
