"""Client.list_runs filters and read_run(load_child_runs=True) on traced runs, both backends."""

from __future__ import annotations

import uuid

import pytest

from assay.client import Client
from assay.errors import InvalidInputError, NotFoundError
from assay.tracing import trace, traceable, tracing_context


@pytest.fixture
def traced(client: Client) -> dict[str, object]:
    """Two projects; project a: an ok trace (chain > llm, tool > tool) and a failing one."""

    @traceable(run_type="tool")
    def lookup(k: str) -> str:
        return k.upper()

    @traceable(run_type="tool")
    def flaky() -> None:
        raise RuntimeError("down")

    ex = uuid.uuid4()
    with tracing_context(enabled=True, client=client, project_name="a"):
        with trace("ok", reference_example_id=ex) as ok:
            with trace("model", run_type="llm") as llm:
                llm.set_usage(input_tokens=2, output_tokens=3)
            with trace("tools") as tools:
                lookup("x")
        with pytest.raises(RuntimeError):
            with trace("bad"):
                flaky()
    with trace("other", client=client, project_name="b", enabled=True):
        pass
    client.flush()
    return {"ok": ok, "llm": llm, "tools": tools, "example": ex}


def names(runs: object) -> list[str]:
    return [r.name for r in runs]  # type: ignore[attr-defined]


def test_filters(client: Client, traced: dict) -> None:
    ok, tools = traced["ok"], traced["tools"]
    assert len(names(client.list_runs(project_name="a"))) == 6
    assert names(client.list_runs(project_name="b")) == ["other"]
    assert len(names(client.list_runs(project_name=["a", "b"]))) == 7
    assert names(client.list_runs(project_name="a", run_type="llm")) == ["model"]
    assert sorted(names(client.list_runs(project_name="a", run_type="tool"))) == ["flaky", "lookup"]
    assert names(client.list_runs(trace_id=ok.trace_id)) == ["ok", "model", "tools", "lookup"]
    assert names(client.list_runs(parent_run_id=tools.id)) == ["lookup"]
    assert names(client.list_runs(project_name="a", is_root=True)) == ["ok", "bad"]
    assert sorted(names(client.list_runs(project_name="a", error=True))) == ["bad", "flaky"]
    assert names(client.list_runs(project_name="a", is_root=True, error=False)) == ["ok"]
    assert names(client.list_runs(reference_example_id=traced["example"])) == ["ok"]
    project = client.read_project(project_name="a")
    assert len(names(client.list_runs(project_id=project.id))) == 6
    assert len(names(client.list_runs(project_name="a", limit=2))) == 2


def test_read_run_with_children(client: Client, traced: dict) -> None:
    ok = traced["ok"]
    run = client.read_run(ok.id, load_child_runs=True)
    assert names(run.child_runs) == ["model", "tools"]
    assert names(run.child_runs[1].child_runs) == ["lookup"]
    assert run.child_runs[1].child_runs[0].outputs == {"output": "X"}
    assert run.child_runs[0].total_tokens == 5
    sub = client.read_run(traced["tools"].id, load_child_runs=True)
    assert names(sub.child_runs) == ["lookup"]
    assert client.read_run(ok.id).child_runs is None


def test_bad_lookups_say_what(client: Client, traced: dict) -> None:
    with pytest.raises(NotFoundError):
        client.read_run(uuid.uuid4())
    with pytest.raises(InvalidInputError, match="trace_id"):
        list(client.list_runs(trace_id="not-a-uuid"))
    with pytest.raises(NotFoundError):
        list(client.list_runs(project_name="no-such-project"))
