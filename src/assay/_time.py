"""Time helpers shared by every layer: UTC now, and epoch microseconds <-> datetimes.

The store keeps timestamps as epoch microseconds (see ``store._types.Micros``); tracing, usage
derivation and the server convert with the same two functions so they all agree on naive
datetimes (taken as UTC), ISO strings and epoch numbers.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

__all__ = ["utcnow", "to_utc", "to_micros", "from_micros"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC (as LangSmith does)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# the instants a datetime holds (years 1 to 9999), in epoch microseconds: what the store can
# read back (``from_micros``), so nothing outside them is ever written
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999


def to_micros(value: datetime | int | float | str | None) -> int | None:
    """UTC datetime (naive taken as UTC), ISO string or epoch number (an int: microseconds; a
    float: seconds) -> epoch microseconds. Anything else is a ``TypeError``, a NaN or infinite
    float a ``ValueError``. Numbers are not range-checked here (queries bind bounds past any
    time): a sender's time goes through ``checked_micros``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("a timestamp cannot be a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        scaled = value * 1_000_000
        if not math.isfinite(scaled):  # NaN, infinite, or past what a float holds
            raise ValueError(f"timestamp {value} is not a number of seconds")
        return int(round(scaled))
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    elif not isinstance(value, datetime):  # a list, a dict...: refused as a type, by name
        raise TypeError(f"a timestamp must be a datetime, an ISO string or an epoch number, "
                        f"not {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def checked_micros(value: datetime | int | float | str | None) -> int | None:
    """``to_micros`` of a time a sender gave, refused (``ValueError``) outside the years 1 to
    9999: a datetime cannot hold it, so the store could neither read it back nor, past 64
    bits, insert it (the fold dropped such a run after the server had accepted it)."""
    us = to_micros(value)
    if us is None or _MIN_US <= us <= _MAX_US:
        return us
    raise ValueError(f"timestamp {value!r} is outside the years 1 to 9999")


def from_micros(value: int | datetime | None) -> datetime | None:
    """Epoch microseconds -> aware UTC datetime (aggregates over Micros columns may already be
    datetimes; they pass through)."""
    if value is None or isinstance(value, datetime):
        return value
    try:  # the epoch plus a timedelta: the same datetime as fromtimestamp, in half the time
        return _EPOCH + timedelta(microseconds=int(value))
    except OverflowError:  # past year 9999 or before year 1: said as fromtimestamp says it
        year = "10000" if int(value) > 0 else "0"
        raise ValueError(f"year {year} is out of range") from None
