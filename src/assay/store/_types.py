"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Integer
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import TypeDecorator

from .._time import from_micros, to_micros

__all__ = ["Micros", "JSONType", "PK", "to_micros", "from_micros"]

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
