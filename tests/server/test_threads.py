"""Conversation threads against ``assay serve`` (SQLite and PostgreSQL): the official SDKs'
``list_threads`` / ``read_thread`` (Python) and ``listThreads`` / ``readThread`` (JS) on
traces the SDK made with a thread id in their metadata, the web UI's threads pages, and
assay's own Client locally and remotely."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from assay import Client

from .conftest import Workspace
from .test_js_sdk import _node, node  # noqa: F401  (the session's node + npm install)

pytestmark = pytest.mark.filterwarnings("ignore:.*(is deprecated|older than the minimum)")

# (thread id key, thread, question): the turns in the order they happen
TURNS = [("thread_id", "t-1", "hi"), ("session_id", "s-9", "hello"),
         ("thread_id", "t-1", "and then?"), ("conversation_id", "t-1", "bye")]


def _ls(ws: Workspace) -> Any:
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


def _conversations(ls: Any) -> str:
    """Four turns in two threads (and one trace in none), traced by the SDK."""
    from langsmith import traceable, tracing_context

    @traceable(run_type="llm")
    def model(q: str) -> dict[str, Any]:
        return {"answer": q.upper(),
                "usage_metadata": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}}

    @traceable
    def chat(q: str) -> dict[str, Any]:
        return {"answer": model(q)["answer"]}

    project = f"bot-{uuid.uuid4().hex[:6]}"
    with tracing_context(enabled=True, client=ls, project_name=project):
        for key, thread, q in TURNS:
            chat(q, langsmith_extra={"metadata": {key: thread}})
        chat("alone")
    ls.flush()
    return project


def test_python_sdk_lists_and_reads_threads(ws: Workspace) -> None:
    ls = _ls(ws)
    project = _conversations(ls)
    threads = ls.list_threads(project_name=project)
    assert [(t["thread_id"], t["count"]) for t in threads] == [("t-1", 3), ("s-9", 1)]
    assert [r.inputs["q"] for r in threads[0]["runs"]] == ["hi", "and then?", "bye"]
    turns = list(ls.read_thread(thread_id="t-1", project_name=project))
    assert [r.inputs["q"] for r in turns] == ["hi", "and then?", "bye"]
    every = list(ls.read_thread(thread_id="t-1", project_name=project, is_root=False))
    assert [r.run_type for r in every] == ["llm"] * 3  # is_root=False: the runs below
    assert list(ls.read_thread(thread_id="nope", project_name=project)) == []


def test_js_sdk_lists_and_reads_threads(ws: Workspace, node: str) -> None:  # noqa: F811
    project = _conversations(_ls(ws))
    out = json.loads(_node(node, "threads.mjs", ws, project))
    assert out["threads"] == [{"thread_id": "t-1", "count": 3}, {"thread_id": "s-9", "count": 1}]
    assert [t["q"] for t in out["turns"]] == ["hi", "and then?", "bye"]
    assert out["groups"] == [
        {"thread_id": "t-1", "count": 3, "total_tokens": 36, "filter": 'eq(thread_id, "t-1")'},
        {"thread_id": "s-9", "count": 1, "total_tokens": 12, "filter": 'eq(thread_id, "s-9")'}]


def test_threads_in_the_web_ui(ws: Workspace) -> None:
    ls = _ls(ws)
    project = _conversations(ls)
    pid = ls.read_project(project_name=project).id
    assert f'href="/ui/projects/{pid}/threads"' in ws.http.get(f"/ui/projects/{pid}").text
    page = ws.http.get(f"/ui/projects/{pid}/threads")
    assert page.status_code == 200
    rows = page.text.split('<tr data-id="')[1:]
    assert [r.split('"', 1)[0] for r in rows] == ["t-1", "s-9"]
    assert '<td class="num">3</td>' in rows[0] and "36" in rows[0]  # turns, tokens (3 x 12)
    first = next(iter(ls.read_thread(thread_id="t-1", project_name=project)))
    ls.create_feedback(first.id, "helpful", score=1)
    table = ws.http.get(f"/ui/projects/{pid}/threads").text  # the pooled score, per thread
    t1_row = table.split('<tr data-id="t-1"')[1].split("</tr>")[0]
    assert 'data-key="feedback:helpful" title="n=1">1' in t1_row
    s9_row = table.split('<tr data-id="s-9"')[1].split("</tr>")[0]
    assert 'data-key="feedback:helpful">–' in s9_row
    one = ws.http.get(f"/ui/projects/{pid}/threads/t-1")
    assert one.status_code == 200 and one.text.count('<li class="turn') == 3
    assert one.text.index("hi") < one.text.index("and then?") < one.text.index("bye")
    assert 'data-key="feedback:helpful"' in one.text and f"/ui/runs/{first.id}" in one.text
    assert ws.http.get(f"/ui/projects/{pid}/threads/nope").status_code == 404
    narrowed = ws.http.get(f"/ui/projects/{pid}/threads", params={"where": 'eq(name, "x")'})
    assert 'id="no-threads"' in narrowed.text
    bad = ws.http.get(f"/ui/projects/{pid}/threads", params={"where": "eq(nope"})
    assert bad.status_code == 400 and "eq(nope" in bad.text  # the page names the filter
    assert httpx.get(f"{ws.server.url}/ui/projects/{pid}/threads",
                     follow_redirects=False).status_code in (303, 401)  # no key: login


@pytest.mark.parametrize("mode", ["local", "remote"])
def test_assay_client_threads(ws: Workspace, mode: str) -> None:
    project = _conversations(_ls(ws))
    client = (Client(api_url=ws.server.url, api_key=ws.key) if mode == "remote"
              else Client(store=ws.store))
    threads = client.list_threads(project_name=project)
    assert [(t["thread_id"], t["count"], len(t["runs"])) for t in threads] == [
        ("t-1", 3, 3), ("s-9", 1, 1)]
    assert threads[0]["total_tokens"] == 36 and threads[0]["latency_p50"] is not None
    assert [s.thread_id for s in client.list_thread_summaries(project_name=project,
                                                               limit=1)] == ["t-1"]
    assert [r.inputs["q"] for r in client.read_thread(thread_id="s-9",
                                                      project_name=project)] == ["hello"]
