"""``ASSAY_BACKGROUND_FOLD=process``: an embedded store's journal folded by a process of its
own, so the appending process (an agent's) pays for its appends alone. Runs are indexed with
no read and no fold in this process; the process leaves when idle and the next append starts
another; one that crashes is started again after a delay; a closed store stops it; reads
still fold what it has not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select

from assay.client import Client
from assay.store import Store, _background
from assay.store._background import fold_transactions
from assay.store._tables import runs
from assay.tracing import RunTree, traceable

COLUMNS = RunTree.ROW_COLUMNS
T0 = 1_700_000_000_000_000


@pytest.fixture
def process_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "process")


def _append(store: Store, n: int, project: str) -> None:
    rows = []
    for i in range(n):
        rid = str(uuid.uuid4())
        values = {"id": rid, "trace_id": rid, "name": "r", "run_type": "chain",
                  "start_time": T0 + i, "end_time": T0 + i + 5, "inputs": {"i": i},
                  "outputs": {"o": i}, "session_name": project}
        rows.append([values.get(c) for c in COLUMNS])
    store.journal.append_runs(rows, columns=COLUMNS, extra=RunTree.ROW_EXTRA)


def _stored(store: Store, project: str) -> int:
    """The project's runs in the indexed table, read without folding anything."""
    from assay.store._tables import sessions

    joined = runs.join(sessions, runs.c.session_id == sessions.c.id)
    with store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(joined)
                                .where(sessions.c.name == project)).scalar() or 0)


