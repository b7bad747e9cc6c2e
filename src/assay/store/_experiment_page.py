"""An experiment's rows a page at a time, in SQL: the web UI's experiment page at any size.

Reading a whole experiment into Python (``analysis.load_experiment``, which comparisons need)
costs ~0.6 ms per root: a minute at 10^5. The page shows 200 rows, so it reads 200 rows.

A row is an example: its repetitions (roots of the project naming the same example) together;
a root without an example is a row of its own. A row's *head* is its earliest root (start
time, then id), and rows are ordered by their heads - the order the experiment ran its
examples, which is the dataset's order for ``evaluate``. Pages are keyset pages over the
heads through the ``(session_id, start_time)`` index: each costs the same wherever it is.
A filter keeps a row when any of its roots matches (errors, ``where``) or when its scores
averaged over the repetitions fall below the threshold (``failing``), as the page always read
them; heads are tested in order until the page is full.

Counts ("showing 103 of 205") are made only for experiments of at most ``count_cap`` rows:
an exact count of the rows a filter keeps means reading every row, so past the cap the page
says "more than". A row's number is its position among all the experiment's rows, carried in
the cursor; under a filter the rows skipped between two shown ones are counted (a range the
filter's own scan walked already).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Float,
    and_,
    cast,
    exists,
    func,
    literal,
    not_,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.sql import Select, operators
from sqlalchemy.sql.elements import UnaryExpression

from .._time import to_micros
from ..errors import InvalidInputError
from ._browse import keyset
from ._run_filter import compile_filter
from ._runs import _row_to_run
from ._tables import feedback, runs

if TYPE_CHECKING:
    from ..schemas import Run
    from ._base import Store

__all__ = ["ExperimentPage", "experiment_rows", "chart_sample"]

COUNT_CAP = 2_000
CHART_RUNS = 2_000


@dataclass
class ExperimentPage:
    heads: list[Run]  # each row's earliest root, in order
    numbers: list[int]  # each row's 1-based position among all the experiment's rows
    roots: dict[str, list[Run]]  # head id -> every root of its row (repetitions), in order
    shown_before: int  # rows of the (filtered) list before this page
    next_cursor: str | None
    matching: int | None  # rows the filters keep; None: more than the cap
    total: int | None  # rows of the experiment; None: more than the cap
    count_cap: int = COUNT_CAP


def _decode(cursor: str) -> tuple[int, str, int, int]:
    try:
        us, rid, shown, number = cursor.split("_")
        return int(us), str(uuid.UUID(rid)), int(shown), int(number)
    except ValueError:
        raise InvalidInputError(f"cursor {cursor!r} is not one this page gave") from None


def _key(t: Any) -> tuple[Any, Any]:
    return type_coerce(t.c.start_time, BigInteger), t.c.id


def _session(t: Any, lite: bool) -> Any:
    """``t.session_id``; on SQLite as ``+session_id``, which no index serves: without ANALYZE
    statistics SQLite would probe a row's repetitions through the project's index (every
    root of the project, per row) rather than the example's (a handful)."""
    col = t.c.session_id
    return UnaryExpression(col, operator=operators.custom_op("+"), type_=col.type) if lite \
        else col


def _over_row(build: Callable[[Any, Any], Select[Any]], lite: bool) -> Any:
    """EXISTS ``build(r, r is a root of the head's row)`` for the head (``runs``): the head
    alone when it names no example, else every root of the project naming that example
    (found through the example's index: a handful of runs, not the project's)."""
    alone, rep = runs.alias("alone"), runs.alias("rep")
    by_example = build(rep, and_(
        rep.c.reference_example_id.is_not(None),
        rep.c.reference_example_id == runs.c.reference_example_id,
        rep.c.tenant_id == runs.c.tenant_id, _session(rep, lite) == runs.c.session_id,
        rep.c.is_root.is_(True),
        # always true (the head is its row's earliest root), and not an equality: PostgreSQL
        # would otherwise hash the subquery over every root of the dataset's experiments
        # (10^5 rows read to show 200) rather than probe each row's few
        rep.c.start_time >= runs.c.start_time))
    return or_(and_(runs.c.reference_example_id.is_(None),
                    exists(build(alone, alone.c.id == runs.c.id))),
               exists(by_example))


def _is_head(t: Any, lite: bool) -> Any:
    """No earlier root of the project names the same example."""
    e = runs.alias("earlier")
    s, i = _key(t)
    es, ei = _key(e)
    return not_(exists(select(literal(1)).where(
        e.c.reference_example_id.is_not(None),
        e.c.reference_example_id == t.c.reference_example_id, e.c.tenant_id == t.c.tenant_id,
        _session(e, lite) == t.c.session_id, e.c.is_root.is_(True),
        or_(es < s, and_(es == s, ei < i)))))


def _filters(store: Store, *, errors: bool, failing: str | None, threshold: float,
             where: str | None) -> list[Any]:
    """Conditions on a head (the ``runs`` table) keeping the rows the filters pick."""
    dialect = store.engine.dialect.name
    lite = dialect == "sqlite"
    out: list[Any] = []
    picks: list[Any] = []
    if errors:
        picks.append(_over_row(lambda r, same: select(literal(1)).where(
            same, r.c.error.is_not(None)), lite))
    if failing:
        def scored(r: Any, same: Any) -> Select[Any]:
            f = feedback.alias("score")
            q = select(f.c.key).select_from(f.join(r, f.c.run_id == r.c.id)).where(
                same, f.c.tenant_id == r.c.tenant_id, f.c.score.is_not(None))
            if failing != "any":
                q = q.where(f.c.key == failing)
            return q.group_by(f.c.key).having(func.avg(cast(f.c.score, Float)) < threshold)
        picks.append(_over_row(scored, lite))
    if picks:
        out.append(or_(*picks))
    if where:
        out.append(_over_row(lambda r, same: select(literal(1)).where(
            same, compile_filter(where, r, dialect)), lite))
    return out


