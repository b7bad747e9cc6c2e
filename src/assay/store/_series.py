"""A project's charts: runs, errors, tokens, cost and latency per time bucket.

The time series behind the project page's charts are SQL aggregates per time bucket (runs,
errors, tokens, cost); latency percentiles per bucket are computed from the latest roots of the
window only (``SAMPLE`` rows at most), which the chart says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Float, case, func, select, type_coerce

from .._time import to_micros
from ..errors import InvalidInputError
from ._tables import runs

if TYPE_CHECKING:
    from ._base import Store

__all__ = ["Bucket", "series", "SAMPLE"]

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
