"""The SQLite library the stores use (``store/_driver.py``): the one pysqlite3-binary bundles
where it is installed, Python's ``sqlite3`` module with ``ASSAY_SQLITE_DRIVER=stdlib`` or
without it; every connection of a store (its engine, the checkpoint thread) goes through it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from assay.store import Store, sqlite_driver

SCRIPT = textwrap.dedent("""
    import json, sys
    from assay.store import Store, sqlite_driver
    store = Store.open(sys.argv[1])
    if len(sys.argv) > 2:
        store.datasets.create(name=sys.argv[2])
    with store.read() as conn:
        engine_version = conn.exec_driver_sql("SELECT sqlite_version()").scalar()
    names = sorted(d.name for d in store.datasets.list())
    store.close()
    print(json.dumps({"module": sqlite_driver().__name__, "engine": engine_version,
                      "driver": sqlite_driver().sqlite_version, "datasets": names}))
""")


def _in_a_process(url: str, env: dict[str, str], *create: str) -> dict[str, object]:
    import os

    out = subprocess.run([sys.executable, "-c", SCRIPT, url, *create], capture_output=True,
                         text=True,
                         env={**os.environ, **env}, timeout=60, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_stores_use_the_bundled_sqlite_when_it_is_installed(tmp_path: Path) -> None:
    import os

    if os.environ.get("ASSAY_SQLITE_DRIVER") == "stdlib":
        pytest.skip("this run asked for Python's sqlite3 module (.ci/run's second pass)")
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        pytest.skip("pysqlite3-binary has no wheel for this platform: the stdlib is used")
    assert sqlite_driver() is dbapi2
    store = Store.open(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        with store.read() as conn:
            assert conn.exec_driver_sql("SELECT sqlite_version()").scalar() == dbapi2.sqlite_version
            raw = conn.connection.driver_connection
            assert isinstance(raw, dbapi2.Connection)
    finally:
        store.close()


def test_assay_sqlite_driver_stdlib_keeps_pythons_module(tmp_path: Path) -> None:
    import sqlite3

    got = _in_a_process(f"sqlite:///{tmp_path / 'b.db'}", {"ASSAY_SQLITE_DRIVER": "stdlib"})
    assert got == {"module": "sqlite3", "engine": sqlite3.sqlite_version,
                   "driver": sqlite3.sqlite_version, "datasets": []}


def test_a_database_written_by_one_library_is_read_by_the_other(tmp_path: Path) -> None:
    """The file format is SQLite's own: a store written with the bundled library opens with
    Python's module (another process, an older tool) and the other way round."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store.open(url)
    store.datasets.create(name="by-this-process")
    store.close()
    stdlib = _in_a_process(url, {"ASSAY_SQLITE_DRIVER": "stdlib"}, "by-python-s-module")
    assert stdlib["module"] == "sqlite3"
    assert stdlib["datasets"] == ["by-python-s-module", "by-this-process"]
    again = Store.open(url)
    try:
        assert sorted(d.name for d in again.datasets.list()) == stdlib["datasets"]
    finally:
        again.close()


def test_none_and_bool_are_bound_through_adapters_found_at_once() -> None:
    """The driver finds an adapter for ``None`` and ``bool`` in its table instead of looking for
    ``__adapt__``/``__conform__`` at every value; what is stored is what it stored before: NULL,
    and a bool as an integer."""
    drv = sqlite_driver()
    assert (type(None), drv.PrepareProtocol) in drv.adapters
    assert (bool, drv.PrepareProtocol) in drv.adapters
    conn = drv.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (a, b)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(None, True), (False, None)])
        assert conn.execute("SELECT typeof(a), a, typeof(b), b FROM t ORDER BY rowid").fetchall() \
            == [("null", None, "integer", 1), ("integer", 0, "null", None)]
    finally:
        conn.close()


