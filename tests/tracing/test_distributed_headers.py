"""Distributed tracing with LangSmith's headers: a run's ``to_headers()`` in one service,
``langsmith_extra={"parent": headers}`` / ``tracing_context(parent=headers)`` /
``trace(parent=headers)`` / ``RunTree.from_headers`` in the next, which continues the trace
under that run (its trace, its project, its baggage's metadata and tags) without writing it;
the headers are LangSmith's own both ways. And ``LANGSMITH_TRACING_SAMPLING_RATE`` read where
``ASSAY_TRACING_SAMPLING_RATE`` is unset."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import langsmith.run_trees as ls_run_trees
import pytest

from assay.client import Client
from assay.errors import InvalidInputError
from assay.tracing import (
    RunTree,
    get_current_run_tree,
    trace,
    traceable,
    tracing_context,
)
from assay.tracing._sampling import keep_below


def _service_a(client: Client) -> tuple[uuid.UUID, dict[str, str]]:
    """Service A: a traced handler that calls service B with its run's headers."""
    sent: dict[str, dict[str, str]] = {}

    @traceable(tags=["svc-a"])
    def handle(q: str) -> str:
        run = get_current_run_tree()
        assert run is not None
        sent["headers"] = run.to_headers()
        return q

    with tracing_context(enabled=True, client=client, project_name="svc-a",
                         metadata={"tenant": "t-1"}):
        with trace("request") as root:
            handle("hi")
    client.flush()
    return root.id, sent["headers"]


@traceable
def _tool(x: int) -> int:
    return x * 2


@traceable
def _handler(x: int) -> int:
    return _tool(x) + 1


def _b_runs(client: Client) -> dict[int, Any]:
    """Service B's handler runs stored in A's project, by their input."""
    client.flush()
    return {r.inputs["x"]: r for r in client.list_runs(project_name="svc-a", run_type="chain")
            if r.name == "_handler"}


def test_b_continues_a_trace_from_its_headers(tclient: Client, wrapper: bool) -> None:
    root_id, headers = _service_a(tclient)
    assert set(headers) == {"langsmith-trace", "baggage"}
    a_handle = next(r for r in tclient.list_runs(project_name="svc-a") if r.name == "handle")
    assert headers["langsmith-trace"] == a_handle.dotted_order
    asgi_style = {k.title().encode(): v.encode() for k, v in headers.items()}  # any case, bytes

    # Service B: tracing off by default, its own project; the headers decide where runs go
    with tracing_context(client=tclient, project_name="svc-b"):
        assert _handler(1, langsmith_extra={"parent": headers}) == 3
        with tracing_context(parent=headers):
            assert _handler(2) == 5
        assert _handler(3, langsmith_extra={"parent": asgi_style}) == 7
        with tracing_context(parent=headers["langsmith-trace"]):  # the dotted order alone:
            _handler(4)  # no baggage, so B's project

    got = _b_runs(tclient)
    assert sorted(got) == [1, 2, 3]
    (got[4],) = [r for r in tclient.list_runs(project_name="svc-b") if r.name == "_handler"]
    for x, run in got.items():
        assert run.parent_run_id == a_handle.id, x
        assert run.trace_id == root_id
        assert run.dotted_order.startswith(a_handle.dotted_order + ".")
        assert run.dotted_order.count(".") == a_handle.dotted_order.count(".") + 1
        if x != 4:  # the baggage's metadata and tags (the dotted order alone has none)
            assert run.extra["metadata"]["tenant"] == "t-1"
            assert "svc-a" in run.tags
    tools = [r for r in tclient.list_runs(project_name="svc-a") if r.name == "_tool"]
    tools += [r for r in tclient.list_runs(project_name="svc-b") if r.name == "_tool"]
    assert len(tools) == 4 and {t.parent_run_id for t in tools} == {r.id for r in got.values()}
    for t in tools:
        assert t.trace_id == root_id
        assert t.dotted_order.startswith(got[t.inputs["x"]].dotted_order + ".")
    # A's trace read back holds B's runs under A's handler; A's run was not written again
    tree = tclient.read_run(root_id, load_child_runs=True)
    handle = tree.child_runs[0]
    assert handle.id == a_handle.id and handle.name == "handle"
    assert sorted(c.inputs["x"] for c in handle.child_runs) == [1, 2, 3, 4]
    assert all(c.child_runs[0].name == "_tool" for c in handle.child_runs)
    names = [r.name for r in tclient.list_runs(project_name="svc-a")]
    assert sorted(names) == sorted(["request", "handle"] + ["_handler", "_tool"] * 3)


