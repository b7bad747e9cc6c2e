"""The compiled traced call (``_speedups.Call``) and writer pass (``take``) against the Python.

A sync ``@traceable`` function runs through ``Call`` where the extension is built; the Python
wrapper stays the reference. The same calls made through each must store the same runs, raise
the same exceptions and leave the context as they found it.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from compiled_paths import is_in_use

from assay._ids import dotted_segment_us
from assay.client import Client
from assay.tracing import RunTree, get_current_run_tree, trace, traceable, tracing_context
from assay.tracing import _run_tree as rt
from assay.tracing import _traceable as tr
from assay.tracing._writer import QUEUED

core = rt.SPEEDUPS
needs_core = pytest.mark.skipif(core is None, reason="pure-Python run (ASSAY_PURE_PYTHON)")


def test_sync_traced_functions_run_through_the_compiled_call() -> None:
    @traceable
    def f(x: int) -> int:
        return x

    cells = [c.cell_contents for c in f.__closure__ or ()]  # type: ignore[attr-defined]
    if not is_in_use(core, "assay.tracing._speedups"):
        assert not any(type(c).__name__ == "Call" for c in cells)
        return
    assert core is not None and any(isinstance(c, core.Call) for c in cells)
    assert f.__wrapped__ is not None and f.__name__ == "f"  # still a function, wrapped as one


class Boom(Exception):
    pass


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


def _scenario(wrap: Callable[..., Any], client: Client, seen: list[Any],
              monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every kind of sync traced call, each wrapper made by ``wrap(fn, **options)``; returns
    what the calls returned or raised, in order."""

    def leaf(x: int) -> int:
        seen.append(get_current_run_tree())
        return x + 1

    def two(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    def defaults(a: int, b: int = 2, *rest: int, **more: Any) -> MappingProxyType[str, int]:
        return MappingProxyType({"a": a, "b": b})

    def raises(x: int) -> int:
        raise Boom(f"no {x}")

    def raises_bad_str() -> None:
        raise BadStr()

    t_leaf = wrap(leaf, run_type="tool")
    t_two = wrap(two)
    t_defaults = wrap(defaults)
    t_raises = wrap(raises)
    t_bad = wrap(raises_bad_str)
    t_hooks = wrap(leaf, name="hooked", process_inputs=lambda d: {"in": d},
                   process_outputs=lambda v: {"out": v})
    t_broken_hook = wrap(leaf, name="broken-hook", process_inputs=lambda d: 1 / 0)
    t_meta = wrap(leaf, name="with-meta", metadata={"k": "v"}, tags=["t1"])
    t_forced_off = wrap(leaf, name="forced-off", enabled=False)
    t_forced_on = wrap(leaf, name="forced-on", enabled=True)

    class Agent:
        def act(self, query: str) -> str:
            return query.upper()

    Agent.act = wrap(Agent.act, name="Agent.act")  # type: ignore[method-assign]

    def chain(x: int) -> int:
        return t_leaf(x) + t_two(x, b=x)["sum"]

    t_chain = wrap(chain)
    out: list[Any] = []

    def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        before = get_current_run_tree()
        try:
            out.append(fn(*args, **kwargs))
        except Exception as exc:
            out.append((type(exc), str(exc) if not isinstance(exc, BadStr) else "bad"))
        assert get_current_run_tree() is before  # the context as it was

    with tracing_context(enabled=True, client=client, project_name="t"):
        call(t_leaf, 1)
        call(t_two, 1, 2)
        call(t_two, a=1, b=2)
        call(t_defaults, 1)
        call(t_defaults, 1, 3, 4, 5, flag=True)
        call(t_chain, 10)
        call(t_raises, 3)
        call(t_bad)
        call(t_hooks, 5)
        call(t_broken_hook, 6)
        call(t_meta, 7)
        call(t_forced_off, 8)
        call(Agent().act, "hi")
        with tracing_context(metadata={"ctx": 1}, tags=["ctx-tag"]):
            call(t_leaf, 9)
        with trace("block"):
            call(t_leaf, 11)
    with tracing_context(enabled=False, client=client, project_name="t"):
        call(t_leaf, 12)  # off: no run
        call(t_forced_on, 13)
    with tracing_context(client=client, project_name="t"):
        call(t_leaf, 14)  # ASSAY_TRACING unset: off
        monkeypatch.setenv("ASSAY_TRACING", "true")
        call(t_leaf, 15)  # on, by the environment
        monkeypatch.delenv("ASSAY_TRACING")
    return out


def _stored(client: Client) -> list[tuple[Any, ...]]:
    client.flush()
    runs = list(client.list_runs(project_name="t"))
    names = {r.id: r.name for r in runs}
    return [(r.name, r.run_type, r.inputs, r.outputs, (r.error or "").split("\n")[0],
             names.get(r.parent_run_id), sorted(r.tags or []),
             {k: v for k, v in ((r.extra or {}).get("metadata") or {}).items()
              if not k.startswith("ls_")}, r.status, r.end_time is not None)
            for r in runs]


@needs_core
def test_the_compiled_call_stores_what_the_python_wrapper_stores(
        sqlite_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    results, stored, seen = {}, {}, {}
    for impl, compiled in (("py", None), ("c", core)):
        def wrap(fn: Callable[..., Any], _c: Any = compiled, **kw: Any) -> Any:
            options = tr._Options(kw.pop("name", fn.__name__), kw.pop("run_type", "chain"),
                                  kw.pop("metadata", None), kw.pop("tags", None), None, None,
                                  kw.pop("process_inputs", None),
                                  kw.pop("process_outputs", None), None, kw.pop("enabled", None))
            assert not kw
            return tr._wrap_sync(fn, options, _c)

        client = Client(database_url=str(tmp_path / f"{impl}.db"))
        seen[impl] = []
        results[impl] = _scenario(wrap, client, seen[impl], monkeypatch)
        stored[impl] = _stored(client)
        client.close()
    assert results["c"] == results["py"]
    assert results["c"][0] == 2 and results["c"][6] == (Boom, "no 3")
    assert stored["c"] == stored["py"]
    names = [s[0] for s in stored["c"]]
    assert "forced-off" not in names and "forced-on" in names
    assert names.count("leaf") == 5  # alone, in chain, in a context, in a block, by the env
    assert {s[0]: s[4] for s in stored["c"]}["raises_bad_str"].startswith("BadStr:")
    # inside the call the current run is the call's own
    assert all(isinstance(r, RunTree) or r is None for r in seen["c"])
    assert [r is None for r in seen["c"]] == [r is None for r in seen["py"]]


@needs_core
def test_a_traced_call_leaks_no_references(tclient: Client) -> None:
    assert core is not None

    @traceable
    def f(x: Any, *, k: Any = None) -> Any:
        return x

    arg, result_holder = object(), []
    before = sys.getrefcount(arg)
    with tracing_context(enabled=True, client=tclient, project_name="t"):
        for _ in range(500):
            result_holder.append(f(arg) is arg)
            f(arg, k=arg)
    for _ in range(500):
        f(arg)  # off
    tclient.flush()
    gc.collect()
    assert all(result_holder)
    # the stored runs keep no reference: only their inputs/outputs were serialized
    assert sys.getrefcount(arg) == before


@needs_core
def test_the_call_rejects_bad_use_clearly() -> None:
    assert core is not None
    options = tr._Options("f", "chain", None, None, None, None, None, None, None, None)
    call = core.Call(len, options, lambda a, k: {}, None, 0)
    with pytest.raises(TypeError, match=r"Call\(args: tuple, kwargs: dict\)"):
        call([1], {})
    with pytest.raises(TypeError, match=r"Call\(args: tuple, kwargs: dict\)"):
        call((1,))
    with pytest.raises(TypeError, match="must be callable"):
        core.Call(1, options, len, None, 0)
    with pytest.raises(TypeError, match="names must be a tuple"):
        core.Call(len, options, len, ["x"], 0)
    with pytest.raises(ValueError, match="drop must be 0 or 1"):
        core.Call(len, options, len, None, 2)
    with pytest.raises(AttributeError):
        core.Call(len, object(), len, None, 0)  # not options
    with pytest.raises(TypeError, match="configure"):
        core.configure(None)


# -- the writer's pass ---------------------------------------------------------------------------
def _finish(run: RunTree, outputs: dict[str, Any]) -> None:
    """End a run as a traced call's end does (``patch`` without queueing it)."""
    run.end(outputs=outputs)
    run._closed = True


def _queue(client: Client) -> Iterator[list[Any]]:
    """A writer's queue holding every kind of item, made twice alike (one for each pass)."""
    while True:
        marker = threading.Event()
        root = RunTree("root", "chain", {"q": 1}, client=client, project_name="t")
        root._sent = QUEUED
        done = RunTree("done", "tool", {"x": 1}, parent=root)  # closed: goes whole
        done._sent = QUEUED
        _finish(done, {"output": 2})
        still = RunTree("still", "llm", {}, parent=root)  # open: posted as a wire dict
        still._sent = QUEUED
        ended = RunTree("ended", "tool", {}, parent=root)  # its post went out already
        ended._sent = 1
        _finish(ended, {"output": 3})
        orphan_parent = RunTree("unposted", "chain", {}, client=client, project_name="t")
        orphan = RunTree("orphan", "tool", {}, parent=orphan_parent)  # parent never posted
        orphan._sent = QUEUED
        _finish(orphan, {"output": 4})
        _finish(root, {"output": 1})

        class Sub(RunTree):
            __slots__ = ()

        sub = Sub("sub", "chain", {}, client=client, project_name="t")
        sub._sent = QUEUED
        _finish(sub, {})
        # an integration's runs (never posted): each end queued as it came, the innermost
        # first, so each run's parent is taken after it
        agent = RunTree("agent", "chain", {}, client=client, project_name="t")
        step = RunTree("step", "llm", {}, parent=agent)
        leaf = RunTree("leaf", "tool", {}, parent=step)
        for run in (leaf, step, agent):
            _finish(run, {})
        yield [root, done, still, (1, ended), marker, orphan, sub, "junk", (1, leaf), (1, step),
               (1, agent)]


@needs_core
def test_take_sorts_as_the_python_writer_does(tclient: Client) -> None:
    writer = tclient._tracing_writer()
    make = _queue(tclient)
    py_items, c_items = next(make), next(make)
    py: dict[str, list[Any]] = {"posts": [], "patches": [], "whole": [], "markers": []}
    writer._sort(py_items, py["posts"], py["patches"], py["whole"], py["markers"], True)
    py_rows = rt._rows(py["whole"])
    c: dict[str, list[Any]] = {"posts": [], "patches": [], "markers": []}
    c_rows = writer._take(c_items, c["posts"], c["patches"], c["markers"])
    assert writer.failed == 2  # "junk", once per pass: reported, the rest kept

    dotted = rt.ROW_SLOTS.index("_dotted")

    def plain(rows: list[tuple[Any, ...]], items: list[Any]) -> list[Any]:
        """Rows with ids as queue positions, times and the dotted order left out: a pass may
        leave a dotted order to the fold that the other found cached (both derive it alike)."""
        runs = [i for i in (j[1] if isinstance(j, tuple) else j for j in items)
                if isinstance(i, RunTree)]
        runs += [r.parent for r in runs if r.parent is not None and r.parent not in runs]
        ids = {r._id: n for n, r in enumerate(runs)}
        return [[ids.get(v, "?") if isinstance(v, str) and v in ids else v
                 for j, v in enumerate(row)
                 if j != dotted and (not isinstance(v, int) or v < 10**12)] for row in rows]

    def names(wires: list[dict[str, Any]]) -> list[str]:
        return [w["name"] for w in wires]

    assert [r[4] for r in c_rows] == [r[4] for r in py_rows] == [
        "root", "done", "orphan", "sub", "leaf", "step", "agent"]  # names, in queue order
    assert plain(c_rows, c_items) == plain(py_rows, py_items)
    assert names(c["posts"]) == names(py["posts"]) == ["still"]
    assert names(c["patches"]) == names(py["patches"]) == ["ended"]
    assert len(c["markers"]) == len(py["markers"]) == 1
    states = [[getattr(i, "_sent", None) for i in (j[1] if isinstance(j, tuple) else j
                                                     for j in items) if isinstance(i, RunTree)]
              for items in (py_items, c_items)]
    assert states[0] == states[1] and states[1][-3:] == [2, 2, 2]
    orphan = c_items[5]
    assert orphan._dotted is not None  # settled now: its parent is not stored before it
    for items in (py_items, c_items):  # the integration's: each order made, the writer's way
        leaf, step, agent = (item[1] for item in items[-3:])
        top = dotted_segment_us(agent._start_us, agent._id)
        assert agent._dotted == top
        assert step._dotted == f"{top}.{dotted_segment_us(step._start_us, step._id)}"
        assert leaf._dotted == f"{step._dotted}.{dotted_segment_us(leaf._start_us, leaf._id)}"
        assert [r[dotted] for r in (c_rows if items is c_items else py_rows)][-3:] == [
            leaf._dotted, step._dotted, agent._dotted]  # journaled with them


@needs_core
def test_take_rejects_what_it_cannot_sort() -> None:
    assert core is not None
    with pytest.raises(TypeError, match=r"take\(items: list"):
        core.take((), QUEUED, lambda item: None)
    with pytest.raises(TypeError, match="must return a RunTree or None"):
        core.take(["x"], QUEUED, lambda item: item)
    with pytest.raises(ZeroDivisionError):
        core.take(["x"], QUEUED, lambda item: 1 / 0)


@needs_core
def test_take_hands_what_runtree_never_holds_to_the_python() -> None:
    """Values no RunTree holds (an op or a ``_sent`` past 64 bits, a start before 1970, an
    order that is not text) are not the fast path's: each item goes to ``slow`` as it is,
    with no error and nothing of it changed."""
    assert core is not None
    parent = RunTree("p", "chain", {})
    odd = [RunTree(f"r{i}", "tool", {}, parent=parent) for i in range(4)]
    for run in odd:
        run._closed = True
    odd[1]._sent = 2**70
    odd[2]._start_us = -5
    odd[3]._parent_dotted, odd[3].parent = 7, None
    items = [(2**70, odd[0]), (1, odd[1]), (1, odd[2]), (1, odd[3])]
    seen: list[Any] = []
    assert core.take(items, QUEUED, lambda item: seen.append(item)) == []
    assert seen == items
    assert [r._dotted for r in odd] == [None] * 4 and parent._dotted is None


def test_a_mapping_result_is_recorded_as_a_dict(tclient: Client) -> None:
    @traceable
    def f() -> Mapping[str, int]:
        return MappingProxyType({"a": 1})

    with tracing_context(enabled=True, client=tclient, project_name="t"):
        assert f()["a"] == 1
    tclient.flush()
    assert next(iter(tclient.list_runs(project_name="t"))).outputs == {"a": 1}


@traceable(name="pickled")
def module_level(x: int) -> int:
    return x * 2


def test_a_traced_function_pickles_by_value_and_by_reference(tclient: Client) -> None:
    """Ray sends a target to its workers as the Ray executor pickles it (cloudpickle): by value
    where it is not importable (a closure, the Call inside included), by reference where it
    is."""
    import pickle

    from assay.evaluation._ray import _dumps

    @traceable(name="local")
    def local(x: int) -> int:
        return x + 100

    by_value = pickle.loads(_dumps(local))
    by_ref = pickle.loads(pickle.dumps(module_level))
    assert by_ref is module_level
    with tracing_context(enabled=True, client=tclient, project_name="t"):
        assert by_value(1) == 101 and by_ref(2) == 4
    tclient.flush()
    runs = {r.name: r for r in tclient.list_runs(project_name="t")}
    assert runs["local"].inputs == {"x": 1} and runs["local"].outputs == {"output": 101}
    assert runs["pickled"].outputs == {"output": 4}
