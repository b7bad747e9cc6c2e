"""``from_micros``: the epoch plus a timedelta, the same aware datetime ``fromtimestamp`` gives,
over the whole range a datetime holds; outside it, the same error."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from assay._time import from_micros, to_micros

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