def _until(check: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_fold_process_indexes_the_appends_with_no_read(store: Store, process_mode: None) -> None:
    project = f"pm-{uuid.uuid4().hex[:8]}"
    for _ in range(4):
        _append(store, 250, project)
    folder = _background._processes[store.engine]
    assert folder.alive() and folder.proc is not None and folder.proc.pid != os.getpid()
    _until(lambda: _stored(store, project) == 1000)
    assert fold_transactions(store) == 0  # no thread of this process folded any of it
    store.close()  # stops it, after the transaction under way
    assert not folder.alive()
    assert store.engine not in _background._processes


def test_it_leaves_when_idle_and_the_next_append_starts_another(
        sqlite_url: str, process_mode: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_background, "PROCESS_IDLE_EXIT", 0.3)
    with Store.open(sqlite_url) as store:
        _append(store, 10, "idle")
        folder = _background._processes[store.engine]
        first = folder.proc
        assert first is not None
        _until(lambda: _stored(store, "idle") == 10)
        assert first.wait(30) == 0  # it left for want of work, on its own
        _append(store, 10, "idle")
        assert folder.proc is not first and folder.alive()
        _until(lambda: _stored(store, "idle") == 20)
        assert fold_transactions(store) == 0


def test_a_crashed_fold_process_is_started_again_after_a_delay(
        sqlite_url: str, process_mode: None) -> None:
    with Store.open(sqlite_url) as store:
        _append(store, 10, "crash")
        folder = _background._processes[store.engine]
        folder.restart_delay = folder._delay = 0.5
        first = folder.proc
        assert first is not None
        first.kill()
        first.wait(10)
        _append(store, 10, "crash")  # within the delay: none started, the read folds
        assert folder.proc is first
        assert store.projects.read(project_name="crash", include_stats=True).run_count == 20
        time.sleep(0.6)
        _append(store, 10, "crash")  # after it: another
        assert folder.proc is not first and folder.alive()
        _until(lambda: _stored(store, "crash") == 30)


def test_an_agents_runs_traced_through_a_client(tmp_path: Path, process_mode: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's pattern: traced calls, flush(), statistics; the fold in the other process."""
    monkeypatch.setenv("ASSAY_TRACING", "true")
    client = Client(database_url=str(tmp_path / "agent.db"))

    @traceable(client=client, project_name="agent", run_type="tool")
    def tool(x: int) -> int:
        return x * 2

    @traceable(client=client, project_name="agent")
    def step(x: int) -> int:
        return tool(x) + 1

    for i in range(300):
        step(i)
    client.flush()
    store = client._store
    _until(lambda: _stored(store, "agent") == 600)
    assert fold_transactions(store) == 0
    stats = client.read_project(project_name="agent", include_stats=True)
    assert stats.run_count == 300


def test_a_database_in_memory_is_refused_by_name(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each connection to an in-memory SQLite database sees an empty one of its own (the
    writer's, the fold's): refused, naming it, and no file is made for it (``:memory:`` was
    once taken for a file path)."""
    from assay.client import Client
    from assay.errors import InvalidInputError

    monkeypatch.chdir(tmp_path)
    for url in ("sqlite://", "sqlite:///:memory:", ":memory:",
                "sqlite:///file:x?mode=memory&cache=shared&uri=true"):
        with pytest.raises(InvalidInputError, match="in memory: assay's store needs a file"):
            Store.open(url)
    with pytest.raises(InvalidInputError, match="in memory"):
        Client(database_url=":memory:")
    assert os.listdir(tmp_path) == []


_FORK_SCRIPT = textwrap.dedent("""
    import os, sys, time, uuid
    from assay.store import Store, _background
    from assay.tracing import RunTree

    def rows(project):
        out = []
        for i in range(10):
            rid = str(uuid.uuid4())
            v = {"id": rid, "trace_id": rid, "name": "r", "run_type": "chain",
                 "start_time": 1_700_000_000_000_000 + i, "end_time": 1_700_000_000_000_005 + i,
                 "session_name": project}
            out.append([v.get(c) for c in RunTree.ROW_COLUMNS])
        return out

    def unraisable(u):  # a warning raised in a finalizer, as -W error makes it
        print("unraisable:", u.exc_value, flush=True)
        os._exit(3)

    sys.unraisablehook = unraisable
    store = Store.open(sys.argv[1])
    store.journal.append_runs(rows("parent"), columns=RunTree.ROW_COLUMNS)
    parent_folder = _background._processes[store.engine].proc.pid
    pid = os.fork()
    if pid == 0:
        store.journal.append_runs(rows("child"), columns=RunTree.ROW_COLUMNS)
        mine = _background._processes[store.engine].proc.pid
        assert mine != parent_folder, "the child must start a fold process of its own"
        deadline = time.monotonic() + 30
        while store.journal.backlog(1) and time.monotonic() < deadline:
            time.sleep(0.02)
        os._exit(0 if not store.journal.backlog(1) else 4)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status), flush=True)
""")


def test_a_forked_child_leaves_its_parents_fold_process_alone(tmp_path: Path) -> None:
    """A child forked after the parent started its fold process drops the parent's handle
    without the warning Popen gives for a running child (fatal under ``-W error``), and folds
    through a fold process of its own."""
    script = tmp_path / "fork.py"
    script.write_text(_FORK_SCRIPT)
    env = {**os.environ, "ASSAY_BACKGROUND_FOLD": "process"}
    out = subprocess.run([sys.executable, "-W", "error", str(script),
                          f"sqlite:///{tmp_path / 'fork.db'}"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "child 0", out.stdout + out.stderr[-2000:]


def test_the_fold_process_imports_what_a_fold_needs_before_its_first_fold(
        tmp_path: Path) -> None:
    """The repositories' modules (and the schemas, pydantic) are imported when the loop starts,
    not inside the first fold of runs, which had paid 0.2 s for them while appends waited."""
    url = f"sqlite:///{tmp_path / 'warm.db'}"
    Store.open(url).close()  # migrated, as the process that starts the fold process does
    script = textwrap.dedent(f"""
        import sys, threading
        from assay.store._fold_process import fold_loop
        stop = threading.Event()
        stop.set()  # the loop stops before it folds or probes anything
        fold_loop({url!r}, stop)
        print(sorted(m for m in ("assay.store._runs", "assay.store._feedback", "assay.schemas")
                     if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == str(["assay.schemas", "assay.store._feedback", "assay.store._runs"])
