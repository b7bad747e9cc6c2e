"""SQLite inserts of many rows, several rows to a statement.

``executemany`` runs its one-row statement once per row: each run binds the row, steps, and
ends the statement (its cursors closed and reopened, its statement journal released), ~10% of a
fold's instructions (bench/README.md, stop 51). ``INSERT ... VALUES (...), (...), ...`` of
``ROWS`` rows ends one statement for all of them. The statement is made once per (SQL, rows) and
kept by the driver's statement cache, so rows go in chunks of one length; the few left
over go through ``executemany`` as before (a statement per chunk length would be prepared anew
for every batch of another length, which cost more than it saved).

What is stored is the same: the same values bound in the same order, each row's numbered
parameters (``?N``) moved along by the row's width. A failure (a duplicate key) stops the
statement at the row, with the rows before it kept (``INSERT OR FAIL``), as ``executemany``
stopped at it; the caller's savepoint or transaction takes back what either wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain, islice
from typing import Any

from ._driver import sqlite

__all__ = ["MAX_SQL", "MAX_VARIABLES", "ROWS", "insert_many", "rows_statement"]

ROWS = 64  # rows a statement at most (fewer for wide rows: ``MAX_VARIABLES``)
# parameters a statement: SQLite's default bound is 32,766 since 3.32 and 999 before (a
# distribution's Python may link an older SQLite); a run's row binds ~20
MAX_VARIABLES = 32766 if sqlite.sqlite_version_info >= (3, 32, 0) else 999
# characters a statement, at most: a batch's shared values are written into each of its rows (a
# long ``extra`` shared by every run, say), and 64 copies of one cost memory and parsing for
# nothing (SQLite's own bound is 1e9 bytes, or what a build sets lower)
MAX_SQL = 500_000

# a quoted literal (kept as it is: a ``?`` inside one is text) or a parameter, numbered or not
_TOKEN = re.compile(r"'(?:[^']|'')*'|\?(\d*)")


@lru_cache(maxsize=256)
def rows_statement(sql: str, rows: int, width: int) -> str | None:
    """``sql``, an insert of one row (``INSERT INTO ... VALUES (...)`` with ``width``
    parameters, all ``?`` or all ``?N`` numbered 1 to ``width``), as an ``INSERT OR FAIL`` of
    ``rows`` rows; None when it is not such a statement.

    ``OR FAIL``: a row that breaks a constraint stops the statement with the rows before it
    kept, as ``executemany`` kept the statements before it, instead of SQLite undoing the
    statement's rows, for which it copied every page the statement changed into a statement
    journal first (6% of a fold's instructions; stop 51). The caller's savepoint or transaction
    takes back what was written, either way."""
    head, sep, tail = sql.rpartition(" VALUES (")
    if (not sep or not tail.endswith(")") or not head.startswith("INSERT INTO ")
            or rows * width > MAX_VARIABLES):
        return None
    head = "INSERT OR FAIL INTO " + head[len("INSERT INTO "):]
    one = "(" + tail
    found = [m.group(1) for m in _TOKEN.finditer(one) if not m.group(0).startswith("'")]
    if not found:
        return None
    if all(n == "" for n in found):  # plain ``?``: bound in order, row after row
        if len(found) != width:
            return None
        return f"{head} VALUES {', '.join([one] * rows)}"
    if "" in found or {int(n) for n in found} != set(range(1, width + 1)):
        return None  # numbered and not: or numbers this renumbering would not keep apart
    row = _numbered_format(one)
    return f"{head} VALUES " + ", ".join(
        row.format(*range(r * width + 1, (r + 1) * width + 1)) for r in range(rows))


def _numbered_format(one: str) -> str:
    """A row's ``(...)`` with numbered parameters as a format string: each ``?N`` becomes
    ``?{N-1}``, every brace elsewhere (in a literal, say) doubled."""
    def text(t: str) -> str:
        return t.replace("{", "{{").replace("}", "}}")

    parts, last = [], 0
    for m in _TOKEN.finditer(one):
        parts.append(text(one[last:m.start()]))
        token = m.group(0)
        parts.append(text(token) if token.startswith("'") else f"?{{{int(m.group(1)) - 1}}}")
        last = m.end()
    parts.append(text(one[last:]))
    return "".join(parts)


def insert_many(raw: Any, sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """``sql`` (a one-row insert) for each of ``rows`` on the driver connection ``raw``:
    ``ROWS`` rows a statement, the rest by ``executemany``. ``rows`` may be an iterator."""
    it = iter(rows)
    first = next(it, None)
    if first is None:
        return
    it = chain((first,), it)
    per = min(ROWS, MAX_VARIABLES // max(len(first), 1), MAX_SQL // len(sql))
    many = rows_statement(sql, per, len(first)) if per > 1 else None
    if many is None:
        raw.executemany(sql, it)
        return
    while True:
        chunk = list(islice(it, per))
        if len(chunk) < per:
            if chunk:
                raw.executemany(sql, chunk)
            return
        raw.execute(many, list(chain.from_iterable(chunk)))
