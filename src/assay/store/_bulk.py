"""Bulk inserts that convert each value once and hand the rows to the driver's executemany.

SQLAlchemy's executemany runs every bound value through its type's processor and rebuilds the
parameter dict per row, which costs tens of microseconds per row of a wide table such as
``runs``. Here each column's conversion is resolved once per statement (timestamps to epoch
microseconds, JSON to text with the engine's serializer, ``None`` in a JSON column as JSON
``null`` as SQLAlchemy writes it) and the rows go to the driver as tuples. The stored values
are the same as through ``conn.execute(table.insert(), rows)``; as there, the first row's keys
choose the columns (others keep their server defaults) and every row must have those keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import Any

from sqlalchemy import JSON, Table
from sqlalchemy.engine import Connection

from .. import _json
from ._types import Micros, to_micros

__all__ = ["insert_many"]

_JSON, _TIME, _PLAIN = 1, 2, 0


def _kind(column: Any) -> int:
    if isinstance(column.type, Micros):
        return _TIME
    if isinstance(column.type, JSON):
        return _JSON
    return _PLAIN


@lru_cache(maxsize=64)
def _plan(table: Table, keys: tuple[str, ...], paramstyle: str, quote: Callable[[str], str],
          conflict: str) -> tuple[str, Any, tuple[int, ...], tuple[int, ...]]:
    """SQL, a C-level getter of a row's values in column order, and the positions holding JSON
    and timestamps (only those need converting)."""
    columns = tuple((c.name, _kind(c)) for c in table.columns if c.name in keys)
    mark = "?" if paramstyle == "qmark" else "%s"
    names = ", ".join(quote(name) for name, _ in columns)
    sql = (f"INSERT INTO {quote(table.name)} ({names}) "
           f"VALUES ({', '.join(mark for _ in columns)}){' ' if conflict else ''}{conflict}")
    picked = tuple(name for name, _ in columns)
    getter = itemgetter(*picked) if len(picked) > 1 else (lambda row: (row[picked[0]],))
    json_at = tuple(i for i, (_, kind) in enumerate(columns) if kind == _JSON)
    time_at = tuple(i for i, (_, kind) in enumerate(columns) if kind == _TIME)
    return sql, getter, json_at, time_at


def insert_many(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]],
                conflict: str = "") -> None:
    """Insert ``rows`` (dicts keyed by column name) with one executemany; ``conflict``: an
    ``ON CONFLICT ...`` clause to end the statement with (SQL the same on both databases)."""
    if not rows:
        return
    dialect = conn.dialect
    if (dialect.paramstyle not in ("qmark", "format", "pyformat")
            and not conflict):  # pragma: no cover
        conn.execute(table.insert(), list(rows))
        return
    sql, getter, json_at, time_at = _plan(table, tuple(sorted(rows[0])), dialect.paramstyle,
                                          dialect.identifier_preparer.quote, conflict)
    dumps = _json.dumps_column  # the engines' serializer: NUL and lone surrogates escaped
    params = []
    for row in rows:
        values = list(getter(row))
        for i in json_at:
            value = values[i]
            values[i] = "null" if value is None else dumps(value)
        for i in time_at:
            value = values[i]
            if value is not None and value.__class__ is not int:
                values[i] = to_micros(value)
        params.append(tuple(values))
    conn.exec_driver_sql(sql, params)
