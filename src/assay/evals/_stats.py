"""Summary statistics of measured runs: the seed's keys plus tail percentiles."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["percentile", "summarize"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between ranks (numpy's
    default), so p99 of 10 runs lies between the two slowest rather than jumping to the max."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def summarize(values: Sequence[float]) -> dict[str, float]:
    """average, median, min, max, std_dev (sample; 0 for one value), p90, p95, p99."""
    if not values:
        raise ValueError("cannot summarize zero measurements")
    data = [float(v) for v in values]
    return {
        "average": statistics.fmean(data),
        "median": float(statistics.median(data)),
        "min": min(data),
        "max": max(data),
        "std_dev": statistics.stdev(data) if len(data) > 1 else 0.0,
        "p90": percentile(data, 90),
        "p95": percentile(data, 95),
        "p99": percentile(data, 99),
    }
