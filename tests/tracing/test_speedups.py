"""The compiled run core (``assay.tracing._speedups``) against the Python it replaces.

The hot paths make runs with ``fast_child``/``fast_root``: C where the extension is built, the
``RunTree`` classmethods otherwise. Both must give the same run, slot for slot; the pure-Python
build must pass the whole tracing suite on its own (run below in a subprocess).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
import uuid
import weakref
from pathlib import Path

import pytest
from compiled_paths import PURE, is_in_use

from assay.tracing import RunTree
from assay.tracing import _run_tree as rt

SLOTS = [s for s in RunTree.__slots__ if s != "__weakref__"]
core = rt.SPEEDUPS


def test_the_compiled_core_is_what_the_hot_paths_use() -> None:
    if not is_in_use(core, "assay.tracing._speedups"):
        assert rt.fast_child == RunTree._fast_child
        return
    assert core is not None and rt.fast_child is core.child and rt.fast_root is core.root
    assert rt._new_id is core.new_id  # RunTree(...) gets its id there too


def _slots(run: RunTree) -> dict[str, object]:
    return {s: getattr(run, s) for s in SLOTS}


needs_core = pytest.mark.skipif(core is None, reason="pure-Python run (ASSAY_PURE_PYTHON)")


@needs_core
def test_c_runs_equal_python_runs_slot_for_slot() -> None:
    assert core is not None
    client, writer, meta, inputs = object(), object(), {"repetition": 1}, {"q": "2+2"}
    ref = str(uuid.uuid4())
    before = time.time_ns() // 1000
    runs = {}
    for impl, root, child, close in (
            ("py", RunTree._fast_root, RunTree._fast_child, RunTree._close),
            ("c", core.root, core.child, core.close)):
        r = root("agent", "chain", inputs, client, "sess-id", "proj", meta, ref)
        r._writer = writer
        c1 = child(r, "tool", "tool", {"x": 1})
        c2 = child(r, "llm", "llm", {"x": 2})
        g = child(c1, "grand", "retriever", {})
        runs[impl] = (r, c1, c2, g)
        assert r._kids == [c1, c2] and c1._kids == [g] and c2._kids is None
        assert r.child_runs == [c1, c2]
        for run in (c1, c2, g):  # inherited from the parent
            assert run._writer is writer and run._client is client
            assert run.trace_id == r.id and run._trace == r._id
            assert run.session_id == "sess-id" and run.session_name == "proj"
        assert c1.parent_run_id == r.id and g.parent is c1 and g._parent_id == c1._id
        c2._sent = 3  # its post still queued: close() says so, and the caller queues nothing
        assert close(c1, {"output": 1}) == 0 and close(c2, {"output": 2}) == 3
        assert c1._closed is True and c1.outputs == {"output": 1} and c1._end_us >= c1._start_us
    after = time.time_ns() // 1000
    for py_run, c_run in zip(runs["py"], runs["c"], strict=True):
        py, c = _slots(py_run), _slots(c_run)
        for own in ("_id", "_trace", "_parent_id", "parent", "_kids", "_start_us", "_end_us"):
            py.pop(own), c.pop(own)
        diff = {k for k in c if c[k] != py[k]}
        assert not diff, diff  # every other slot: the same value (defaults included)
        u = uuid.UUID(c_run._id)
        assert str(u) == c_run._id and u.version == 7 and u.variant == uuid.RFC_4122
        assert before <= c_run._start_us <= (c_run._end_us or after) <= after
        # the id's time is the run's start: its milliseconds, and the sub-millisecond fraction
        assert int(c_run._id[:8] + c_run._id[9:13], 16) == c_run._start_us // 1000
        assert int(c_run._id[15:18], 16) == (c_run._start_us % 1000) * 4096 // 1000
        assert c_run.dotted_order.startswith(c_run.parent.dotted_order + "."
                                             if c_run.parent else "")
        if c_run in (r, g):  # (not closed)
            assert c_run._sent == 0 and c_run._closed is False and c_run.outputs is None


@needs_core
def test_close_records_results_as_python_does() -> None:
    """``close`` makes the outputs from the call's result as ``_as_outputs`` does: a dict as it
    is, another mapping copied into a dict, anything else under "output"."""
    assert core is not None
    import types
    from collections import OrderedDict

    class Obj:
        pass

    mine = {"a": 1}
    results = [mine, OrderedDict(b=2), types.MappingProxyType({"c": 3}), None, "s", 4, 5.0,
               True, [6], (7,), b"8", Obj(), {1, 2}]
    for result in results:
        runs = [core.root("r", "chain", {}, None, None, "p", None, None) for _ in range(2)]
        core.close(runs[0], result)
        RunTree._close(runs[1], result)
        assert runs[0].outputs == runs[1].outputs == rt._as_outputs(result)
        assert type(runs[0].outputs) is dict
    run = core.root("r", "chain", {}, None, None, "p", None, None)
    core.close(run, mine)
    assert run.outputs is mine  # a dict result is not copied (as in Python)


@needs_core
def test_c_rows_equal_the_attrgetters() -> None:
    """The writer's journal rows (``rows``): the same tuples as ``ROW``, for runs made every
    way and carrying every kind of value."""
    assert core is not None
    root = RunTree("root", "chain", {"q": 1}, project_name="p", metadata={"m": 1}, tags=["t"],
                   extra={"e": 2}, reference_example_id=uuid.uuid4())
    kid = core.child(root, "kid", "llm", {"x": [1, 2]})
    kid.add_event({"name": "new_token"})
    core.close(kid, {"output": "hi"})
    root.end(error=ValueError("boom"))
    plain = core.root("plain", "tool", {}, None, None, "p", None, None)
    runs = [root, kid, plain, RunTree._fast_root("py", "chain", {}, None, None, None, None, None)]
    assert core.rows(runs) == list(map(rt.ROW, runs)) == rt._rows(runs)
    assert core.rows([]) == []
    with pytest.raises(TypeError, match="list of RunTree"):
        core.rows([root, object()])
    with pytest.raises(TypeError, match="list of RunTree"):
        core.rows(tuple(runs))


@needs_core
def test_ids_are_unique_and_sort_by_time() -> None:
    assert core is not None
    ids = [core.new_id() for _ in range(200_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 36 and uuid.UUID(i).version == 7 for i in ids[:1000])
    # ordered by their time part (48-bit ms + 12-bit fraction), whatever the random tail
    stamps = [i[:18] for i in ids]
    assert stamps == sorted(stamps)


@needs_core
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    assert core is not None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.write(w, core.new_id().encode())
        os._exit(0)
    os.close(w)
    mine = core.new_id()
    os.waitpid(pid, 0)
    theirs = os.read(r, 64).decode()
    os.close(r)
    # without the reseed at fork both draw the same random tail next
    assert mine[19:] != theirs[19:]


@needs_core
def test_runs_made_in_c_are_freed_and_leak_no_references() -> None:
    assert core is not None
    name, inputs, kind = "leaky", {"a": 1}, "chain"
    counts = (sys.getrefcount(name), sys.getrefcount(inputs))
    for _ in range(1000):
        root = core.root(name, kind, inputs, None, None, "p", None, None)
        core.child(root, name, kind, inputs)
        del root
    gc.collect()
    assert (sys.getrefcount(name), sys.getrefcount(inputs)) == counts
    # a parent and its children form a cycle (parent._kids / child.parent): the collector
    # frees it, so the objects are tracked as Python's own are
    root = core.root(name, kind, inputs, None, None, "p", None, None)
    kid = core.child(root, name, kind, inputs)
    refs = weakref.ref(root), weakref.ref(kid)
    del root, kid
    gc.collect()
    assert refs[0]() is None and refs[1]() is None


@needs_core
def test_bad_calls_fail_clearly() -> None:
    assert core is not None
    with pytest.raises(TypeError, match="RunTree parent"):
        core.child(object(), "x", "chain", {})
    with pytest.raises(TypeError, match=r"child\(parent"):
        core.child(None, "x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"close\(run, result\)"):
        core.close(object(), {})
    with pytest.raises(TypeError, match=r"root\(name"):
        core.root("x", "chain")  # type: ignore[call-arg]

    class NotARun:
        __slots__ = ("_id",)

    with pytest.raises(TypeError, match="NotARun._trace is not a slot"):
        core.bind(NotARun, rt.ROW_SLOTS)
    with pytest.raises(TypeError, match="RunTree.nope is not a slot"):
        core.bind(RunTree, (*rt.ROW_SLOTS, "nope"))
    with pytest.raises(TypeError, match="bind"):
        core.bind(RunTree)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="32 random bytes"):
        core.seed(b"short")
    # a failed bind keeps the binding it had
    run = core.root("still", "chain", {}, None, None, "p", None, None)
    assert isinstance(run, RunTree) and run.name == "still"
    assert core.rows([run]) == [rt.ROW(run)]


@pytest.mark.skipif(PURE, reason="this is the pure-Python run itself")
def test_the_tracing_suite_passes_in_pure_python() -> None:
    """Where the extension is not built, tracing is the same code in Python: run the tracing
    tests that way (in a subprocess: the choice is made at import)."""
    here = Path(__file__).parent
    env = {**os.environ, "ASSAY_PURE_PYTHON": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(here)], cwd=here.parent.parent, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
