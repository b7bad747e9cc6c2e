"""Stored traces nobody holds are freed by reference counting (``_untangle``), held ones stay
whole; a burst of traced runs is written with the collector relaxed, a trickle is not."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from assay.client import Client
from assay.tracing import RunTree, get_current_run_tree, traceable, tracing_context


def _alive(prefix: str) -> list[RunTree]:
    return [o for o in gc.get_objects() if isinstance(o, RunTree) and o.name.startswith(prefix)]


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic collector off: whatever is freed is freed by reference counting."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_stored_traces_nobody_holds_are_freed_and_held_ones_stay_whole(
        tclient: Client, no_collector: None) -> None:
    held_roots: list[RunTree] = []
    held_kids: list[RunTree] = []
    watched: list[Any] = []

    @traceable(name="u-leaf")
    def leaf(i: int) -> int:
        return i

    @traceable(name="u-mid")
    def mid(i: int) -> int:
        if i == 7:
            held_kids.append(get_current_run_tree())  # a child kept, its root not
        return leaf(i) + leaf(i + 1)

    @traceable(name="u-root")
    def root(i: int) -> int:
        if i == 5:
            held_roots.append(get_current_run_tree())
        if i == 9:
            watched.append(weakref.ref(get_current_run_tree()))  # reachable through it
        return mid(i)

    with tracing_context(enabled=True, client=tclient, project_name="untangle"):
        for i in range(30):
            root(i)
    tclient.flush()
    # the writer takes a batch apart after storing it, before flush() returns
    alive = _alive("u-")
    assert len(alive) == 3 * 4, sorted(r.name for r in alive)  # three traces of four runs
    (kept,) = held_roots
    (mid_run,) = kept.child_runs
    assert [r.name for r in mid_run.child_runs] == ["u-leaf", "u-leaf"]
    assert all(r.parent is mid_run for r in mid_run.child_runs) and mid_run.parent is kept
    (kid,) = held_kids
    assert kid in kid.parent.child_runs and len(kid.child_runs) == 2  # type: ignore[union-attr]
    watched_root = watched[0]()
    assert watched_root is not None and len(watched_root.child_runs[0].child_runs) == 2
    del alive, watched_root
    # and every run is stored as it was traced
    stored = list(tclient.list_runs(project_name="untangle"))
    assert len(stored) == 120
    by_id = {str(r.id): r for r in stored}
    for run in stored:
        if run.name == "u-root":
            assert run.parent_run_id is None and run.dotted_order.count(".") == 0
        else:
            parent = by_id[str(run.parent_run_id)]
            assert run.dotted_order.startswith(parent.dotted_order + ".")
            assert run.trace_id == parent.trace_id


def test_a_trace_still_open_is_left_whole(tclient: Client, no_collector: None) -> None:
    """A root that is still running when its child is stored: nothing is taken apart."""
    @traceable(name="o-kid")
    def kid() -> int:
        return 1

    with tracing_context(enabled=True, client=tclient, project_name="open"):
        @traceable(name="o-root")
        def root() -> int:
            kid()
            tclient.flush()  # the child is stored while its root runs
            me = get_current_run_tree()
            assert me is not None and [k.name for k in me.child_runs] == ["o-kid"]
            return 0

        root()
    tclient.flush()
    assert not _alive("o-")  # ended and stored by now: taken apart, then freed


def _run(code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_burst_is_written_with_the_collector_relaxed_and_a_trickle_is_not(
        tmp_path: Any) -> None:
    """In a fresh interpreter (the suite's servers relax the collector for their lifetime)."""
    _run(f"""
        import gc, time
        from assay.client import Client
        from assay.tracing import traceable, tracing_context
        from assay.tracing._writer import RELAX_IDLE

        default = gc.get_threshold()
        client = Client(database_url="sqlite:///{tmp_path}/burst.db")

        @traceable
        def step(i):
            return i

        with tracing_context(enabled=True, client=client, project_name="p"):
            for i in range(3):  # a trickle
                step(i)
                time.sleep(0.01)
            client.flush()
            assert gc.get_threshold() == default, gc.get_threshold()
            for i in range(20_000):  # a burst
                step(i)
            assert gc.get_threshold()[0] >= 20_000, gc.get_threshold()
            client.flush()
        deadline = time.monotonic() + 10
        while gc.get_threshold() != default:
            assert time.monotonic() < deadline, "the burst's thresholds were never restored"
            time.sleep(RELAX_IDLE / 4)
        assert sum(1 for _ in client.list_runs(project_name="p")) == 20_003
    """)
