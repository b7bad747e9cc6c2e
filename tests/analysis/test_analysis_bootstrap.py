"""paired_bootstrap against cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assay.analysis import paired_bootstrap
from assay.errors import InvalidInputError


def test_identical_samples_give_a_zero_interval() -> None:
    a = np.random.default_rng(1).normal(0.7, 0.2, size=50)
    res = paired_bootstrap(a, a.copy())
    assert (res.diff, res.low, res.high, res.n) == (0.0, 0.0, 0.0, 50)
    assert not res.excludes_zero


def test_constant_shift_is_exact() -> None:
    a = np.linspace(0, 1, 30)
    res = paired_bootstrap(a, a + 0.25)
    assert res.diff == pytest.approx(0.25)
    assert res.low == res.high == res.diff
    assert res.excludes_zero


def test_zero_mean_noise_contains_zero() -> None:
    rng = np.random.default_rng(7)
    a = rng.uniform(0, 1, size=40)
    eps = rng.uniform(0.05, 0.3, size=20)
    noise = np.concatenate([eps, -eps])  # differences with mean exactly 0
    rng.shuffle(noise)
    res = paired_bootstrap(a, a + noise)
    assert res.diff == pytest.approx(0.0, abs=1e-12)
    assert res.low < 0 < res.high
    assert not res.excludes_zero


def test_clear_shift_is_significant() -> None:
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 1.0, size=60)
    b = a - 0.2 + rng.normal(0, 0.05, size=60)
    res = paired_bootstrap(a, b)
    assert res.high < 0
    assert res.low < res.diff < res.high
    assert res.diff == pytest.approx(float(np.mean(b - a)))


def test_width_matches_the_normal_approximation() -> None:
    """For n large, the 95% percentile interval is about mean +- 1.96 * sd / sqrt(n)."""
    rng = np.random.default_rng(11)
    n = 400
    a = rng.normal(0, 1, size=n)
    d = rng.normal(0.1, 1.0, size=n)
    res = paired_bootstrap(a, a + d, resamples=4000)
    half = 1.96 * d.std() / math.sqrt(n)
    assert (res.high - res.low) / 2 == pytest.approx(half, rel=0.08)
    assert (res.low + res.high) / 2 == pytest.approx(d.mean(), abs=0.2 * half)


def test_confidence_level_widens_the_interval() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=80), rng.normal(size=80)
    r90 = paired_bootstrap(a, b, confidence=0.90)
    r99 = paired_bootstrap(a, b, confidence=0.99)
    assert r99.low < r90.low and r99.high > r90.high


def test_seed_makes_it_reproducible() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=30), rng.normal(size=30)
    assert paired_bootstrap(a, b, seed=42) == paired_bootstrap(a, b, seed=42)
    assert paired_bootstrap(a, b, seed=42).low != paired_bootstrap(a, b, seed=43).low


def test_many_examples_are_resampled_in_chunks() -> None:
    rng = np.random.default_rng(9)
    a = rng.normal(size=20_000)
    res = paired_bootstrap(a, a + 0.01 + rng.normal(0, 0.1, size=20_000), resamples=500)
    assert res.low > 0 and res.n == 20_000


@pytest.mark.parametrize("a, b, kwargs, match", [
    ([1, 2], [1], {}, "equally long"),
    ([], [], {}, "at least one pair"),
    ([1.0], [2.0], {"confidence": 1.0}, "confidence"),
    ([1.0], [2.0], {"resamples": 0}, "resamples"),
    ([1.0, float("nan")], [2.0, 1.0], {}, "finite"),
])
def test_bad_input_is_named(a: list, b: list, kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        paired_bootstrap(a, b, **kwargs)