def _count(conn: Any, conds: list[Any], cap: int) -> int | None:
    inner = select(literal(1)).select_from(runs).where(*conds).limit(cap + 1).subquery()
    n = int(conn.execute(select(func.count()).select_from(inner)).scalar_one())
    return n if n <= cap else None


def experiment_rows(store: Store, project_id: str, *, cursor: str | None = None,
                    limit: int = 200, errors: bool = False, failing: str | None = None,
                    threshold: float = 0.5, where: str | None = None,
                    count_cap: int = COUNT_CAP) -> ExperimentPage:
    """The rows of one page (``limit``) after ``cursor`` (a page's ``next_cursor``)."""
    pid = str(project_id)
    base = [runs.c.tenant_id == store.tenant_id, runs.c.session_id == pid,
            runs.c.is_root.is_(True), _is_head(runs, store.engine.dialect.name == "sqlite")]
    picked = _filters(store, errors=errors, failing=failing, threshold=threshold, where=where)
    after: list[Any] = []
    shown = number = 0
    if cursor:
        us, rid, shown, number = _decode(cursor)
        after.append(keyset(runs, us, rid, newer=True))
    q = (select(runs).where(*base, *picked, *after).order_by(runs.c.start_time, runs.c.id)
         .limit(limit + 1))
    store.settle()
    with store.read() as conn:
        heads = [_row_to_run(r) for r in conn.execute(q)]
        more = len(heads) > limit
        heads = heads[:limit]
        numbers: list[int] = []
        if picked and heads:
            # every row from the cursor to the page's last: each shown row's number is its
            # place among them (the filter's own query walked this range already)
            last = heads[-1]
            upto = keyset(runs, _us(last), str(last.id), newer=False, inclusive=True)
            keys = conn.execute(select(_key(runs)[0], runs.c.id).where(
                *base, *after, upto).order_by(runs.c.start_time, runs.c.id)).all()
            place = {str(rid): i for i, (_, rid) in enumerate(keys, 1)}
            numbers = [number + place[str(h.id)] for h in heads]
            number = numbers[-1]
        else:
            numbers = list(range(number + 1, number + len(heads) + 1))
            number += len(heads)
        roots = _siblings(conn, store, pid, heads)
        total = _count(conn, base, count_cap)
        # matching rows are counted only in an experiment of at most ``count_cap`` rows: a
        # rare match (2% errors) would otherwise have the count read every row
        matching = total if not picked else (
            _count(conn, base + picked, count_cap) if total is not None else None)
    nxt = None
    if more and heads:
        nxt = f"{_us(heads[-1])}_{heads[-1].id}_{shown + len(heads)}_{number}"
    return ExperimentPage(heads, numbers, roots, shown, nxt, matching, total, count_cap)


def _us(run: Run) -> int:
    us = to_micros(run.start_time)
    assert us is not None  # a stored run always has a start time
    return us


def _siblings(conn: Any, store: Store, pid: str, heads: list[Run]) -> dict[str, list[Run]]:
    """Every root of each head's row (the head alone when it names no example)."""
    lite = store.engine.dialect.name == "sqlite"
    out: dict[str, list[Run]] = {str(h.id): [h] for h in heads}
    by_example = {str(h.reference_example_id): str(h.id) for h in heads
                  if h.reference_example_id is not None}
    ids = list(by_example)
    for i in range(0, len(ids), 500):
        q = select(runs).where(
            runs.c.tenant_id == store.tenant_id, _session(runs, lite) == pid,
            runs.c.is_root.is_(True), runs.c.reference_example_id.in_(ids[i:i + 500])
        ).order_by(runs.c.start_time, runs.c.id)
        for row in conn.execute(q):
            run = _row_to_run(row)
            head = by_example[str(run.reference_example_id)]
            if str(run.id) != head:
                out[head].append(run)
    return out


def chart_sample(store: Store, project_id: str, limit: int = CHART_RUNS
                 ) -> tuple[list[float], dict[str, list[float]], int]:
    """Latency (seconds) of the experiment's first ``limit`` roots and their feedback scores
    per key, and how many roots that is: the distributions a page can afford to read."""
    pid = str(project_id)
    first = (select(runs.c.id, runs.c.latency_us).where(
        runs.c.tenant_id == store.tenant_id, runs.c.session_id == pid,
        runs.c.is_root.is_(True)).order_by(runs.c.start_time, runs.c.id).limit(limit)
        .subquery())
    store.settle()
    with store.read() as conn:
        got = conn.execute(select(first.c.id, first.c.latency_us)).all()
        ids = [str(r[0]) for r in got]
        lat = [int(r[1]) / 1e6 for r in got if r[1] is not None]
        n = len(got)
        scores: dict[str, list[float]] = {}
        # by the ids themselves: from ``IN (subquery)`` PostgreSQL hashes the whole table
        for i in range(0, len(ids), 1000):
            q = select(feedback.c.key, feedback.c.score).where(
                feedback.c.tenant_id == store.tenant_id, feedback.c.score.is_not(None),
                feedback.c.comparative_experiment_id.is_(None),  # pairwise: not the run's own
                feedback.c.run_id.in_(ids[i:i + 1000]))
            for key, score in conn.execute(q):
                scores.setdefault(key, []).append(float(score))
    return lat, scores, n
