"""Session statistics (``read_project(include_stats=True)``).

``session_stats`` reads the counts and sums that every write keeps up to date
(``_aggregates.py``: one row per session and per feedback key), so its cost does not grow with
the session. Each percentile reads at most two index entries (``ORDER BY ... LIMIT 2 OFFSET k``)
from the nearer end and interpolates linearly between them, which is numpy's default method.
``recompute_session_stats`` computes the same figures from the runs and feedback rows with full
aggregate queries: the definition the maintained sums must always equal (tests and repair
compare the two). The same SQL runs on SQLite and PostgreSQL.

Meanings:
- run_count, latency, error_rate, last_run_start_time: over root runs of the session.
- first_token_p50/p99: over runs that streamed (have a ``new_token`` event), from the run's start
  to its first token; null when none streamed. streaming_rate: share of root runs whose trace
  streamed.
- tokens and costs: summed over the session's ``llm`` runs (costs null when none is known).
- feedback_stats: feedback on the session's runs, per key ``{n, avg, stdev, values}`` where
  ``stdev`` is the population standard deviation of numeric scores and ``values`` counts
  categorical values; session_feedback_stats: feedback on the session itself (summary
  evaluators).
- test_run_number: the session's 1-based position among its dataset's experiments by start time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, distinct, func, literal_column, or_, select
from sqlalchemy.engine import Connection

from ._aggregates import pending_feedback
from ._driver import marked
from ._tables import (
    feedback,
    runs,
    session_aggregates,
)
from ._types import from_micros, to_micros

__all__ = ["percentile", "quantile", "recompute_session_stats", "session_stats"]

# Inline literals, not bound parameters: the planners can then use the partial indexes
# (``WHERE run_type = 'llm'``, ``first_token_us IS NOT NULL``) that match these terms.
_IS_LLM = runs.c.run_type == literal_column("'llm'")


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile of values in memory: linear interpolation between the two nearest
    ranks, as ``percentile`` reads it from an index."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def percentile(conn: Connection, column: Any, where: Any, n: int, q: float) -> float | None:
    """The q-quantile (0..1) of ``column`` over ``n`` non-null rows matching ``where``.

    The two neighbouring values are read from whichever end of the index is nearer, so p99 of a
    million runs walks ten thousand index entries, not 990,000.
    """
    if n <= 0:
        return None
    pos = q * (n - 1)
    lo = int(math.floor(pos))
    frac = pos - lo
    hi = min(lo + 1, n - 1)
    base = select(column).where(where, column.is_not(None))
    if lo <= n - 1 - hi:
        vals = conn.execute(base.order_by(column).offset(lo).limit(2)).scalars().all()
    else:  # from the top: the value at rank hi comes first
        vals = conn.execute(
            base.order_by(column.desc()).offset(n - 1 - hi).limit(2)
        ).scalars().all()[::-1]
    if not vals:
        return None
    a = float(vals[0])
    b = float(vals[-1]) if hi > lo else a
    return a + (b - a) * frac


def _feedback_stats(conn: Connection, where: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    q = select(
        feedback.c.key,
        func.count(),
        func.count(feedback.c.score),
        func.sum(feedback.c.score),
        func.sum(feedback.c.score * feedback.c.score),
    ).where(where).group_by(feedback.c.key)
    for key, n, n_scored, total, total_sq in conn.execute(q):
        out[key] = _key_stats(n, n_scored, total, total_sq)
    labels = select(feedback.c.key, feedback.c.label, func.count()).where(
        where, feedback.c.label.is_not(None)
    ).group_by(feedback.c.key, feedback.c.label)
    for key, label, n in conn.execute(labels):
        out.setdefault(key, {"n": 0, "avg": None, "stdev": None, "values": {}})
        out[key]["values"][label] = int(n)
    return out


def recompute_session_stats(conn: Connection, session: Any) -> dict[str, Any]:
    """The statistics from the rows themselves (full scans): what ``session_stats`` must equal."""
    sid = session.id
    in_session = runs.c.session_id == sid
    roots = and_(in_session, runs.c.is_root.is_(True))
    run_count, n_lat, n_err, last_start = conn.execute(
        select(
            func.count(),
            func.count(runs.c.latency_us),
            func.count(runs.c.error),
            func.max(runs.c.start_time),
        ).where(roots)
    ).one()
    n_ft, n_streamed_traces = conn.execute(
        select(func.count(runs.c.first_token_us), func.count(distinct(runs.c.trace_id))).where(
            in_session, runs.c.first_token_us.is_not(None)
        )
    ).one()
    tokens = conn.execute(
        select(
            func.sum(runs.c.total_tokens),
            func.sum(runs.c.prompt_tokens),
            func.sum(runs.c.completion_tokens),
            func.sum(runs.c.total_cost),
            func.sum(runs.c.prompt_cost),
            func.sum(runs.c.completion_cost),
        ).where(in_session, _IS_LLM)
    ).one()

    def cost(value: Any) -> float | None:
        return None if value is None else float(value)

    # feedback rows carry the writer's workspace: another workspace naming this session's or
    # runs' ids must not move these statistics
    own = feedback.c.tenant_id == session.tenant_id
    run_feedback = and_(
        own,
        feedback.c.run_id.is_not(None),
        feedback.c.comparative_experiment_id.is_(None),  # pairwise: the comparison's
        or_(
            feedback.c.session_id == sid,
            and_(
                feedback.c.session_id.is_(None),
                feedback.c.run_id.in_(select(runs.c.id).where(in_session)),
            ),
        ),
    )
    return {
        "run_count": int(run_count),
        "latency_p50": _seconds(percentile(conn, runs.c.latency_us, roots, n_lat, 0.5)),
        "latency_p99": _seconds(percentile(conn, runs.c.latency_us, roots, n_lat, 0.99)),
        "first_token_p50": _seconds(percentile(conn, runs.c.first_token_us, in_session, n_ft, 0.5)),
        "first_token_p99": _seconds(
            percentile(conn, runs.c.first_token_us, in_session, n_ft, 0.99)),
        "total_tokens": int(tokens[0] or 0),
        "prompt_tokens": int(tokens[1] or 0),
        "completion_tokens": int(tokens[2] or 0),
        "total_cost": cost(tokens[3]),
        "prompt_cost": cost(tokens[4]),
        "completion_cost": cost(tokens[5]),
        "last_run_start_time": from_micros(last_start),
        "last_run_start_time_live": None,
        "feedback_stats": _feedback_stats(conn, run_feedback),
        "session_feedback_stats": _feedback_stats(
            conn, and_(own, feedback.c.session_id == sid, feedback.c.run_id.is_(None))
        ),
        "run_facets": [],
        "error_rate": (n_err / run_count) if run_count else None,
        "streaming_rate": (n_streamed_traces / run_count) if run_count else None,
        "test_run_number": _test_run_number(conn, session),
    }


def _test_run_number(conn: Connection, session: Any) -> int | None:
    if session.reference_dataset_id is None:
        return None
    start_us = to_micros(session.start_time)
    ref = str(session.reference_dataset_id)
    return conn.exec_driver_sql(marked(conn, _EARLIER_RUNS),
                                (ref, start_us, start_us, str(session.id))).scalar()


def _seconds(value: float | None) -> float | None:
    return None if value is None else value / 1_000_000


def _key_stats(n: int, n_scored: int, total: float, total_sq: float) -> dict[str, Any]:
    """``{n, avg, stdev, values}`` from a key's count, scored count and score sums.

    The variance is E[x^2] - E[x]^2; a difference within float rounding of E[x^2] (1e-12 of
    it) is zero: sums added in another order (the maintained ones are added write by write)
    must not turn equal scores into a stdev of 1e-8.
    """
    avg = stdev = None
    if n_scored:
        avg = float(total) / n_scored
        mean_sq = float(total_sq) / n_scored
        var = mean_sq - avg * avg
        stdev = math.sqrt(var) if var > 1e-12 * mean_sq else 0.0
    return {"n": int(n), "avg": avg, "stdev": stdev, "values": {}}


def _maintained_feedback(conn: Connection, sid: str, tenant: str
                         ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(feedback_stats, session_feedback_stats) from the feedback aggregates, plus the
    workspace's pending feedback whose run is in this session (counted live)."""
    sums: dict[tuple[str, str], list[Any]] = {}  # [n, n_scored, total, total_sq]
    labels: dict[tuple[str, str], dict[str, int]] = {}
    for level, key, n, n_scored, total, total_sq in conn.exec_driver_sql(
            marked(conn, _SCORE_SUMS), (sid, tenant)):
        sums[(level, key)] = [n, n_scored, total, total_sq]
    for level, key, label, n in conn.exec_driver_sql(marked(conn, _LABELS), (sid, tenant)):
        labels.setdefault((level, key), {})[label] = int(n)
    for key, score, label in pending_feedback(conn, sid, tenant):
        d = sums.setdefault(("run", key), [0, 0, 0.0, 0.0])
        d[0] += 1
        if score is not None:
            d[1] += 1
            d[2] += score
            d[3] += score * score
        if label is not None:
            per = labels.setdefault(("run", key), {})
            per[label] = per.get(label, 0) + 1
    out: dict[str, dict[str, dict[str, Any]]] = {"run": {}, "session": {}}
    for (level, key) in sorted(sums):
        stats = _key_stats(*sums[(level, key)])
        stats["values"] = labels.get((level, key), {})
        out[level][key] = stats
    return out["run"], out["session"]


