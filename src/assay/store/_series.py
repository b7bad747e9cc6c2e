"""A project's charts: runs, errors, tokens, cost and latency per time bucket.

The time series behind the project page's charts are sums per time bucket (runs, errors,
tokens, cost), read from the hourly rollups ``run_hours`` where the buckets are whole hours and
counted from the runs elsewhere; latency percentiles per bucket are computed from the latest
roots of the window only (``SAMPLE`` rows at most), which the chart says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Float, case, func, select, type_coerce

from .._time import to_micros
from ..errors import InvalidInputError
from ._aggregates import HOUR_US, hour_of
from ._tables import run_hours, runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["Bucket", "series", "scan_series", "SAMPLE"]

SAMPLE = 20_000


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
           bucket_seconds: int, rollup: bool = True) -> list[Bucket]:
    """Per ``bucket_seconds`` of ``[start, end)``: root runs, errors, llm tokens and cost, and
    root latencies (of the latest ``SAMPLE`` roots).

    Whole hours come from the hourly rollups (``run_hours``, kept by every write of runs) when
    the buckets are whole hours from an hour's start (the project page's hourly and daily
    charts): a row per hour, not every run of the window. A last partial hour (``end`` is
    "now"), and buckets not made of whole hours, are counted from the runs (everything is
    with ``rollup=False``: the benchmark's baseline)."""
    if bucket_seconds <= 0:
        raise InvalidInputError("bucket_seconds must be positive")
    width = bucket_seconds * 1_000_000
    lo, hi = to_micros(start), to_micros(end)
    assert lo is not None and hi is not None  # both given: never None
    n = max((hi - lo + width - 1) // width, 0)
    out = [Bucket(datetime.fromtimestamp((lo + i * width) / 1e6, tz=UTC)) for i in range(n)]
    if not out:
        return out
    sid = str(project_id)
    t = type_coerce(runs.c.start_time, BigInteger)
    store.settle()
    with store.read() as conn:
        if rollup and width % HOUR_US == 0 and lo % HOUR_US == 0:
            whole = hour_of(hi)  # the hours before it are whole hours of the window
            _from_hours(conn, store.tenant_id, sid, lo, width, whole, out)
            if whole < hi:
                _scan(conn, store.tenant_id, sid, lo, width, whole, hi, out)
        else:
            _scan(conn, store.tenant_id, sid, lo, width, lo, hi, out)
        lat = conn.execute(select(t, runs.c.latency_us).where(
            runs.c.tenant_id == store.tenant_id, runs.c.session_id == sid, t >= lo, t < hi,
            runs.c.is_root.is_(True), runs.c.latency_us.is_not(None))
            .order_by(runs.c.start_time.desc()).limit(SAMPLE)).all()
    for at, latency_us in lat:
        out[(int(at) - lo) // width].latencies.append(latency_us / 1e6)
    return out


def _from_hours(conn: Connection, tenant: str, sid: str, lo: int, width: int, until: int,
                out: list[Bucket]) -> None:
    """Add the rollups of the hours in ``[lo, until)`` to their buckets."""
    rh = run_hours
    for hour, roots, errors, tokens, cost, costed in conn.execute(select(
            rh.c.hour, rh.c.root_runs, rh.c.root_errors, rh.c.total_tokens, rh.c.total_cost,
            rh.c.cost_runs).where(rh.c.session_id == sid, rh.c.tenant_id == tenant,
                                  rh.c.hour >= lo, rh.c.hour < until)):
        b = out[(int(hour) - lo) // width]
        b.runs += int(roots)
        b.errors += int(errors)
        b.tokens += int(tokens)
        if costed:
            b.cost += float(cost)


def _scan(conn: Connection, tenant: str, sid: str, lo: int, width: int, part_lo: int,
          part_hi: int, out: list[Bucket]) -> None:
    """Add the runs starting in ``[part_lo, part_hi)`` to their buckets (two GROUP BYs)."""
    t = type_coerce(runs.c.start_time, BigInteger)
    slot = ((t - lo) // width).label("slot")  # t >= lo: floor division is truncation
    base = [runs.c.tenant_id == tenant, runs.c.session_id == sid, t >= part_lo, t < part_hi]
    roots = conn.execute(select(
        slot, func.count(),
        func.sum(case((runs.c.error.is_not(None), 1), else_=0)),
    ).where(*base, runs.c.is_root.is_(True)).group_by(slot)).all()
    llm = conn.execute(select(
        slot, func.sum(type_coerce(runs.c.total_tokens, BigInteger)),
        func.sum(type_coerce(runs.c.total_cost, Float)),
    ).where(*base, runs.c.run_type == "llm").group_by(slot)).all()
    for s, count, errors in roots:
        b = out[int(s)]
        b.runs += int(count)
        b.errors += int(errors or 0)
    for s, tokens, cost in llm:
        b = out[int(s)]
        b.tokens += int(tokens or 0)
        b.cost += float(cost or 0.0)


def scan_series(store: Store, project_id: str, *, start: datetime, end: datetime,
                bucket_seconds: int) -> list[Bucket]:
    """``series`` counted from the runs alone (no rollups): what ``series`` must equal."""
    if bucket_seconds <= 0:
        raise InvalidInputError("bucket_seconds must be positive")
    width = bucket_seconds * 1_000_000
    lo, hi = to_micros(start), to_micros(end)
    assert lo is not None and hi is not None
    n = max((hi - lo + width - 1) // width, 0)
    out = [Bucket(datetime.fromtimestamp((lo + i * width) / 1e6, tz=UTC)) for i in range(n)]
    store.settle()
    with store.read() as conn:
        _scan(conn, store.tenant_id, str(project_id), lo, width, lo, hi, out)
    return out
