"""Shared datasets and the OpenAI fine-tuning download against ``assay serve`` (SQLite and
PostgreSQL): the official SDKs' ``share_dataset`` / ``read_dataset_shared_schema`` /
``read_shared_dataset`` / ``list_shared_examples`` / ``list_shared_projects`` /
``unshare_dataset`` and ``read_dataset_openai_finetuning``, the web UI's share button and the
page a link opens without a key, what a token must not open, and assay's own Client on a local
store and remote."""

from __future__ import annotations

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

CHATS = [
    ({"messages": [{"role": "user", "content": "Hi"}]},
     {"message": {"role": "assistant", "content": "Hello!"}}),
    ({"question": "2+2?"}, {"answer": "4"}),
]


def _ls(ws: Workspace) -> Any:
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


def _dataset_with_experiment(ls: Any) -> tuple[Any, str]:
    """A two-example dataset and one experiment on it (feedback ``right`` 1 and 0)."""
    name = f"shared-{uuid.uuid4().hex[:6]}"
    ds = ls.create_dataset(name)
    ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": i, "outputs": o} for i, o in CHATS])

    def right(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> bool:
        return outputs == reference_outputs

    result = ls.evaluate(lambda inputs: {"answer": "4"}, data=name, evaluators=[right],
                         experiment_prefix="share", blocking=True)
    ls.flush()  # the experiment's runs, sent in the background
    return ds, result.experiment_name


def test_share_a_dataset_with_the_python_sdk(ws: Workspace) -> None:
    from langsmith.utils import LangSmithNotFoundError

    ls = _ls(ws)
    ds, experiment = _dataset_with_experiment(ls)
    with pytest.raises(LangSmithNotFoundError, match="is not shared"):
        ls.read_dataset_shared_schema(ds.id)

    made = ls.share_dataset(dataset_name=ds.name)
    token = str(made["share_token"])
    assert str(made["dataset_id"]) == str(ds.id) and made["url"].endswith(f"/public/{token}/d")
    assert str(ls.share_dataset(ds.id)["share_token"]) == token  # one link a dataset
    assert str(ls.read_dataset_shared_schema(dataset_name=ds.name)["share_token"]) == token

    # the token is the key: no API key needed, and it opens this dataset only
    anon = httpx.get(f"{ws.server.url}/public/{token}/datasets")
    assert anon.status_code == 200 and anon.json()["name"] == ds.name
    assert ls.read_shared_dataset(token).id == ds.id
    shared = list(ls.list_shared_examples(token))
    assert sorted(json.dumps(e.inputs) for e in shared) == sorted(json.dumps(i) for i, _ in CHATS)
    one = shared[0]
    assert [e.id for e in ls.list_shared_examples(token, example_ids=[one.id])] == [one.id]
    projects = list(ls.list_shared_projects(dataset_share_token=token))
    assert [p.name for p in projects] == [experiment]
    assert projects[0].run_count == 2 and projects[0].feedback_stats["right"]["avg"] == 0.5
    assert list(ls.list_shared_projects(dataset_share_token=token, name="nope")) == []

    ls.unshare_dataset(ds.id)
    with pytest.raises(LangSmithNotFoundError):
        ls.read_shared_dataset(token)
    assert httpx.get(f"{ws.server.url}/public/{token}/examples").status_code == 404


def test_what_a_dataset_share_must_not_do(ws: Workspace) -> None:
    ls = _ls(ws)
    ds, _ = _dataset_with_experiment(ls)
    token = str(ls.share_dataset(ds.id)["share_token"])
    # a dataset token opens no trace, a trace token no dataset
    assert httpx.get(f"{ws.server.url}/public/{token}/run").status_code == 404
    run = next(iter(ls.list_runs(project_name=next(iter(
        ls.list_shared_projects(dataset_share_token=token))).name, is_root=True)))
    trace_token = ls.share_run(run.id).split("/public/")[1].split("/")[0]
    assert httpx.get(f"{ws.server.url}/public/{trace_token}/datasets").status_code == 404
    assert httpx.get(f"{ws.server.url}/public/{trace_token}/d").status_code == 404
    # another workspace cannot see, share or unshare it
    other_key, _ = ws.server.new_key()
    other = {"x-api-key": other_key}
    for method in ("GET", "PUT", "DELETE"):
        assert httpx.request(method, f"{ws.server.url}/datasets/{ds.id}/share", headers=other,
                             json={} if method == "PUT" else None).status_code == 404
    assert str(ls.read_dataset_shared_schema(ds.id)["share_token"]) == token
    # a token another dataset holds is refused, and a bad one is named
    second = ls.create_dataset(f"second-{uuid.uuid4().hex[:6]}")
    taken = ws.http.put(f"/datasets/{second.id}/share", json={"share_token": token})
    assert taken.status_code == 409 and token in taken.text
    bad = ws.http.put(f"/datasets/{second.id}/share", json={"share_token": "nope"})
    assert bad.status_code == 422 and "share_token" in bad.text
    # deleting the dataset closes its link
    ls.delete_dataset(dataset_id=ds.id)
    assert httpx.get(f"{ws.server.url}/public/{token}/datasets").status_code == 404


def test_shared_dataset_page_in_the_web_ui(ws: Workspace) -> None:
    ls = _ls(ws)
    ds, experiment = _dataset_with_experiment(ls)
    page = ws.http.get(f"/ui/datasets/{ds.id}")
    assert "Share this dataset" in page.text

    shared = ws.http.post(f"/ui/datasets/{ds.id}/share", data={}, follow_redirects=True)
    link = re.search(r'id="share-link" href="(/public/[^"]+/d)"', shared.text)
    assert link is not None
    assert ls.read_dataset_shared_schema(ds.id)["url"].endswith(link.group(1))

    public = httpx.get(ws.server.url + link.group(1))  # no key, no cookie
    assert public.status_code == 200 and 'id="shared-note"' in public.text
    assert "2+2?" in public.text and experiment in public.text  # examples and experiments
    assert 'data-key="feedback:right" data-value="0.5"' in public.text
    # nothing of the workspace beyond it: no forms, no links into the key-holders' pages
    assert "Share this dataset" not in public.text and "/ui/experiments/" not in public.text
    assert f"/ui/datasets/{ds.id}" not in public.text

    ws.http.post(f"/ui/datasets/{ds.id}/share", data={"stop": "1"})
    assert httpx.get(ws.server.url + link.group(1)).status_code == 404


def test_openai_finetuning_with_the_python_sdk(ws: Workspace) -> None:
    from langsmith.utils import LangSmithError

    ls = _ls(ws)
    ds, _ = _dataset_with_experiment(ls)
    lines = ls.read_dataset_openai_finetuning(dataset_name=ds.name)
    assert sorted(json.dumps(x) for x in lines) == sorted(json.dumps(x) for x in [
        {"messages": [{"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello!"}]},
        {"messages": [{"role": "user", "content": "2+2?"},
                      {"role": "assistant", "content": "4"}]}])

    odd = ls.create_example(inputs={"a": 1, "b": 2}, outputs={"x": "y"}, dataset_id=ds.id)
    with pytest.raises(LangSmithError, match=f"example {odd.id}.*no conversation"):
        ls.read_dataset_openai_finetuning(ds.id)
    empty = ls.create_dataset(f"empty-{uuid.uuid4().hex[:6]}")
    with pytest.raises(LangSmithError, match="has no examples"):
        ls.read_dataset_openai_finetuning(empty.id)


def test_js_sdk_dataset_shares(ws: Workspace, node: str) -> None:  # noqa: F811
    ls = _ls(ws)
    ds, _ = _dataset_with_experiment(ls)
    out = json.loads(_node(node, "dataset_share.mjs", ws, ds.name))
    token = out["made"]["share_token"]
    assert out["made"]["dataset_id"] == str(ds.id) and out["made"]["url"].endswith(
        f"/public/{token}/d")
    assert out["again"]["share_token"] == out["schema"]["share_token"] == token
    assert out["dataset"] == {"id": str(ds.id), "name": ds.name}
    assert sorted(map(json.dumps, out["examples"])) == sorted(json.dumps(i) for i, _ in CHATS)
    assert len(out["finetuning"]) == 2 and all(
        line["messages"][-1]["role"] == "assistant" for line in out["finetuning"])
    assert "404" in out["after"] or "not found" in out["after"].lower()


@pytest.mark.parametrize("mode", ["local", "remote"])
def test_assay_client_dataset_shares(ws: Workspace, mode: str) -> None:
    from assay.errors import NotFoundError

    client = (Client(api_url=ws.server.url, api_key=ws.key) if mode == "remote"
              else Client(store=ws.store))
    ds, experiment = _dataset_with_experiment(_ls(ws))
    with pytest.raises(NotFoundError, match="is not shared"):
        client.read_dataset_shared_schema(ds.id)
    made = client.share_dataset(dataset_name=ds.name)
    token = made["share_token"]
    want = f"{ws.server.url}/public/{token}/d" if mode == "remote" else f"/public/{token}/d"
    assert made["url"] == want and client.read_dataset_shared_schema(ds.id) == made
    assert client.read_shared_dataset(made["url"]).name == ds.name  # the link works as a token
    assert len(list(client.list_shared_examples(token))) == 2
    assert len(list(client.list_shared_examples(token, limit=1))) == 1
    assert [p.name for p in client.list_shared_projects(dataset_share_token=token)] == [
        experiment]
    assert len(client.read_dataset_openai_finetuning(dataset_name=ds.name)) == 2
    client.unshare_dataset(ds.id)
    with pytest.raises(NotFoundError):
        client.read_shared_dataset(token)
