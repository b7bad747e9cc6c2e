"""How a store is located and how SQLite is opened."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from assay.store import HEAD, Store, resolve_url


def test_default_location_is_dot_assay_under_cwd(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASSAY_DATABASE_URL", raising=False)
    store = Store.open()
    store.datasets.create("here")
    assert (tmp_path / ".assay" / "assay.db").exists()
    assert store.url.endswith(str(tmp_path / ".assay" / "assay.db"))


def test_env_var_and_explicit_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_DATABASE_URL", f"sqlite:///{tmp_path}/env.db")
    assert resolve_url() == f"sqlite:///{tmp_path}/env.db"
    assert resolve_url(tmp_path / "file.db") == f"sqlite:///{tmp_path / 'file.db'}"
    assert resolve_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"


def test_sqlite_pragmas(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "p.db")
    with store.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
        # a page cache that holds the indexes of a large runs table (negative: KiB), and
        # the commits checkpoint past 64 MB of WAL (a thread every ~4 MB before that), which
        # is truncated to 16 MB when it starts over (see _engine.SQLITE_PRAGMAS)
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -65536
        assert conn.exec_driver_sql("PRAGMA journal_size_limit").scalar() == 16 * 1024 * 1024
        # a new database gets 16 KB pages; the checkpoint limit is 64 MB in pages of its size
        assert conn.exec_driver_sql("PRAGMA page_size").scalar() == 16384
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 4096


def test_an_existing_database_keeps_its_page_size(tmp_path: Path) -> None:
    import sqlite3

    raw = sqlite3.connect(tmp_path / "old.db")  # as an earlier assay made it: 4 KB pages
    raw.execute("PRAGMA page_size = 4096")
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("CREATE TABLE keep (x)")
    raw.execute("INSERT INTO keep VALUES (1)")
    raw.commit()
    raw.close()
    store = Store.open(tmp_path / "old.db")
    with store.read() as conn:
        assert conn.exec_driver_sql("PRAGMA page_size").scalar() == 4096
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 16384
        assert conn.exec_driver_sql("SELECT x FROM keep").scalar() == 1
    store.runs.upsert(posts=[{"id": "00000000-0000-4000-8000-000000000001", "name": "r",
                              "run_type": "chain", "start_time": "2026-01-01T00:00:00Z"}])
    assert store.runs.read("00000000-0000-4000-8000-000000000001").name == "r"


def test_wal_stays_bounded_under_sustained_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Autocheckpoints keep the WAL near its limit however much is written, with no thread
    copying it back (``_checkpoint``; its cadence out of reach). The limit at 16 MB, the
    least it can be with 16 KB pages, so that a test writes past it twice in seconds."""
    from assay.store import _checkpoint, _engine

    monkeypatch.setattr(_engine, "WAL_CHECKPOINT_BYTES", 16 * 1024 * 1024)
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_ROWS", 1 << 62)
    store = Store.open(tmp_path / "wal.db")
    wal = tmp_path / "wal.db-wal"
    blob = "x" * 3000
    sizes = []
    for i in range(40):  # ~40 MB through the WAL: several checkpoints
        store.runs.upsert(posts=[{"id": f"00000000-0000-4000-8000-{i:06d}{j:06d}",
                                  "name": "r", "run_type": "chain", "inputs": {"b": blob},
                                  "start_time": "2026-01-01T00:00:00Z"} for j in range(300)])
        store.settle()
        sizes.append(wal.stat().st_size)
    limit = 16 * 1024 * 1024
    assert max(sizes) < 2 * limit, sizes  # bounded: a checkpoint ran and the log restarted
    assert (tmp_path / "wal.db").stat().st_size > 2 * limit  # more went through it


def test_opening_twice_does_not_migrate_again(tmp_path: Path) -> None:
    Store.open(tmp_path / "twice.db").close()
    mtime = os.stat(tmp_path / "twice.db").st_mtime_ns
    store = Store.open(tmp_path / "twice.db")
    assert store.schema_version() == HEAD
    assert os.stat(tmp_path / "twice.db").st_mtime_ns == mtime


def _hold_write_lock(path: Path) -> tuple[object, object]:
    """Another process's writer, as SQLite sees it: a connection of its own in a write
    transaction (``check_same_thread`` off, so a timer thread can end it)."""
    from assay.store import sqlite_driver

    other = sqlite_driver().connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE IF NOT EXISTS held (x)")
    return other, other.execute


def test_a_write_waits_for_another_connections_lock_then_gets_it(tmp_path: Path) -> None:
    """Writers poll for SQLite's write lock (not its busy handler's growing sleeps): a write
    that finds it held waits, gets it when the holder commits, and what both wrote is kept."""
    import threading

    store = Store.open(tmp_path / "w.db")
    other, execute = _hold_write_lock(tmp_path / "w.db")
    execute("INSERT INTO held VALUES (1)")
    threading.Timer(0.2, execute, ("COMMIT",)).start()
    store.datasets.create("after the lock")  # blocks until the timer's COMMIT
    assert [d.name for d in store.datasets.list()] == ["after the lock"]
    assert execute("SELECT x FROM held").fetchall() == [(1,)]
    with store.read() as conn:  # the connection's busy timeout is back for its readers
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    other.close()  # type: ignore[attr-defined]


def test_a_write_lock_never_released_ends_in_a_store_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.errors import StoreError
    from assay.store import _engine

    store = Store.open(tmp_path / "l.db")
    store.datasets.create("kept")
    other, _ = _hold_write_lock(tmp_path / "l.db")
    monkeypatch.setattr(_engine, "BUSY_TIMEOUT_S", 0.3)
    started = time.monotonic()
    with pytest.raises(StoreError, match="database is locked"):
        store.datasets.create("never")
    # the wait is assay's, bounded by its timeout: not SQLite's busy handler's (60 s here)
    assert time.monotonic() - started < 30
    other.rollback()  # type: ignore[attr-defined]
    store.datasets.create("later")  # the failed wait left the pool's connection usable
    assert sorted(d.name for d in store.datasets.list()) == ["kept", "later"]
    with store.read() as conn:  # the configured timeout, not the 0 it polls with
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 300
    other.close()  # type: ignore[attr-defined]
