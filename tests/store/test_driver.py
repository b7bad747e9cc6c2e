"""The SQLite library the stores use (``store/_driver.py``): the one pysqlite3-binary bundles
where it is installed, Python's ``sqlite3`` module with ``ASSAY_SQLITE_DRIVER=stdlib`` or
without it; every connection of a store (its engine, the checkpoint thread) goes through it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

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
