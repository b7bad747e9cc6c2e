"""@traceable on sync, async, generator and async-generator functions: runs, nesting, errors."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from assay.client import Client
from assay.errors import InvalidInputError
from assay.tracing import get_current_run_tree, trace, traceable, tracing_context

DOTTED_SEGMENT = re.compile(r"^\d{8}T\d{12}Z[0-9a-f-]{36}$")


def runs_by_name(client: Client, project: str = "t") -> dict[str, Any]:
    client.flush()
    return {r.name: r for r in client.list_runs(project_name=project)}


def on(client: Client, project: str = "t") -> Any:
    return tracing_context(enabled=True, client=client, project_name=project)


def test_sync_nesting_inputs_outputs_and_wire_fields(tclient: Client) -> None:
    @traceable(run_type="tool")
    def add(a: int, b: int = 2, *rest: int, **opts: Any) -> int:
        return a + b + sum(rest)

    @traceable
    def chain(x: int) -> dict[str, int]:
        return {"sum": add(x) + add(x, 5, 1, 1, flag=True)}

    with on(tclient):
        assert chain(1) == {"sum": 3 + 8}
    tclient.flush()
    runs = list(tclient.list_runs(project_name="t"))
    assert [r.name for r in runs] == ["chain", "add", "add"]
    root, first, second = runs
    assert root.run_type == "chain" and first.run_type == "tool"
    assert root.inputs == {"x": 1} and root.outputs == {"sum": 11}
    assert first.inputs == {"a": 1, "b": 2} and first.outputs == {"output": 3}
    # extra positionals under the *args name, **kwargs flattened (LangSmith's convention)
    assert second.inputs == {"a": 1, "b": 5, "rest": [1, 1], "flag": True}
    for child in (first, second):
        assert child.parent_run_id == root.id and child.trace_id == root.id
        assert child.dotted_order.startswith(root.dotted_order + ".")
        assert all(DOTTED_SEGMENT.match(s) for s in child.dotted_order.split("."))
    assert root.parent_run_id is None and root.trace_id == root.id
    assert root.id.version == 7
    assert root.status == "success" and root.end_time >= root.start_time
    assert first.dotted_order < second.dotted_order  # execution order


def test_methods_drop_self(tclient: Client) -> None:
    class Agent:
        @traceable(name="Agent.act")
        def act(self, query: str) -> str:
            return query.upper()

    with on(tclient):
        assert Agent().act("hi") == "HI"
    run = runs_by_name(tclient)["Agent.act"]
    assert run.inputs == {"query": "hi"}


async def test_async_functions_nest_across_tasks(tclient: Client) -> None:
    @traceable(run_type="retriever")
    async def fetch(q: str) -> list[str]:
        await asyncio.sleep(0.001)
        return [q, q]

    @traceable
    async def pipeline(q: str) -> int:
        docs = await asyncio.gather(fetch(q + "1"), fetch(q + "2"))
        return sum(len(d) for d in docs)

    with on(tclient):
        assert await pipeline("q") == 4
    tclient.flush()
    runs = list(tclient.list_runs(project_name="t"))
    root = next(r for r in runs if r.name == "pipeline")
    kids = [r for r in runs if r.name == "fetch"]
    assert len(kids) == 2 and all(k.parent_run_id == root.id for k in kids)
    assert {k.inputs["q"] for k in kids} == {"q1", "q2"}
    assert all(k.run_type == "retriever" for k in kids)


def test_generator_collects_items_and_first_token(tclient: Client) -> None:
    @traceable(run_type="tool")
    def inner() -> int:
        return 7

    @traceable(run_type="llm")
    def stream(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            inner()
            yield f"tok{i}"

    @traceable
    def consumer() -> str:
        parts = []
        for tok in stream(3):
            # between items the caller is NOT inside the generator's run
            assert get_current_run_tree().name == "consumer"  # type: ignore[union-attr]
            parts.append(tok)
        return "".join(parts)

    with on(tclient):
        assert consumer() == "tok0tok1tok2"
    tclient.flush()
    runs = list(tclient.list_runs(project_name="t"))
    by_id = {r.id: r for r in runs}
    gen = next(r for r in runs if r.name == "stream")
    assert gen.outputs == {"output": ["tok0", "tok1", "tok2"]}
    assert by_id[gen.parent_run_id].name == "consumer"
    inners = [r for r in runs if r.name == "inner"]
    assert len(inners) == 3 and all(r.parent_run_id == gen.id for r in inners)
    [ev] = gen.events
    assert ev["name"] == "new_token"
    assert gen.first_token_time is not None
    assert gen.start_time <= gen.first_token_time <= gen.end_time


def test_generator_send_return_value_and_early_close(tclient: Client) -> None:
    @traceable
    def echo():  # type: ignore[no-untyped-def]
        got = yield "ready"
        while got is not None:
            got = yield f"echo {got}"
        return "done"

    @traceable
    def three():  # type: ignore[no-untyped-def]
        yield from (1, 2, 3)

    with on(tclient):
        g = echo()
        assert next(g) == "ready"
        assert g.send("a") == "echo a"
        with pytest.raises(StopIteration) as stop:
            g.send(None)
        assert stop.value.value == "done"
        it = three()
        assert next(it) == 1
        it.close()  # consumer stops early: the run keeps what was produced
    runs = runs_by_name(tclient)
    assert runs["echo"].outputs == {"output": ["ready", "echo a"]}
    assert runs["three"].outputs == {"output": [1]} and runs["three"].error is None
    assert runs["three"].end_time is not None


async def test_async_generator_with_reduce_fn(tclient: Client) -> None:
    @traceable(run_type="llm", reduce_fn=lambda items: {"text": "".join(items)})
    async def astream(words: list[str]):  # type: ignore[no-untyped-def]
        for w in words:
            await asyncio.sleep(0)
            assert get_current_run_tree().name == "astream"  # type: ignore[union-attr]
            yield w

    with on(tclient):
        out = [w async for w in astream(["a", "b", "c"])]
        assert get_current_run_tree() is None
    assert out == ["a", "b", "c"]
    run = runs_by_name(tclient)["astream"]
    assert run.outputs == {"text": "abc"}
    assert run.events and run.events[0]["name"] == "new_token"


class Boom(RuntimeError):
    pass


def test_crash_is_recorded_and_same_exception_reraised(tclient: Client) -> None:
    err = Boom("tool exploded")

    @traceable(run_type="tool")
    def tool() -> None:
        raise err

    @traceable
    def agent() -> None:
        tool()

    with on(tclient):
        with pytest.raises(Boom) as info:
            agent()
    assert info.value is err
    runs = runs_by_name(tclient)
    for name in ("tool", "agent"):
        run = runs[name]
        assert run.status == "error"
        assert run.error.startswith("Boom: tool exploded")
        assert "Traceback" in run.error and "raise err" in run.error
        assert run.end_time is not None
    assert list(tclient.list_runs(project_name="t", error=True, is_root=True))[0].name == "agent"


async def test_async_and_generator_crashes_reraise_same_object(tclient: Client) -> None:
    err1, err2, err3 = ValueError("a"), KeyError("b"), OSError("c")

    @traceable
    async def acrash() -> None:
        await asyncio.sleep(0)
        raise err1

    @traceable
    def gcrash():  # type: ignore[no-untyped-def]
        yield 1
        raise err2

    @traceable
    async def agcrash():  # type: ignore[no-untyped-def]
        yield 1
        raise err3

    with on(tclient):
        with pytest.raises(ValueError) as i1:
            await acrash()
        with pytest.raises(KeyError) as i2:
            list(gcrash())
        with pytest.raises(OSError) as i3:
            [x async for x in agcrash()]
    assert (i1.value, i2.value, i3.value) == (err1, err2, err3)
    assert i1.value is err1 and i2.value is err2 and i3.value is err3
    runs = runs_by_name(tclient)
    assert runs["acrash"].error.startswith("ValueError: a")
    assert runs["gcrash"].error.startswith("KeyError: 'b'")
    assert runs["gcrash"].outputs is None
    assert runs["agcrash"].error.startswith("OSError: c")


def test_process_inputs_outputs_metadata_tags(tclient: Client) -> None:
    @traceable(name="login", metadata={"team": "a"}, tags=["auth"],
               process_inputs=lambda d: {k: v for k, v in d.items() if k != "password"},
               process_outputs=lambda out: {"ok": out})
    def login(user: str, password: str) -> bool:
        return password == "pw"

    with on(tclient):
        assert login("ann", "pw") is True
    run = runs_by_name(tclient)["login"]
    assert run.inputs == {"user": "ann"}
    assert run.outputs == {"ok": True}
    assert run.metadata["team"] == "a" and run.tags == ["auth"]


def test_bad_arguments_are_named() -> None:
    with pytest.raises(InvalidInputError, match="run_type must be one of"):
        traceable(run_type="agent")(lambda: None)
    with pytest.raises(InvalidInputError, match="needs a function"):
        traceable(42)  # type: ignore[call-overload]
    with pytest.raises(InvalidInputError, match="tags"):
        traceable(tags="x")(lambda: None)
    with pytest.raises(InvalidInputError, match="run_type"):
        trace("x", run_type="bogus")


def test_run_type_positional_and_all_types(tclient: Client) -> None:
    fns = {}
    for rt in ("chain", "llm", "tool", "retriever", "embedding", "prompt", "parser"):
        fns[rt] = traceable(rt, name=f"f_{rt}")(lambda rt=rt: rt)  # type: ignore[call-overload]
    with on(tclient):
        for f in fns.values():
            f()
    runs = runs_by_name(tclient)
    assert {r.run_type for r in runs.values()} == set(fns)


def test_switched_off_calls_straight_through(tclient: Client) -> None:
    calls = []

    @traceable
    def f(x: int) -> int:
        calls.append(get_current_run_tree())
        return x * 2

    assert f(2) == 4  # ASSAY_TRACING unset: off
    with tracing_context(enabled=False, client=tclient):
        assert f(3) == 6
    assert calls == [None, None]
    assert "_run_writer" not in tclient.__dict__  # nothing queued, no writer made
    with trace("ignored", client=tclient) as run:  # off: a detached run, not current
        assert get_current_run_tree() is None
        run.add_metadata({"k": 1})
    assert "_run_writer" not in tclient.__dict__


@pytest.mark.parametrize("enabled", [True, False])
async def test_async_generator_asend_and_athrow_are_forwarded(tclient: Client,
                                                             enabled: bool) -> None:
    @traceable
    async def acc():  # type: ignore[no-untyped-def]
        total = 0
        while True:
            try:
                got = yield total
            except ValueError:
                got = -total  # the generator handles a thrown error and goes on
            total += got

    with tracing_context(enabled=enabled, client=tclient, project_name="t"):
        g = acc()
        assert await g.asend(None) == 0
        assert await g.asend(5) == 5
        assert await g.athrow(ValueError("reset")) == 0
        assert await g.asend(2) == 2
        await g.aclose()
    tclient.flush()
    if not enabled:
        assert "_run_writer" not in tclient.__dict__  # nothing was traced
        return
    [run] = list(tclient.list_runs(project_name="t"))
    assert run.outputs == {"output": [0, 5, 0, 2]} and run.error is None


def test_broken_hooks_never_break_the_call(tclient: Client,
                                          caplog: pytest.LogCaptureFixture) -> None:
    def bad(_: Any) -> Any:
        raise TypeError("hook bug")

    @traceable(process_inputs=bad, process_outputs=bad)
    def f(x: int) -> int:
        return x + 1

    with on(tclient):
        assert f(1) == 2
    run = runs_by_name(tclient)["f"]
    assert run.inputs == {"x": 1} and run.outputs == {"output": 2}
    assert "process_inputs of f failed" in caplog.text
