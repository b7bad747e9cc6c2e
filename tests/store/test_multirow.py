"""Inserts of several rows a statement store what one statement a row stores."""

from __future__ import annotations

import random
from typing import Any

import pytest

from assay.store import sqlite_driver
from assay.store._multirow import MAX_SQL, MAX_VARIABLES, ROWS, insert_many, rows_statement

sqlite = sqlite_driver()


def _values(rng: random.Random) -> list[Any]:
    """A row's five values, of every kind the fold binds."""
    pick = [None, 0, -1, 2**63 - 1, 1.5, float("inf"), "", "x" * 300, "it's ?1 and ?",
            "\x00nul", "ünï", b"\x00bytes", True]
    return [rng.choice(pick) for _ in range(5)]


def _table(conn: Any, name: str) -> None:
    conn.execute(f"CREATE TABLE {name} (k INTEGER PRIMARY KEY, a, b, c, d, e, lit, again)")


def _rows(conn: Any, name: str) -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT * FROM {name} ORDER BY k").fetchall()


PER = min(ROWS, MAX_VARIABLES // 6)  # rows a statement at the tests' width


@pytest.mark.parametrize("count", [0, 1, PER - 1, PER, PER + 1, 3 * PER + 5])
def test_the_same_rows_as_one_statement_a_row(count: int) -> None:
    rng = random.Random(count)
    rows = [(i, *_values(rng)) for i in range(count)]
    conn = sqlite.connect(":memory:")
    _table(conn, "one")
    _table(conn, "many")
    # a literal holding what looks like parameters, and a parameter bound twice (numbered)
    numbered = ("INSERT INTO T (k, a, b, c, d, e, lit, again) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'a {?2} '' ?', ?2)")
    conn.executemany(numbered.replace(" T ", " one "), rows)
    insert_many(conn, numbered.replace(" T ", " many "), iter(rows))  # an iterator, as the fold
    assert _rows(conn, "many") == _rows(conn, "one")
    assert len(_rows(conn, "many")) == count
    plain = "INSERT INTO {} (k, a, b, c, d, e, lit) VALUES (?, ?, ?, ?, ?, ?, '?')"
    conn.execute("DELETE FROM one")
    conn.execute("DELETE FROM many")
    conn.executemany(plain.format("one"), rows)
    insert_many(conn, plain.format("many"), rows)
    assert _rows(conn, "many") == _rows(conn, "one")


def test_a_duplicate_key_stops_the_insert_where_it_did() -> None:
    conn = sqlite.connect(":memory:", isolation_level=None)
    _table(conn, "one")
    _table(conn, "many")
    rows = [(i, None, None, None, None, None) for i in range(2 * PER + 3)]
    rows[PER + 5] = rows[3]  # in the second statement of rows
    sql = "INSERT INTO {} (k, a, b, c, d, e) VALUES (?, ?, ?, ?, ?, ?)"
    with pytest.raises(sqlite.IntegrityError, match="UNIQUE constraint failed"):
        conn.executemany(sql.format("one"), rows)
    with pytest.raises(sqlite.IntegrityError, match="UNIQUE constraint failed"):
        insert_many(conn, sql.format("many"), rows)
    # the rows before the duplicate stay (a savepoint or the transaction takes them back)
    assert _rows(conn, "many") == _rows(conn, "one")
    assert len(_rows(conn, "many")) == PER + 5


def test_statements_it_cannot_widen_go_one_row_at_a_time() -> None:
    assert rows_statement("INSERT INTO t (a, b) VALUES (?1, ?)", 2, 2) is None  # mixed
    assert rows_statement("INSERT INTO t (a, b) VALUES (?1, ?3)", 2, 2) is None  # a gap
    assert rows_statement("INSERT INTO t (a, b) VALUES (?, ?)", 2, 3) is None  # other width
    assert rows_statement("INSERT INTO t (a) VALUES (?)", MAX_VARIABLES + 1, 1) is None
    assert rows_statement("UPDATE t SET a = ?", 2, 1) is None
    assert rows_statement("INSERT INTO t (a, b) VALUES (?, 'x?')", 2, 1) == \
        "INSERT OR FAIL INTO t (a, b) VALUES (?, 'x?'), (?, 'x?')"
    assert rows_statement("INSERT INTO t (a, b, c) VALUES (?1, 'it''s {?2}', ?1)", 2, 1) == \
        "INSERT OR FAIL INTO t (a, b, c) VALUES (?1, 'it''s {?2}', ?1), (?2, 'it''s {?2}', ?2)"


def test_rows_with_long_literals_go_fewer_to_a_statement() -> None:
    """A batch's shared value written into every row (a long ``extra``) keeps each statement
    under ``MAX_SQL`` characters: fewer rows a statement, or one by one; the same rows."""
    conn = sqlite.connect(":memory:")
    _table(conn, "one")
    _table(conn, "many")
    ran: list[str] = []
    rows = [(i, None, None, None, None, None) for i in range(3 * PER)]
    for size in (20_000, MAX_SQL):  # ~25 rows a statement; one statement a row
        conn.execute("DELETE FROM one")
        conn.execute("DELETE FROM many")
        sql = ("INSERT INTO {} (k, a, b, c, d, e, lit) VALUES (?, ?, ?, ?, ?, ?, '"
               + "x" * size + "')")
        conn.executemany(sql.format("one"), rows)
        conn.set_trace_callback(ran.append)
        insert_many(conn, sql.format("many"), rows)
        conn.set_trace_callback(None)
        assert _rows(conn, "many") == _rows(conn, "one")
    assert ran and max(map(len, ran)) <= MAX_SQL + 100
    assert any("), (" in statement for statement in ran)  # several rows a statement still
