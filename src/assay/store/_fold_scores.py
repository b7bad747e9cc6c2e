"""The fold's columnar path for ``evaluate()``'s plain scores: value lists straight to rows.

``evaluate()``'s feedback sink journals each plain score as four values (``SCORE_COLUMNS``),
what they all share (the experiment, the source) once per batch. Folded as feedback items,
each became a dict, a row dict (``FeedbackRepo._row``), a probe for its id among the stored
ones, a JSON encoding of its source, a tuple of 15 bound values and a ``FeedbackDeltas`` call:
~10 us a score, more than SQLite's own insert with every index (~3 us). Here the batch's
shared row is made once by ``_row`` itself (``score_rows``: a ``ScoreBatch``), and
``insert_scores`` writes each score's id, run, trace, key and score beside it: on SQLite in one
executemany whose shared values are written into the statement once (each bound value costs
the driver ~0.3 us), on PostgreSQL through ``COPY``. The statistics are summed per key in row
order, as ``FeedbackDeltas`` adds them, so they are the same to the last bit.

Taken is a batch whose every item is a list of exactly those four values: a run id and a
trace id as canonical UUID text (or no trace), a non-empty key of valid Unicode, a score that is
a number, a bool or null; the shared fields naming a project (so no run's project is looked
up) and no id (each row gets a fresh one, which no stored row can have: no probe). Any other
batch takes the general path, item by item through ``_row``, which names what is wrong.
A test compares every stored column and statistic of both paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._ids import all_canonical_uuids, new_ids_text
from ._aggregates import FeedbackDeltas
from ._bulk import _JSON, _TIME, _kind
from ._fold_batch import types_of
from ._fold_rows import _sql_literal, executemany
from ._tables import feedback

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._feedback import FeedbackRepo

__all__ = ["SCORE_COLUMNS", "ScoreBatch", "insert_scores", "score_rows"]

SCORE_COLUMNS = ("run_id", "trace_id", "key", "score")  # evaluate()'s plain scores (_sink)
_WIDTH = len(SCORE_COLUMNS)
_COLUMNS = tuple(c.name for c in feedback.columns)
_KINDS = tuple(_kind(c) for c in feedback.columns)
# what varies from score to score; every other column is the batch's shared row
_OWN = ("id", "run_id", "trace_id", "key", "score")
_float, _bool, _int, _str, _list = float, bool, int, str, list
_BATCH_TIMES = frozenset(c for c, k in zip(_COLUMNS, _KINDS, strict=True) if k == _TIME)


class ScoreBatch:
    """A batch of plain scores ready to insert: the shared row (``FeedbackRepo._row`` of the
    first item) and the scores' own values, column by column."""

    __slots__ = ("template", "run_ids", "trace_ids", "keys", "scores")

    def __init__(self, template: dict[str, Any], run_ids: list[str],
                 trace_ids: list[str | None], keys: list[str], scores: list[float | None]):
        self.template = template
        self.run_ids = run_ids
        self.trace_ids = trace_ids
        self.keys = keys
        self.scores = scores

    def __len__(self) -> int:
        return len(self.run_ids)


def _as_score(value: Any) -> Any:
    """``_feedback._score`` for the types JSON gives; ``_row`` (the general path) for others."""
    cls = value.__class__
    if cls is _float or value is None:
        return value
    if cls is _bool:
        return 1.0 if value else 0.0
    if cls is _int:
        return _float(value)  # OverflowError past a float's range: the general path's
    raise TypeError(value)


def score_rows(repo: FeedbackRepo, items: list[Any], columns: Any, defaults: Any,
               created: Any) -> ScoreBatch | None:
    """The batch of plain scores journaled as value lists (see the module docstring) as a
    ``ScoreBatch`` for ``insert_scores``, or None when it is not one that this path
    takes (the general path then builds each row with ``FeedbackRepo._row``)."""
    defaults = defaults or {}
    if (tuple(columns or ()) != SCORE_COLUMNS or created is None or "id" in defaults
            or not items):
        return None
    if types_of(items) != {_list} or set(map(len, items)) != {_WIDTH}:
        return None
    run_ids, trace_ids, keys, raw = map(list, zip(*items, strict=True))
    if not all_canonical_uuids(run_ids):
        return None
    if trace_ids != run_ids:  # evaluate()'s: each score on a root run, its own trace
        if any(t is None for t in trace_ids):
            if not all_canonical_uuids([t for t in trace_ids if t is not None]):
                return None
        elif not all_canonical_uuids(trace_ids):
            return None
    if types_of(keys) != {_str}:
        return None
    for key in (keys[0],) if keys.count(keys[0]) == len(keys) else set(keys):
        if not key:
            return None
        try:
            key.encode()  # a lone surrogate: _row says so
        except UnicodeEncodeError:
            return None
    kinds = types_of(raw)
    if kinds <= {_float, type(None)}:  # as _as_score gives them, without a call each
        scores = raw
    elif kinds == {_bool}:
        scores = [1.0 if v else 0.0 for v in raw]
    else:
        try:
            scores = [_as_score(v) for v in raw]
        except (TypeError, OverflowError):
            return None
    first = {**defaults, **dict(zip(SCORE_COLUMNS, items[0], strict=True))}
    first.setdefault("created_at", created)  # as the general path's items get them
    first.setdefault("modified_at", first["created_at"])
    try:
        template = repo._row(first)
    except Exception:  # noqa: BLE001 - the general path reports it, item by item
        return None
    if template["session_id"] is None:  # a run's project to look up: the general path
        return None
    return ScoreBatch(template, run_ids, trace_ids, keys, scores)


