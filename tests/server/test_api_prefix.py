"""The REST API under ``/api/v1`` and ``/api`` (a self-hosted LangSmith's endpoint) as well as at
the root, and the web links the official SDKs derive from such an endpoint - the experiment URL
``evaluate()`` prints, ``share_run``'s link, a presigned feedback URL - landing on assay itself.

The server here listens on 127.0.0.2: both SDKs take 127.0.0.1 for "localhost" and then link to
``http://localhost`` whatever the port, as they would for a LangSmith on a developer's laptop; any
other host gets links derived from the endpoint, as a team server on the network does.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ._checks import parse_printed_json
from .conftest import Server, Workspace, _start, sdk_env
from .test_js_sdk import JS, _node, node  # noqa: F401  (the session's node + npm install)

HERE = Path(__file__).parent

pytestmark = pytest.mark.filterwarnings("ignore:.*(is deprecated|older than the minimum)")


@pytest.fixture(scope="module")
def team_server(sqlite_template: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    target = tmp_path_factory.mktemp("prefix") / "assay.db"
    shutil.copy(sqlite_template, target)
    yield from _start(f"sqlite:///{target}", "sqlite", host="127.0.0.2")


@pytest.fixture
def tws(team_server: Server) -> Iterator[Workspace]:
    key, view = team_server.new_key()
    with httpx.Client(base_url=team_server.url, headers={"x-api-key": key}, timeout=30) as http:
        yield Workspace(team_server, key, view, http)


def _env(ws: Workspace, endpoint: str) -> dict[str, str]:
    return {**sdk_env(ws.server, ws.key), "LANGSMITH_ENDPOINT": endpoint}


@pytest.mark.parametrize("suffix", ["/api/v1", "/api"])
def test_python_sdk_at_a_self_hosted_endpoint(tws: Workspace, suffix: str) -> None:
    """The seed's Python snippet, verbatim, with LANGSMITH_ENDPOINT=http://host:port/api/v1:
    its traces, feedback and statistics arrive, and the URL it prints opens the experiment."""
    proc = subprocess.run([sys.executable, str(HERE / "seed_py.py")],
                          env=_env(tws, tws.server.url + suffix), capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    printed = parse_printed_json(proc.stdout)
    assert printed["feedback_stats"]["foo"] == {**printed["feedback_stats"]["foo"],
                                                "n": 2, "avg": 1.0}
    url = re.search(r"at:\n(\S+)", proc.stdout)
    assert url is not None, proc.stdout
    assert url[1].startswith(f"{tws.server.url}/o/")  # the suffix cut: assay's own web UI
    page = tws.http.get(url[1], follow_redirects=True)
    assert page.status_code == 200 and printed["name"] in page.text

    from langsmith import Client as LangSmithClient

    ls = LangSmithClient(api_url=tws.server.url + suffix, api_key=tws.key)
    root = next(iter(ls.list_runs(project_name=printed["name"], is_root=True, limit=1)))
    link = ls.share_run(root.id)
    assert link.startswith(f"{tws.server.url}/public/")
    shared = httpx.get(link)  # no key: the token is the key
    assert shared.status_code == 200 and str(root.id) in shared.text
    assert ls.read_shared_run(link.split("/public/")[1].split("/")[0]).id == root.id

    # a URL the server builds carries the prefix it was asked under, and answers there
    token = ls.create_presigned_feedback_token(root.id, "thumbs")
    assert token.url.startswith(tws.server.url + suffix + "/feedback/tokens/")
    assert httpx.get(token.url, params={"score": 1}).status_code == 200
    assert [f.score for f in ls.list_feedback(run_ids=[root.id], feedback_key=["thumbs"])] == [1]


def test_js_sdk_at_a_self_hosted_endpoint(tws: Workspace, node: str) -> None:  # noqa: F811
    """The seed's TypeScript snippet (as JavaScript) at ``/api/v1``, and ``shareRun`` at
    ``/api``: the link the JS client builds is assay's public trace page."""
    def run(script: str, suffix: str, *args: str) -> str:
        proc = subprocess.run([node, script, *args], cwd=JS, env=_env(tws, tws.server.url + suffix),
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return proc.stdout

    run("prepare.mjs", "/api/v1")
    printed = parse_printed_json(run("seed.mjs", "/api/v1"))
    assert printed["run_count"] == 2 and printed["feedback_stats"]["foo"]["n"] == 2
    project = tws.store.projects.read(project_name=printed["name"])
    root = tws.store.runs.list(project_ids=[str(project.id)], is_root=True)[0]

    shared = json.loads(run("share.mjs", "/api", str(root.id)))
    assert shared["url"] == shared["again"] == shared["link"]
    assert re.fullmatch(re.escape(tws.server.url) + r"/public/[0-9a-f-]{36}/r", shared["url"])
    assert shared["before"] is None and shared["after"] is None


def test_what_the_prefix_does_not_change(tws: Workspace) -> None:
    info = tws.http.get("/info").json()
    assert tws.http.get("/api/v1/info").json() == info == tws.http.get("/api/info").json()
    # routes that live under /api/ themselves answer as before, under no second prefix
    unsupported = tws.http.get("/api/v1/platform/evaluators")
    assert unsupported.status_code == 422 and "online evaluat" in unsupported.text
    assert tws.http.get("/api/v1/api/v1/platform/evaluators").status_code == 422
    # ...and paths that match nothing stay a JSON 404, prefixed or not
    for path in ("/api/v1/nope", "/api/nope", "/api", "/apiary", "/api/v2/nope"):
        missing = tws.http.get(path)
        assert missing.status_code == 404, path
    # the key is still needed under the prefix, and errors still name what was wrong
    anon = httpx.get(f"{tws.server.url}/api/v1/sessions")
    assert anon.status_code == 401
    bad = tws.http.post("/api/v1/runs", content=b"{not json",
                        headers={"content-type": "application/json"})
    assert bad.status_code in (400, 422) and "json" in bad.text.lower()
