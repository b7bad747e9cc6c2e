"""The background batching writer: merging, batching, backpressure, failures, flush and exit."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from assay.client import Client
from assay.store import Store
from assay.tracing import RunTree, get_current_run_tree, trace, traceable, tracing_context


class SpyJournal:
    """The real store's journal, with every batch the writer appends recorded (and optionally
    held)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[tuple[list[dict], list[dict]]] = []
        self.gate = threading.Event()
        self.gate.set()

    def append_runs(self, posts: Any = (), patches: Any = (), **kw: Any) -> int:
        """Recorded as the fold reads them: finished runs come as rows in ``columns`` order."""
        from assay.store._journal import _row_posts

        self.gate.wait(10)
        posts, patches = list(posts), list(patches)
        columns = kw.get("columns")
        as_read = [list(p) if isinstance(p, tuple) else p for p in posts]
        self.calls.append((_row_posts(as_read, columns, kw.get("extra")) if columns
                           else as_read, patches))
        return self.real.append_runs(posts, patches, **kw)

    def sizes(self) -> list[int]:
        """Runs per batch appended so far."""
        return [len(p) + len(q) for p, q in self.calls]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@traceable
def f(i: int) -> int:
    return i


class SpyBackend:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.journal = SpyJournal(store.journal)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture
def spied(tclient: Client) -> tuple[Client, SpyJournal]:
    backend = SpyBackend(tclient.store)
    tclient._backend = backend  # type: ignore[assignment]  # the client's own seam, not a library
    return tclient, backend.journal


def test_quick_run_is_one_merged_post_long_run_is_post_then_patch(spied: tuple) -> None:
    client, spy = spied
    with tracing_context(enabled=True, client=client, project_name="w"):
        with trace("quick") as quick:
            pass
        client.flush()
        with trace("long") as long:
            client.flush()  # the writer sends the start while the run is still open
            assert client.read_run(long.id).status == "pending"
    client.flush()
    posts = [p for ps, _ in spy.calls for p in ps]
    patches = [p for _, pa in spy.calls for p in pa]
    quick_posts = [p for p in posts if p["id"] == str(quick.id)]
    assert len(quick_posts) == 1 and quick_posts[0]["end_time"] is not None
    assert not [p for p in patches if p["id"] == str(quick.id)]
    long_posts = [p for p in posts if p["id"] == str(long.id)]
    long_patches = [p for p in patches if p["id"] == str(long.id)]
    assert len(long_posts) == 1 and "end_time" not in long_posts[0]
    assert len(long_patches) == 1 and long_patches[0]["end_time"] is not None
    assert "inputs" not in long_patches[0]
    # LangSmith wire fields
    wire = quick_posts[0]
    for key in ("id", "trace_id", "parent_run_id", "dotted_order", "name", "run_type", "inputs",
                "outputs", "error", "start_time", "end_time", "extra", "events", "tags",
                "session_name"):
        assert key in wire, key
    assert wire["extra"]["metadata"] == {} and wire["extra"]["runtime"]["sdk"] == "assay"
    assert client.read_run(long.id).status == "success"


def test_runs_are_batched(spied: tuple) -> None:
    client, spy = spied
    writer = client._tracing_writer()
    writer.batch_size = 100
    spy.gate.clear()  # hold the writer so the queue builds up

    with tracing_context(enabled=True, client=client, project_name="b"):
        for i in range(1000):
            f(i)
    spy.gate.set()
    client.flush()
    assert len(list(client.list_runs(project_name="b"))) == 1000
    sizes = spy.sizes()
    assert sum(sizes) == 1000  # every run went out once, as a merged post
    assert len(spy.calls) <= 12 and max(sizes) == 100


def test_runs_queued_during_a_drain_wait_for_the_next_round(spied: tuple) -> None:
    """A drain stores what was queued when it began; runs that arrive while it writes wait
    for the next round (the interval, a full batch or a flush) instead of a small transaction
    each right away, which competed with a busy event loop while examples finished."""
    client, spy = spied
    writer = client._tracing_writer()
    writer.interval = 1.0  # a round long enough to see which drain stored what
    spy.gate.clear()  # the first drain blocks in its first append

    with tracing_context(enabled=True, client=client, project_name="r"):
        for i in range(5):
            f(i)
        writer._wake.set()  # the first round starts now, on these 5
        deadline = time.monotonic() + 5
        while writer._q and time.monotonic() < deadline:  # taken by the drain, now blocked
            time.sleep(0.005)
        for i in range(5, 8):  # arrive while it writes
            f(i)
    spy.gate.set()
    time.sleep(0.1)  # the first drain finishes; the next round is a second away
    assert spy.sizes() == [5]
    client.flush()
    assert spy.sizes() == [5, 3]
    assert len(list(client.list_runs(project_name="r"))) == 8