def test_trace_block_and_from_headers_as_parent(tclient: Client) -> None:
    root_id, headers = _service_a(tclient)
    with tracing_context(enabled=True, client=tclient, project_name="svc-b"):
        with trace("b-block", parent=headers, metadata={"own": 1}) as block:
            _tool(5)
        parent = RunTree.from_headers(headers)
        assert parent is not None
        assert parent.session_name == "svc-a" and parent.metadata == {"tenant": "t-1"}
        child = parent.create_child("b-manual", inputs={"x": 6})
        child.post()
        child.end(outputs={"ok": True})
        child.patch()
        parent.post()  # the remote parent itself is never written here
        parent.end()
        parent.patch()
    tclient.flush()
    got = {r.name: r for r in tclient.list_runs(project_name="svc-a")}
    a_handle = got["handle"]
    assert got["b-block"].id == block.id and got["b-block"].parent_run_id == a_handle.id
    assert got["b-block"].extra["metadata"]["tenant"] == "t-1"
    assert got["b-block"].extra["metadata"]["own"] == 1
    assert got["_tool"].parent_run_id == block.id and got["_tool"].trace_id == root_id
    assert got["b-manual"].parent_run_id == a_handle.id and got["b-manual"].trace_id == root_id
    assert got["b-manual"].dotted_order.startswith(a_handle.dotted_order + ".")
    assert "parent" not in got and tclient.read_run(a_handle.id).end_time == a_handle.end_time


def test_headers_without_a_trace_give_no_parent(tclient: Client) -> None:
    assert RunTree.from_headers({}) is None
    assert RunTree.from_headers({"baggage": "langsmith-project=x", "langsmith-trace": ""}) is None
    with tracing_context(enabled=True, client=tclient, project_name="svc-b"):
        _handler(7, langsmith_extra={"parent": {"accept": "*/*"}})  # traced as a root
        with tracing_context(parent={}):
            _handler(8)
    tclient.flush()
    runs = [r for r in tclient.list_runs(project_name="svc-b") if r.name == "_handler"]
    assert sorted(r.inputs["x"] for r in runs) == [7, 8]
    assert all(r.parent_run_id is None for r in runs)


def test_langsmith_headers_are_read_by_assay(tclient: Client) -> None:
    """Headers made by the LangSmith SDK itself (a root and a child run)."""
    ls_root = ls_run_trees.RunTree(name="ls-root", project_name="ls-proj",
                                   extra={"metadata": {"user": "u-9", "n": 2}},
                                   tags=["from-ls", "b"])
    ls_child = ls_root.create_child(name="ls-child")
    for ls_run in (ls_root, ls_child):
        headers = ls_run.to_headers()
        parent = RunTree.from_headers(headers)
        assert parent is not None
        assert parent.id == ls_run.id and parent.trace_id == ls_root.id
        assert parent.parent_run_id == ls_run.parent_run_id
        assert parent.dotted_order == ls_run.dotted_order
        assert parent.session_name == "ls-proj"
        assert parent.metadata == {"user": "u-9", "n": 2}
        assert parent.tags == ls_run.tags  # (LangSmith's child carries none)
    with tracing_context(client=tclient):
        _handler(9, langsmith_extra={"parent": ls_child.to_headers()})
    tclient.flush()
    run = next(r for r in tclient.list_runs(project_name="ls-proj") if r.name == "_handler")
    assert run.parent_run_id == ls_child.id and run.trace_id == ls_root.id
    assert run.dotted_order.startswith(ls_child.dotted_order + ".")
    assert run.extra["metadata"]["user"] == "u-9"


def test_assay_headers_are_read_by_langsmith(tclient: Client) -> None:
    with tracing_context(enabled=True, client=tclient, project_name="svc-a"):
        with trace("root", metadata={"tenant": "t-1", "deep": {"k": [1, "a,b"]}},
                   tags=["t1", "t 2"]) as root:
            with trace("step") as step:
                pass
    for run, parent_id in ((root, None), (step, root.id)):
        ls_parent = ls_run_trees.RunTree.from_headers(run.to_headers())
        assert ls_parent is not None
        assert ls_parent.id == run.id and ls_parent.trace_id == root.id
        assert ls_parent.parent_run_id == parent_id
        assert ls_parent.dotted_order == run.dotted_order
        assert ls_parent.session_name == "svc-a"
        assert ls_parent.metadata == dict(run.metadata)
        assert sorted(ls_parent.tags or []) == sorted(run.tags)
        ours = RunTree.from_headers(run.to_headers())  # and assay's own reading agrees
        assert ours is not None and ours.dotted_order == run.dotted_order
        assert ours.metadata == dict(run.metadata) and ours.tags == list(run.tags)