def _stored(template: Mapping[str, Any]) -> list[Any]:
    """The shared row's values as ``_bulk.insert_many`` binds them, in table order."""
    from .. import _json
    from ._types import to_micros

    out = []
    for name, kind in zip(_COLUMNS, _KINDS, strict=True):
        value = template[name]
        if kind == _JSON:
            value = "null" if value is None else _json.dumps_column(value)
        elif kind == _TIME and value is not None and value.__class__ is not _int:
            value = to_micros(value)
        out.append(value)
    return out


def insert_scores(conn: Connection, batch: ScoreBatch) -> int:
    """Insert the batch's rows and add them to the statistics, in the caller's transaction;
    return how many."""
    n = len(batch)
    shared = _stored(batch.template)
    ids = new_ids_text(n)
    runs, traces, keys, scores = batch.run_ids, batch.trace_ids, batch.keys, batch.scores
    one_key = keys.count(keys[0]) == n
    same_trace = traces is runs or traces == runs
    if conn.dialect.name == "postgresql":
        _copy(conn, shared, ids, runs, traces, keys, scores)
    else:
        _executemany(conn, shared, ids, runs, traces, keys, scores, one_key, same_trace)
    _add_stats(batch, one_key).apply(conn)
    return n


def _executemany(conn: Connection, shared: list[Any], ids: list[str], runs: list[str],
                 traces: list[Any], keys: list[str], scores: list[Any], one_key: bool,
                 same_trace: bool) -> None:
    """SQLite: a numbered parameter per value a score has of its own, the shared values as
    literals (bound once per row, like a score's own, where no literal stores the same)."""
    at = {name: i for i, name in enumerate(_COLUMNS)}
    values: list[str] = []
    columns: list[list[Any]] = []  # the bound values, column by column

    def bind(column: list[Any]) -> str:
        columns.append(column)
        return f"?{len(columns)}"

    for name in _COLUMNS:
        if name == "id":
            values.append(bind(ids))
        elif name == "run_id":
            run_mark = bind(runs)
            values.append(run_mark)
        elif name == "trace_id":
            values.append(run_mark if same_trace else bind(traces))
        elif name == "key":
            literal = _sql_literal(keys[0]) if one_key else None
            values.append(literal if literal is not None else bind(keys))
        elif name == "score":
            values.append(bind(scores))
        else:
            value = shared[at[name]]
            # a batch's times are bound, not written in: they differ from batch to batch, and
            # each batch's statement (several rows, ``_multirow``) was then prepared anew
            literal = None if name in _BATCH_TIMES else _sql_literal(value)
            values.append(literal if literal is not None else bind([value] * len(ids)))
    quote = conn.dialect.identifier_preparer.quote
    sql = (f"INSERT INTO {quote(feedback.name)} ({', '.join(quote(c) for c in _COLUMNS)}) "
           f"VALUES ({', '.join(values)})")
    executemany(conn, sql, zip(*columns, strict=True))


def _copy(conn: Connection, shared: list[Any], ids: list[str], runs: list[str],
          traces: list[Any], keys: list[str], scores: list[Any]) -> None:
    """PostgreSQL: the rows through ``COPY`` (the driver formats each in C)."""
    quote = conn.dialect.identifier_preparer.quote
    sql = f"COPY {quote(feedback.name)} ({', '.join(quote(c) for c in _COLUMNS)}) FROM STDIN"
    row = list(shared)
    i_id, i_run, i_trace, i_key, i_score = (_COLUMNS.index(c) for c in _OWN)
    raw: Any = conn.connection.driver_connection  # in this transaction (and savepoint)
    with raw.cursor() as cur, cur.copy(sql) as copy:
        write = copy.write_row
        for fid, run, trace, key, score in zip(ids, runs, traces, keys, scores, strict=True):
            row[i_id], row[i_run], row[i_trace], row[i_key], row[i_score] = (
                fid, run, trace, key, score)
            write(row)


def _add_stats(batch: ScoreBatch, one_key: bool) -> FeedbackDeltas:
    """What ``FeedbackDeltas.add_row`` would add for each row, summed per key in row order
    (so the float sums are the same)."""
    t = batch.template
    sid, tenant, label = t["session_id"], t["tenant_id"], t["label"]
    deltas = FeedbackDeltas()
    groups: dict[str, list[float | None]]
    groups = {batch.keys[0]: batch.scores} if one_key else {}
    if not one_key:
        for key, score in zip(batch.keys, batch.scores, strict=True):
            got = groups.get(key)
            if got is None:
                got = groups[key] = []
            got.append(score)
    for key, scores in groups.items():  # every row names a run: level "run"
        n = len(scores)
        scored = 0
        total = 0.0
        squares = 0.0
        for s in scores:
            if s is not None:
                scored += 1
                total += s
                squares += s * s
        deltas.stats[(sid, tenant, "run", key)] = [n, scored, total, squares]
        if label is not None:
            deltas.labels[(sid, tenant, "run", key, label)] = n
    return deltas
