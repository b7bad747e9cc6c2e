"""API keys (made with the CLI), 401s, and workspace isolation."""

from __future__ import annotations

import json
import uuid

import httpx
from typer.testing import CliRunner

from assay.cli import app

from ._wire import make_run, multipart
from .conftest import Server, Workspace


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_keys_from_the_cli_and_401s(server: Server) -> None:
    workspace = f"team-{uuid.uuid4().hex[:8]}"
    key = _cli("keys", "create", "--workspace", workspace, "--db", server.store_url).splitlines()[0]
    assert key.startswith("asy_")
    ok = httpx.get(f"{server.url}/sessions", headers={"x-api-key": key})
    assert ok.status_code == 200 and ok.json() == []
    listed = json.loads(_cli("keys", "list", "--workspace", workspace, "--db", server.store_url,
                             "--json"))
    assert len(listed) == 1 and listed[0]["workspace"] == workspace
    assert listed[0]["revoked_at"] is None and key not in json.dumps(listed)  # never the secret

    for headers, why in (({}, "missing"), ({"x-api-key": "asy_nope"}, "unknown")):
        resp = httpx.get(f"{server.url}/datasets", headers=headers)
        assert resp.status_code == 401, resp.text
        assert resp.json()["error"] == "unauthorized" and why in resp.json()["detail"]
    # a bad key is refused before the body is even read
    resp = httpx.post(f"{server.url}/runs/batch", content=b"{not json", headers={"x-api-key": "x"})
    assert resp.status_code == 401

    _cli("keys", "revoke", listed[0]["id"], "--db", server.store_url)
    resp = httpx.get(f"{server.url}/sessions", headers={"x-api-key": key})
    assert resp.status_code == 401 and "revoked" in resp.json()["detail"]
    # Authorization: Bearer works too
    other, _ = server.new_key()
    assert httpx.get(f"{server.url}/sessions",
                     headers={"authorization": f"Bearer {other}"}).status_code == 200


def test_keys_cli_help_texts() -> None:
    for cmd in (["keys", "--help"], ["keys", "create", "--help"], ["keys", "list", "--help"],
                ["keys", "revoke", "--help"], ["serve", "--help"]):
        out = CliRunner().invoke(app, cmd).output
        assert "Usage" in out and len(out) > 200


def test_workspaces_are_isolated(ws: Workspace) -> None:
    a = ws.http
    # workspace A: a dataset with an example, an experiment with a run and feedback
    ds = a.post("/datasets", json={"name": "shared-name"}).json()
    ex = a.post("/examples", json={"dataset_id": ds["id"], "inputs": {"q": 1}}).json()
    sess = a.post("/sessions", json={"name": "exp", "reference_dataset_id": ds["id"]}).json()
    run = make_run("root", session="exp", end_time="2026-01-01T00:00:01+00:00",
                   start=__import__("datetime").datetime(
                       2026, 1, 1, tzinfo=__import__("datetime").timezone.utc))
    assert a.post("/runs/batch", json={"post": [run]}).status_code == 202
    fb = a.post("/feedback", json={"run_id": run["id"], "key": "acc", "score": 1}).json()
    before = a.get(f"/sessions/{sess['id']}", params={"include_stats": True}).json()

    key_b, store_b = ws.server.new_key()
    with httpx.Client(base_url=ws.server.url, headers={"x-api-key": key_b}, timeout=30) as b:
        # B sees nothing of A
        assert b.get("/datasets").json() == [] and b.get("/sessions").json() == []
        assert b.get("/datasets", params={"name": "shared-name"}).json() == []
        assert b.get("/sessions", params={"name": "exp", "include_stats": True}).json() == []
        assert b.post("/runs/query", json={"session": [sess["id"]]}).json()["runs"] == []
        assert b.get("/feedback").json() == []
        for path in (f"/datasets/{ds['id']}", f"/examples/{ex['id']}", f"/sessions/{sess['id']}",
                     f"/runs/{run['id']}", f"/feedback/{fb['id']}",
                     f"/datasets/{ds['id']}/versions"):
            resp = b.get(path)
            assert resp.status_code == 404, (path, resp.text)
        assert b.get("/examples", params={"id": [ex["id"]]}).json() == []
        # ...and can change nothing of A
        assert b.patch(f"/datasets/{ds['id']}", json={"name": "mine"}).status_code == 404
        assert b.delete(f"/datasets/{ds['id']}").status_code == 404
        assert b.patch(f"/examples/{ex['id']}", json={"inputs": {"q": 2}}).status_code == 404
        assert b.delete(f"/examples/{ex['id']}").status_code == 404
        assert b.patch(f"/sessions/{sess['id']}", json={"name": "mine"}).status_code == 404
        assert b.delete(f"/sessions/{sess['id']}").status_code == 404
        assert b.delete(f"/feedback/{fb['id']}").status_code == 404
        assert b.post("/examples", json={"dataset_id": ds["id"], "inputs": {}}).status_code == 404
        body, headers = multipart([(str(uuid.uuid4()), {}), ])
        assert b.post(f"/v1/platform/datasets/{ds['id']}/examples", content=body,
                      headers=headers).status_code == 404
        # runs into A's project, or over A's run ids, are refused and write nothing
        intruder = make_run("x", session="ignored")
        intruder["session_id"] = sess["id"]
        assert b.post("/runs/batch", json={"post": [intruder]}).status_code == 404
        assert b.post("/runs/batch", json={"patch": [{"id": run["id"], "outputs": {"h": 1},
                                                      "session_name": "exp"}]}).status_code == 409
        # feedback naming A's run or session counts only in B, never in A's statistics
        assert b.post("/feedback", json={"run_id": run["id"], "key": "acc", "score": 0,
                                         "session_id": sess["id"]}).status_code == 200
        assert b.post("/feedback", json={"id": fb["id"], "run_id": run["id"], "key": "acc",
                                         "score": 0}).status_code == 409
        # B may reuse A's names in its own workspace
        assert b.post("/datasets", json={"name": "shared-name"}).status_code == 200
        assert b.post("/sessions", json={"name": "exp"}).status_code == 200
    assert store_b.runs.list() == []
    after = a.get(f"/sessions/{sess['id']}", params={"include_stats": True}).json()
    assert after == before
    assert a.get(f"/runs/{run['id']}").json()["outputs"] is None
    assert a.get(f"/datasets/{ds['id']}").json()["name"] == "shared-name"
    assert a.get(f"/feedback/{fb['id']}").json()["score"] == 1
