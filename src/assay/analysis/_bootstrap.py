"""The paired bootstrap: a confidence interval for the mean per-example difference.

Pairing by example removes the variance that comes from examples being easy or hard, so a small
but consistent change is detected with far fewer examples than two independent samples would need.
Resampling examples (not runs) keeps the interval honest when examples differ a lot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from ..errors import InvalidInputError

__all__ = ["BootstrapResult", "paired_bootstrap"]

_CELLS_PER_CHUNK = 4_000_000  # resamples x examples drawn at once (~32 MB of indices)


class BootstrapResult(BaseModel):
    diff: float  # mean of (candidate - baseline) over the pairs
    low: float
    high: float
    n: int
    confidence: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def paired_bootstrap(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> BootstrapResult:
    """Percentile CI of mean(candidate - baseline), resampling the pairs with replacement.

    ``seed`` makes the interval reproducible (the default, 0, gives the same answer on every run,
    which a CI gate needs); ``None`` draws fresh randomness.
    """
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise InvalidInputError(
            f"paired samples must be two equally long lists, got {a.shape} and {b.shape}")
    if a.size == 0:
        raise InvalidInputError("paired bootstrap needs at least one pair")
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise InvalidInputError(f"resamples must be positive, got {resamples}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise InvalidInputError("paired samples must be finite numbers")
    d = b - a
    n = d.size
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, _CELLS_PER_CHUNK // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = d[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    diff = float(d.mean())
    if np.ptp(d) == 0:  # a constant difference resamples to itself (no rounding noise)
        low = high = diff
    return BootstrapResult(diff=diff, low=float(low), high=float(high), n=int(n),
                           confidence=confidence)
