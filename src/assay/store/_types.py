"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Integer
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import TypeDecorator

from .._time import checked_micros, from_micros, to_micros
from ..errors import InvalidInputError

__all__ = ["Micros", "JSONType", "PK", "sender_micros", "to_micros", "from_micros"]


def sender_micros(value: Any, where: str) -> int | None:
    """A time a sender gave (a run's start, a feedback's ``created_at``...) as epoch
    microseconds, refused as bad input naming ``where`` when it is not one the store can keep
    and read back (``checked_micros``): else the journal's fold would drop its item later."""
    try:
        return checked_micros(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where} is not a timestamp: {value!r} ({exc})") from exc

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
# The runs' JSON columns: JSON text on both (PostgreSQL's ``json`` checks the text and keeps
# it as written, key order included, as SQLite does). Building JSONB's binary form was a
# third of PostgreSQL's own work a run row, and the PostgreSQL fold's bottleneck once its
# COPY text came from C (migration 0011: the fold 15-20% faster). A query that needs JSONB's
# operators (tags containment) casts in the query.
RunJSONType = JSON()

# SQLite only autoincrements INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
PK = BigInteger().with_variant(Integer(), "sqlite")
