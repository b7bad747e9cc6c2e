"""The server's background folder sleeps until something is journaled: no polling while idle."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select

from assay.server._folder import Folder
from assay.store import Store
from assay.store._tables import runs

from ._wire import make_run


def _rows(store: Store) -> int:
    """Journal rows waiting (in a SQLite file's queue file, or the database's own table)."""
    return store.journal.backlog(1_000_000)


def _until(cond: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_folder_wakes_on_appends_and_does_not_poll(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "wake.db")
    statements: list[str] = []  # what the folder's own thread sends to the database

    @event.listens_for(store.engine, "before_cursor_execute")
    def _count(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        if threading.current_thread().name == "assay-fold":
            statements.append(sql)

    # an hour between fallback probes: anything folded below was woken by an append
    folder = Folder(store, interval=3600, idle=0.05, chunk=1)
    try:
        for i in range(3):  # journaled before the server starts: folded at start
            store.journal.append_runs([make_run(f"early{i}", session="wake")])
        folder.start()
        assert _until(lambda: _rows(store) == 0), "the backlog at start was not folded"
        time.sleep(0.1)  # the folder's last probe (empty journal) and back to sleep
        quiet = len(statements)
        time.sleep(0.4)  # idle: the old folder probed 8 times in this
        assert len(statements) == quiet, statements[quiet:]

        for i in range(5):
            store.journal.append_runs([make_run(f"late{i}", session="wake")])
        assert _until(lambda: _rows(store) == 0), "appends did not wake the folder"
        with store.read() as conn:  # folded into runs, every one
            assert conn.execute(select(func.count()).select_from(runs)).scalar() == 8
        time.sleep(0.1)
        quiet = len(statements)
        time.sleep(0.3)
        assert len(statements) == quiet, statements[quiet:]
    finally:
        started = time.monotonic()
        folder.stop()
        stopped_in = time.monotonic() - started
        store.close()
    assert stopped_in < 2.0  # stop wakes the sleeping thread (no hour-long wait)


def test_folder_probes_for_other_processes_rows_at_its_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows journaled without this process's hook (another worker) are found by the fallback
    probe every ``interval`` seconds."""
    from assay.store import _background

    store = Store.open(tmp_path / "other.db")
    folder = Folder(store, interval=0.2, idle=0.05)
    folder.start()
    try:
        # as if another process journaled: no hook here, and no store background folder
        monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
        _background.release(store.engine)
        store.journal.append_runs([make_run("elsewhere", session="other")])
        _background.claim(store.engine, folder.ingested)
        monkeypatch.delenv("ASSAY_BACKGROUND_FOLD")
        assert _rows(store) == 1
        assert _until(lambda: _rows(store) == 0, 3.0)
    finally:
        folder.stop()
        store.close()
