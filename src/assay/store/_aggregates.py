"""Session statistics kept up to date on write, so reading them costs a few rows, not a scan.

Invariant, held by every write to ``runs`` or ``feedback`` in the same transaction:

- ``session_aggregates[s]`` sums, over the runs with ``session_id = s``, each run's contribution
  (``RunDeltas.add``): root runs, roots with a latency, roots with an error, streamed runs, llm
  tokens and costs (with the count of llm runs that know each cost, so a sum over none stays
  null); ``last_root_start`` is the latest root start (recomputed through an index when the
  latest root goes away, since a maximum cannot be decremented).
- ``trace_streams[s, t]`` counts the streamed runs of session s in trace t, and
  ``streamed_traces`` counts those pairs above zero (``COUNT(DISTINCT trace_id)``, kept by
  watching the counts cross zero).
- ``run_hours[s, h]`` sums the same contributions of the runs of session s whose start falls in
  hour h (``hour_of``): root runs, roots with an error, llm tokens and costs (with the count of
  llm runs that know their cost). The project charts read it (``_series``).
- ``feedback_aggregates[s, tenant, level, key]`` and ``feedback_label_counts`` sum the feedback
  rows with that ``session_id`` and ``tenant_id`` (level ``run`` when the row names a run).

Feedback whose run is not stored yet keeps ``session_id`` NULL and is in no aggregate: statistics
add such rows live (``pending_feedback``; there are few), and the post of the run adopts them
(sets ``session_id``, adds them). A patch that arrives before its post does not adopt: until the
post the run may still move to another project, and its feedback moves with it.

Writers compute each changed row's contribution before and after and add the difference with
``INSERT .. ON CONFLICT DO UPDATE SET x = x + excluded.x``: one statement per batch, one row per
session, atomic under concurrent writers on SQLite and PostgreSQL alike. Rows are sorted by key
so two PostgreSQL transactions lock them in the same order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    case,
    delete,
    func,
    literal,
    literal_column,
    select,
    type_coerce,
    update,
)
from sqlalchemy.engine import Connection

from ._bulk import insert_many
from ._driver import marked
from ._tables import (
    feedback,
    feedback_aggregates,
    feedback_label_counts,
    run_hours,
    runs,
    session_aggregates,
    trace_streams,
)

__all__ = ["RunDeltas", "FeedbackDeltas", "HOUR_US", "HOURLY", "hour_of", "hourly_select",
           "RUN_RETURNING", "FEEDBACK_RETURNING", "ORPHAN", "adopt_pending_feedback",
           "adopt_all_pending", "pending_feedback", "drop_session", "rebuild_aggregates"]

# the summed columns of session_aggregates, in the order RunDeltas keeps them
_SUMS = ("root_runs", "root_latencies", "root_errors", "streamed_runs", "total_tokens",
         "prompt_tokens", "completion_tokens", "total_cost", "prompt_cost", "completion_cost",
         "total_cost_runs", "prompt_cost_runs", "completion_cost_runs", "streamed_traces")
_STREAMED_TRACES = _SUMS.index("streamed_traces")
_ZERO = (0,) * len(_SUMS)
_CHUNK = 500
HOUR_US = 3_600_000_000
# the summed columns of run_hours, in the order RunDeltas.hours keeps them
_HOUR_SUMS = ("root_runs", "root_errors", "total_tokens", "total_cost", "cost_runs")
ORPHAN = "orphan"  # runs.status of a patch stored before its post

# what a DELETE .. RETURNING must give back for RunDeltas.add / FeedbackDeltas.add_row (plain
# columns: SQLite 3.40 returned 1 for ``error IS NOT NULL`` on every deleted row)
RUN_RETURNING = (runs.c.id, runs.c.tenant_id, runs.c.session_id, runs.c.trace_id,
                 runs.c.is_root, runs.c.run_type,
                 type_coerce(runs.c.start_time, BigInteger).label("start_time"),  # epoch us
                 runs.c.latency_us, runs.c.first_token_us, runs.c.error, runs.c.total_tokens,
                 runs.c.prompt_tokens, runs.c.completion_tokens, runs.c.total_cost,
                 runs.c.prompt_cost, runs.c.completion_cost)
FEEDBACK_RETURNING = (feedback.c.session_id, feedback.c.tenant_id, feedback.c.run_id,
                      feedback.c.key, feedback.c.score, feedback.c.label,
                      feedback.c.comparative_experiment_id)


def hour_of(start_us: int) -> int:
    """The start of the hour (epoch microseconds) that ``start_us`` falls in (floored, as
    migration 0010's SQL does for times before 1970 too)."""
    return start_us - start_us % HOUR_US


# a table's ``SET`` terms other than ``c = t.c + excluded.c`` (``{t}``: the table): a sum that
# must become exactly 0 (not float residue) when no row is left to sum, and the latest root
# start (a maximum)
_SPECIAL = {
    "feedback_aggregates": {
        c: (f"CASE WHEN {{t}}.n_scored + excluded.n_scored = 0 THEN 0.0 "
            f"ELSE {{t}}.{c} + excluded.{c} END") for c in ("score_sum", "score_sq_sum")},
    "run_hours": {"total_cost": "CASE WHEN {t}.cost_runs + excluded.cost_runs = 0 THEN 0.0 "
                                "ELSE {t}.total_cost + excluded.total_cost END"},
    "session_aggregates": {"last_root_start": (
        "CASE WHEN excluded.last_root_start IS NULL THEN {t}.last_root_start "
        "WHEN {t}.last_root_start IS NULL OR excluded.last_root_start > {t}.last_root_start "
        "THEN excluded.last_root_start ELSE {t}.last_root_start END")},
}
_CLAUSES: dict[str, str] = {}  # table -> its ON CONFLICT clause


def _add(conn: Connection, table: Any, sums: tuple[str, ...],
         rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` into ``table``, adding to the rows already there: ``ON CONFLICT (pk) DO
    UPDATE SET c = c + excluded.c`` for each summed column. Through ``_bulk.insert_many`` (the
    rows to the driver as tuples), SQL the same on SQLite (3.24 and later) and PostgreSQL: the
    Core construct it was cost each new engine ~2 ms a statement to compile, which the first
    read after an experiment paid for each of these (stop 52)."""
    clause = _CLAUSES.get(table.name)
    if clause is None:
        t = table.name
        special = _SPECIAL.get(t, {})
        keys = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
        sets = ", ".join(f'"{c}" = ' + (special[c].format(t=t) if c in special
                                         else f'{t}."{c}" + excluded."{c}"')
                         for c in [*sums, *(c for c in special if c not in sums)])
        clause = _CLAUSES[t] = f"ON CONFLICT ({keys}) DO UPDATE SET {sets}"
    insert_many(conn, table, rows, clause)


def _add_lists(into: dict[Any, list[Any]], other: Mapping[Any, list[Any]]) -> None:
    """Add ``other``'s lists of sums to ``into``'s, element by element (copied when new)."""
    for key, values in other.items():
        mine = into.get(key)
        if mine is None:
            into[key] = list(values)
        else:
            for i, value in enumerate(values):
                mine[i] += value


def _add_counts(into: dict[Any, int], other: Mapping[Any, int]) -> None:
    for key, n in other.items():
        into[key] = into.get(key, 0) + n


class RunDeltas:
    """Per-session differences that a batch of run writes makes to the aggregates."""

    __slots__ = ("sums", "tenants", "streams", "added_start", "removed_start", "hours")

    def __init__(self) -> None:
        self.sums: dict[str, list[Any]] = {}
        self.tenants: dict[str, str] = {}
        self.streams: dict[tuple[str, str], int] = {}
        self.added_start: dict[str, int] = {}
        self.removed_start: dict[str, dict[int, int]] = {}
        # (session, hour) -> [root runs, root errors, llm tokens, llm cost, llm costed runs]
        self.hours: dict[tuple[str, int], list[Any]] = {}

    def add(self, row: Mapping[Any, Any], sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) one stored run row's contribution.

        ``row`` holds the run's columns, with timestamps as epoch microseconds. A row taken
        away and put back unchanged cancels out.
        """
        sid = row["session_id"]
        d = self.sums.get(sid)
        if d is None:
            d = self.sums[sid] = list(_ZERO)
            self.tenants[sid] = row["tenant_id"]
        start = row["start_time"]
        is_llm = row["run_type"] == "llm"
        if row["is_root"] or is_llm:
            hkey = (sid, start - start % HOUR_US)
            h = self.hours.get(hkey)
            if h is None:
                h = self.hours[hkey] = [0, 0, 0, 0.0, 0]
            if row["is_root"]:
                h[0] += sign
                if row["error"] is not None:
                    h[1] += sign
            if is_llm:
                value = row["total_tokens"]
                if value is not None:
                    h[2] += sign * value
                value = row["total_cost"]
                if value is not None:
                    h[3] += sign * value
                    h[4] += sign
        if row["is_root"]:
            d[0] += sign
            if row["latency_us"] is not None:
                d[1] += sign
            if row["error"] is not None:
                d[2] += sign
            removed = self.removed_start.get(sid)
            if sign < 0:
                if removed is None:
                    removed = self.removed_start[sid] = {}
                removed[start] = removed.get(start, 0) + 1
            elif removed and removed.get(start):
                removed[start] -= 1  # the same root start put back: the maximum is unchanged
            else:
                cur = self.added_start.get(sid)
                if cur is None or start > cur:
                    self.added_start[sid] = start
        if row["first_token_us"] is not None:
            d[3] += sign
            key = (sid, row["trace_id"])
            self.streams[key] = self.streams.get(key, 0) + sign
        if is_llm:
            for i, col in ((4, "total_tokens"), (5, "prompt_tokens"), (6, "completion_tokens")):
                value = row[col]
                if value is not None:
                    d[i] += sign * value
            for i, col in ((7, "total_cost"), (8, "prompt_cost"), (9, "completion_cost")):
                value = row[col]
                if value is not None:
                    d[i] += sign * value
                    d[i + 3] += sign

    def add_new_roots(self, sid: str, tenant: str, starts: Sequence[int], ended: int,
                      failed: Sequence[int]) -> None:
        """``add(row, 1)`` for a session's new root runs without usage or first token, at
        once: the fold's fast paths count such runs from their ``starts``, how many ``ended``
        and the starts of those that ``failed``, instead of a row's mapping each. A new child
        run without usage adds nothing."""
        if not starts:
            return
        d = self.sums.get(sid)
        if d is None:
            d = self.sums[sid] = list(_ZERO)
            self.tenants[sid] = tenant
        d[0] += len(starts)
        d[1] += ended
        d[2] += len(failed)
        for column, of in ((0, starts), (1, failed)):
            for hour, count in Counter([s - s % HOUR_US for s in of]).items():
                h = self.hours.get((sid, hour))
                if h is None:
                    h = self.hours[(sid, hour)] = [0, 0, 0, 0.0, 0]
                h[column] += count
        latest = max(starts)
        cur = self.added_start.get(sid)
        if cur is None or latest > cur:
            self.added_start[sid] = latest

    def add_root_rows(self, tenant: str,
                      roots: Iterable[tuple[str, int, bool, bool]]) -> None:
        """``add_new_roots`` for roots given one by one, as (session, start, ended, failed):
        what a fast path that writes run by run collects."""
        by_session: dict[str, tuple[list[int], list[int], list[int]]] = {}
        for sid, start, ended, failed in roots:
            got = by_session.get(sid)
            if got is None:
                got = by_session[sid] = ([], [], [])
            got[0].append(start)
            if ended:
                got[1].append(start)
            if failed:
                got[2].append(start)
        for sid, (starts, done, failed_starts) in by_session.items():
            self.add_new_roots(sid, tenant, starts, len(done), failed_starts)

    def merge(self, other: RunDeltas) -> None:
        """Add another batch's differences to these: applied once, they write what applying
        both would (every sum adds; the latest root start is a maximum)."""
        _add_lists(self.sums, other.sums)
        _add_lists(self.hours, other.hours)
        self.tenants.update(other.tenants)  # a session's workspace is the same in both
        _add_counts(self.streams, other.streams)
        for sid, removed in other.removed_start.items():
            _add_counts(self.removed_start.setdefault(sid, {}), removed)
        for sid, start in other.added_start.items():
            cur = self.added_start.get(sid)
            if cur is None or start > cur:
                self.added_start[sid] = start

    def apply(self, conn: Connection) -> None:
        """Write the differences (after the run rows themselves are written)."""
        if self.streams:
            changed = sorted((k, v) for k, v in self.streams.items() if v)
            for i in range(0, len(changed), _CHUNK):
                part = changed[i : i + _CHUNK]
                wanted = dict(part)
                for sid, trace, after in _add_streams(conn, part):
                    before = after - wanted[(sid, trace)]
                    if before <= 0 < after:
                        self.sums[sid][_STREAMED_TRACES] += 1
                    elif after <= 0 < before:
                        self.sums[sid][_STREAMED_TRACES] -= 1
        rows = []
        for sid in sorted(self.sums):
            d = self.sums[sid]
            start = self.added_start.get(sid)
            if start is None and not any(d):
                continue
            row = dict(zip(_SUMS, d, strict=True))
            row.update(session_id=sid, tenant_id=self.tenants[sid], last_root_start=start)
            rows.append(row)
        if rows:
            _add(conn, session_aggregates, _SUMS, rows)
        hours = [{"session_id": sid, "hour": hour, "tenant_id": self.tenants[sid],
                  **dict(zip(_HOUR_SUMS, h, strict=True))}
                 for (sid, hour), h in sorted(self.hours.items()) if any(h)]
        if hours:
            _add(conn, run_hours, _HOUR_SUMS, hours)
        for sid, removed in sorted(self.removed_start.items()):
            gone = [start for start, n in removed.items() if n > 0]
            if gone:
                _recompute_last_start(conn, sid, max(gone))

    def drop_empty_streams(self, conn: Connection) -> None:
        """Delete the trace_streams rows this batch brought to zero (after ``apply``)."""
        by_session: dict[str, list[str]] = {}
        for (sid, trace), v in sorted(self.streams.items()):
            if v < 0:
                by_session.setdefault(sid, []).append(trace)
        for sid, traces in by_session.items():
            for i in range(0, len(traces), _CHUNK):
                conn.execute(delete(trace_streams).where(
                    trace_streams.c.session_id == sid,
                    trace_streams.c.trace_id.in_(traces[i : i + _CHUNK]),
                    trace_streams.c.streamed_runs <= 0))


def _add_streams(conn: Connection, part: list[tuple[tuple[str, str], int]]) -> Sequence[Any]:
    """Add to trace_streams counts; return (session, trace, count after) of each row.

    One multi-row statement written out here rather than through SQLAlchemy's executemany:
    a streamed run costs one row, and the generic path doubled that cost.
    """
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    values = ", ".join([f"({mark}, {mark}, {mark})"] * len(part))
    sql = (f"INSERT INTO trace_streams (session_id, trace_id, streamed_runs) VALUES {values} "
           "ON CONFLICT (session_id, trace_id) DO UPDATE SET "
           "streamed_runs = trace_streams.streamed_runs + excluded.streamed_runs "
           "RETURNING session_id, trace_id, streamed_runs")
    params = tuple(v for (sid, trace), d in part for v in (sid, trace, d))
    return conn.exec_driver_sql(sql, params).all()


def _recompute_last_start(conn: Connection, sid: str, removed: int) -> None:
    """A root at or after the recorded latest start went away: read the latest start again
    (one index walk from the top of ``ix_runs_session_start``)."""
    latest = (
        select(runs.c.start_time)
        .where(runs.c.session_id == sid, runs.c.is_root.is_(True))
        .order_by(runs.c.start_time.desc())
        .limit(1)
        .scalar_subquery()
    )
    conn.execute(update(session_aggregates).where(
        session_aggregates.c.session_id == sid,
        session_aggregates.c.last_root_start <= removed,
    ).values(last_root_start=latest))


class FeedbackDeltas:
    """Per (session, tenant, level, key) differences that feedback writes make."""

    __slots__ = ("stats", "labels")

    def __init__(self) -> None:
        self.stats: dict[tuple[str, str, str, str], list[float]] = {}
        self.labels: dict[tuple[str, str, str, str, str], int] = {}

    def add(self, session_id: str | None, tenant_id: str, run_id: str | None, key: str,
            score: float | None, label: str | None, sign: int) -> None:
        if session_id is None:  # pending: in no aggregate (see the module docstring)
            return
        k = (session_id, tenant_id, "run" if run_id is not None else "session", key)
        d = self.stats.get(k)
        if d is None:
            d = self.stats[k] = [0, 0, 0.0, 0.0]
        d[0] += sign
        if score is not None:
            d[1] += sign
            d[2] += sign * score
            d[3] += sign * score * score
        if label is not None:
            lk = (*k, label)
            self.labels[lk] = self.labels.get(lk, 0) + sign

    def add_row(self, row: Mapping[str, Any], sign: int) -> None:
        if row.get("comparative_experiment_id"):  # pairwise: a comparison's, not the run's
            return  # experiment's (``ComparativeRepo`` counts it)
        self.add(row["session_id"], row["tenant_id"], row["run_id"], row["key"], row["score"],
                 row["label"], sign)

    def add_rows(self, rows: Iterable[Any], sign: int) -> None:
        for row in rows:
            self.add_row(row._mapping if hasattr(row, "_mapping") else row, sign)

    def apply(self, conn: Connection) -> None:
        stats = [
            {"session_id": k[0], "tenant_id": k[1], "level": k[2], "key": k[3], "n": d[0],
             "n_scored": d[1], "score_sum": d[2], "score_sq_sum": d[3]}
            for k, d in sorted(self.stats.items()) if any(d)
        ]
        if stats:
            _add(conn, feedback_aggregates, ("n", "n_scored", "score_sum", "score_sq_sum"), stats)
        labels = [
            {"session_id": k[0], "tenant_id": k[1], "level": k[2], "key": k[3], "label": k[4],
             "n": n}
            for k, n in sorted(self.labels.items()) if n
        ]
        if labels:
            _add(conn, feedback_label_counts, ("n",), labels)


def adopt_pending_feedback(conn: Connection, tenant_id: str, by_session: Mapping[str, list[str]],
                           deltas: FeedbackDeltas) -> None:
    """Runs just posted take in the feedback that was waiting for them (same workspace only).

    ``UPDATE .. WHERE session_id IS NULL .. RETURNING``: each row is adopted exactly once even
    when two writers race for it.
    """
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    if conn.exec_driver_sql(  # SQL text: no statement to build and look up per batch
            f"SELECT 1 FROM feedback WHERE tenant_id = {mark} AND session_id IS NULL LIMIT 1",
            (tenant_id,)).first() is None:  # nothing waits (the common case): one probe
        return
    for sid, run_ids in sorted(by_session.items()):
        run_ids = sorted(run_ids)
        for i in range(0, len(run_ids), _CHUNK):
            adopted = conn.execute(
                update(feedback)
                .where(feedback.c.tenant_id == tenant_id, feedback.c.session_id.is_(None),
                       feedback.c.run_id.in_(run_ids[i : i + _CHUNK]))
                .values(session_id=sid)
                .returning(feedback.c.run_id, feedback.c.key, feedback.c.score, feedback.c.label)
            )
            for run_id, key, score, label in adopted:
                deltas.add(sid, tenant_id, run_id, key, score, label, 1)


def pending_feedback(conn: Connection, session_id: str, tenant_id: str) -> Sequence[Any]:
    """(key, score, label) of the workspace's pending feedback whose run is in the session:
    feedback that reached the store before its run's post (or lost a race with it).

    Driven from the small partial index of pending feedback; each row probes its run by id.
    """
    return conn.exec_driver_sql(marked(conn, _PENDING), (tenant_id, session_id)).all()


_PENDING = ('SELECT f."key", f.score, f.label FROM feedback AS f WHERE f.tenant_id = ? '
            "AND f.session_id IS NULL AND EXISTS (SELECT 1 FROM runs AS r "
            "WHERE r.id = f.run_id AND r.session_id = ?)")


def adopt_all_pending(conn: Connection) -> None:
    """Give pending feedback whose run has been posted its run's session (as a post would)."""
    r = runs.alias("r")
    owner = select(r.c.session_id).where(
        r.c.id == feedback.c.run_id, r.c.tenant_id == feedback.c.tenant_id,
        r.c.status != literal(ORPHAN)).scalar_subquery()
    conn.execute(update(feedback).where(
        feedback.c.session_id.is_(None), feedback.c.run_id.is_not(None), owner.is_not(None),
    ).values(session_id=owner))


def drop_session(conn: Connection, session_id: str, tenant_id: str) -> None:
    """Forget a deleted session's aggregates (its runs and own feedback are gone with it)."""
    conn.execute(delete(session_aggregates).where(session_aggregates.c.session_id == session_id))
    conn.execute(delete(trace_streams).where(trace_streams.c.session_id == session_id))
    conn.execute(delete(run_hours).where(run_hours.c.session_id == session_id))
    for table in (feedback_aggregates, feedback_label_counts):
        conn.execute(delete(table).where(table.c.session_id == session_id,
                                         table.c.tenant_id == tenant_id))


def rebuild_aggregates(conn: Connection) -> None:
    """Recompute every aggregate from the runs and feedback tables (one GROUP BY each).

    For bulk loads that write the tables directly (the benchmark) and for repair; migration 0004
    does the same with its own copy of these statements.
    """
    for table in (session_aggregates, trace_streams, run_hours, feedback_aggregates,
                  feedback_label_counts):
        conn.execute(delete(table))
    adopt_all_pending(conn)
    root = runs.c.is_root.is_(True)
    llm = runs.c.run_type == literal("llm")

    def n_if(cond: Any) -> Any:
        return func.coalesce(func.sum(case((cond, 1), else_=0)), 0)

    def llm_sum(col: Any) -> Any:
        return func.coalesce(func.sum(case((llm, col), else_=None)), 0)

    conn.execute(trace_streams.insert().from_select(
        ["session_id", "trace_id", "streamed_runs"],
        select(runs.c.session_id, runs.c.trace_id, func.count())
        .where(runs.c.first_token_us.is_not(None))
        .group_by(runs.c.session_id, runs.c.trace_id),
    ))
    streamed_traces = (
        select(func.count()).where(trace_streams.c.session_id == runs.c.session_id)
        .scalar_subquery()
    )
    cols = {
        "session_id": runs.c.session_id,
        "tenant_id": func.max(runs.c.tenant_id),
        "root_runs": n_if(root),
        "root_latencies": n_if(root & runs.c.latency_us.is_not(None)),
        "root_errors": n_if(root & runs.c.error.is_not(None)),
        "last_root_start": func.max(case((root, runs.c.start_time), else_=None)),
        "streamed_runs": func.count(runs.c.first_token_us),
        "streamed_traces": streamed_traces,
        "total_tokens": llm_sum(runs.c.total_tokens),
        "prompt_tokens": llm_sum(runs.c.prompt_tokens),
        "completion_tokens": llm_sum(runs.c.completion_tokens),
        "total_cost": llm_sum(runs.c.total_cost),
        "prompt_cost": llm_sum(runs.c.prompt_cost),
        "completion_cost": llm_sum(runs.c.completion_cost),
        "total_cost_runs": n_if(llm & runs.c.total_cost.is_not(None)),
        "prompt_cost_runs": n_if(llm & runs.c.prompt_cost.is_not(None)),
        "completion_cost_runs": n_if(llm & runs.c.completion_cost.is_not(None)),
    }
    conn.execute(session_aggregates.insert().from_select(
        list(cols), select(*cols.values()).group_by(runs.c.session_id)))
    conn.execute(run_hours.insert().from_select(list(HOURLY), hourly_select()))
    level = case((feedback.c.run_id.is_(None), literal("session")), else_=literal("run"))
    score = feedback.c.score
    has_session = (feedback.c.session_id.is_not(None)  # pairwise rows: a comparison's
                   & feedback.c.comparative_experiment_id.is_(None))
    conn.execute(feedback_aggregates.insert().from_select(
        ["session_id", "tenant_id", "level", "key", "n", "n_scored", "score_sum", "score_sq_sum"],
        select(feedback.c.session_id, feedback.c.tenant_id, level, feedback.c.key, func.count(),
               func.count(score), func.coalesce(func.sum(score), 0.0),
               func.coalesce(func.sum(score * score), 0.0))
        .where(has_session)
        .group_by(feedback.c.session_id, feedback.c.tenant_id, level, feedback.c.key),
    ))
    conn.execute(feedback_label_counts.insert().from_select(
        ["session_id", "tenant_id", "level", "key", "label", "n"],
        select(feedback.c.session_id, feedback.c.tenant_id, level, feedback.c.key,
               feedback.c.label, func.count())
        .where(has_session, feedback.c.label.is_not(None))
        .group_by(feedback.c.session_id, feedback.c.tenant_id, level, feedback.c.key,
                  feedback.c.label),
    ))


def _hour_expr(t: Any) -> Any:
    """``hour_of`` in SQL: floored on both backends (their ``%`` keeps the dividend's sign)."""
    hour: Any = literal_column(str(HOUR_US))  # inline: PostgreSQL matches GROUP BY by its text
    return t - ((t % hour) + hour) % hour


_T = type_coerce(runs.c.start_time, BigInteger)
_LLM = runs.c.run_type == literal("llm")
HOURLY = {
    "session_id": runs.c.session_id,
    "hour": _hour_expr(_T),
    "tenant_id": func.max(runs.c.tenant_id),
    "root_runs": func.coalesce(func.sum(case((runs.c.is_root.is_(True), 1), else_=0)), 0),
    "root_errors": func.coalesce(func.sum(case(
        (runs.c.is_root.is_(True) & runs.c.error.is_not(None), 1), else_=0)), 0),
    "total_tokens": func.coalesce(func.sum(case((_LLM, runs.c.total_tokens), else_=None)), 0),
    "total_cost": func.coalesce(func.sum(case((_LLM, runs.c.total_cost), else_=None)), 0.0),
    "cost_runs": func.coalesce(func.sum(case(
        (_LLM & runs.c.total_cost.is_not(None), 1), else_=0)), 0),
}


def hourly_select(*where: Any) -> Any:
    """``run_hours`` computed from the runs (matching ``where``): a GROUP BY (session, hour)
    over the roots and llm runs. Migration 0010 fills the table with it; tests compare."""
    return (select(*HOURLY.values())
            .where(runs.c.is_root.is_(True) | _LLM, *where)
            .group_by(runs.c.session_id, _hour_expr(_T)))
