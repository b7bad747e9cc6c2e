"""``POST /api/v2/runs/query``: the official SDK's ``client.runs.query`` against the server,
and the request forms it refuses."""

from __future__ import annotations

import asyncio
import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from .conftest import Workspace


def _tree(ws: Workspace, project: str, start: datetime, **root_fields: Any) -> dict[str, str]:
    """A chain with an llm child (usage, a known model, a streamed first token) and a tool."""
    ids = {k: str(uuid.uuid4()) for k in ("root", "llm", "tool")}

    def seg(t: datetime, rid: str) -> str:
        return t.strftime("%Y%m%dT%H%M%S%fZ") + rid

    root_order = seg(start, ids["root"])
    t_llm, t_tool = start + timedelta(milliseconds=10), start + timedelta(milliseconds=500)
    posts = [
        {"id": ids["root"], "trace_id": ids["root"], "name": "agent", "run_type": "chain",
         "start_time": start.isoformat(), "end_time": (start + timedelta(seconds=1)).isoformat(),
         "dotted_order": root_order, "session_name": project, "inputs": {"q": "x" * 500},
         "extra": {"metadata": {"thread_id": "conv-1", "user": "u1"}}, **root_fields},
        {"id": ids["llm"], "trace_id": ids["root"], "parent_run_id": ids["root"], "name": "chat",
         "run_type": "llm", "start_time": t_llm.isoformat(),
         "end_time": (t_llm + timedelta(milliseconds=400)).isoformat(),
         "dotted_order": f"{root_order}.{seg(t_llm, ids['llm'])}", "session_name": project,
         "events": [{"name": "new_token",
                     "time": (t_llm + timedelta(milliseconds=50)).isoformat()}],
         "extra": {"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                                "usage_metadata": {"input_tokens": 1000, "output_tokens": 200,
                                                   "total_tokens": 1200}}}},
        {"id": ids["tool"], "trace_id": ids["root"], "parent_run_id": ids["root"],
         "name": "search", "run_type": "tool", "start_time": t_tool.isoformat(),
         "end_time": (t_tool + timedelta(milliseconds=100)).isoformat(),
         "dotted_order": f"{root_order}.{seg(t_tool, ids['tool'])}", "session_name": project,
         "error": "TimeoutError: slow"},
    ]
    resp = ws.http.post("/runs/batch", json={"post": posts})
    assert resp.status_code == 202, resp.text
    return ids


def _query(ws: Workspace, **params: Any) -> list[Any]:
    from langsmith import Client as LangSmithClient

    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)

    async def collect() -> list[Any]:
        return [run async for run in ls.runs.query(**params)]

    return asyncio.run(collect())


