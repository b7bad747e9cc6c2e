"""trace(...) blocks, tracing_context switches, usage and cost, RunTree.to_run()."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from assay.client import Client
from assay.tracing import RunTree, get_current_run_tree, trace, traceable, tracing_context


def test_trace_block_fields_and_children(tclient: Client) -> None:
    rid = uuid.uuid4()
    with trace("root", inputs={"q": "hi"}, metadata={"m": 1}, tags=["a"], client=tclient,
               project_name="p", run_id=rid, enabled=True) as run:
        assert get_current_run_tree() is run
        assert run.id == rid and run.trace_id == rid and run.parent_run_id is None
        assert isinstance(run.start_time, datetime) and run.start_time.tzinfo is not None
        assert run.metadata == {"m": 1}
        run.add_metadata({"n": 2})
        run.add_tags(["b", "a"])
        run.add_event({"name": "checkpoint"})
        with trace("child", run_type="tool", inputs=5) as child:
            assert child.parent_run_id == run.id and child.trace_id == run.id
            assert child.dotted_order.startswith(run.dotted_order + ".")
        run.end(outputs={"answer": 42})
    assert get_current_run_tree() is None
    tclient.flush()
    stored = tclient.read_run(rid, load_child_runs=True)
    assert stored.inputs == {"q": "hi"} and stored.outputs == {"answer": 42}
    assert stored.metadata["m"] == 1 and stored.metadata["n"] == 2
    assert stored.tags == ["a", "b"]
    assert stored.events[0]["name"] == "checkpoint"
    assert stored.dotted_order == run.dotted_order
    [kid] = stored.child_runs
    assert kid.name == "child" and kid.inputs == {"input": 5} and kid.run_type == "tool"
    assert tclient.read_project(project_name="p").id == stored.session_id


async def test_async_with_and_exception_reraised(tclient: Client) -> None:
    err = ZeroDivisionError("nope")
    with tracing_context(enabled=True, client=tclient, project_name="p"):
        with pytest.raises(ZeroDivisionError) as info:
            async with trace("aroot") as run:
                await asyncio.sleep(0)
                run.end(outputs={"partial": 1})
                raise err
    assert info.value is err
    tclient.flush()
    stored = tclient.read_run(run.id)
    assert stored.error.startswith("ZeroDivisionError: nope")
    assert stored.outputs == {"partial": 1} and stored.status == "error"


def test_reference_example_and_project_id(tclient: Client) -> None:
    project = tclient.create_project("exp")
    ex = uuid.uuid4()
    with trace("target", client=tclient, project_id=project.id, reference_example_id=ex,
               enabled=True) as run:
        pass
    tclient.flush()
    stored = tclient.read_run(run.id)
    assert stored.session_id == project.id and stored.reference_example_id == ex
    assert [r.id for r in tclient.list_runs(reference_example_id=ex)] == [run.id]


def test_tracing_context_scoping(tclient: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    @traceable
    def leaf() -> RunTree | None:
        return get_current_run_tree()

    assert leaf() is None  # default off
    with tracing_context(enabled=True, client=tclient, project_name="ctx",
                         metadata={"env": "test"}, tags=["ctx"]):
        assert leaf() is not None
        with tracing_context(enabled=False):
            assert leaf() is None
            # forced on (as evaluate() does): its descendants are traced again
            with trace("forced", enabled=True) as forced:
                inner = leaf()
                assert inner is not None and inner.parent is forced
                with tracing_context(enabled=False):  # ...unless switched off inside it
                    assert leaf() is forced  # no run of its own
        with tracing_context(metadata={"extra": 1}):
            meta_run = leaf()
    assert meta_run is not None
    assert meta_run.metadata == {"env": "test", "extra": 1} and meta_run.tags == ["ctx"]
    tclient.flush()
    stored = {r.name: r for r in tclient.list_runs(project_name="ctx")}
    assert set(stored) == {"leaf", "forced"}
    assert stored["forced"].metadata["env"] == "test"

    # the environment switch is read live (and cheaply)
    monkeypatch.setenv("ASSAY_TRACING", "true")
    monkeypatch.setenv("ASSAY_PROJECT", "from-env")
    with tracing_context(client=tclient):
        run = leaf()
    assert run is not None and run.session_name == "from-env"
    monkeypatch.setenv("ASSAY_TRACING", "false")
    with tracing_context(client=tclient):
        assert leaf() is None


def test_tracing_context_parent_adopts_runs(tclient: Client) -> None:
    with trace("root", client=tclient, enabled=True, project_name="p") as root:
        pass
    with tracing_context(parent=root):
        with trace("late") as late:
            pass
    assert late.parent_run_id == root.id and late.session_name == "p"


def test_usage_cost_from_genai_prices_explicit_cost_and_unknown_model(tclient: Client) -> None:
    from genai_prices import Usage, calc_price

    expected = calc_price(Usage(input_tokens=1000, output_tokens=500), model_ref="gpt-4o-mini",
                          provider_id="openai")
    with tracing_context(enabled=True, client=tclient, project_name="cost"):
        with trace("priced", run_type="llm") as priced:
            priced.set_usage(input_tokens=1000, output_tokens=500, provider="openai",
                             model="gpt-4o-mini")
        with trace("explicit", run_type="llm") as explicit:
            explicit.set_usage(input_tokens=1000, output_tokens=500, input_cost=0.5,
                               output_cost=0.25, provider="openai", model="gpt-4o-mini")
        with trace("unknown", run_type="llm") as unknown:
            unknown.set_usage(input_tokens=10, output_tokens=5, provider="nobody",
                              model="no-such-model-xyz")
    tclient.flush()
    p = tclient.read_run(priced.id)
    assert p.prompt_tokens == 1000 and p.completion_tokens == 500 and p.total_tokens == 1500
    assert p.metadata["usage_metadata"]["total_tokens"] == 1500
    assert p.metadata["ls_provider"] == "openai" and p.metadata["ls_model_name"] == "gpt-4o-mini"
    assert p.prompt_cost == pytest.approx(float(expected.input_price))
    assert p.completion_cost == pytest.approx(float(expected.output_price))
    assert p.total_cost == pytest.approx(float(expected.total_price))
    e = tclient.read_run(explicit.id)
    assert (e.prompt_cost, e.completion_cost, e.total_cost) == (0.5, 0.25, 0.75)
    u = tclient.read_run(unknown.id)
    assert u.total_tokens == 15 and u.total_cost is None and u.prompt_cost is None
    stats = tclient.read_project(project_name="cost", include_stats=True)
    assert stats.total_tokens == 1500 + 1500 + 15


def test_to_run_gives_the_shared_record_with_children(tclient: Client) -> None:
    @traceable(run_type="tool")
    def search(q: str) -> list[str]:
        return [q]

    with trace("agent", inputs={"q": "x"}, client=tclient, enabled=True) as run:
        search("a")
        with trace("llm", run_type="llm") as llm:
            llm.set_usage(input_tokens=3, output_tokens=4, provider="openai", model="gpt-4o-mini")
            llm.add_event({"name": "new_token", "time": datetime.now(UTC)})
        search("b")
        run.end(outputs={"answer": "y"})
    rec = run.to_run()
    assert rec.id == run.id and rec.outputs == {"answer": "y"} and rec.status == "success"
    assert [c.name for c in rec.child_runs] == ["search", "llm", "search"]
    assert [c.inputs for c in rec.child_runs if c.name == "search"] == [{"q": "a"}, {"q": "b"}]
    llm_rec = rec.child_runs[1]
    assert llm_rec.total_tokens == 7 and llm_rec.total_cost and llm_rec.total_cost > 0
    assert llm_rec.first_token_time is not None
    assert rec.latency is not None and rec.latency >= timedelta(0)


def test_manual_run_tree_post_and_patch(tclient: Client) -> None:
    run = RunTree("manual", "chain", {"a": 1}, client=tclient, project_name="m")
    run.post()
    tclient.flush()
    assert tclient.read_run(run.id).status == "pending"  # the start is stored before the end
    child = run.create_child("step", "parser", {"text": "x"})
    child.end(outputs={"parsed": True})
    child.patch()
    run.end(outputs={"done": True})
    run.patch()
    tclient.flush()
    stored = tclient.read_run(run.id, load_child_runs=True)
    assert stored.status == "success" and stored.outputs == {"done": True}
    assert stored.child_runs[0].outputs == {"parsed": True}


def test_llm_function_in_langsmith_style(tclient: Client) -> None:
    """usage in the outputs (or set on the current run), model and provider in metadata."""

    @traceable(run_type="llm", metadata={"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"})
    def chat(prompt: str) -> dict:
        return {"content": prompt[::-1],
                "usage_metadata": {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30}}

    @traceable(run_type="llm")
    def chat2(prompt: str) -> str:
        get_current_run_tree().set_usage(  # type: ignore[union-attr]
            input_tokens=4, output_tokens=6, provider="openai", model="gpt-4o-mini")
        return prompt

    with tracing_context(enabled=True, client=tclient, project_name="ls"):
        chat("abc")
        chat2("x")
    tclient.flush()
    runs = {r.name: r for r in tclient.list_runs(project_name="ls")}
    assert runs["chat"].total_tokens == 30 and runs["chat"].total_cost > 0
    assert runs["chat2"].total_tokens == 10 and runs["chat2"].total_cost > 0
    assert runs["chat2"].metadata["usage_metadata"]["input_tokens"] == 4


def _as_json(value: object) -> object:
    from assay._json import dumpb, loads

    return loads(dumpb(value))


def test_a_finished_run_s_journal_row_holds_its_wire_dict(tclient: Client) -> None:
    """``_row`` (what the local writer journals), read back as the fold reads it, is ``_wire``
    (what goes to a server): metadata and the shared runtime moved into extra, None where the
    dict leaves a key out; a root's dotted order is left to the fold, which derives the same."""
    from assay.store._journal import _row_posts
    from assay.tracing._run_tree import ROW

    ref, project = uuid.uuid4(), uuid.uuid4()
    root = RunTree("root", "chain", {"q": 1}, client=tclient, project_id=project,
                   reference_example_id=ref, metadata={"m": 1}, tags=["a"],
                   extra={"runtime": {"sdk": "mine"}, "other": 2})
    child = root.create_child("llm", "llm", {"p": "x"})
    child.add_event({"name": "new_token", "time": "2026-01-01T00:00:00+00:00"})
    child.end(error=ValueError("bad"))
    plain = RunTree("plain", "tool", {}, client=tclient, project_name="named")
    rows = []
    for run in (child, root, plain):  # the child first: its row names its parent's order
        if run is not child:
            run.end(outputs={"ok": True})
        else:  # its parent was never queued: the writer settles its order itself (see _sort)
            assert run.dotted_order
        row = ROW(run)
        assert len(row) == len(RunTree.ROW_COLUMNS)
        rows.append(row)
    back = _row_posts(_as_json(rows), RunTree.ROW_COLUMNS, RunTree.ROW_EXTRA)
    for run, post in zip((child, root, plain), back, strict=True):
        wire = _as_json(run._wire(True, micros=True))
        assert wire["dotted_order"] == run.dotted_order
        if run is plain:  # a root no child asked about: its order is the fold's to derive
            assert post.pop("dotted_order") is None
            del wire["dotted_order"]
        assert {k: v for k, v in post.items() if v is not None or k in wire} == wire
    assert back[1]["reference_example_id"] == str(ref)
    assert back[0]["trace_id"] == str(root.id) and back[0]["parent_run_id"] == str(root.id)
    assert back[1]["extra"]["runtime"] == {"sdk": "mine"}  # the run's own wins
    assert back[2]["extra"]["runtime"] == RunTree.ROW_EXTRA["runtime"]
    fresh = RunTree("fresh", "chain", {}, client=tclient, project_name="named")
    for run in (root, child, plain, fresh):
        run.end()
        run.patch()
    tclient.flush()
    assert fresh._dotted is None  # journaled without one: the fold derived what is stored
    for run in (root, child, plain, fresh):
        assert tclient.read_run(run.id).dotted_order == run.dotted_order
