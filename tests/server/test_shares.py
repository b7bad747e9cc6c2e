"""Shared traces against ``assay serve`` (SQLite and PostgreSQL): the official SDKs'
``share_run`` / ``read_shared_run`` / ``list_shared_runs`` / ``unshare_run`` and their v2
successors (``client.runs.share``, ``client.public.runs``, the ``SHARE_URL`` select), the web
UI's share button and the page a link opens without a key, what a token must not open, and
assay's own Client on a local store and remote."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import httpx
import pytest

from assay import Client

from .conftest import Workspace
from .test_js_sdk import _node, node  # noqa: F401  (the session's node + npm install)

pytestmark = pytest.mark.filterwarnings("ignore:.*(is deprecated|older than the minimum)")


def _ls(ws: Workspace) -> Any:
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


def _trace(ls: Any, project: str, question: str = "hello") -> tuple[Any, Any]:
    """One agent trace with a tool call, posted by the SDK: (root run, tool run)."""
    from langsmith import traceable, tracing_context

    @traceable(run_type="tool")
    def lookup(q: str) -> str:
        return q.title()

    @traceable
    def agent(q: str) -> dict[str, Any]:
        return {"answer": lookup(q)}

    with tracing_context(enabled=True, client=ls, project_name=project):
        agent(question)
    ls.flush()
    runs = list(ls.list_runs(project_name=project))
    root = next(r for r in runs if r.parent_run_id is None and r.inputs == {"q": question})
    tool = next(r for r in runs if r.trace_id == root.id and r.run_type == "tool")
    return root, tool


def _token(url: str) -> str:
    return url.split("/public/", 1)[1].split("/", 1)[0]


def test_share_a_trace_with_the_python_sdk(ws: Workspace) -> None:
    ls = _ls(ws)
    project = f"share-{uuid.uuid4().hex[:6]}"
    root, tool = _trace(ls, project)
    other_root, _ = _trace(ls, project, "bye")
    assert ls.run_is_shared(root.id) is False and ls.read_run_shared_link(root.id) is None

    url = ls.share_run(tool.id)  # a child run shares its whole trace
    assert url.endswith("/r") and "/public/" in url
    assert ls.share_run(root.id) == url == ls.read_run_shared_link(tool.id)  # one link a trace
    assert ls.run_is_shared(root.id) and not ls.run_is_shared(other_root.id)
    token = _token(url)

    shared = ls.read_shared_run(token)  # the trace's root
    assert shared.id == root.id and shared.outputs == {"answer": "Hello"}
    child = ls.read_shared_run(token, tool.id)
    assert child.name == "lookup" and child.inputs == {"q": "hello"}
    assert child.outputs == {"output": "Hello"}
    assert [r.name for r in ls.list_shared_runs(token)] == ["agent", "lookup"]
    assert [r.id for r in ls.list_shared_runs(token, run_ids=[str(tool.id)])] == [tool.id]

    # the token is the key: no API key needed, and it opens this trace only
    anon = httpx.get(f"{ws.server.url}/public/{token}/run")
    assert anon.status_code == 200 and anon.json()["id"] == str(root.id)
    outside = httpx.get(f"{ws.server.url}/public/{token}/run/{other_root.id}")
    assert outside.status_code == 404
    queried = httpx.post(f"{ws.server.url}/public/{token}/runs/query",
                         json={"id": [str(other_root.id)]})
    assert queried.status_code == 200 and queried.json()["runs"] == []

    ls.unshare_run(root.id)
    assert ls.read_run_shared_link(tool.id) is None
    assert httpx.get(f"{ws.server.url}/public/{token}/run").status_code == 404
    assert ls.share_run(root.id) != url  # shared again: a new link


def test_v2_share_and_public_reads(ws: Workspace) -> None:
    """The SDK's generated clients (what the deprecated methods point to)."""
    ls = _ls(ws)
    project = f"share-v2-{uuid.uuid4().hex[:6]}"
    root, tool = _trace(ls, project)
    pid, tid = str(root.session_id), str(root.id)

    async def flow() -> dict[str, Any]:
        made = await ls.runs.share.create(str(tool.id), session_id=pid, trace_id=tid)
        token = made.share_token
        one = await ls.public.runs.retrieve(str(tool.id), share_token=token,
                                            selects=["NAME", "OUTPUTS", "TRACE_ID"],
                                            start_time=tool.start_time)
        every = await ls.public.runs.query(token, selects=["ID", "NAME", "RUN_TYPE"])
        link = await ls.runs.retrieve(tid, project_id=pid, selects=["SHARE_URL"])
        await ls.runs.share.delete(tid, session_id=pid)
        await ls.runs.share.delete(tid, session_id=pid)  # idempotent
        after = await ls.runs.retrieve(tid, project_id=pid, selects=["SHARE_URL"])
        return {"token": token, "one": one, "every": every, "link": link, "after": after}

    got = asyncio.run(flow())
    assert got["one"].name == "lookup" and got["one"].outputs == {"output": "Hello"}
    assert got["one"].trace_id == tid
    assert [(r.name, r.run_type) for r in got["every"].items] == [("agent", "chain"),
                                                                   ("lookup", "tool")]
    assert got["link"].share_url == f"{ws.server.url}/public/{got['token']}/r"
    assert got["after"].share_url is None
    assert httpx.get(f"{ws.server.url}/api/v2/public/{got['token']}/run/{tool.id}",
                     params={"selects": ["NAME"]}).status_code == 404


