"""The background fold: appends are folded without a read, reads still see everything, and a
fold or a process killed at any point leaves every run readable exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, text

from assay.client import Client
from assay.store import Store, _background
from assay.store._background import COALESCE_DELAY, fold_transactions, wait_idle
from assay.store._journal import _PG_LOCK
from assay.store._tables import runs
from assay.tracing import RunTree

from ._stored import TRACING_SCRIPT
from .test_aggregates import _check_all

T0 = 1_700_000_000_000_000
COLUMNS = RunTree.ROW_COLUMNS


def _rows(n: int, project: str, start: int = 0) -> list[list]:
    out = []
    for i in range(n):
        rid = str(uuid.uuid4())
        values = {"id": rid, "trace_id": rid, "name": "r", "run_type": "chain",
                  "start_time": T0 + start + i, "end_time": T0 + start + i + 5,
                  "inputs": {"i": i}, "outputs": {"o": i}, "session_name": project}
        out.append([values.get(c) for c in COLUMNS])
    return out


def _stored(store: Store) -> int:
    """Runs in the indexed table of this workspace, read without folding anything."""
    with store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(runs).where(
            runs.c.tenant_id == store.tenant_id)).scalar() or 0)


@pytest.fixture
def background(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "1")


def test_appends_are_folded_without_a_read(store: Store, background: None) -> None:
    for b in range(5):
        store.journal.append_runs(_rows(200, "bg", b * 1000), columns=COLUMNS,
                                      extra=RunTree.ROW_EXTRA)
    deadline = time.monotonic() + 60
    while _stored(store) < 1000 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert wait_idle(store)
    assert _stored(store) == 1000  # no read asked for it
    assert store.projects.read(project_name="bg", include_stats=True).run_count == 1000
    assert _check_all([store]) == 1


def test_reads_while_folding_in_the_background_see_every_append(store: Store,
                                                                background: None) -> None:
    for b in range(20):
        store.journal.append_runs(_rows(100, "live", b * 1000), columns=COLUMNS,
                                      extra=RunTree.ROW_EXTRA)
        # folded by the background thread or by this read, whichever comes first; once
        project = store.projects.read(project_name="live", include_stats=True)
        assert project.run_count == (b + 1) * 100
    assert len(store.runs.list(project_ids=[project.id])) == 2000
    assert _check_all([store]) == 1


@pytest.fixture(params=["sqlite", "postgres"])
def own_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """A store on a database of its own: the shared test database's other engines (other
    tests' stores, servers) would fold this test's rows with their own folders, which the
    count of this engine's fold transactions does not see."""
    if request.param == "sqlite":
        st = Store.open(request.getfixturevalue("sqlite_url"))
        yield st
        st.close()
        return
    import psycopg

    admin = request.getfixturevalue("pg_url")  # the run's database: a connection to create
    name = f"assay_fold_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    st = Store.open(f"{admin.rpartition('/')[0]}/{name}")
    try:
        yield st
    finally:
        st.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_trickle_of_small_batches_is_folded_in_few_transactions(own_store: Store,
                                                                   background: None) -> None:
    """An agent's few runs every few tens of milliseconds: the folder waits for more (up to
    ``COALESCE_DELAY`` after the first append) and folds them together, not a transaction
    per batch in the producer's process; a read still sees every append at once."""
    before = fold_transactions(own_store)
    for b in range(10):
        own_store.journal.append_runs(_rows(3, "trickle", b * 1000), columns=COLUMNS,
                                      extra=RunTree.ROW_EXTRA)
        time.sleep(COALESCE_DELAY / 25)
    deadline = time.monotonic() + 60
    while _stored(own_store) < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert wait_idle(own_store)
    assert _stored(own_store) == 30  # folded in the background, no read asked for it
    assert 1 <= fold_transactions(own_store) - before <= 3  # not one per batch (10)
    own_store.journal.append_runs(_rows(3, "trickle", 99_000), columns=COLUMNS,
                                  extra=RunTree.ROW_EXTRA)
    assert own_store.projects.read(project_name="trickle", include_stats=True).run_count == 33
    assert _check_all([own_store]) == 1


class _Spinner:
    """A thread computing in pure Python (an ``evaluate()`` loop over a fast target, say)
    until stopped."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        while not self.done.is_set():
            sum(range(2000))

    def __enter__(self) -> _Spinner:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def _wait_stored(store: Store, n: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while _stored(store) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return _stored(store)


@pytest.fixture
def busy_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy process is one whose other threads use a tenth of a core over 20 ms: a spinning
    thread gets that much even on a machine loaded by the other test worker and more."""
    monkeypatch.setattr(_background, "BUSY_SHARE", 0.1)
    monkeypatch.setattr(_background, "BUSY_NAP", 0.02)


def test_a_busy_process_has_its_appends_folded_after_it_computes(
        own_store: Store, background: None, busy_share: None) -> None:
    """A thread computing beside the appends: the folder waits for it to end (a fold beside
    it would fight it for the GIL), then folds without a read."""
    with _Spinner():
        for b in range(3):  # past COALESCE_ITEMS: an idle process would fold at once
            own_store.journal.append_runs(_rows(400, "busy", b * 1000), columns=COLUMNS,
                                          extra=RunTree.ROW_EXTRA)
        time.sleep(0.5)
        assert _stored(own_store) == 0  # deferred while the process computes
    assert _wait_stored(own_store, 1200) == 1200  # then folded, no read asked for it
    assert own_store.projects.read(project_name="busy", include_stats=True).run_count == 1200
    assert _check_all([own_store]) == 1