@pytest.mark.parametrize("bad", ["garbage", " ", "20240101T000000000000Znot-a-uuid",
                                 "20240101T000000000000Z8f0c5b9e-3d2a-4c1e-9b7a-2f6d4e1a0c3b.junk"])
def test_a_malformed_trace_header_is_refused_by_name(tclient: Client, bad: str) -> None:
    """LangSmith raises (a ValueError) on a trace header it cannot parse; so does assay, with
    an InvalidInputError (a ValueError) naming the header."""
    headers = {"langsmith-trace": bad, "baggage": ""}
    with pytest.raises(ValueError):
        ls_run_trees.RunTree.from_headers(headers)
    match = "malformed 'langsmith-trace' header"
    with pytest.raises(InvalidInputError, match=match):
        RunTree.from_headers(headers)
    with tracing_context(client=tclient):
        with pytest.raises(InvalidInputError, match=match):
            _handler(1, langsmith_extra={"parent": headers})
        with pytest.raises(InvalidInputError, match=match), tracing_context(parent=headers):
            pass
    with pytest.raises(InvalidInputError, match="langsmith_extra\\['parent'\\]"):
        _handler(1, langsmith_extra={"parent": 42})


def test_an_unreadable_baggage_is_left_out() -> None:
    dotted = "20240101T000000000000Z" + str(uuid.uuid4())
    parent = RunTree.from_headers({"langsmith-trace": dotted,
                                   "baggage": "langsmith-metadata=%7Bnot-json,other=1"})
    assert parent is not None and parent.dotted_order == dotted and not parent.metadata


# -- LANGSMITH_TRACING_SAMPLING_RATE --------------------------------------------------------------
def test_langsmith_sampling_rate_is_read_when_assay_s_is_unset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSAY_TRACING_SAMPLING_RATE", raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING_SAMPLING_RATE", "0.5")
    assert keep_below() == 1 << 31
    monkeypatch.setenv("ASSAY_TRACING_SAMPLING_RATE", "1")  # assay's wins when set
    assert keep_below() is None
    monkeypatch.setenv("ASSAY_TRACING_SAMPLING_RATE", " ")  # blank: as unset
    assert keep_below() == 1 << 31
    monkeypatch.delenv("ASSAY_TRACING_SAMPLING_RATE")
    monkeypatch.setenv("LANGSMITH_TRACING_SAMPLING_RATE", "0")
    client = Client(database_url=f"sqlite:///{tmp_path / 'ls-rate.db'}")  # a writer of its own
    try:
        with trace("marker", client=client, project_name="other", enabled=True):
            pass
        with tracing_context(enabled=True, client=client, project_name="svc"):
            for i in range(10):
                _handler(i)
        client.flush()
        assert "svc" not in {p.name for p in client.list_projects()}  # nothing kept
    finally:
        client.close()
    monkeypatch.setenv("LANGSMITH_TRACING_SAMPLING_RATE", "lots")
    with pytest.raises(InvalidInputError, match="LANGSMITH_TRACING_SAMPLING_RATE must be a "
                                                "number from 0 to 1"):
        keep_below()


def test_a_client_s_own_sampling_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Client(tracing_sampling_rate=...)``, LangSmith's keyword: the traces made with that
    client are sampled at its rate (whole traces), over the environment's; another client of
    the same store (sharing its writer) keeps its own."""
    monkeypatch.delenv("ASSAY_TRACING_SAMPLING_RATE", raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING_SAMPLING_RATE", "0")  # the process keeps nothing
    url = f"sqlite:///{tmp_path / 'client-rate.db'}"
    half = Client(database_url=url, tracing_sampling_rate=0.5)
    every = Client(store=half.store, tracing_sampling_rate=1.0)
    default = Client(store=half.store)
    try:
        for client, project in ((half, "half"), (every, "every"), (default, "default")):
            with tracing_context(enabled=True, client=client, project_name=project):
                for i in range(200):
                    _handler(i)
        half.flush()
        roots = {p: list(half.list_runs(project_name=p, is_root=True))
                 for p in ("half", "every")}
        assert len(roots["every"]) == 200
        assert 60 < len(roots["half"]) < 140  # a hash of each trace id: about half
        kept = {r.trace_id for r in roots["half"]}
        children = list(half.list_runs(project_name="half", is_root=False))
        assert children and {r.trace_id for r in children} <= kept  # with their roots
        assert "default" not in {p.name for p in half.list_projects()}
    finally:
        half.close()
    with pytest.raises(InvalidInputError, match=r"tracing_sampling_rate must be a number from "
                                                r"0 to 1 \(the share of traces kept\), got 2"):
        Client(database_url=url, tracing_sampling_rate=2)