# the statistics' reads of plain columns, as SQL text to the driver (``marked``): Core
# statements each new engine compiled again, at the first read after an experiment
_SCORE_SUMS = ('SELECT level, "key", n, n_scored, score_sum, score_sq_sum FROM feedback_aggregates'
               " WHERE session_id = ? AND tenant_id = ? AND n > 0")
_LABELS = ('SELECT level, "key", label, n FROM feedback_label_counts'
           " WHERE session_id = ? AND tenant_id = ? AND n > 0")
_AGGREGATES = "SELECT * FROM session_aggregates WHERE session_id = ?"
_EARLIER_RUNS = ("SELECT count(*) FROM sessions WHERE reference_dataset_id = ? "
                 "AND (start_time < ? OR (start_time = ? AND id <= ?))")

# a session no run has reached yet has no aggregate row
_NO_RUNS = {c.name: (None if c.name == "last_root_start" else 0) for c in session_aggregates.c}


def session_stats(conn: Connection, session: Any) -> dict[str, Any]:
    """The statistics from the maintained aggregates: a handful of indexed reads."""
    sid = session.id
    row = conn.exec_driver_sql(marked(conn, _AGGREGATES), (sid,)).first()
    agg: Any = row._mapping if row is not None else _NO_RUNS
    in_session = runs.c.session_id == sid
    roots = and_(in_session, runs.c.is_root.is_(True))
    run_count, n_lat, n_ft = (int(agg[c]) for c in ("root_runs", "root_latencies",
                                                       "streamed_runs"))

    def cost(total: str, count: str) -> float | None:
        return float(agg[total]) if agg[count] else None

    def tokens(col: str) -> int:
        return int(agg[col])

    run_stats, session_fb = _maintained_feedback(conn, sid, session.tenant_id)
    return {
        "run_count": run_count,
        "latency_p50": _seconds(percentile(conn, runs.c.latency_us, roots, n_lat, 0.5)),
        "latency_p99": _seconds(percentile(conn, runs.c.latency_us, roots, n_lat, 0.99)),
        "first_token_p50": _seconds(percentile(conn, runs.c.first_token_us, in_session, n_ft, 0.5)),
        "first_token_p99": _seconds(
            percentile(conn, runs.c.first_token_us, in_session, n_ft, 0.99)),
        "total_tokens": tokens("total_tokens"),
        "prompt_tokens": tokens("prompt_tokens"),
        "completion_tokens": tokens("completion_tokens"),
        "total_cost": cost("total_cost", "total_cost_runs"),
        "prompt_cost": cost("prompt_cost", "prompt_cost_runs"),
        "completion_cost": cost("completion_cost", "completion_cost_runs"),
        "last_run_start_time": from_micros(agg["last_root_start"]) if run_count else None,
        "last_run_start_time_live": None,
        "feedback_stats": run_stats,
        "session_feedback_stats": session_fb,
        "run_facets": [],
        "error_rate": (agg["root_errors"] / run_count) if run_count else None,
        "streaming_rate": (agg["streamed_traces"] / run_count) if run_count else None,
        "test_run_number": _test_run_number(conn, session),
    }
