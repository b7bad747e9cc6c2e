"""Browsing a project's traces: keyset pages and time series, fast at a million runs.

The web UI's project page lists a project's traces newest first. OFFSET paging reads and throws
away every row before the page, so page 1,000 of a million runs costs a thousand pages; a keyset
page continues after the last row shown (its start time and id) through the
``(session_id, start_time)`` index and costs the same wherever it is. The time series behind the
project's charts are SQL aggregates per time bucket (runs, errors, tokens, cost); latency
percentiles per bucket are computed from the latest roots of the window only (``SAMPLE``
rows at most), which the chart says.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, Float, and_, case, func, or_, select, type_coerce

from .._time import to_micros
from ..errors import InvalidInputError
from ._runs import _row_to_run
from ._tables import runs

if TYPE_CHECKING:
    from ..schemas import Run
    from ._base import Store

__all__ = ["Bucket", "Page", "encode_cursor", "decode_cursor", "page_runs", "series"]

SAMPLE = 20_000


@dataclass
class Page:
    runs: list[Run]
    next_cursor: str | None


def encode_cursor(run: Run) -> str:
    return f"{to_micros(run.start_time)}_{run.id}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        us, _, rid = cursor.partition("_")
        return int(us), str(uuid.UUID(rid))
    except ValueError:
        raise InvalidInputError(f"cursor {cursor!r} is not one this page gave") from None


def page_runs(store: Store, *, cursor: str | None = None, limit: int = 50,
              **filters: Any) -> Page:
    """Runs matching ``filters`` (``RunRepo.list``'s), newest first, ``limit`` at a time after
    ``cursor`` (the ``next_cursor`` of the page before)."""
    conds = store.runs.conditions(**filters)
    start = type_coerce(runs.c.start_time, BigInteger)
    if cursor:
        us, rid = decode_cursor(cursor)
        conds.append(or_(start < us, and_(start == us, runs.c.id < rid)))
    q = (select(runs).where(*conds).order_by(runs.c.start_time.desc(), runs.c.id.desc())
         .limit(limit + 1))
    if filters.get("project_ids") and not filters.get("trace_id"):
        # Newest first, a page at a time: walk the project's start-time index and stop after
        # the page. Without ANALYZE statistics SQLite may pick another index a filter names
        # (latency) and sort every match first: seconds at 10^6 runs.
        q = q.with_hint(runs, "INDEXED BY ix_runs_session_start", "sqlite")
    store.settle()
    with store.read() as conn:
        found = [_row_to_run(r) for r in conn.execute(q)]
    more = len(found) > limit
    found = found[:limit]
    return Page(found, encode_cursor(found[-1]) if more and found else None)


@dataclass
class Bucket:
    start: datetime
    runs: int = 0
    errors: int = 0
    tokens: int = 0
    cost: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.runs if self.runs else None

    def latency(self, q: float) -> float | None:
        if not self.latencies:
            return None
        xs = sorted(self.latencies)
        pos = (len(xs) - 1) * q
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def series(store: Store, project_id: str, *, start: datetime, end: datetime,
           bucket_seconds: int) -> list[Bucket]:
    """Per ``bucket_seconds`` of ``[start, end)``: root runs, errors, llm tokens and cost, and
    root latencies (of the latest ``SAMPLE`` roots)."""
    if bucket_seconds <= 0:
        raise InvalidInputError("bucket_seconds must be positive")
    width = bucket_seconds * 1_000_000
    lo, hi = to_micros(start), to_micros(end)
    assert lo is not None and hi is not None  # both given: never None
    t = type_coerce(runs.c.start_time, BigInteger)
    slot = ((t - lo) // width).label("slot")  # t >= lo: floor division is truncation
    base = [runs.c.tenant_id == store.tenant_id, runs.c.session_id == str(project_id),
            t >= lo, t < hi]
    n = (hi - lo + width - 1) // width
    out = [Bucket(datetime.fromtimestamp((lo + i * width) / 1e6, tz=UTC)) for i in range(n)]
    store.settle()
    with store.read() as conn:
        roots = conn.execute(select(
            slot, func.count(),
            func.sum(case((runs.c.error.is_not(None), 1), else_=0)),
        ).where(*base, runs.c.is_root.is_(True)).group_by(slot)).all()
        llm = conn.execute(select(
            slot, func.sum(type_coerce(runs.c.total_tokens, BigInteger)),
            func.sum(type_coerce(runs.c.total_cost, Float)),
        ).where(*base, runs.c.run_type == "llm").group_by(slot)).all()
        lat = conn.execute(select(t, runs.c.latency_us).where(
            *base, runs.c.is_root.is_(True), runs.c.latency_us.is_not(None))
            .order_by(runs.c.start_time.desc()).limit(SAMPLE)).all()
    for s, count, errors in roots:
        b = out[int(s)]
        b.runs, b.errors = int(count), int(errors or 0)
    for s, tokens, cost in llm:
        b = out[int(s)]
        b.tokens, b.cost = int(tokens or 0), float(cost or 0.0)
    for at, latency_us in lat:
        out[(int(at) - lo) // width].latencies.append(latency_us / 1e6)
    return out
