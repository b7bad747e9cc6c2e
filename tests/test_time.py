"""``from_micros``: the epoch plus a timedelta, the same aware datetime ``fromtimestamp`` gives,
over the whole range a datetime holds; outside it, the same error."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from assay._time import checked_micros, from_micros, to_micros

FIRST, LAST = -62_135_596_800_000_000, 253_402_300_799_999_999  # year 1 .. the end of 9999


def _reference(us: int) -> datetime:
    seconds, micros = divmod(us, 1_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)


def test_from_micros_is_fromtimestamp_over_the_whole_range() -> None:
    rng = random.Random(39)
    values = [FIRST, LAST, 0, -1, 1, 999_999, -1_000_001, 1_764_000_000_123_456]
    values += [rng.randint(FIRST, LAST) for _ in range(20_000)]
    for us in values:
        got = from_micros(us)
        assert got == _reference(us) and got.tzinfo is UTC, us
        assert to_micros(got) == us
    assert from_micros(None) is None
    moment = datetime(2026, 11, 28, tzinfo=UTC)
    assert from_micros(moment) is moment


@pytest.mark.parametrize(("us", "year"), [(LAST + 1, "10000"), (FIRST - 1, "0")])
def test_out_of_range_is_refused_as_fromtimestamp_refuses_it(us: int, year: str) -> None:
    with pytest.raises(ValueError, match=f"year {year} is out of range"):
        from_micros(us)
    with pytest.raises(ValueError, match=f"year {year} is out of range"):
        _reference(us)


@pytest.mark.parametrize("value", [[1], {"t": 1}, object()])
def test_a_value_of_another_type_is_refused_as_a_type_by_name(value: object) -> None:
    """A TypeError (what the store's callers catch as bad input), not an AttributeError from
    deep inside: an llm run whose event time is a list was dropped by the fold before."""
    with pytest.raises(TypeError, match=type(value).__name__):
        to_micros(value)  # type: ignore[arg-type]  # the point of the test


def test_numbers_outside_the_years_a_datetime_holds_are_refused() -> None:
    """The store reads times back as datetimes: a number past them would be written, then fail
    every read (or the fold's insert, past 64 bits). Refused as a ValueError instead."""
    assert checked_micros(FIRST) == FIRST and checked_micros(LAST) == LAST
    assert checked_micros(-5) == -5 and checked_micros(None) is None  # before 1970 is fine
    assert checked_micros("2026-11-29T04:00:00Z") == to_micros("2026-11-29T04:00:00Z")
    for bad in (FIRST - 1, LAST + 1, 10**20, 1e30, -1e30, 1e308, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            checked_micros(bad)
    assert to_micros(2**62) == 2**62  # unchecked: queries bind such bounds
    for bad in (float("nan"), float("inf"), 1e308):  # not a number of seconds at all
        with pytest.raises(ValueError):
            to_micros(bad)