def test_shared_page_in_the_web_ui(ws: Workspace) -> None:
    ls = _ls(ws)
    root, _ = _trace(ls, f"share-ui-{uuid.uuid4().hex[:6]}")
    ls.create_feedback(root.id, "reviewed", score=1, comment="private note")
    page = ws.http.get(f"/ui/runs/{root.id}")
    assert "Share this trace" in page.text and "private note" in page.text

    shared = ws.http.post(f"/ui/runs/{root.id}/share", data={}, follow_redirects=True)
    link = re.search(r'id="share-link" href="(/public/[^"]+/r)"', shared.text)
    assert link is not None and ls.read_run_shared_link(root.id).endswith(link.group(1))

    public = httpx.get(ws.server.url + link.group(1))  # no key, no cookie
    assert public.status_code == 200
    assert 'id="shared-note"' in public.text and public.text.count('class="node') == 2
    assert "lookup" in public.text
    # nothing of the workspace beyond the trace: no feedback, no forms, no project links
    assert "private note" not in public.text and "add-feedback" not in public.text
    assert "/ui/projects/" not in public.text

    ws.http.post(f"/ui/runs/{root.id}/share", data={"stop": "1"})
    assert httpx.get(ws.server.url + link.group(1)).status_code == 404
    assert httpx.get(f"{ws.server.url}/public/{uuid.uuid4()}/r").status_code == 404


