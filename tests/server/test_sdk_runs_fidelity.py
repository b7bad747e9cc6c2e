"""Runs read back as the official SDK wrote them, and strings outside the BMP, lone surrogates
and NUL come back as sent, through every ingest path, on SQLite and PostgreSQL.

The SDK runs in-process (its own background thread, flushed before reading), pointed at the
test's workspace by ``api_url``/``api_key``; nothing of it is patched.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ._checks import parse_printed_json
from ._wire import multipart
from .conftest import Workspace
from .test_js_sdk import _node, node  # noqa: F401  (the fixture: npm install once a session)

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated")

# every kind of string the wire can carry that a naive store loses
HARD = {
    "emoji": "a😀b🎉",  # outside the BMP: 4 UTF-8 bytes, a surrogate pair in JSON escapes
    "lone_high": "x\ud800y",  # JSON allows it (the JS SDK sends it); UTF-8 cannot encode it
    "lone_low": "\udfff",
    "nul": "a\x00b",  # PostgreSQL's JSONB and text refuse it
    "pair_and_lone": "😀\udc00\x00",
    "noncharacter": "\ufdd0 and \ufdd0\ufdd0 and \ue400",  # the store's own escape characters
}


def _sdk(ws: Workspace) -> Any:
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


@pytest.fixture
def sdk(ws: Workspace) -> Iterator[Any]:
    client = _sdk(ws)
    yield client
    client.cleanup()


# -- 1. every field the SDK writes reads back as written ------------------------------------

_SDK_ONLY = {"session_name", "dangerously_allow_filesystem", "attachments", "child_runs"}
_IDS = ("id", "trace_id", "parent_run_id", "reference_example_id")


def _sent(tree: Any) -> dict[str, Any]:
    """What the SDK sends for a RunTree: its dict, less what the SDK itself drops on the way
    (``Client._run_transform``: serialized of non-llm runs, new_token kwargs)."""
    sent = {k: v for k, v in tree._get_dicts_safe().items() if k not in _SDK_ONLY}
    if sent.get("run_type") not in ("llm", "prompt"):
        sent.pop("serialized", None)
    sent["events"] = [{k: v for k, v in ev.items() if k != "kwargs"}
                      if ev.get("name") == "new_token" else ev for ev in sent.get("events") or []]
    return sent


def _same(sent: dict[str, Any], run: Any) -> None:
    for key, want in sent.items():
        got = getattr(run, key)
        if key in ("start_time", "end_time"):
            want = want if isinstance(want, datetime) else datetime.fromisoformat(want)
        elif key in _IDS and want is not None:
            want = uuid.UUID(str(want))
        assert got == want, (run.name, key, want, got)


def test_run_tree_fields_read_back_field_by_field(ws: Workspace, sdk: Any) -> None:
    from langsmith import traceable, tracing_context
    from langsmith.run_trees import RunTree

    project = "fidelity"
    example = uuid.uuid4()
    root = RunTree(name="agent😀", run_type="chain", project_name=project, client=sdk,
                   inputs={"q": "hi 😀", "n": 1, "nested": {"l": [1, 2.5, None, True]}},
                   tags=["a", "b"], reference_example_id=example,
                   extra={"metadata": {"user": "u1", "emoji": "🎉"}, "custom": {"x": 1}})
    root.post()
    llm = root.create_child(name="chat", run_type="llm", inputs={"messages": [
        {"role": "user", "content": "hi"}]}, serialized={"name": "ChatModel", "kwargs": {"t": 0}},
        extra={"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"}},
        tags=["model"])
    llm.post()
    llm.add_event({"name": "new_token", "time": datetime.now(UTC).isoformat(),
                   "kwargs": {"token": "he"}})
    llm.set(usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7})
    llm.end(outputs={"choices": [{"message": {"role": "assistant", "content": "hello"}}]})
    llm.patch()
    tool = llm.create_child(name="lookup", run_type="tool", inputs={"a": 1})
    tool.post()
    tool.end(error="ValueError: boom\nTraceback ...")
    tool.patch()

    @traceable(run_type="retriever", name="retrieve", metadata={"k": "v"}, tags=["r"])
    def retrieve(query: str) -> list[dict[str, Any]]:
        return [{"page_content": query + " 😀", "metadata": {"source": "s"}}]

    with tracing_context(enabled=True, client=sdk, project_name=project, parent=root):
        retrieve("docs")
    root.end(outputs={"answer": "😀"})
    root.patch()
    sdk.flush()

    for tree in (root, llm, tool):
        _same(_sent(tree), sdk.read_run(tree.id))
    chat = sdk.read_run(llm.id)
    assert chat.extra["metadata"]["usage_metadata"] == {  # the SDK's usage, as it set it
        "input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
    assert chat.prompt_tokens == 3 and chat.completion_tokens == 4 and chat.total_tokens == 7
    assert chat.parent_run_ids == [root.id] and chat.in_dataset is False
    assert sdk.read_run(root.id).in_dataset is True
    assert sdk.read_run(tool.id).parent_run_ids == [root.id, llm.id]
    traced = next(sdk.list_runs(project_name=project, run_type="retriever"))
    assert traced.name == "retrieve" and traced.parent_run_id == root.id
    assert traced.inputs == {"query": "docs"}
    assert traced.outputs == {"output": [{"page_content": "docs 😀", "metadata": {"source": "s"}}]}
    assert sorted(traced.tags) == ["a", "b", "r"]  # the SDK adds the parent's tags
    meta = traced.extra["metadata"]
    assert meta["k"] == "v" and meta["ls_method"] == "traceable"
    assert traced.extra["runtime"]["sdk"] == "langsmith-py"  # what the SDK stamps, kept whole

    # load_child_runs: the tree in the shape the SDK builds, children in execution order
    tree = sdk.read_run(root.id, load_child_runs=True)
    assert [c.name for c in tree.child_runs] == ["chat", "retrieve"]
    assert [c.name for c in tree.child_runs[0].child_runs] == ["lookup"]
    assert tree.child_runs[0].child_runs[0].error.startswith("ValueError: boom")
    # client.runs.retrieve, which replaces read_run: the selected fields, as read_run has them
    pid = str(sdk.read_project(project_name=project).id)
    got = asyncio.run(sdk.runs.retrieve(str(llm.id), project_id=pid, selects=[
        "ID", "NAME", "RUN_TYPE", "STATUS", "INPUTS", "OUTPUTS", "METADATA", "EVENTS", "TAGS",
        "PARENT_RUN_IDS", "TRACE_ID", "DOTTED_ORDER", "PROMPT_TOKENS", "TOTAL_TOKENS",
        "MANIFEST", "START_TIME", "END_TIME"]))
    assert (got.id, got.name, got.run_type, got.status) == (str(llm.id), "chat", "llm", "SUCCESS")
    assert (got.inputs, got.outputs) == (chat.inputs, chat.outputs)
    assert got.metadata == chat.extra["metadata"]
    assert [(e.name, e.time) for e in got.events] == [
        (e["name"], datetime.fromisoformat(e["time"])) for e in chat.events]
    assert got.tags == chat.tags and got.manifest == chat.serialized
    assert got.parent_run_ids == [str(root.id)] and got.trace_id == str(root.id)
    assert got.dotted_order == chat.dotted_order
    assert (got.prompt_tokens, got.total_tokens) == (3, 7)
    assert (got.start_time, got.end_time) == (chat.start_time, chat.end_time)
    only_id = asyncio.run(sdk.runs.retrieve(str(llm.id), project_id=pid))
    assert only_id.id == str(llm.id) and only_id.name is None  # only the id by default
    resp = ws.http.get(f"/api/v2/runs/{llm.id}", params={"project_id": str(uuid.uuid4())})
    assert resp.status_code == 404
    # list_runs gives the same fields as read_run
    listed = {r.id: r for r in sdk.list_runs(project_name=project)}
    for tree_ in (root, llm, tool):
        _same(_sent(tree_), listed[tree_.id])


# -- 2. JSON fidelity -----------------------------------------------------------------------

def _payload(tag: str) -> dict[str, Any]:
    return {"tag": tag, **HARD, "list": list(HARD.values()), "k😀": {"deep": HARD["lone_high"]},
            **LONE_KEYS}


# keys too: a lone surrogate in a key at the top and deeper (pydantic's JSON dump writes the
# first as U+FFFD and refuses the second), NUL and the store's escape character beside it
LONE_KEYS = {"k\ud800": 1, "\udfff\x00": {"d\udc00eep": [{"\ufdd0\ud801": HARD["lone_low"]}]}}


def _escaped(value: Any) -> bytes:
    """JSON as the JS SDK writes it: ASCII, lone surrogates as ``\\ud800`` escapes."""
    return json.dumps(value, ensure_ascii=True).encode()


def test_hard_strings_round_trip_through_every_ingest_path(ws: Workspace, sdk: Any) -> None:
    t0 = datetime.now(UTC) - timedelta(minutes=5)

    def run(name: str, **fields: Any) -> dict[str, Any]:
        rid = str(uuid.uuid4())
        return {"id": rid, "trace_id": rid, "name": name, "run_type": "chain",
                "start_time": t0.isoformat(), "session_name": "hard",
                "dotted_order": t0.strftime("%Y%m%dT%H%M%S%fZ") + rid, **fields}

    meta = {"extra": {"metadata": _payload("meta")}}
    batch = run("batch", inputs=_payload("in"), outputs=_payload("out"), **meta)
    resp = ws.http.post("/runs/batch", content=_escaped({"post": [batch]}),
                        headers={"content-type": "application/json"})
    assert resp.status_code == 202, resp.text

    single = run("single", inputs=_payload("in"), **meta)
    resp = ws.http.post("/runs", content=_escaped(single),
                        headers={"content-type": "application/json"})
    assert resp.status_code == 202, resp.text
    resp = ws.http.patch(f"/runs/{single['id']}", content=_escaped(
        {"outputs": _payload("out"), "end_time": (t0 + timedelta(seconds=1)).isoformat()}),
        headers={"content-type": "application/json"})
    assert resp.status_code == 202, resp.text

    multi = run("multi", **meta)
    fid = str(uuid.uuid4())
    body, headers = multipart([
        (f"post.{multi['id']}", _escaped(multi)),
        (f"post.{multi['id']}.inputs", _escaped(_payload("in"))),
        (f"patch.{multi['id']}", _escaped({"id": multi["id"], "end_time": t0.isoformat()})),
        (f"patch.{multi['id']}.outputs", _escaped(_payload("out"))),
        (f"feedback.{fid}", _escaped({"id": fid, "run_id": multi["id"], "key": "k",
                                       "value": HARD["pair_and_lone"], "comment": HARD["nul"],
                                       "correction": _payload("fix")})),
    ], encoding="zstd")
    resp = ws.http.post("/runs/multipart", content=body, headers=headers)
    assert resp.status_code == 202, resp.text
    resp = ws.http.post("/feedback", content=_escaped({
        "run_id": batch["id"], "key": "k", "value": _payload("value"),
        "comment": HARD["pair_and_lone"],
        "extra": _payload("extra")}), headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text

    for sent in (batch, single, multi):
        rid = sent["id"]
        raw = json.loads(ws.http.get(f"/runs/{rid}").content)  # the bytes as an SDK parses them
        stored = ws.store.runs.read(rid)  # the local Client's view of the same rows
        read = sdk.read_run(rid)
        for got in (raw["inputs"], stored.inputs, read.inputs):
            assert got == _payload("in"), sent["name"]
        for got in (raw["outputs"], stored.outputs, read.outputs):
            assert got == _payload("out"), sent["name"]
        for got in (raw["extra"]["metadata"], stored.metadata, read.extra["metadata"]):
            assert got == _payload("meta"), sent["name"]
    listed = {str(r.id): r for r in sdk.list_runs(project_name="hard")}
    assert all(listed[s["id"]].inputs == _payload("in") for s in (batch, single, multi))

    fb = {f.run_id: f for f in sdk.list_feedback(run_ids=[batch["id"], multi["id"]])}
    on_multi, on_batch = fb[uuid.UUID(multi["id"])], fb[uuid.UUID(batch["id"])]
    assert on_multi.value == HARD["pair_and_lone"] and on_multi.comment == HARD["nul"]
    assert on_multi.correction == _payload("fix")
    assert on_batch.value == _payload("value") and on_batch.extra == _payload("extra")
    assert on_batch.comment == HARD["pair_and_lone"]
    local = {str(f.run_id): f for f in ws.store.feedback.list(run_ids=[multi["id"]])}
    assert local[multi["id"]].value == HARD["pair_and_lone"]

    # load_child_runs nests records: their keys come back exact as well
    tree = sdk.read_run(batch["id"], load_child_runs=True)
    assert tree.inputs == _payload("in")


def test_hard_keys_round_trip_on_examples_and_feedback(ws: Workspace, sdk: Any) -> None:
    """Examples written as the JS SDK writes them (lone surrogates in keys as ``\\ud800``
    escapes) read back exact through every read the SDK has; a feedback KEY with a lone
    surrogate is refused naming it (the Python SDK drops such characters before sending)."""
    ds = sdk.create_dataset("hard-keys")
    resp = ws.http.post("/examples/bulk", content=_escaped([
        {"dataset_id": str(ds.id), "inputs": _payload("in"), "outputs": _payload("out"),
         "metadata": _payload("meta")}]), headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    raw = json.loads(resp.content)
    made = raw[0] if isinstance(raw, list) else raw["examples"][0]
    assert made["inputs"] == _payload("in")
    ex = sdk.read_example(made["id"])
    assert ex.inputs == _payload("in") and ex.outputs == _payload("out")
    assert {k: v for k, v in ex.metadata.items() if k != "dataset_split"} == _payload("meta")
    listed = list(sdk.list_examples(dataset_id=ds.id, include_attachments=True))
    assert [e.inputs for e in listed] == [_payload("in")]
    updated = ws.http.patch("/examples/bulk", content=_escaped([
        {"id": made["id"], "outputs": _payload("fix")}]),
        headers={"content-type": "application/json"})
    assert updated.status_code == 200, updated.text
    assert json.loads(updated.content)["examples"][0]["outputs"] == _payload("fix")
    assert sdk.read_example(made["id"]).outputs == _payload("fix")

    rid = str(uuid.uuid4())
    sdk.create_run("r", inputs={}, run_type="chain", id=rid, project_name="hard-keys")
    sdk.flush()
    for body in ({"run_id": rid, "key": "f\ud800", "score": 1},
                 {"run_id": rid, "key": "\udfffx", "value": 1}):
        resp = ws.http.post("/feedback", content=_escaped(body),
                            headers={"content-type": "application/json"})
        assert resp.status_code == 422, resp.text
        assert repr(body["key"]) in resp.json()["detail"] and "surrogate" in resp.json()["detail"]
    assert list(sdk.list_feedback(run_ids=[rid])) == []


def test_sdk_traced_emoji_and_nul_read_back(ws: Workspace, sdk: Any) -> None:
    """What the Python SDK sends itself: UTF-8 emoji and NUL (orjson writes ``\\u0000``). Lone
    surrogates never leave it: its serializer drops them (and, in the same object, the escaped
    pairs of emoji) before sending, so there is nothing for a server to keep."""
    from langsmith import traceable, tracing_context

    @traceable(name="echo😀", metadata={"m": "🎉\x00"})
    def echo(text: str) -> dict[str, str]:
        return {"out": text + "🚀", "nul": "\x00"}

    with tracing_context(enabled=True, client=sdk, project_name="emoji"):
        echo("héllo 😀 \x00 end")
    sdk.flush()
    run = next(sdk.list_runs(project_name="emoji"))
    assert run.name == "echo😀"
    assert run.inputs == {"text": "héllo 😀 \x00 end"}
    assert run.outputs == {"out": "héllo 😀 \x00 end🚀", "nul": "\x00"}
    assert run.extra["metadata"]["m"] == "🎉\x00"


# -- 3. multipart parts of the wrong type ----------------------------------------------------

@pytest.mark.parametrize("ctype", ["text/plain", "application/octet-stream"])
def test_multipart_run_part_of_wrong_type_is_refused(ws: Workspace, ctype: str) -> None:
    rid = str(uuid.uuid4())
    good, headers = multipart([(f"post.{rid}", {"id": rid, "name": "x", "run_type": "chain",
                                               "start_time": datetime.now(UTC).isoformat()})])
    body = good.replace(b"Content-Type: application/json", f"Content-Type: {ctype}".encode())
    resp = ws.http.post("/runs/multipart", content=body, headers=headers)
    assert resp.status_code == 422, resp.text
    assert f"post.{rid}" in resp.json()["detail"] and ctype in resp.json()["detail"]
    assert ws.store.runs.list() == []  # nothing half written


def test_js_sdk_hard_strings_round_trip(node: str, ws: Workspace) -> None:  # noqa: F811
    """The JS SDK sends lone surrogates as ``\\ud800`` escapes (JSON.stringify): each path it
    writes (createRun/updateRun, a traceable, feedback) reads back what it sent."""
    printed = parse_printed_json(_node(node, "hard_strings.mjs", ws, "js-hard", str(uuid.uuid4())))
    sent, got = printed["sent"], printed["got"]
    assert got["name"] == "hard😀"
    for key in ("inputs", "outputs", "echo_inputs", "echo_outputs", "value", "correction",
                "comment"):
        assert got[key] == sent[key], key
    for key in ("metadata", "echo_metadata"):  # the SDK adds its own keys to the metadata
        assert {k: got[key].get(k) for k in sent[key]} == sent[key], key
    assert got["inputs"]["lone_high"] == "x\ud800y" and got["inputs"]["nul"] == "a\x00b"
    assert got["inputs"]["k\ud800"] == 1  # keys too
    assert got["refused"] and "422" in got["refused"] and "surrogate" in got["refused"]


@pytest.mark.parametrize(("field", "value", "named"), [
    ("dotted_order", "20260101T000000000000Zé", "dotted_order"),
    ("events", [{"name": "new_token", "time": "2026-01-01T00:00:00Z"}, "tok"], "events"),
    ("tags", ["ok", 1], "tags"),
    ("start_time", 10**20, "start_time"),
])
def test_a_run_the_store_could_not_keep_is_refused_not_accepted(ws: Workspace, field: str,
                                                                 value: Any, named: str) -> None:
    """A 202 means the run is kept: a field the fold could not write, or a read could not
    give back, is a 422 naming it, and nothing of the request is stored."""
    rid, other = str(uuid.uuid4()), str(uuid.uuid4())
    start = datetime.now(UTC).isoformat()
    good = {"id": other, "name": "fine", "run_type": "chain", "start_time": start,
            "session_name": "refused-whole"}
    bad = {**good, "id": rid, "name": "odd", field: value}
    body, headers = multipart([(f"post.{other}", good), (f"post.{rid}", bad)])
    resp = ws.http.post("/runs/multipart", content=body, headers=headers)
    assert resp.status_code == 422, resp.text
    assert named in resp.text
    assert ws.store.journal.pending() == 0 and ws.store.journal.dropped == 0
    assert not [p for p in ws.store.projects.list() if p.name == "refused-whole"]
