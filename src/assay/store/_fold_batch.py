"""The fold's batch lane: a whole batch of plain runs checked and built column by column.

``_fold_columns.insert_rows`` unpacks each value list and writes its row in one expression,
with a dozen checks per run in Python between. Most batches need none of them run by run: an
experiment's root runs or a burst of traced calls are runs of the same few shapes, and each
check holds for a whole column at once (every start an ``int``, every reference id canonical
text, no outputs naming usage...). Here the batch is turned into its columns (one ``zip``) and
each check and each derived column is one pass in C (``map``, ``set``, ``str.join``, a regex
over the joined ids) or one comprehension, then the rows are zipped back together: the
experiment's fold 4.5 -> ~2 us of Python a run (bench/README, stop 40).

It takes a batch only when every run of it is one the per-run loop would take as a new plain
run, the values it stores being the same (a test folds batches both ways and compares every
stored column and statistic); any batch with something else in it (an llm run, events, usage
among its outputs' own keys or in metadata, an ``extra`` of its own, a value of an unusual
type, a run stored or patched already) is left to the loop, whole. An agent's trace is such
a batch (its llm runs): ``_fold_columns._plain_part`` hands the lane its other runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson

from .._compiled import compiled
from .._ids import all_canonical_uuids, dotted_segment_us
from ._aggregates import RunDeltas
from ._fold_rows import (
    _ORDER,
    _SAME_CANDIDATES,
    FoldScope,
    _escaped,
    _insert,
    _json_text,
    apply_new_runs,
    batch_literal,
    executemany,
)
from ._fold_usage import holds_usage, names_usage

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["insert_batch", "types_of"]

_NONE = type(None)
_TEXT_OR_NONE = {str, _NONE}
_INT_OR_NONE = {int, _NONE}


def _types_py(column: Sequence[Any]) -> set[type]:
    return set(map(type, column))


# in C where built (``_cencode.types_of``: the same set, without a type() call per value)
types_of: Callable[[Sequence[Any]], set[type]] = getattr(
    compiled("assay.store._cencode"), "types_of", _types_py)


def _objects_text(column: tuple[Any, ...]) -> bool:
    """Every value JSON text of an object (the writer's ``column_text``) or None."""
    kinds = types_of(column)
    if kinds == {str}:
        return all(map(str.startswith, column, repeat("{")))
    if not kinds <= _TEXT_OR_NONE:
        return False
    return all(v.startswith("{") for v in column if v is not None)


def insert_batch(conn: Connection, items: list[list[Any]], sessions: Mapping[Any, Any],
                 tenant: str, shared: Mapping[str, Any], common: str,
                 scope: FoldScope | None) -> int | None:
    """Insert ``items`` (value lists in ``WRITER_COLUMNS`` order, inputs and outputs as
    ``column_text``, none stored or patched, ids canonical and distinct) and stage their
    statistics; return how many, or None (nothing written) when a run of the batch is not one
    this lane takes. ``sessions``: the project of each (session id, session name) pair of the
    batch, and no other; ``common``: the ``extra`` text of a run without metadata of its
    own."""
    (rids, traces, parents, dotted, names, run_types, starts, inputs, extras, metas, tags,
     events, sid_col, sname_col, refs, ends, outputs, errors) = zip(*items, strict=True)
    n = len(rids)
    # what makes a run one to derive usage for, or one the loop checks item by item
    if (any(extras) or not types_of(extras) <= {dict, _NONE} or any(events) or "llm" in run_types
            or not types_of(run_types) <= {str} or not types_of(starts) <= {int}
            or not types_of(ends) <= _INT_OR_NONE or not types_of(events) <= {list, _NONE}
            or not types_of(metas) <= {dict, _NONE} or not types_of(tags) <= {list, _NONE}
            or not types_of(names) <= {str} or not types_of(errors) <= _TEXT_OR_NONE
            or not _objects_text(inputs) or not _objects_text(outputs)):
        return None
    # usage named in an output's text: a run to derive it for if among the outputs' own keys
    # (an agent's chain runs name it deeper, in their messages: plain runs all the same)
    if names_usage("\x00".join(o for o in outputs if o is not None)) and any(
            holds_usage(o) for o in outputs if o is not None):
        return None
    if any("usage_metadata" in m for m in metas if m):
        return None
    # ids: a trace or parent named is canonical text (the batch's own ids are)
    if not all_canonical_uuids([p for p in parents if p is not None]):
        return None
    if not all_canonical_uuids([r for r in refs if r is not None]):
        return None
    if None in traces:
        if any(t is None and p is not None for t, p in zip(traces, parents, strict=True)):
            return None  # a child without its trace: the loop names what is missing
        traces = tuple(r if t is None else t for t, r in zip(traces, rids, strict=True))
    if traces != rids and not all_canonical_uuids([t for t, r in zip(traces, rids, strict=True)
                                          if t != r]):
        return None
    if len(sessions) == 1:  # the batch's sessions, as insert_rows resolved them: one
        sid = next(iter(sessions.values()))
        if sid is None:
            return None
        sids: tuple[Any, ...] | list[Any] = (sid,) * n
    else:
        sids = [sessions[p] for p in zip(sid_col, sname_col, strict=True)]
        if None in sids:
            return None

    # the columns as the loop writes them
    in_col = [("null" if v is None else v) for v in inputs] if None in inputs else inputs
    out_col = [("null" if v is None else v) for v in outputs] if None in outputs else outputs
    extra_col = _extras(metas, shared, common)
    tag_col = [("[]" if not t else _json_text(t)) for t in tags]
    joined = "".join(names)
    if "\x00" in joined or not joined.isascii():
        names = tuple(map(_escaped, names))
    failed = any(e is not None for e in errors)
    if failed:
        errors = tuple(None if e is None else _escaped(e) for e in errors)
        status = ["error" if e else ("success" if end is not None else "pending")
                  for e, end in zip(errors, ends, strict=True)]
    else:
        status = ["pending" if end is None else "success" for end in ends]
    latency = [None if e is None else e - s for s, e in zip(starts, ends, strict=True)]
    roots = [p is None for p in parents]
    if not all(dotted):
        dotted = tuple(d if d or p is not None else dotted_segment_us(s, r)
                       for d, p, s, r in zip(dotted, parents, starts, rids, strict=True))
    columns = (dotted, ends, errors, ("[]",) * n, extra_col, rids, in_col, roots, latency,
               names, out_col, parents, refs, run_types, ("null",) * n, sids, starts, status,
               tag_col, (tenant,) * n, traces)
    if conn.dialect.name != "sqlite":  # PostgreSQL's COPY
        _insert(conn, list(zip(*columns, strict=True)))
    elif roots.count(roots[0]) == n:
        _insert_columns(conn, columns)
    else:  # roots and children: in two statements, each group's columns picked in C
        for group in ([i for i, r in enumerate(roots) if r],
                      [i for i, r in enumerate(roots) if not r]):
            pick = itemgetter(*group)
            _insert_columns(conn, [pick(c) for c in columns] if len(group) > 1
                            else [(c[group[0]],) for c in columns])

    deltas = RunDeltas()
    posted: dict[str, list[str]] = {}
    by_session: dict[str, list[int]] = {}
    if sids.__class__ is tuple:
        posted[sids[0]] = list(rids)
        by_session[sids[0]] = list(range(n))
    else:
        for i, (s, rid) in enumerate(zip(sids, rids, strict=True)):
            posted.setdefault(s, []).append(rid)
            by_session.setdefault(s, []).append(i)
    for s, at in by_session.items():  # a new child run without usage adds nothing
        mine = at if all(roots) else [i for i in at if roots[i]]
        deltas.add_new_roots(s, tenant, [starts[i] for i in mine],
                             sum(ends[i] is not None for i in mine),
                             [starts[i] for i in mine if errors[i] is not None] if failed else [])
    apply_new_runs(conn, tenant, deltas, posted, scope)
    return n


def _extras(metas: Sequence[Any], shared: Mapping[str, Any], common: str) -> list[str]:
    """Each run's ``extra`` text as the per-run loop writes it; metadata of the same JSON
    (an experiment's runs all carry ``{"repetition": 0}``, say) written once."""
    spliced = "metadata" not in shared  # else the batch's own metadata is replaced
    head = common[:-3]
    known: dict[bytes, str] = {}
    out = []
    for m in metas:
        if not m:
            out.append(common)
            continue
        try:
            key = orjson.dumps(m)  # the value as JSON: two values with one text store one
        except TypeError:  # orjson.JSONEncodeError: past its integers, say
            key = b""
        text = known.get(key) if key else None
        if text is None:
            text = f"{head}{_json_text(m)}}}" if spliced else _json_text(
                {**shared, "metadata": m})
            if key:
                known[key] = text
        out.append(text)
    return out


def _insert_columns(conn: Connection, columns: Sequence[Sequence[Any]]) -> None:
    """SQLite: the rows (``columns`` in ``_ORDER``, all roots or all children) in one
    executemany, as ``_fold_rows._insert`` writes them: a column with one value throughout
    written into the statement as a literal, the others bound row by row."""
    values, bound = [], []
    for name, column in zip(_ORDER, columns, strict=True):
        literal = batch_literal(column) if name in _SAME_CANDIDATES else None
        if literal is None:
            bound.append(column)
            values.append("?")
        else:
            values.append(literal)
    quote = conn.dialect.identifier_preparer.quote
    executemany(
        conn,
        f"INSERT INTO runs ({', '.join(quote(c) for c in _ORDER)}) VALUES ({', '.join(values)})",
        zip(*bound, strict=True))