def test_a_busy_process_leaves_a_bounded_backlog(own_store: Store, background: None,
                                                 busy_share: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The deferral has two bounds: the items waiting (``DEFER_ITEMS``) and the age of the
    first of them (``DEFER_SECONDS``); past either, the folder folds beside the computing."""
    monkeypatch.setattr(_background, "DEFER_ITEMS", 1000)
    with _Spinner():
        for b in range(3):
            own_store.journal.append_runs(_rows(400, "many", b * 1000), columns=COLUMNS,
                                          extra=RunTree.ROW_EXTRA)
        assert _wait_stored(own_store, 1200) == 1200  # folded while it still computes
    monkeypatch.setattr(_background, "DEFER_ITEMS", 25_000)
    monkeypatch.setattr(_background, "DEFER_SECONDS", 0.3)
    with _Spinner():
        own_store.journal.append_runs(_rows(600, "old", 9000), columns=COLUMNS,
                                      extra=RunTree.ROW_EXTRA)
        assert _wait_stored(own_store, 1800) == 1800
    assert own_store.projects.read(project_name="old", include_stats=True).run_count == 600
    assert _check_all([own_store]) == 2


BUSY_CHECK = r"""
import threading
from assay.store import _background
_background.BUSY_SHARE = 0.1  # a tenth of a core: what a spinning thread gets, however loaded
assert not _background._others_busy(0.2), "idle seen as busy"
done = threading.Event()
def spin():
    while not done.is_set():
        sum(range(2000))
t = threading.Thread(target=spin)
t.start()
try:
    assert _background._others_busy(0.2), "a spinning thread not seen"
finally:
    done.set()
    t.join()
"""


def test_the_busy_test_sees_an_idle_process_as_idle() -> None:
    """The measure itself, in a fresh interpreter (this one may have other tests' threads
    at work): a sleeping process is idle, a spinning thread makes it busy."""
    proc = subprocess.run([sys.executable, "-c", BUSY_CHECK], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


BACKGROUND_KILLED = TRACING_SCRIPT + r"""
trace(sys.argv[2], 3000)
client.flush()   # durable; the background folder is at work on it
os._exit(0)      # killed with it: a fold in progress is never committed
"""


def test_a_process_killed_while_folding_in_the_background_loses_nothing(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "1")
    project = f"killed-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run([sys.executable, "-c", BACKGROUND_KILLED, store_url, project],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    client = Client(database_url=store_url)
    stats = client.read_project(project_name=project, include_stats=True)
    assert stats.run_count == 3000
    got = list(client.list_runs(project_name=project))
    assert len(got) == len({r.id for r in got}) == 6000
    client.store.close()


FOLD_THEN_KILLED = textwrap.dedent(r"""
    import os, sys, threading, time, uuid
    from assay.store import Store
    from assay.tracing import RunTree
    store = Store.open(sys.argv[1]).for_tenant(sys.argv[2])
    T0 = 1_700_000_000_000_000
    for b in range(60):
        rows = []
        for i in range(200):
            rid = str(uuid.uuid4())
            v = {"id": rid, "trace_id": rid, "name": "r", "run_type": "chain",
                 "start_time": T0 + b * 1000 + i, "end_time": T0 + b * 1000 + i + 5,
                 "inputs": {"i": i}, "outputs": {"o": i}, "session_name": "midway"}
            rows.append([v.get(c) for c in RunTree.ROW_COLUMNS])
        store.journal.append_runs(rows, columns=RunTree.ROW_COLUMNS, extra=RunTree.ROW_EXTRA)
    print("appended", flush=True)
    sys.stdin.readline()        # the parent says when to fold
    store.settle()              # killed by the parent while this runs
    print("finished", flush=True)
    time.sleep(60)
""")


@pytest.fixture
def own_pg_database(pg_url: str) -> Iterator[str]:
    """A database of this test's own: the session's is also served by the test server, whose
    background fold would fold these batches before the child could be killed folding them."""
    import psycopg

    base, _, _ = pg_url.rpartition("/")
    name = f"assay_fold_kill_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_fold_killed_midway_on_postgresql_leaves_every_run_once(
        own_pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folding process is SIGKILLed while its fold transaction is open (seen from outside:
    it holds the folders' advisory lock): the next reader applies every batch, once."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")  # this process folds only when it reads
    pg_url = own_pg_database
    base_store = Store.open(pg_url)
    store = base_store.for_tenant(str(uuid.uuid4()))
    child = subprocess.Popen([sys.executable, "-c", FOLD_THEN_KILLED, pg_url, store.tenant_id],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "appended"
        assert store.journal.pending() == 12_000
        hi, lo = _PG_LOCK >> 32, _PG_LOCK & 0xFFFFFFFF
        held = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND classid = :hi AND objid = :lo AND database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database())")
        child.stdin.write("\n")
        child.stdin.flush()
        deadline = time.monotonic() + 60
        with store.engine.connect() as conn:
            while not conn.execute(held, {"hi": hi, "lo": lo}).scalar():
                assert time.monotonic() < deadline and child.poll() is None
                conn.rollback()
                time.sleep(0.002)
        os.kill(child.pid, signal.SIGKILL)  # inside the fold's transaction
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    left = store.journal.pending()
    assert 0 < left <= 12_000  # the killed fold's chunk was not committed
    project = store.projects.read(project_name="midway", include_stats=True)
    assert project.run_count == 12_000
    assert len(store.runs.list(project_ids=[project.id])) == 12_000
    assert store.journal.pending() == 0
    assert _check_all([store]) == 1
    store.close()
    base_store.close()
