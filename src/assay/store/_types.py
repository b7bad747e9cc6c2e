"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, BigInteger, Integer
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import TypeDecorator

__all__ = ["Micros", "JSONType", "PK", "to_micros", "from_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def to_micros(value: datetime | int | float | str | None) -> int | None:
    """UTC datetime (naive taken as UTC), ISO string or epoch number -> epoch microseconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("a timestamp cannot be a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(round(value * 1_000_000))
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int | datetime | None) -> datetime | None:
    """Epoch microseconds -> aware UTC datetime (aggregates over Micros columns may already be
    datetimes; they pass through)."""
    if value is None or isinstance(value, datetime):
        return value
    seconds, micros = divmod(int(value), 1_000_000)
    return datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=micros)


class Micros(TypeDecorator[datetime]):
    """Timestamps as epoch microseconds (BIGINT).

    One representation for both databases: latency and first-token arithmetic are plain integer
    subtraction in SQL, ordering is exact, and no time-zone conversion differs between drivers.
    """

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> int | None:
        return to_micros(value)

    def process_result_value(self, value: Any, dialect: Any) -> datetime | None:
        return from_micros(value)


# JSONB on PostgreSQL (indexable, compact), JSON text on SQLite.
JSONType = JSON().with_variant(postgresql.JSONB(), "postgresql")

# SQLite only autoincrements INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
PK = BigInteger().with_variant(Integer(), "sqlite")
