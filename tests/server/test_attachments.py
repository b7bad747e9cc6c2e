"""Example and run attachments through the official ``langsmith`` SDK against ``assay serve``
(SQLite and PostgreSQL), the download route, and bad uploads refused whole."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import func, select

from assay.server import create_app
from assay.store import Store
from assay.store._tables import blobs

from .conftest import Workspace
from .test_js_sdk import node  # noqa: F401  (the fixture: node with the npm package installed)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16
PDF = b"%PDF-1.7\n" + b"x" * 500
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(64)


def _sdk(ws: Workspace):  # type: ignore[no-untyped-def]
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


def _files(ex) -> dict[str, tuple[str | None, bytes]]:  # type: ignore[no-untyped-def]
    return {n: (a["mime_type"], a["reader"].read()) for n, a in ex.attachments.items()}


def _blob_count(store: Store) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(blobs)
                            .where(blobs.c.tenant_id == store.tenant_id)).scalar_one()


def test_sdk_example_attachments_round_trip(ws: Workspace) -> None:
    from langsmith.schemas import ExampleUpdate

    ls = _sdk(ws)
    ds = ls.create_dataset(f"mm-{uuid.uuid4().hex[:6]}")
    e1, e2 = uuid.uuid4(), uuid.uuid4()
    ls.create_examples(dataset_id=ds.id, examples=[
        {"id": e1, "inputs": {"q": "what is in the image?"}, "outputs": {"a": "a cat"},
         "attachments": {"image": ("image/png", PNG),
                         "spec": {"mime_type": "application/pdf", "data": PDF}}},
        {"id": e2, "inputs": {"q": "transcribe"}, "attachments": {"audio": ("audio/wav", WAV)}},
    ])
    ex = ls.read_example(e1)
    assert _files(ex) == {"image": ("image/png", PNG), "spec": ("application/pdf", PDF)}
    assert ex.outputs == {"a": "a cat"}
    listed = {e.id: e for e in ls.list_examples(dataset_id=ds.id, include_attachments=True)}
    assert _files(listed[e2]) == {"audio": ("audio/wav", WAV)}
    assert set(listed[e1].attachments) == {"image", "spec"}
    assert all(not e.attachments for e in ls.list_examples(dataset_id=ds.id))  # not asked for
    v1 = ls.read_example(e1).modified_at

    # update: keep "image" renamed, drop "spec", add "notes"; e2 untouched files, new inputs
    ls.update_examples(dataset_id=ds.id, updates=[
        ExampleUpdate(id=e1, attachments={"notes": ("text/plain", b"look left")},
                      attachments_operations={"rename": {"image": "photo"}, "retain": []}),
        ExampleUpdate(id=e2, inputs={"q": "transcribe it"}),
    ])
    assert _files(ls.read_example(e1)) == {"photo": ("image/png", PNG),
                                           "notes": ("text/plain", b"look left")}
    assert _files(ls.read_example(e2)) == {"audio": ("audio/wav", WAV)}
    # as_of: the attachments of that version
    assert _files(ls.read_example(e1, as_of=v1)) == {"image": ("image/png", PNG),
                                                     "spec": ("application/pdf", PDF)}
    old = {e.id: e for e in ls.list_examples(dataset_id=ds.id, as_of=v1, include_attachments=True)}
    assert set(old[e1].attachments) == {"image", "spec"}
    # update_example (one example, the same multipart endpoint)
    ls.update_example(e2, attachments_operations={"retain": []})
    assert ls.read_example(e2).attachments == {}
    # PNG stored once though three versions name it
    assert _blob_count(ws.store) == 4  # PNG, PDF, WAV, notes


def test_download_url_serves_ranges_and_types(ws: Workspace) -> None:
    ls = _sdk(ws)
    ds = ls.create_dataset(f"dl-{uuid.uuid4().hex[:6]}")
    eid = uuid.uuid4()
    ls.create_examples(dataset_id=ds.id, examples=[
        {"id": eid, "inputs": {}, "attachments": {"the image": ("image/png", PNG)}}])
    url = ls.read_example(eid).attachments["the image"]["presigned_url"]
    assert url.startswith(ws.server.url + "/attachments/")
    with httpx.Client(timeout=10) as http:  # no API key: the URL carries the permission
        full = http.get(url)
        assert full.status_code == 200 and full.content == PNG
        assert full.headers["content-type"] == "image/png"
        assert full.headers["accept-ranges"] == "bytes"
        assert "the%20image" in full.headers["content-disposition"]
        part = http.get(url, headers={"Range": "bytes=8-15"})
        assert part.status_code == 206 and part.content == PNG[8:16]
        assert part.headers["content-range"] == f"bytes 8-15/{len(PNG)}"
        tail = http.get(url, headers={"Range": "bytes=-4"})
        assert tail.status_code == 206 and tail.content == PNG[-4:]
        rest = http.get(url, headers={"Range": f"bytes={len(PNG) - 3}-"})
        assert rest.status_code == 206 and rest.content == PNG[-3:]
        bad = http.get(url, headers={"Range": f"bytes={len(PNG)}-"})
        assert bad.status_code == 416 and bad.headers["content-range"] == f"bytes */{len(PNG)}"
        payload, sig = url.rsplit("/", 1)[1].split(".")
        forged = http.get(f"{ws.server.url}/attachments/{payload}.{sig[:-2]}AA")
        assert forged.status_code == 403 and "signature" in forged.json()["detail"]
        # a token for another blob (or workspace) cannot be made without the key
        from assay.server._attachments import make_token
        from assay.store._attachments import StoredAttachment

        att = StoredAttachment("x", "0" * 64, "image/png", 1)
        foreign = make_token(b"not the key", ws.store.tenant_id, att)
        assert http.get(f"{ws.server.url}/attachments/{foreign}").status_code == 403
        secret = ws.server.store.attachments.signing_secret()
        stale = make_token(secret, ws.store.tenant_id, att, ttl_s=-1)
        assert http.get(f"{ws.server.url}/attachments/{stale}").status_code == 410


def _multipart(parts: list[tuple[str, bytes, str]]) -> tuple[bytes, str]:
    from assay.client._remote_attachments import _encode

    return _encode(parts)


def _post(ws: Workspace, ds_id: object, parts: list[tuple[str, bytes, str]],
          method: str = "POST") -> httpx.Response:
    body, ctype = _multipart(parts)
    return ws.http.request(method, f"/v1/platform/datasets/{ds_id}/examples", content=body,
                           headers={"content-type": ctype})


def test_bad_attachments_are_refused_whole(ws: Workspace) -> None:
    ds = ws.http.post("/datasets", json={"name": f"bad-{uuid.uuid4().hex[:6]}"}).json()
    good_id, bad_id = str(uuid.uuid4()), str(uuid.uuid4())

    def attempt(bad: tuple[str, bytes, str]) -> httpx.Response:
        return _post(ws, ds["id"], [
            (good_id, b"{}", "application/json"),
            (f"{good_id}.inputs", b'{"q": 1}', "application/json"),
            (f"{good_id}.attachment.ok", PDF, f"application/pdf; length={len(PDF)}"),
            (bad_id, b"{}", "application/json"),
            (f"{bad_id}.inputs", b'{"q": 2}', "application/json"),
            bad])

    lying = attempt((f"{bad_id}.attachment.img", PDF, f"image/png; length={len(PDF)}"))
    assert lying.status_code == 422
    assert "declared image/png but the content is not image/png" in lying.json()["detail"]
    truncated = attempt((f"{bad_id}.attachment.img", PNG[:100], f"image/png; length={len(PNG)}"))
    assert truncated.status_code == 400 and "truncated" in truncated.json()["detail"]
    for name in ("../../etc/passwd", "a/b", "..", "a\\b"):
        r = attempt((f"{bad_id}.attachment.{name}", b"x", "text/plain; length=1"))
        assert r.status_code == 422 and "path separators" in r.json()["detail"], (name, r.text)
    untyped = _post(ws, ds["id"], [(good_id, b"{}", "application/json"),
                                   (f"{good_id}.inputs", b"{}", "application/json")])
    assert untyped.status_code == 201  # (control: the good example alone is fine)
    # nothing of any refused request was kept: only the control example, no blobs
    listed = ws.http.get("/examples", params={"dataset": ds["id"]}).json()
    assert [e["id"] for e in listed] == [good_id]
    assert _blob_count(ws.store) == 0
    # a bad attachments_operations on update: refused, the example unchanged
    r = _post(ws, ds["id"], [(good_id, b"{}", "application/json"),
                             (f"{good_id}.attachments_operations", b'{"retain": ["nope"]}',
                              "application/json")], method="PATCH")
    assert r.status_code == 422 and "nope" in r.json()["detail"]
    # a truncated body (no closing boundary) is a 400, nothing written
    body, ctype = _multipart([(str(uuid.uuid4()), b"{}", "application/json")])
    r = ws.http.post(f"/v1/platform/datasets/{ds['id']}/examples", content=body[:-20],
                     headers={"content-type": ctype})
    assert r.status_code == 400 and "closing boundary" in r.json()["detail"]
    assert len(ws.http.get("/examples", params={"dataset": ds["id"]}).json()) == 1


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory,
                 sqlite_template: Path) -> Iterator[tuple[str, Store]]:
    """A server whose attachment limit (2 KiB) is far under its body limit."""
    import shutil

    path = tmp_path_factory.mktemp("small") / "assay.db"
    shutil.copy(sqlite_template, path)
    store = Store.open(path)
    app = create_app(store=store, max_body_bytes=1 << 20, max_attachment_bytes=2048)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", store
    server.should_exit = True
    thread.join(10)
    store.close()


def test_attachment_over_the_limit_is_413_naming_it(small_server: tuple[str, Store]) -> None:
    from langsmith import Client as LangSmithClient
    from langsmith.utils import LangSmithError

    url, store = small_server
    key = store.keys.create(tenant=f"ws-{uuid.uuid4().hex[:8]}")
    ls = LangSmithClient(api_url=url, api_key=key.key)
    ds = ls.create_dataset("limits")
    with pytest.raises(LangSmithError, match="over the limit of 2048 bytes"):
        ls.create_examples(dataset_id=ds.id, examples=[
            {"inputs": {}, "attachments": {"big": ("application/octet-stream", bytes(2049))}}])
    with httpx.Client(base_url=url, headers={"x-api-key": key.key}) as http:
        body, ctype = _multipart([(str(uuid.uuid4()), b"{}", "application/json"),
                                  (f"{uuid.uuid4()}.attachment.big", bytes(4000),
                                   "application/octet-stream")])
        r = http.post(f"/v1/platform/datasets/{ds.id}/examples", content=body,
                      headers={"content-type": ctype})
        assert r.status_code == 413 and r.json()["limit"] == 2048
    assert list(ls.list_examples(dataset_id=ds.id)) == []
    ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {}, "attachments": {"ok": ("application/octet-stream", bytes(2048))}}])
    assert len(list(ls.list_examples(dataset_id=ds.id))) == 1


def test_sdk_run_attachments_are_stored(ws: Workspace) -> None:
    from langsmith import traceable, tracing_context
    from langsmith.run_helpers import get_current_run_tree
    from langsmith.schemas import Attachment

    ls = _sdk(ws)
    project = f"runs-{uuid.uuid4().hex[:6]}"

    @traceable(name="describe")
    def describe(question: str, image: Attachment) -> str:
        return str(get_current_run_tree().id)

    with tracing_context(enabled=True, client=ls, project_name=project):
        run_id = describe("what?", Attachment(mime_type="image/png", data=PNG))
    ls.flush()
    run = ls.read_run(run_id)
    assert _files(run) == {"image": ("image/png", PNG)}
    runs = list(ls.list_runs(project_name=project))
    assert [_files(r) for r in runs] == [{"image": ("image/png", PNG)}]
    # an example made from the run takes its files along (use_source_run_io / _attachments)
    ds = ls.create_dataset(f"from-runs-{uuid.uuid4().hex[:6]}")
    whole = ls.create_example(dataset_id=ds.id, source_run_id=run_id, use_source_run_io=True)
    picked = ls.create_example(inputs={"q": 1}, dataset_id=ds.id, source_run_id=run_id,
                               use_source_run_attachments=["image"])
    for ex in (whole, picked):
        assert _files(ls.read_example(ex.id)) == {"image": ("image/png", PNG)}
    assert ls.read_example(whole.id).inputs == {"question": "what?"}


def _traced_with_files(ls, project: str, files: dict[str, bytes]) -> str:  # type: ignore[no-untyped-def]
    from langsmith import traceable, tracing_context
    from langsmith.run_helpers import get_current_run_tree
    from langsmith.schemas import Attachment

    @traceable(name="describe")
    def describe(**images: Attachment) -> str:
        return str(get_current_run_tree().id)

    with tracing_context(enabled=True, client=ls, project_name=project):
        run_id = describe(**{n: Attachment(mime_type="image/png" if d.startswith(b"\x89PNG")
                                           else "application/pdf", data=d)
                             for n, d in files.items()})
    ls.flush()
    return run_id


def test_v2_run_queries_give_attachment_urls(ws: Workspace) -> None:
    """The v2 runs API (``ATTACHMENTS`` select) gives each file's download URL, as v1's
    ``s3_urls``: through the SDK's v2 reader (what it uses on a v2-only LangSmith), its
    generated ``runs.query``/``runs.retrieve``/``traces.list_runs`` clients."""
    import asyncio

    from langsmith._internal._v2_migration_utils import _read_run_v2

    ls = _sdk(ws)
    project = f"v2-files-{uuid.uuid4().hex[:6]}"
    with_files = _traced_with_files(ls, project, {"image": PNG, "doc": PDF})
    plain = _traced_with_files(ls, project, {})
    pid = ls.read_project(project_name=project).id
    v1 = ls.read_run(with_files)
    run = _read_run_v2(uuid.UUID(with_files), ls, project_id=pid)  # downloads each URL
    assert _files(v1) == {"image": ("image/png", PNG), "doc": ("application/pdf", PDF)}
    # v2 gives {name: URL}: the same bytes, no MIME type (the SDK's v2 shape has none)
    assert {n: data for n, (_, data) in _files(run).items()} == {"image": PNG, "doc": PDF}

    async def query() -> tuple[list, Any, list]:  # type: ignore[type-arg]
        got = [r async for r in ls.runs.query(project_ids=[str(pid)],
                                              selects=["ID", "ATTACHMENTS"])]
        one = await ls.runs.retrieve(plain, project_id=str(pid), selects=["ATTACHMENTS"])
        trace = await ls.traces.list_runs(with_files, project_id=str(pid),
                                          selects=["ID", "ATTACHMENTS"])
        return got, one, trace.items

    got, one, trace = asyncio.run(query())
    by_id = {r.id: r.attachments for r in got}
    assert set(by_id[with_files]) == {"image", "doc"} and by_id[plain] in ({}, None)
    assert one.attachments in ({}, None)
    # each answer signs its URLs with its own expiry second: compare what they download
    fetched = {n: httpx.get(url).content for n, url in by_id[with_files].items()}
    assert fetched == {"image": PNG, "doc": PDF}  # no key needed: signed
    assert {n: httpx.get(url).content for n, url in trace[0].attachments.items()} == fetched
    ids = [r["id"] for r in ws.http.post("/api/v2/runs/query", json={
        "project_ids": [str(pid)], "selects": ["ID"]}).json()["items"]]
    assert sorted(ids) == sorted([with_files, plain])  # not selected: not looked up


def test_deleting_traces_and_projects_deletes_their_run_attachments(ws: Workspace) -> None:
    """``POST /runs/delete`` and the SDK's ``delete_project`` take the runs' files along (rows
    and the blobs nothing else names); a blob an example still uses stays downloadable."""
    ls = _sdk(ws)
    project = f"gone-{uuid.uuid4().hex[:6]}"
    first = _traced_with_files(ls, project, {"image": PNG})
    second = _traced_with_files(ls, project, {"doc": PDF})
    other = _traced_with_files(ls, f"{project}-other", {"doc": PDF})
    ds = ls.create_dataset(f"keeps-png-{uuid.uuid4().hex[:6]}")
    ls.create_example(inputs={"q": 1}, dataset_id=ds.id,
                      attachments={"img": ("image/png", PNG)})
    url = ls.read_run(first).attachments["image"]["presigned_url"]
    assert _blob_count(ws.store) == 2
    pid = ls.read_project(project_name=project).id
    resp = ws.http.post("/runs/delete", json={"session_id": str(pid), "trace_ids": [first]})
    assert resp.status_code == 200 and resp.json() == {"deleted": 1}, resp.text
    assert ws.store.attachments.of_runs([first]) == {}
    assert httpx.get(url).content == PNG  # the same bytes are still an example's
    ls.delete_project(project_name=project)
    assert ws.store.attachments.of_runs([second]) == {}
    assert _files(ls.read_run(other)) == {"doc": ("application/pdf", PDF)}  # shared, kept
    assert _blob_count(ws.store) == 2
    ls.delete_project(project_name=f"{project}-other")
    assert _blob_count(ws.store) == 1  # the example's PNG
    assert ws.store.attachments.collect() == 0


def test_run_attachment_lying_type_refuses_the_batch(ws: Workspace) -> None:
    run_id = str(uuid.uuid4())
    run = (b'{"id": "%s", "name": "r", "run_type": "chain", "start_time": "2026-01-01T00:00:00Z",'
           b' "trace_id": "%s", "dotted_order": "20260101T000000000000Z%s", "inputs": {}}'
           % (run_id.encode(), run_id.encode(), run_id.encode()))
    body, ctype = _multipart([(f"post.{run_id}", run, "application/json"),
                              (f"attachment.{run_id}.img", PDF, "image/jpeg")])
    r = ws.http.post("/runs/multipart", content=body, headers={"content-type": ctype})
    assert r.status_code == 422 and "declared image/jpeg" in r.json()["detail"]
    assert ws.store.runs.list(run_ids=[run_id]) == []
    assert _blob_count(ws.store) == 0


def test_remote_client_matches_local(ws: Workspace, sqlite_url: str) -> None:
    """assay's own Client gives the same answers over HTTP as on a local store."""
    from assay.client import Client

    def scenario(client: Client) -> list[object]:
        ds = client.create_dataset("same")
        ex = client.create_example({"q": 1}, dataset_id=ds.id,
                                   attachments={"img": ("image/png", PNG)})
        v1 = client.read_example(ex.id).modified_at
        client.update_example(ex.id, attachments={"doc": ("application/pdf", PDF)},
                              attachments_operations={"rename": {"img": "pic"}})
        now = client.read_example(ex.id)
        then = client.read_example(ex.id, as_of=v1)
        listed = list(client.list_examples(dataset_id=ds.id, include_attachments=True))
        return [sorted((n, a["mime_type"], a["reader"].read()) for n, a in e.attachments.items())
                for e in (now, then, *listed)]

    local = scenario(Client(database_url=sqlite_url))
    remote = scenario(Client(api_url=ws.server.url, api_key=ws.key))
    assert local == remote
    assert local[0] == [("doc", "application/pdf", PDF), ("pic", "image/png", PNG)]


