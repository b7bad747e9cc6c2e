"""Identifiers: the fast dotted-order segment agrees with strftime's everywhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assay._ids import dotted_segment_us

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dotted_segment(start: datetime, run_id: str) -> str:
    """LangSmith's own definition of a segment, with strftime."""
    return start.strftime("%Y%m%dT%H%M%S%fZ") + run_id


@pytest.mark.parametrize("us", [0, 7, 999_999, 1_000_000, 1_000_001, 123_456_789, -1, -1_500_000,
                                1_795_361_072_087_265, 4_102_444_799_999_999])
def test_segment_from_microseconds_is_strftime_s(us: int) -> None:
    """The tracing writer and the journal's fold derive orders with ``dotted_segment_us``; a
    stored run's order must read as LangSmith's ``%Y%m%dT%H%M%S%fZ<id>`` would, before 1970 and
    in its first second (where the digits of the microseconds alone are not ``%f``) too."""
    run_id = "01a203db-e3d7-77c5-a4e5-a3dbcc1ce8c1"
    assert dotted_segment_us(us, run_id) == dotted_segment(_EPOCH + timedelta(microseconds=us),
                                                           run_id)


def test_segment_cache_follows_the_second() -> None:
    """The per-second prefix is cached: consecutive calls across a second boundary still
    format each second of their own."""
    base = 1_795_361_072_000_000
    got = [dotted_segment_us(base + d, "x") for d in (999_999, 1_000_000, 999_998, 2_000_001)]
    want = [dotted_segment(_EPOCH + timedelta(microseconds=base + d), "x")
            for d in (999_999, 1_000_000, 999_998, 2_000_001)]
    assert got == want
