"""SQLite's WAL is checkpointed by a thread of its own, not inside the fold's commits."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from assay.store import Store, _checkpoint, sqlite_driver

from ._stored import TRACING_SCRIPT

# the stores' own SQLite: two copies of SQLite must not open one file in one process
sqlite3 = sqlite_driver()

T0 = 1_700_000_000_000_000  # epoch microseconds


@pytest.fixture(autouse=True)
def _reads_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The folds here are the test's own (``settle``): no background folder."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")


def _posts(n: int, blob: str = "") -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        root = str(uuid.uuid4())
        out.append({"id": root, "trace_id": root, "name": "root", "run_type": "chain",
                    "start_time": T0 + i, "end_time": T0 + i + 5, "inputs": {"b": blob},
                    "outputs": {"i": i}})
    return out


def _count(path: Path, project: str) -> int:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT count(*) FROM runs JOIN sessions ON sessions.id = "
                           "runs.session_id WHERE sessions.name = ?", (project,)).fetchone()[0]


def _checkpoints(store: Store) -> int:
    cp = _checkpoint._running.get(store.engine)
    return 0 if cp is None else cp.checkpoints


def _wait_for(cond: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_the_fold_leaves_the_checkpoint_to_a_thread_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_ROWS", 100)
    store = Store.open(tmp_path / "c.db")
    db = tmp_path / "c.db"
    before = db.stat().st_size
    store.journal.append_runs(_posts(300, "x" * 500), default_project="cp")
    store.settle()
    # the runs are in the WAL, far below the commits' own checkpoint limit (64 MB), and the
    # thread copies them into the database file
    assert _wait_for(lambda: _checkpoints(store) >= 1)
    assert _wait_for(lambda: db.stat().st_size > before + 100_000)
    assert _count(db, "cp") == 300
    store.close()
    assert store.engine not in _checkpoint._running


def test_few_rows_start_no_checkpoint(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "few.db")
    store.journal.append_runs(_posts(5), default_project="few")
    store.settle()
    time.sleep(0.05)
    assert _checkpoints(store) == 0  # 5 rows: nothing to copy back before CHECKPOINT_ROWS
    # nor a thread and its connection, for a store that may never write that much (its
    # first write had started them: 1-2 ms of a new store's first append)
    cp = _checkpoint._running.get(store.engine)
    assert cp is not None and not cp.started and not cp.thread.is_alive()
    assert cp.thread not in threading.enumerate()
    store.close()  # a checkpointer never started is stopped without a join
    assert store.engine not in _checkpoint._running


def test_the_thread_keeps_the_wal_small_under_sustained_folds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_ROWS", 300)
    store = Store.open(tmp_path / "sustained.db")
    wal = tmp_path / "sustained.db-wal"
    sizes = []
    for _ in range(12):
        store.journal.append_runs(_posts(300, "x" * 3000), default_project="s")
        store.settle()
        time.sleep(0.05)  # a gap between bursts, as an agent's or an experiment's
        sizes.append(wal.stat().st_size)
    assert _checkpoints(store) >= 6
    # the log starts over once the thread has copied it all back: far below the commits' 64 MB
    assert max(sizes) < 6 * 1024 * 1024, sizes
    assert _count(tmp_path / "sustained.db", "s") == 12 * 300
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_checkpoints_with_a_thread_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_ROWS", 50)
    store = Store.open(tmp_path / "fork.db")
    store.journal.append_runs(_posts(100), default_project="parent")
    store.settle()
    assert _wait_for(lambda: _checkpoints(store) >= 1)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's exit code is the assertion
        code = 1
        try:
            assert store.engine not in _checkpoint._running  # the parent's thread is not here
            store.engine.dispose(close=False)  # the parent's pooled connections stay theirs
            store.journal.append_runs(_posts(100), default_project="child")
            store.settle()
            ok = _wait_for(lambda: _checkpoints(store) >= 1, 10.0)
            code = 0 if ok else 2
        except BaseException:  # noqa: BLE001
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _count(tmp_path / "fork.db", "child") == 100
    assert _count(tmp_path / "fork.db", "parent") == 100
    store.close()


_EXITING = TRACING_SCRIPT + """
trace("exiting", int(sys.argv[2]))
if sys.argv[3] == "read":
    client.flush()
    assert client.read_project(project_name="exiting", include_stats=True).run_count == 50
# "exit": the process ends with its runs still in the writer (its exit flush journals them)
"""


@pytest.mark.parametrize("how", ["read", "exit"])
def test_a_process_that_ends_leaves_its_store_in_one_file(tmp_path: Path, how: str) -> None:
    """At exit the store's connections close, so the WAL is copied back and removed: a copy of
    the database file alone holds everything (before, it held nothing, not even the schema)."""
    import shutil
    import subprocess

    db = tmp_path / "one.db"
    env = {**os.environ, "ASSAY_BACKGROUND_FOLD": "1"}
    done = subprocess.run([sys.executable, "-c", _EXITING, f"sqlite:///{db}", "50", how],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "one.db-wal").exists()
    alone = tmp_path / "copy" / "one.db"
    alone.parent.mkdir()
    shutil.copy(db, alone)  # the file alone, as a user would share it
    store = Store.open(alone)
    try:
        project = store.projects.read(project_name="exiting", include_stats=True)
        assert project.run_count == 50
        assert len(store.runs.list(project_ids=[str(project.id)], limit=1000)) == 100
    finally:
        store.close()