def test_sdk_evaluate_hands_attachments_to_target_and_evaluators(ws: Workspace) -> None:
    """LangSmith's own evaluate() against assay serve: files reach target and evaluator."""
    from langsmith import evaluate as ls_evaluate

    ls = _sdk(ws)
    name = f"mm-eval-{uuid.uuid4().hex[:6]}"
    ds = ls.create_dataset(name)
    ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": i}, "outputs": {"size": len(PNG) + i},
         "attachments": {"img": ("image/png", PNG + bytes(i))}} for i in range(2)])

    def target(inputs: dict, attachments: dict) -> dict:
        return {"size": len(attachments["img"]["reader"].read())}

    def same_size(outputs: dict, reference_outputs: dict, attachments: dict) -> bool:
        return outputs["size"] == reference_outputs["size"] == len(
            attachments["img"]["reader"].read())

    res = ls_evaluate(target, data=name, evaluators=[same_size], client=ls,
                      max_concurrency=0)
    rows = list(res)
    assert sorted(r["run"].outputs["size"] for r in rows) == [len(PNG), len(PNG) + 1]
    assert [r["evaluation_results"]["results"][0].score for r in rows] == [True, True]


def test_js_sdk_example_attachments(ws: Workspace, node: str) -> None:  # noqa: F811
    """The official JS client: upload, read, download (and a range), update, list."""
    import json

    from .test_js_sdk import JS, _node

    out = json.loads(_node(node, str(JS / "attachments.mjs"), ws).strip().splitlines()[-1])
    assert out["names"] == ["image", "note"] and out["mime"] == "image/png"
    assert out["same_bytes"] is True
    assert out["range_status"] == 206 and out["range_bytes"] == [0x89, 0x50, 0x4E, 0x47]
    assert out["after"] == ["extra", "photo"]
    assert out["listed"] == [["extra", "photo"]]


