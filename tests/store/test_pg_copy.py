"""The fold's rows as PostgreSQL's COPY text in C (``_cencode.copy_text``, ``store/_ccopy.c``)
against psycopg's own formatting, which it stands in for: the same bytes for every kind of
value the fold's rows hold, None (psycopg's ``write_row`` then) for anything else; and a real
COPY on PostgreSQL storing the same rows either way, a declined value in a chunk included."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from compiled_paths import is_in_use, needs_c
from psycopg._copy_base import TextFormatter  # what Copy.write_row formats with (3.2+)
from psycopg.adapt import Transformer

from assay.store import _pg_copy


def psycopg_text(rows: list[Any]) -> bytes:
    """What psycopg's ``Copy.write_row`` sends for ``rows`` in a text COPY."""
    fmt = TextFormatter(Transformer())
    out = b"".join(bytes(fmt.write_row(row)) for row in rows)
    return out + bytes(fmt.end())


STRINGS = ["", "plain", "tab\there", "new\nline", "cr\rlf\r\n", "back\\slash", "\\N", "\b\v\f",
           "é😀中", '{"a": "b\\\\c"}', "x" * 5000, " leading and trailing "]
INTS = [0, 1, -1, 42, 10**15, 2**63 - 1, -(2**63), 1795950846884083]
FLOATS = [0.0, -0.0, 1.0, 2.5, 1.5e-05, 2.7e-05, 1e-300, 1e300, 123456789.123, 1 / 3, -7.25,
          1e15, 1e16, 0.1 + 0.2]
VALUES: list[Any] = [*STRINGS, *INTS, *FLOATS, None, True, False]
# declined: psycopg formats (or refuses) these its own way
ODD: list[Any] = [2**63, -(2**63) - 1, float("nan"), float("inf"), "nul\x00", "x\ud800y",
                  b"bytes", uuid.UUID(int=5), [1], {"a": 1}, 3 + 0j, object()]


@pytest.fixture(scope="module")
def copy_text() -> Any:
    if not is_in_use(_pg_copy._TEXT, "assay.store._cencode"):
        pytest.skip("pure-Python run: write_row only")
    return _pg_copy._TEXT


@needs_c
def test_every_kind_of_value_as_psycopg_writes_it(copy_text: Any) -> None:
    rows = [[v] for v in VALUES] + [VALUES, tuple(VALUES)]
    assert copy_text(rows) == psycopg_text(rows)


@needs_c
def test_random_rows_as_psycopg_writes_them(copy_text: Any) -> None:
    rng = random.Random(44)
    for _ in range(300):
        width = rng.randint(1, 30)
        rows = [[rng.choice(VALUES) if rng.random() < 0.8 else rng.choice(STRINGS)[:rng.randint(
            0, 9)] + chr(rng.randint(1, 0x2FFF)) for _ in range(width)]
            for _ in range(rng.randint(1, 5))]
        assert copy_text(rows) == psycopg_text(rows)


@needs_c
@pytest.mark.parametrize("odd", ODD, ids=lambda v: type(v).__name__)
def test_a_value_it_does_not_write_declines_the_chunk(copy_text: Any, odd: Any) -> None:
    assert copy_text([["fine", 1], ["fine", odd]]) is None


@needs_c
def test_rows_that_are_not_lists_or_tuples_decline(copy_text: Any) -> None:
    assert copy_text([{"a": 1}]) is None
    assert copy_text([]) == b""
    with pytest.raises(TypeError):
        copy_text(5)


def _copied(pg_url: str, rows: list[Any], chunk: int, text: Any) -> list[tuple[Any, ...]]:
    """``rows`` COPYed into a scratch table through ``CopyRows`` (``chunk`` rows a chunk,
    ``_TEXT`` as ``text``), read back in order."""
    from sqlalchemy import create_engine

    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    table = f"copy_{uuid.uuid4().hex[:8]}"
    old = (_pg_copy._TEXT, _pg_copy.CHUNK)
    _pg_copy._TEXT, _pg_copy.CHUNK = text, chunk
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE TEMP TABLE {table} (n bigint, s text, f double "
                                 "precision, b boolean, j jsonb)")
            with _pg_copy.CopyRows(conn, ("n", "s", "f", "b", "j"), table) as out:
                for row in rows:
                    out.write(row)
            return [tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {table} ORDER BY n")]
    finally:
        _pg_copy._TEXT, _pg_copy.CHUNK = old
        engine.dispose()


def test_copy_rows_store_the_same_either_way(pg_url: str) -> None:
    rng = random.Random(7)
    rows: list[Any] = []
    for n in range(200):
        s = rng.choice([*STRINGS, None])
        rows.append([n, s, rng.choice([*FLOATS, None]), rng.choice([True, False, None]),
                     rng.choice(['{"a": [1, "x\\ty"]}', "[]", "null", '"é\\n"', None])])
    rows[77][2] = float("nan")  # psycopg's spelling: its chunk goes through write_row
    rows[150] = tuple(rows[150])
    by_rows = repr(_copied(pg_url, rows, 16, None))  # repr: NaN equals no NaN
    assert by_rows.count("(") == 200 and "(77, 'new\\nline', nan," in by_rows
    assert repr(_copied(pg_url, rows, 16, _pg_copy._TEXT)) == by_rows
    assert repr(_copied(pg_url, rows, 1000, _pg_copy._TEXT)) == by_rows


def test_a_failed_copy_stores_none_of_its_rows(pg_url: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE TEMP TABLE copy_fail (n bigint NOT NULL)")
            conn.commit()
            with pytest.raises(Exception, match="null value"), conn.begin(), \
                    _pg_copy.CopyRows(conn, ("n",), "copy_fail") as out:
                for n in range(100):
                    out.write([n])
                out.write([None])  # in the last, unflushed chunk
            assert conn.exec_driver_sql("SELECT count(*) FROM copy_fail").scalar() == 0
    finally:
        engine.dispose()
