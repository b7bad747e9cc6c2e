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
from compiled_paths import is_in_use

from assay.client import Client
from assay.tracing import RunTree, get_current_run_tree, traceable, tracing_context
from assay.tracing._run_tree import SPEEDUPS


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
        from assay._gc import YOUNG

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
            assert gc.get_threshold()[0] >= YOUNG, gc.get_threshold()
            client.flush()
        deadline = time.monotonic() + 10
        while gc.get_threshold() != default:
            assert time.monotonic() < deadline, "the burst's thresholds were never restored"
            time.sleep(RELAX_IDLE / 4)
        assert sum(1 for _ in client.list_runs(project_name="p")) == 20_003
    """)


def _untanglers() -> list[Any]:
    from assay.tracing import _untangle

    found = [pytest.param(_untangle.untangle_py, id="python")]
    if is_in_use(SPEEDUPS, "assay.tracing._speedups"):
        found.append(pytest.param(SPEEDUPS.untangle, id="c"))
    return found


@pytest.mark.parametrize("untangle", _untanglers())
def test_untangle_takes_apart_exactly_the_traces_nothing_else_holds(
        untangle: Any, no_collector: None) -> None:
    """Both implementations on one writer's batch of traces built by hand (every run an item,
    one end queued apart as an ``(op, run)`` tuple): each case left whole by the rule it
    breaks, the others taken apart (every ``_kids`` dropped) and freed once the batch goes."""
    kept: dict[str, Any] = {}
    batch = _batch_of_cases(kept)
    untangle(batch)
    roots = {r.name.split("-")[0]: r for r in batch
             if isinstance(r, RunTree) and r.name.endswith("-root")}
    assert set(roots) == {"plain", "twice", "held", "kid", "weak", "open", "sent", "odd"}
    for tag in ("plain", "twice"):
        assert all(r._kids is None for r in batch
                   if isinstance(r, RunTree) and r.name.startswith(tag)), tag
    for tag in ("held", "kid", "weak", "open", "sent", "odd"):
        assert [len(m.child_runs) for m in roots[tag].child_runs] == [1, 1], tag
    assert kept["weak"]() is not None and kept["kid"].parent is not None
    del batch, roots
    assert not _alive("plain-") and not _alive("twice-")  # freed (the collector is off)
    assert len(_alive("open-")) == 5  # left whole: a cycle only the collector frees


def _batch_of_cases(kept: dict[str, Any]) -> list[Any]:
    def stored_trace(tag: str) -> RunTree:
        root = RunTree(f"{tag}-root", "chain", {})
        for i in range(2):
            mid = root.create_child(f"{tag}-mid{i}")
            mid.create_child(f"{tag}-leaf").end(outputs={"i": i})
            mid.end()
        root.end()
        for run in _walk(root):  # closed (RunTree.patch) and stored whole, as the writer
            run._closed, run._sent = True, 2  # marks it
        return root

    traces = {t: stored_trace(t) for t in ("plain", "twice", "held", "kid", "weak", "open",
                                           "sent", "odd")}
    kept["held"] = traces["held"]  # a root someone holds
    kept["kid"] = traces["kid"].child_runs[0].child_runs[0]  # a leaf someone holds
    kept["weak"] = weakref.ref(traces["weak"].child_runs[1])
    traces["open"].child_runs[1]._closed = False  # still running
    traces["sent"].child_runs[0]._sent = 1  # its post went out without the end
    traces["odd"].child_runs[0].child_runs[0].parent = traces["odd"]  # not who lists it
    batch: list[Any] = [run for root in traces.values() for run in _walk(root)]
    batch += [(1, traces["twice"].child_runs[0]), "a flush marker", (1, "not a run")]
    return batch


def _walk(root: RunTree) -> list[RunTree]:
    out = [root]
    for run in out:
        out.extend(run._kids or [])
    return out
