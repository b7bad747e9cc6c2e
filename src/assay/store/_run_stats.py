"""Statistics over the runs a query matches (LangSmith's ``POST /runs/stats``,
``Client.get_run_stats``).

Unlike ``read_project``'s statistics (root runs of one session, kept up to date on every
write), these are computed on request over whatever ``RunRepo.conditions`` selects: any runs of
any projects, filtered by the filter language like ``list_runs``. Meanings:

- run_count, latency, error_rate, last_run_start_time, first_token, streaming_rate: over the
  matched runs themselves.
- tokens and costs: each matched run counts what its subtree's ``llm`` runs used (itself, for an
  llm run), as LangSmith rolls usage up to the chains above; a chain and its llm call both
  matching count the call twice, as there. Costs are summed exactly (``math.fsum``), so the
    figure does not depend on the order the database returns rows in.
    ``median_tokens``/``tokens_p99`` and the
  ``*_p50``/``*_p99`` figures are percentiles of those per-run totals (numpy's linear method).
- feedback_stats: feedback on the matched runs, per key (``{n, avg, stdev, values}``).
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Connection

from ._stats import _feedback_stats, _seconds, percentile, quantile
from ._tables import feedback, runs
from ._types import from_micros

__all__ = ["run_stats"]

_USAGE = ("total_tokens", "prompt_tokens", "completion_tokens", "total_cost", "prompt_cost",
          "completion_cost")


def _usage(conn: Connection, where: Any) -> list[tuple[Any, ...]]:
    """Per matched run: the sums of its subtree's llm usage (rows only for runs with some)."""
    below = runs.alias("below")
    sums = [func.sum(below.c[c]) for c in _USAGE]
    q = (select(runs.c.id, *sums)
         .select_from(runs.join(below, and_(
             below.c.tenant_id == runs.c.tenant_id, below.c.trace_id == runs.c.trace_id,
             or_(below.c.id == runs.c.id,
                 below.c.dotted_order.startswith(runs.c.dotted_order + ".")))))
         .where(where, below.c.run_type == "llm")
         .group_by(runs.c.id))
    return [tuple(row) for row in conn.execute(q)]


def run_stats(conn: Connection, where: Any, tenant: str) -> dict[str, Any]:
    """The statistics of the runs matching ``where`` (terms on ``runs``) in ``tenant``."""
    run_count, n_lat, n_err, n_ft, last_start = conn.execute(select(
        func.count(), func.count(runs.c.latency_us), func.count(runs.c.error),
        func.count(runs.c.first_token_us), func.max(runs.c.start_time)).where(where)).one()
    usage = _usage(conn, where) if run_count else []

    def column(i: int, cast: Any) -> list[Any]:
        return [cast(row[i]) for row in usage if row[i] is not None]

    tokens = {name: column(i + 1, int) for i, name in enumerate(_USAGE[:3])}
    costs = {name: column(i + 4, float) for i, name in enumerate(_USAGE[3:])}

    matched = select(runs.c.id).where(where)
    on_runs = and_(feedback.c.tenant_id == tenant, feedback.c.run_id.in_(matched))
    return {
        "run_count": int(run_count),
        "latency_p50": _seconds(percentile(conn, runs.c.latency_us, where, n_lat, 0.5)),
        "latency_p99": _seconds(percentile(conn, runs.c.latency_us, where, n_lat, 0.99)),
        "first_token_p50": _seconds(percentile(conn, runs.c.first_token_us, where, n_ft, 0.5)),
        "first_token_p99": _seconds(percentile(conn, runs.c.first_token_us, where, n_ft, 0.99)),
        "total_tokens": sum(tokens["total_tokens"]),
        "prompt_tokens": sum(tokens["prompt_tokens"]),
        "completion_tokens": sum(tokens["completion_tokens"]),
        "median_tokens": quantile(tokens["total_tokens"], 0.5),
        "tokens_p99": quantile(tokens["total_tokens"], 0.99),
        "prompt_tokens_p50": quantile(tokens["prompt_tokens"], 0.5),
        "prompt_tokens_p99": quantile(tokens["prompt_tokens"], 0.99),
        "completion_tokens_p50": quantile(tokens["completion_tokens"], 0.5),
        "completion_tokens_p99": quantile(tokens["completion_tokens"], 0.99),
        "total_cost": math.fsum(costs["total_cost"]) if costs["total_cost"] else None,
        "prompt_cost": math.fsum(costs["prompt_cost"]) if costs["prompt_cost"] else None,
        "completion_cost": (math.fsum(costs["completion_cost"])
                            if costs["completion_cost"] else None),
        "cost_p50": quantile(costs["total_cost"], 0.5),
        "cost_p99": quantile(costs["total_cost"], 0.99),
        "last_run_start_time": from_micros(last_start),
        "feedback_stats": _feedback_stats(conn, on_runs) if run_count else {},
        "run_facets": [],
        "error_rate": (n_err / run_count) if run_count else None,
        "streaming_rate": (n_ft / run_count) if run_count else None,
    }
