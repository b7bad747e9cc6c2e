"""Presigned feedback tokens through the official SDKs against ``assay serve`` (SQLite and
PostgreSQL): made with the API key, used without it (the URL, as an app's front end calls it),
checked against the key's config, expired, and confined to the workspace that made them."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from assay import Client

from ._checks import parse_printed_json
from .conftest import Workspace
from .test_js_sdk import _node, node  # noqa: F401  (the session's node + npm install)

pytestmark = pytest.mark.filterwarnings("ignore:.*[Dd]eprecated")


def _run(ws: Workspace, project: str = "prod") -> str:
    rid = str(uuid.uuid4())
    now = datetime.now(UTC)
    post = {"id": rid, "trace_id": rid, "name": "app", "run_type": "chain",
            "start_time": now.isoformat(), "end_time": now.isoformat(),
            "dotted_order": now.strftime("%Y%m%dT%H%M%S%fZ") + rid, "session_name": project,
            "inputs": {"q": "hi"}, "outputs": {"a": "HI"}}
    assert ws.http.post("/runs/batch", json={"post": [post]}).status_code == 202
    return rid


def test_a_token_scores_its_run_without_the_key(ws: Workspace) -> None:
    from langsmith import Client as LangSmithClient
    from langsmith.utils import LangSmithError

    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    rid = _run(ws)
    token = ls.create_presigned_feedback_token(
        rid, "thumbs", feedback_config={"type": "continuous", "min": 0, "max": 1})
    assert token.url == f"{ws.server.url}/feedback/tokens/{token.id}"
    assert timedelta(hours=2.9) < token.expires_at - datetime.now(UTC) < timedelta(hours=3.1)
    with httpx.Client(timeout=30) as browser:  # no key, as a front end calls it
        used = browser.get(token.url, params={"score": 1, "comment": "great"})
        assert used.status_code == 200, used.text
        wrong = browser.get(token.url, params={"score": 5})
        assert wrong.status_code == 422 and "outside [0, 1]" in wrong.json()["detail"]
        empty = browser.get(token.url)
        assert empty.status_code == 422 and "give a score" in empty.json()["detail"]
        assert browser.get(f"{ws.server.url}/feedback/tokens/{uuid.uuid4()}",
                           params={"score": 1}).status_code == 404
    (fb,) = ls.list_feedback(run_ids=[rid])
    assert (fb.key, fb.score, fb.comment) == ("thumbs", 1.0, "great")
    assert fb.feedback_source.type == "app"
    # the user changes their mind: the token's one feedback is replaced, not added to
    ls.create_feedback_from_token(token.url, score=0, comment="on second thought")
    (fb,) = ls.list_feedback(run_ids=[rid])
    assert (fb.score, fb.comment) == (0.0, "on second thought")
    stats = ls.read_project(project_name="prod", include_stats=True).feedback_stats
    assert stats["thumbs"]["n"] == 1 and stats["thumbs"]["avg"] == 0.0
    assert ws.store.feedback_configs.read("thumbs").feedback_config["max"] == 1

    several = ls.create_presigned_feedback_tokens(rid, ["a", "b"],
                                                  expiration=timedelta(minutes=5))
    assert len({t.url for t in several}) == 2
    listed = ws.http.get("/feedback/tokens", params={"run_id": rid}).json()
    assert {t["id"] for t in listed} == {str(token.id), *(str(t.id) for t in several)}
    with pytest.raises(LangSmithError, match="not found"):
        ls.create_presigned_feedback_token(str(uuid.uuid4()), "thumbs")
    with pytest.raises(LangSmithError, match="has passed"):
        ls.create_presigned_feedback_token(rid, "thumbs",
                                           expiration=datetime.now(UTC) - timedelta(minutes=1))


def test_expired_tokens_and_other_workspaces(ws: Workspace) -> None:
    rid = _run(ws)
    token = ws.store.feedback_tokens.create(rid, "thumbs", expires_in=timedelta(seconds=0.5))
    time.sleep(0.7)
    gone = httpx.post(f"{ws.server.url}{token.url}", json={"score": 1})
    assert gone.status_code == 410 and "expired" in gone.json()["detail"]
    assert ws.store.feedback.list(run_ids=[rid]) == []
    # another workspace's key cannot make a token for this run
    other_key, _ = ws.server.new_key()
    resp = httpx.post(f"{ws.server.url}/feedback/tokens", headers={"x-api-key": other_key},
                      json={"run_id": rid, "feedback_key": "thumbs"})
    assert resp.status_code == 404
    assert httpx.post(f"{ws.server.url}/feedback/tokens",
                      json={"run_id": rid, "feedback_key": "x"}).status_code == 401
    # several at once: all or none, and not in bulk
    good = {"run_id": rid, "feedback_key": "a"}
    resp = ws.http.post("/feedback/tokens", json=[good, {**good, "run_id": str(uuid.uuid4())}])
    assert resp.status_code == 404 and "token 1" in resp.json()["detail"]
    assert ws.http.get("/feedback/tokens", params={"run_id": rid}).json() == []
    assert ws.http.post("/feedback/tokens", json=[good] * 101).status_code == 422
    # assay's own client, remote: the same round trip
    remote = Client(api_url=ws.server.url, api_key=ws.key)
    mine = remote.create_presigned_feedback_token(rid, "stars", expiration=timedelta(hours=1))
    made = remote.create_feedback_from_token(mine.url, score=4, metadata={"ui": "widget"})
    assert made.key == "stars" and made.feedback_source.metadata["ui"] == "widget"


def test_tokens_with_the_js_sdk(node: str, ws: Workspace) -> None:  # noqa: F811
    rid = _run(ws)
    out: dict[str, Any] = parse_printed_json(_node(node, "tokens.mjs", ws, rid))
    assert out["status"] == 200 and out["listed"] == [out["id"]]
    (fb,) = ws.store.feedback.list(run_ids=[rid])
    assert (fb.key, fb.score, fb.comment) == ("thumbs", 1.0, "from the browser")


def test_local_client_tokens(client: Client) -> None:
    client.create_run("app", {"q": 1}, "chain", id=(rid := uuid.uuid4()), project_name="p")
    client.flush()
    token = client.create_presigned_feedback_token(rid, "thumbs")
    assert token.url == f"/feedback/tokens/{token.id}"  # the path under `assay serve`
    made = client.create_feedback_from_token(token.url, score=True)
    assert made.score == 1.0 and str(made.run_id) == str(rid)