def test_upsert_endpoint_creates_and_updates_with_attachments(ws: Workspace) -> None:
    """``/v1/platform/examples/multipart``: dataset per example, create or update by id."""
    ds = ws.http.post("/datasets", json={"name": f"ups-{uuid.uuid4().hex[:6]}"}).json()
    ex_id = str(uuid.uuid4())
    body_json = json.dumps({"dataset_id": ds["id"]}).encode()

    def upsert(*extra: tuple[str, bytes, str]) -> httpx.Response:
        body, ctype = _multipart([(ex_id, body_json, "application/json"),
                                  (f"{ex_id}.inputs", b'{"q": 1}', "application/json"), *extra])
        return ws.http.post("/v1/platform/examples/multipart", content=body,
                            headers={"content-type": ctype})

    assert upsert((f"{ex_id}.attachment.a", PDF, "application/pdf")).status_code == 201
    assert upsert((f"{ex_id}.attachment.b", b"B", "text/plain"),
                  (f"{ex_id}.attachments_operations", b'{"rename": {"a": "doc"}}',
                   "application/json")).status_code == 201
    got = ws.http.get(f"/examples/{ex_id}").json()["attachment_urls"]
    assert sorted(got) == ["attachment.b", "attachment.doc"]
    assert httpx.get(got["attachment.doc"]["presigned_url"]).content == PDF