def test_a_trickling_producer_is_stored_in_a_few_batches_not_one_per_tick(spied: tuple) -> None:
    """An agent emits a few runs every few ms: the writer lets a small batch wait (``linger``)
    for the next ones, so the store's per-batch cost is paid once per many steps."""
    client, spy = spied
    writer = client._tracing_writer()
    writer.interval, writer.linger = 0.01, 0.25
    with tracing_context(enabled=True, client=client, project_name="trickle"):
        for i in range(30):  # ~0.15 s: 15 ticks of the writer
            f(i)
            time.sleep(0.005)
    time.sleep(0.05)
    assert len(spy.calls) <= 1  # without the linger: one batch per tick, ~15
    deadline = time.monotonic() + 5  # ...and a lingering batch goes by itself, unflushed
    while sum(spy.sizes()) < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sum(spy.sizes()) == 30 and len(spy.calls) <= 2
    client.flush()  # (the spy records a batch just before the real append)
    assert len(spy.calls) <= 2
    assert len(list(client.list_runs(project_name="trickle"))) == 30


def test_flush_and_a_big_enough_batch_do_not_linger(spied: tuple) -> None:
    client, spy = spied
    writer = client._tracing_writer()
    writer.interval, writer.linger, writer.linger_items = 0.01, 60.0, 10
    with tracing_context(enabled=True, client=client, project_name="now"):
        for i in range(3):
            f(i)
        time.sleep(0.1)
        assert spy.calls == []  # three runs wait for company (up to a minute here)
        client.flush()  # ...but a flush stores them at once
        assert spy.sizes() == [3]
        for i in range(10):  # a batch of linger_items runs goes at the next tick
            f(i)
        deadline = time.monotonic() + 5
        while len(spy.calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert spy.sizes() == [3, 10]
    client.flush()  # (the spy records a batch just before the real append)
    assert spy.sizes() == [3, 10]
    assert len(list(client.list_runs(project_name="now"))) == 13


def test_full_queue_blocks_producers_instead_of_dropping(spied: tuple) -> None:
    client, spy = spied
    writer = client._tracing_writer()
    writer.max_queue, writer.batch_size = 20, 5
    spy.gate.clear()
    release = threading.Timer(0.3, spy.gate.set)
    release.start()

    t0 = time.perf_counter()
    with tracing_context(enabled=True, client=client, project_name="full"):
        for i in range(200):
            f(i)
    waited = time.perf_counter() - t0
    client.flush()
    assert waited >= 0.25  # the producer was held until the writer made room
    assert writer.dropped == 0
    assert len(list(client.list_runs(project_name="full"))) == 200


def test_queue_that_stays_full_drops_loudly(spied: tuple, caplog: pytest.LogCaptureFixture) -> None:
    client, spy = spied
    writer = client._tracing_writer()
    writer.max_queue, writer.batch_size, writer.block_timeout = 4, 1, 0.05
    spy.gate.clear()
    with caplog.at_level(logging.WARNING, logger="assay.tracing"):
        with tracing_context(enabled=True, client=client, project_name="drop"):
            for i in range(10):
                with trace(f"r{i}"):
                    pass
    spy.gate.set()
    client.flush()
    assert writer.dropped > 0
    assert "dropped run" in caplog.text
    stored = len(list(client.list_runs(project_name="drop")))
    assert stored > 0 and stored + writer.dropped >= 10


def test_a_rejected_run_does_not_lose_its_batch(tclient: Client,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """The batch is journaled whole; the fold applies it run by run when one run is bad, drops
    only that one and says which and why."""
    writer = tclient._tracing_writer()
    writer.interval = 5  # only flush() sends: all runs in one batch
    with caplog.at_level(logging.WARNING, logger="assay.store"):
        with tracing_context(enabled=True, client=tclient, project_name="bad"):
            for i in range(5):
                with trace(f"ok{i}"):
                    pass
            with trace("poison") as poison:
                poison.run_type = 123  # type: ignore[assignment]  # the store will refuse it
        tclient.flush()
        names = sorted(r.name for r in tclient.list_runs(project_name="bad"))
    assert names == [f"ok{i}" for i in range(5)]
    assert tclient.store.journal.dropped == 1 and writer.failed == 0
    assert "run_type must be a string" in caplog.text and str(poison.id) in caplog.text
    assert tclient.store.journal.pending() == 0


def test_a_held_writer_stores_nothing_until_released_then_drops_what_it_is_told(
        tclient: Client) -> None:
    """``hold``: runs queued meanwhile wait (flush too) and are stored, in order, once the
    event is set. ``drop_session``: runs of that project are discarded from then on."""
    writer = tclient._tracing_writer()
    writer.interval = 0.01
    held = threading.Event()
    writer.hold(held)
    with tracing_context(enabled=True, client=tclient, project_name="held"):
        for i in range(3):
            with trace(f"r{i}"):
                pass
    flushed = threading.Event()
    threading.Thread(target=lambda: (tclient.flush(), flushed.set())).start()
    time.sleep(0.2)
    assert not flushed.is_set() and tclient.store.journal.pending() == 0
    held.set()
    assert flushed.wait(10)
    assert sorted(r.name for r in tclient.list_runs(project_name="held")) == ["r0", "r1", "r2"]

    gone = tclient.create_project("gone")
    writer.drop_session(str(gone.id))
    from assay.tracing import RunTree

    dropped = RunTree(name="dropped", run_type="chain", inputs={}, client=tclient,
                      project_id=gone.id)
    dropped.post()
    dropped.end(outputs={})
    dropped.patch()
    with tracing_context(enabled=True, client=tclient, project_name="held"):
        with trace("kept"):
            pass
    tclient.flush()
    assert list(tclient.list_runs(project_name="gone")) == []
    assert "kept" in {r.name for r in tclient.list_runs(project_name="held")}

    # a project row waiting for a locked database is waited for, never overtaken by its runs
    from assay.store._engine import BUSY_TIMEOUT_S
    from assay.tracing import _writer

    assert _writer._HOLD_LIMIT > BUSY_TIMEOUT_S


def test_a_run_of_a_runtree_subclass_is_stored_like_any_run(tclient: Client) -> None:
    """An integration's own RunTree subclass goes to the journal as a row like RunTree's."""

    class AgentRun(RunTree):
        __slots__ = ()

    parent = AgentRun("agent", client=tclient, project_name="sub", inputs={"q": 1})
    child = AgentRun("tool", "tool", {"x": 2}, parent=parent)
    child.end(outputs={"y": 3})
    child.patch()  # never posted: the whole run, as a row
    parent.end(outputs="done")
    parent.patch()
    tclient.flush()
    writer = tclient._tracing_writer()
    assert writer.failed == 0
    stored = {r.name: r for r in tclient.list_runs(project_name="sub")}
    assert stored["tool"].outputs == {"y": 3} and stored["tool"].parent_run_id == parent.id
    assert stored["agent"].outputs == {"output": "done"}
    assert stored["tool"].dotted_order == child.dotted_order


def test_idle_writer_thread_exits_and_restarts(tclient: Client) -> None:
    writer = tclient._tracing_writer()
    writer.idle_exit, writer.interval = 0.1, 0.02
    with trace("a", client=tclient, enabled=True):
        pass
    tclient.flush()
    deadline = time.monotonic() + 5
    while writer._running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not writer._running
    with trace("b", client=tclient, enabled=True):
        pass
    tclient.flush()
    assert {r.name for r in tclient.list_runs()} == {"a", "b"}


def test_close_flushes(sqlite_url: str) -> None:
    client = Client(database_url=sqlite_url)
    client._tracing_writer().interval = 60
    with trace("closing", client=client, enabled=True) as run:
        pass
    client.close()
    other = Client(database_url=sqlite_url)
    assert other.read_run(run.id).name == "closing"


def test_runs_are_stored_at_interpreter_exit(tmp_path: Path, sqlite_url: str) -> None:
    script = textwrap.dedent(f"""
        from assay.client import Client
        from assay.tracing import traceable, tracing_context
        client = Client(database_url={sqlite_url!r})
        client._tracing_writer().interval = 60   # never by timer: only the exit hook stores
        @traceable
        def f(i):
            return i
        with tracing_context(enabled=True, client=client, project_name="exit"):
            for i in range(50):
                f(i)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    client = Client(database_url=sqlite_url)
    assert len(list(client.list_runs(project_name="exit"))) == 50


@pytest.mark.parametrize("batch_size", [1, 7, 1000])
def test_dotted_orders_left_to_the_fold_are_the_run_trees_own(client: Client,
                                                             batch_size: int) -> None:
    """The writer leaves a root's dotted order, and a child's whose parent was queued before
    it, for the fold to derive (from the batch, or from the stored parent when a batch ends
    between them); it computes the others itself: a child of a run whose start was never
    queued (an experiment's root), of a remote parent. Every stored order is the RunTree's."""
    client._tracing_writer().batch_size = batch_size
    made: list[RunTree] = []

    @traceable
    def grand(x: int) -> int:
        made.append(get_current_run_tree())
        return x

    @traceable
    def child(x: int) -> int:
        made.append(get_current_run_tree())
        return grand(x) + grand(x + 1)

    with tracing_context(enabled=True, client=client, project_name="orders"):
        for i in range(4):
            with trace("root") as root:  # posted at its start
                made.append(root)
                for j in range(3):
                    child(j)
            child(i)  # roots of their own
        late = RunTree("late", "chain", {}, client=client, project_name="orders")
        with tracing_context(parent=late):  # its start is never queued: it goes whole at end
            child(9)
        late.end()
        late.patch()
        made.append(late)
        remote = RunTree("remote", "chain", {}, client=client, project_name="orders",
                         trace_id=late.trace_id, parent_run_id=late.id,
                         parent_dotted_order=late.dotted_order)
        remote.end()
        remote.patch()
        made.append(remote)
    client.flush()
    assert any(r._dotted is None for r in made)  # some were left to the fold
    stored = {r.id: r.dotted_order for r in client.list_runs(project_name="orders")}
    assert len(stored) == len({r.id for r in made}) == 4 * (1 + 3 * 3) + 4 * 3 + 3 + 2
    assert stored == {r.id: r.dotted_order for r in made}


# -- ASSAY_TRACING_SAMPLING_RATE ----------------------------------------------------------------
@traceable
def _step(i: int) -> int:
    return i


@traceable
def _turn(i: int) -> int:
    return _step(i)


def test_a_sampling_rate_keeps_that_share_of_traces_whole_and_every_experiment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ASSAY_TRACING_SAMPLING_RATE=0.25``: about a quarter of the production traces are
    stored, each whole (root and step), chosen by a hash of the trace id (the same decision
    in any process); an experiment's traces are all stored."""
    from assay.evaluation import evaluate

    monkeypatch.setenv("ASSAY_TRACING_SAMPLING_RATE", "0.25")
    client = Client(database_url=f"sqlite:///{tmp_path / 'sampled.db'}")  # a writer of its own
    with tracing_context(enabled=True, client=client, project_name="svc"):
        for i in range(400):
            _turn(i)
    results = evaluate(lambda inputs: {"echo": inputs["q"]}, client=client,
                       data=[{"inputs": {"q": i}, "outputs": {}} for i in range(20)])
    client.flush()
    runs = list(client.list_runs(project_name="svc"))
    roots = [r for r in runs if r.parent_run_id is None]
    assert 50 <= len(roots) <= 150  # binomial(400, 0.25): 100 +- 8.7
    assert all(int(str(r.trace_id)[-8:], 16) < 0.25 * 2**32 for r in runs)
    assert sorted(r.trace_id for r in runs if r.parent_run_id is not None) == sorted(
        r.id for r in roots)  # each kept trace whole
    experiment = list(client.list_runs(project_name=results.experiment_name, is_root=True))
    assert len(experiment) == 20


@pytest.mark.parametrize(("rate", "stored"), [("0", 0), ("1", 40)])
def test_a_sampling_rate_of_0_keeps_nothing_and_1_everything(
        rate: str, stored: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_TRACING_SAMPLING_RATE", rate)
    client = Client(database_url=f"sqlite:///{tmp_path / 'rate.db'}")
    with trace("marker", client=client, project_name="other", enabled=True):
        pass  # (the project exists either way: a rate of 0 leaves "svc" uncreated)
    with tracing_context(enabled=True, client=client, project_name="svc"):
        for i in range(20):
            _turn(i)
    client.flush()
    projects = {p.name for p in client.list_projects()}
    count = len(list(client.list_runs(project_name="svc"))) if "svc" in projects else 0
    assert count == stored


@pytest.mark.parametrize("raw", ["1.5", "-0.1", "half"])
def test_a_sampling_rate_that_is_not_a_share_is_refused_by_name(
        raw: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.errors import InvalidInputError

    monkeypatch.setenv("ASSAY_TRACING_SAMPLING_RATE", raw)
    client = Client(database_url=f"sqlite:///{tmp_path / 'bad.db'}")
    with pytest.raises(InvalidInputError, match=r"ASSAY_TRACING_SAMPLING_RATE must be a number "
                                                r"from 0 to 1.*" + repr(raw).replace(".", r"\.")):
        client._tracing_writer()