def test_runs_query_with_the_official_client(ws: Workspace) -> None:
    now = datetime.now(UTC)
    recent = _tree(ws, "v2", now - timedelta(hours=1))
    old = _tree(ws, "v2", now - timedelta(days=3))
    pid = str(ws.store.projects.read(project_name="v2").id)
    ws.store.feedback.create_many([
        {"run_id": recent["root"], "key": "correct", "score": 1, "comment": "fine"},
        {"run_id": recent["root"], "key": "correct", "score": 0}])

    # by default the last day only, newest first, and only the id
    default = _query(ws, project_ids=[pid])
    assert {r.id for r in default} == set(recent.values()) and default[0].name is None
    everything = _query(ws, project_ids=[pid], min_start_time=now - timedelta(days=7),
                        page_size=2, selects=["ID"])  # pages of 2, followed by the client
    assert sorted(r.id for r in everything) == sorted([*recent.values(), *old.values()])

    fields = ["ID", "NAME", "RUN_TYPE", "STATUS", "LATENCY_SECONDS", "PARENT_RUN_IDS",
              "THREAD_ID", "IS_ROOT", "METADATA", "INPUTS_PREVIEW", "ERROR_PREVIEW",
              "TOTAL_TOKENS", "TOTAL_COST", "FIRST_TOKEN_TIME", "PROJECT_ID", "FEEDBACK_STATS"]
    runs = {r.name: r for r in _query(ws, project_ids=[pid], selects=fields)}
    root, llm, tool = runs["agent"], runs["chat"], runs["search"]
    assert (root.status, tool.status) == ("SUCCESS", "ERROR")
    assert root.latency_seconds == pytest.approx(1.0) and root.is_root and not llm.is_root
    assert llm.parent_run_ids == [recent["root"]] and root.parent_run_ids == []
    assert root.thread_id == "conv-1" and root.metadata == {"thread_id": "conv-1", "user": "u1"}
    assert len(root.inputs_preview) == 200 and tool.error_preview == "TimeoutError: slow"
    assert llm.total_tokens == 1200 and llm.total_cost > 0 and root.total_tokens is None
    assert llm.project_id == pid and llm.first_token_time is not None
    stats = root.feedback_stats["correct"]
    assert (stats.n, stats.avg, stats.min, stats.max) == (2, 0.5, 0.0, 1.0)
    assert stats.stdev == pytest.approx(0.7071, abs=1e-4) and stats.comments == ["fine"]

    # a chain with the usage of what it called
    rolled = _query(ws, project_ids=[pid], is_root=True, include_subtree_usage=True,
                    selects=["NAME", "TOTAL_TOKENS", "TOTAL_COST", "FIRST_TOKEN_TIME"])
    assert [(r.name, r.total_tokens) for r in rolled] == [("agent", 1200)]
    assert rolled[0].total_cost == pytest.approx(llm.total_cost)
    assert rolled[0].first_token_time == llm.first_token_time

    # the run's page (client.runs.get_url, which replaces get_run_url): this server's web UI
    from langsmith import Client as LangSmithClient

    async def url_of(**params: Any) -> str:
        ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
        return (await ls.runs.get_url(**params)).url

    url = asyncio.run(url_of(run_id=recent["llm"], project_id=pid, trace_id=recent["root"]))
    assert url == f"{ws.server.url}/ui/runs/{recent['llm']}"
    with pytest.raises(Exception, match="404"):  # a trace the run is not in
        asyncio.run(url_of(run_id=recent["llm"], project_id=pid, trace_id=old["root"]))

    # filters, the error flag, the trace
    # (the filter language's usage of a chain is its llm calls', as in list_runs)
    assert sorted(r.name for r in _query(ws, project_ids=[pid], filter='gt(total_tokens, 1000)',
                                         selects=["NAME"])) == ["agent", "chat"]
    assert [r.name for r in _query(ws, project_ids=[pid], has_error=True,
                                   selects=["NAME"])] == ["search"]
    assert {r.name for r in _query(ws, project_ids=[pid], trace_id=recent["root"],
                                   tree_filter='eq(run_type, "tool")', selects=["NAME"])} == \
        {"agent", "chat", "search"}


def test_runs_query_by_dataset_and_refusals(ws: Workspace) -> None:
    ds = ws.http.post("/datasets", json={"name": "v2-ds"}).json()
    ex = ws.http.post("/examples/bulk", json=[{"dataset_id": ds["id"], "inputs": {"q": 1}}]).json()
    old_start = datetime.now(UTC) - timedelta(days=5)
    session = ws.http.post("/sessions", json={"name": "v2-exp", "reference_dataset_id": ds["id"],
                                              "start_time": old_start.isoformat()}).json()
    ids = _tree(ws, "v2-exp", old_start + timedelta(minutes=1), reference_example_id=ex[0]["id"])
    # the window starts at the dataset's first experiment, not a day ago
    found = ws.http.post("/api/v2/runs/query", json={
        "reference_dataset_id": ds["id"], "is_root": True,
        "selects": ["ID", "REFERENCE_DATASET_ID", "IS_IN_DATASET", "REFERENCE_EXAMPLE_ID"]})
    assert found.status_code == 200, found.text
    body = found.json()
    assert [i["id"] for i in body["items"]] == [ids["root"]] and body["next_cursor"] is None
    assert body["items"][0]["reference_dataset_id"] == ds["id"]
    assert body["items"][0]["is_in_dataset"] is True

    def refused(payload: dict[str, Any], status: int, words: str) -> None:
        resp = ws.http.post("/api/v2/runs/query", json=payload)
        assert resp.status_code == status and words in resp.json()["detail"], resp.text

    pid = session["id"]
    refused({}, 422, "exactly one of project_ids and reference_dataset_id")
    refused({"project_ids": [pid], "reference_dataset_id": ds["id"]}, 422, "exactly one")
    refused({"project_ids": [pid], "sem_filter": "angry users"}, 422, "sem_filter")
    refused({"project_ids": [pid], "ai_search": "slow runs"}, 422, "ai_search")
    refused({"project_ids": [pid], "selects": ["ID", "COLOUR"]}, 422, "selects")
    refused({"project_ids": [pid], "page_size": 5000}, 422, "page_size")
    refused({"project_ids": [pid], "cursor": "nonsense"}, 422, "cursor")
    refused({"project_ids": [pid], "cursor": base64.urlsafe_b64encode(b'{"offset": -1}').decode()},
            422, "cursor")
    refused({"project_ids": [pid], "filter": "eq(colour, 1)"}, 422, "colour")
    refused({"project_ids": [str(uuid.uuid4())]}, 404, "not found")
    refused({"reference_dataset_id": str(uuid.uuid4())}, 404, "not found")