def test_an_adapter_registered_before_is_left_alone() -> None:
    """Another library's adapter for ``bool`` (say, to store text) stays the one used."""
    script = textwrap.dedent("""
        import sqlite3
        sqlite3.register_adapter(bool, lambda b: "yes" if b else "no")
        import os
        os.environ["ASSAY_SQLITE_DRIVER"] = "stdlib"
        from assay.store import sqlite_driver
        conn = sqlite_driver().connect(":memory:")
        print(conn.execute("SELECT ?, ?", (True, None)).fetchone())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "('yes', None)"


def test_sql_text_is_marked_for_each_backends_driver(store: Store) -> None:
    """``marked``: SQL written with ``?`` runs on SQLite's driver and psycopg's alike, a
    literal ``%`` kept (psycopg reads ``%`` as the start of a placeholder)."""
    from assay.store._driver import marked

    sql = "SELECT CAST(? AS TEXT) || '%' || CAST(? AS TEXT)"
    with store.read() as conn:
        assert conn.exec_driver_sql(marked(conn, sql), ("a", "b")).scalar() == "a%b"


def test_in_lists_take_a_few_shapes_and_bind_the_same_values() -> None:
    """``in_marks``: a list of n values takes the next power of two of marks, padded with its
    last value, so the driver's statement cache holds ten probe statements up to 512 instead of
    one per length a batch happens to have."""
    from assay.store._driver import in_marks

    shapes = set()
    for n in range(1, 513):
        values = [f"v{i}" for i in range(n)]
        cond, bound = in_marks(values)
        assert cond.count("?") == len(bound) >= n
        assert bound[:n] == values and set(bound[n:]) <= {values[-1]}
        assert len(bound) < 2 * n or n == 1
        shapes.add(cond)
    assert len(shapes) == 10  # 1, 2, 4, ..., 512
    assert in_marks(["a", "b", "c"]) == ("IN (?, ?, ?, ?)", ["a", "b", "c", "c"])


def test_stored_id_probes_find_exactly_the_stored_ones_at_every_length(store: Store) -> None:
    """The fold's probe of which runs are stored (``stored_ids``), padded: for lists of every
    length around the shapes' edges and past a chunk, exactly the stored ids come back, once
    each, on both databases."""
    import uuid
    from datetime import UTC, datetime

    from assay.store._fold_rows import stored_ids

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    stored = [str(uuid.uuid4()) for _ in range(40)]
    store.runs.upsert(posts=[{"id": i, "trace_id": i, "name": "t", "run_type": "chain",
                              "session_name": "probe", "start_time": t0} for i in stored])
    missing = [str(uuid.uuid4()) for _ in range(600)]
    with store.read() as conn:
        for n in (1, 2, 3, 5, 8, 9, 31, 33, 64, 65, 500, 501, 640):
            # distinct ids, as the fold asks: the stored ones spread through the list
            asked = [x for k, m in enumerate(missing) for x in (
                (stored[k // 15], m) if k % 15 == 0 and k // 15 < len(stored) else (m,))][:n]
            got = stored_ids(conn, "runs", asked)
            assert sorted(got) == sorted(set(asked) & set(stored)), n
            assert len(got) == len(set(got))
        assert stored_ids(conn, "runs", [missing[0], *stored[:3]], first=True) == [
            min(stored[:3])]


def test_a_store_connection_keeps_the_statements_a_fold_makes(tmp_path: Path) -> None:
    """A fold prepares a few dear statements (a 64-row insert: ~1.5M instructions), each run
    once a fold, beside the ~120 others a store runs on one connection; the driver's cache of
    100 let them go (its least used first) and every fold prepared them again. A file store's
    connections keep 512: a statement run again after 150 others (run twice each) is not
    prepared again (SQLite asks the authorizer only while it prepares a statement)."""
    from assay.store._engine import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        with engine.connect() as conn:
            raw = conn.connection.driver_connection
            reads: list[str] = []

            def authorize(action: int, arg1: Any, arg2: Any, *_: Any) -> int:
                if action == sqlite_driver().SQLITE_READ and arg1 == "probe":
                    reads.append(arg2)
                return sqlite_driver().SQLITE_OK

            raw.set_authorizer(authorize)
            raw.execute("CREATE TEMP TABLE probe (x)")
            probe = "SELECT x FROM probe WHERE x = ?"
            raw.execute(probe, (1,)).fetchall()
            asked = len(reads)
            assert asked and set(reads) == {"x"}  # prepared: the authorizer was asked
            for i in range(150):  # others, each run more often, as a store's reads are
                for _ in range(2):
                    raw.execute(f"SELECT {i}").fetchall()
            raw.execute(probe, (2,)).fetchall()
            assert len(reads) == asked  # kept: not prepared again
    finally:
        engine.dispose()
