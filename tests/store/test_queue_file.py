"""A SQLite file's journal in a queue file of its own (``store/_queue.py``).

Appends take the queue's write lock, folds the database's: an append never waits for a fold
(nor for anyone holding the database). The fold's mark, committed with the rows it wrote, keeps
every entry applied exactly once across a fold killed before it trimmed the queue, a queue file
made anew, and a database made anew beside an old queue; closing a store or ending a process
moves what waits into the database file, so that file alone holds everything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from assay.store import Store, sqlite_driver
from assay.store._queue import queue_path, queue_store
from assay.store._tables import journal

# the stores' own SQLite: two copies of SQLite must not open one file in one process
sqlite3 = sqlite_driver()

T0 = 1_700_000_000_000_000  # epoch microseconds


def _run(rid: str, project: str = "q", end: int | None = T0 + 5) -> dict:
    run = {"id": rid, "trace_id": rid, "name": "step", "run_type": "chain", "start_time": T0,
           "inputs": {"q": rid[:4]}, "session_name": project}
    if end is not None:
        run["end_time"] = end
        run["outputs"] = {"a": 1}
    return run


def _ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def _queue_rows(db: Path) -> int:
    conn = sqlite3.connect(queue_path(str(db)))
    try:
        return int(conn.execute("SELECT count(*) FROM journal").fetchone()[0])
    finally:
        conn.close()


def _stats(store: Store, project: str = "q") -> tuple[int, int]:
    """(runs stored, the project's run count in its statistics)."""
    got = store.projects.read(project_name=project, include_stats=True)
    return len(store.runs.list(project_ids=[str(got.id)], limit=10_000)), got.run_count


@pytest.fixture(autouse=True)
def _reads_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    # the tests decide when folds happen: no background folder of this process
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")


def test_appends_go_to_the_queue_and_do_not_wait_for_the_database(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    store = Store.open(db)
    first = _ids(3)
    store.journal.append_runs([_run(r) for r in first])
    assert _queue_rows(db) == 1 and queue_store(store) is not None
    assert _stats(store) == (3, 3)  # folded: the project exists from here
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # the database's write lock, as a long fold holds it
    done = threading.Event()
    later, admitted = _ids(5), _ids(4)

    def append() -> None:
        store.journal.append_runs([_run(r) for r in later])
        store.journal.admit([_run(r) for r in admitted])  # its project exists: a read
        done.set()

    t = threading.Thread(target=append)
    t.start()
    try:
        assert done.wait(10), "an append waited for the database's write lock"
        assert _queue_rows(db) == 2
    finally:
        holder.execute("COMMIT")
        holder.close()
        t.join()
    assert _stats(store) == (12, 12)
    assert _queue_rows(db) == 0 and store.journal.pending() == 0
    store.close()


def test_reads_make_no_queue_file_and_the_first_append_does(tmp_path: Path) -> None:
    """A store that has only been read has no queue (making one is a write, which every new
    store's first read had paid: an experiment's set-up); its first append makes it, and a
    reader that looked before then sees the entry at its next read."""
    db = tmp_path / "a.db"
    reader, writer = Store.open(f"sqlite:///{db}"), Store.open(f"sqlite:///{db}")
    assert reader.settle() == 0 and reader.journal.pending() == 0
    assert reader.runs.list(limit=10) == []
    assert reader.journal.fold() == 0
    assert not os.path.exists(queue_path(str(db)))
    rid = _ids(1)[0]
    writer.journal.append_runs([_run(rid)])
    assert os.path.exists(queue_path(str(db))) and _queue_rows(db) == 1
    assert reader.journal.pending() == 1
    assert _stats(reader) == (1, 1)
    reader.close()
    writer.close()


def test_a_batch_in_a_store_transaction_is_journaled_in_it(tmp_path: Path) -> None:
    """Inside ``Store.transaction()`` (the server's batch with attachments) the append joins
    the transaction: a failure later in it keeps nothing, in the queue or elsewhere."""
    store = Store.open(tmp_path / "t.db")
    with pytest.raises(RuntimeError), store.transaction():
        store.journal.admit([_run(r) for r in _ids(2)])
        raise RuntimeError("the rest of the request failed")
    assert store.journal.pending() == 0
    with store.transaction():
        store.journal.admit([_run(r) for r in _ids(2)])
    assert _stats(store) == (2, 2)
    store.close()


_KILLED_BEFORE_TRIM = r"""
import os, sys
from assay.store import Store, _journal
sys.path.insert(0, sys.argv[2])
from test_queue_file import _ids, _run
store = Store.open(sys.argv[1])
store.journal.append_runs([_run(r) for r in _ids(30)])
store.journal.append_feedback([{"run_id": r, "key": "k", "score": 1.0} for r in _ids(7)])
def killed(queue, upto):  # the process dies after the fold's commit, before the queue's delete
    os._exit(9)
_journal.trim = killed
store.journal.fold()
"""


def test_a_fold_killed_before_it_trimmed_the_queue_applies_nothing_twice(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    Store.open(db).close()  # migrated
    done = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_TRIM, str(db),
                           str(Path(__file__).parent)],
                          env={**os.environ, "ASSAY_BACKGROUND_FOLD": "0"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    assert _queue_rows(db) == 2  # applied (the mark says so) but not deleted
    store = Store.open(db)
    assert _stats(store) == (30, 30)  # every run once, counted once
    with store.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM feedback").scalar() == 7
    assert store.journal.dropped == 0  # nothing was applied again (and refused)
    assert _queue_rows(db) == 0  # the next fold deleted them
    store.journal.append_runs([_run(r) for r in _ids(2)])
    assert _stats(store) == (32, 32)
    store.close()


def test_a_queue_file_made_anew_is_folded_whole(tmp_path: Path) -> None:
    """Its entries number from 1 again, under the old queue's mark: another epoch, so the old
    mark does not apply to them."""
    db = tmp_path / "a.db"
    store = Store.open(db)
    for _ in range(5):
        store.journal.append_runs([_run(r) for r in _ids(2)])
    assert _stats(store) == (10, 10)  # the mark is at entry 5
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(queue_path(str(db)) + suffix).unlink(missing_ok=True)
    store = Store.open(db)
    store.journal.append_runs([_run(r) for r in _ids(3)])  # entry 1 of the new queue
    assert _stats(store) == (13, 13)
    store.close()


_LEFT_IN_THE_QUEUE = r"""
import os, sys
from assay.store import Store
sys.path.insert(0, sys.argv[2])
from test_queue_file import _ids, _run
store = Store.open(sys.argv[1])
store.journal.append_runs([_run(r, project="old") for r in _ids(4)])
os._exit(0)  # killed: nothing folded, nothing moved into the database
"""


def _leave_in_the_queue(db: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _LEFT_IN_THE_QUEUE, str(db),
                           str(Path(__file__).parent)],
                          env={**os.environ, "ASSAY_BACKGROUND_FOLD": "0"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _queue_rows(db) == 1


def test_a_killed_process_s_entries_are_folded_by_the_next_reader(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _leave_in_the_queue(db)
    store = Store.open(db)
    assert _stats(store, "old") == (4, 4)
    store.close()


def test_a_database_made_anew_does_not_fold_the_old_one_s_queue(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    _leave_in_the_queue(db)
    for suffix in ("", "-wal", "-shm"):  # the database deleted, its queue file left
        Path(str(db) + suffix).unlink(missing_ok=True)
    store = Store.open(db)
    store.journal.append_runs([_run(r) for r in _ids(2)])
    assert _stats(store) == (2, 2)
    assert [p.name for p in store.projects.list()] == ["q"]  # nothing of the old database
    assert _queue_rows(db) == 0
    store.close()


def test_a_closed_store_s_database_file_alone_holds_its_runs(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    store.journal.append_runs([_run(r) for r in _ids(6)])
    store.journal.append_feedback([{"run_id": r, "key": "k", "score": 1.0} for r in _ids(3)])
    store.close()  # nothing folded: moved into the database's own journal
    assert _queue_rows(db) == 0
    alone = tmp_path / "copy" / "c.db"
    alone.parent.mkdir()
    shutil.copy(db, alone)
    copy = Store.open(alone)
    assert _stats(copy) == (6, 6)
    with copy.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM feedback").scalar() == 3
    copy.close()


def test_the_database_s_own_journal_folds_before_the_queue(tmp_path: Path) -> None:
    """Entries an earlier version wrote into the database's journal come first: a run posted
    there and ended by a patch in the queue is stored ended."""
    from sqlalchemy import insert

    from assay import _json
    from assay.store._journal import _pack

    db = tmp_path / "o.db"
    store = Store.open(db)
    rid = str(uuid.uuid4())
    payload = {"posts": [_run(rid, end=None)], "patches": [], "default_project": "default"}
    with store.write() as conn:
        conn.execute(insert(journal).values(tenant_id=store.tenant_id, kind="runs", items=1,
                                            created_at=T0, payload=_pack(_json.dumpb(payload))))
    store.journal.append_runs(patches=[{"id": rid, "end_time": T0 + 9, "outputs": {"a": 2}}])
    got = store.runs.read(rid)
    assert got.end_time is not None and got.outputs == {"a": 2}
    assert store.journal.pending() == 0
    store.close()


def test_a_fold_inside_a_transaction_rolled_back_loses_nothing(tmp_path: Path) -> None:
    """A read inside ``Store.transaction()`` folds the queue in that transaction; rolled back,
    its rows and its mark go, so the queue's entries must still be there to fold again."""
    db = tmp_path / "x.db"
    store = Store.open(db)
    store.journal.append_runs([_run(r) for r in _ids(4)])
    with pytest.raises(RuntimeError), store.transaction():
        assert len(store.runs.list(limit=100)) == 4  # folded in the transaction
        raise RuntimeError("the request failed after its read")
    assert _queue_rows(db) == 1
    assert _stats(store) == (4, 4)
    assert _queue_rows(db) == 0
    store.close()


_APPENDER = r"""
import sys
from assay.store import Store
sys.path.insert(0, sys.argv[2])
from test_queue_file import _ids, _run
store = Store.open(sys.argv[1])
for i in range(int(sys.argv[3])):
    ids = _ids(50)
    store.journal.append_runs([_run(r, project="many") for r in ids])
    store.journal.append_feedback([{"run_id": r, "key": "k", "score": 1.0} for r in ids])
    if i % 7 == 0:
        store.projects.read(project_name="many", include_stats=True)  # a read: it folds
print("ok")
"""


def test_processes_appending_and_folding_at_once_store_every_item_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three processes append to one queue while their background folders and their reads,
    and this process's reads, fold it: every run and score stored once, counted once."""
    db = tmp_path / "m.db"
    Store.open(db).close()
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "1")
    batches = 30
    procs = [subprocess.Popen([sys.executable, "-c", _APPENDER, str(db),
                               str(Path(__file__).parent), str(batches)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    store = Store.open(db)
    try:
        while any(p.poll() is None for p in procs):
            store.settle()  # a reader folding meanwhile
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip() == "ok", err
            assert "locked" not in err
        n = 3 * batches * 50
        assert _stats(store, "many") == (n, n)
        got = store.projects.read(project_name="many", include_stats=True)
        assert got.feedback_stats["k"].n == n  # type: ignore[index]
        assert store.journal.pending() == 0 and store.journal.dropped == 0
    finally:
        store.close()