def test_what_a_share_must_not_do(ws: Workspace) -> None:
    ls = _ls(ws)
    project = f"share-bad-{uuid.uuid4().hex[:6]}"
    root, _ = _trace(ls, project)
    other, _ = _trace(ls, project, "bye")
    token = str(uuid.uuid4())
    assert _token(ls.share_run(root.id, share_id=token)) == token  # the client's own token

    # another trace asking for the same token is refused, nothing changes
    taken = ws.http.put(f"/runs/{other.id}/share",
                        json={"run_id": str(other.id), "share_token": token})
    assert taken.status_code == 409 and token in taken.text
    assert ls.read_run_shared_link(other.id) is None

    # another workspace cannot share or see this workspace's run
    key, _ = ws.server.new_key()
    stranger = httpx.Client(base_url=ws.server.url, headers={"x-api-key": key})
    assert stranger.put(f"/runs/{root.id}/share", json={}).status_code == 404
    assert stranger.get(f"/runs/{root.id}/share").status_code == 404
    # ... though the link itself opens the trace for anyone who has it
    assert stranger.get(f"/public/{token}/run").json()["id"] == str(root.id)

    assert ws.http.put(f"/runs/{uuid.uuid4()}/share", json={}).status_code == 404
    assert ws.http.put(f"/runs/{root.id}/share", json=[1]).status_code == 422
    assert ws.http.post(f"/api/v2/runs/{root.id}/share",
                        json={"session_id": str(uuid.uuid4()),
                              "trace_id": str(root.id)}).status_code == 404
    assert httpx.post(f"{ws.server.url}/api/v2/public/{token}/runs/query",
                      json={"selects": ["NOPE"]}).status_code == 422
    assert httpx.get(f"{ws.server.url}/public/not-a-token/run").status_code in (400, 422)

    ls.delete_project(project_name=project)  # the trace is gone: so is its link
    assert httpx.get(f"{ws.server.url}/public/{token}/run").status_code == 404
    assert ws.store.shares.tokens_of_traces([root.id]) == {}


def test_runs_deleted_take_their_link(ws: Workspace) -> None:
    ls = _ls(ws)
    project = f"share-del-{uuid.uuid4().hex[:6]}"
    root, _ = _trace(ls, project)
    kept, _ = _trace(ls, project, "bye")
    gone, stays = _token(ls.share_run(root.id)), _token(ls.share_run(kept.id))
    deleted = ws.http.post("/runs/delete", json={"session_id": str(root.session_id),
                                                 "trace_ids": [str(root.id)]})
    assert deleted.status_code < 300, deleted.text
    assert httpx.get(f"{ws.server.url}/public/{gone}/run").status_code == 404
    assert httpx.get(f"{ws.server.url}/public/{stays}/run").status_code == 200
    assert list(ws.store.shares.tokens_of_traces([root.id, kept.id]).values()) == [stays]


def test_js_sdk_shares(ws: Workspace, node: str) -> None:  # noqa: F811
    ls = _ls(ws)
    root, tool = _trace(ls, f"share-js-{uuid.uuid4().hex[:6]}")
    out = json.loads(_node(node, "share.mjs", ws, str(tool.id)))
    assert out["before"] is None and out["again"] == out["url"] == out["link"]
    assert "/public/" in out["url"] and out["after"] is None
    assert httpx.get(f"{ws.server.url}/public/{_token(out['url'])}/run").status_code == 404


def test_assay_client_local_and_remote(ws: Workspace, sqlite_url: str) -> None:
    from assay import traceable, tracing_context

    local = Client(database_url=sqlite_url)

    @traceable(run_type="tool")
    def lookup(q: str) -> str:
        return q.title()

    @traceable
    def agent(q: str) -> str:
        return lookup(q)

    with tracing_context(enabled=True, client=local, project_name="local-share"):
        agent("hi")
    local.flush()
    root = next(r for r in local.list_runs(project_name="local-share") if r.parent_run_id is None)
    path = local.share_run(root.id)  # no server here: the path to serve it at
    assert re.fullmatch(r"/public/[0-9a-f-]{36}/r", path)
    assert local.read_shared_run(path).id == root.id  # a link or its token
    assert [r.name for r in local.list_shared_runs(_token(path))] == ["agent", "lookup"]
    local.unshare_run(root.id)
    assert not local.run_is_shared(root.id)

    remote = Client(ws.server.url, api_key=ws.key)
    ls_root, tool = _trace(_ls(ws), f"share-remote-{uuid.uuid4().hex[:6]}")
    url = remote.share_run(tool.id)
    assert url.startswith(ws.server.url + "/public/") and remote.run_is_shared(ls_root.id)
    assert remote.read_shared_run(url, tool.id).name == "lookup"
    assert [r.name for r in remote.list_shared_runs(url)] == ["agent", "lookup"]
    remote.unshare_run(ls_root.id)
    assert remote.read_run_shared_link(ls_root.id) is None
