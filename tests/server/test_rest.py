"""The REST resources the SDKs use: /info, sessions, datasets, examples, versions, feedback."""

from __future__ import annotations

import json
import uuid

import httpx

from ._wire import make_run, multipart
from .conftest import Server, Workspace


def test_info_advertises_what_the_sdks_need(server: Server) -> None:
    info = httpx.get(f"{server.url}/info").json()
    assert info["batch_ingest_config"]["use_multipart_endpoint"] is True
    assert info["batch_ingest_config"]["size_limit_bytes"] < 1024 * 1024  # below the body cap
    flags = info["instance_flags"]
    for flag in ("zstd_compression_enabled", "gzip_body_enabled",
                 "dataset_examples_multipart_enabled", "examples_multipart_enabled"):
        assert flags[flag] is True
    assert "sdb_query_enabled" not in flags


def test_sessions_create_read_patch_delete(ws: Workspace) -> None:
    ds = ws.http.post("/datasets", json={"name": "d"}).json()
    sid = str(uuid.uuid4())
    body = {"id": sid, "name": "exp-1", "reference_dataset_id": ds["id"], "description": None,
            "extra": {"metadata": {"git": {"commit": None}, "revision_id": None}},
            "num_examples": 2, "num_repetitions": 1, "evaluator_keys": ["foo"]}
    made = ws.http.post("/sessions", json=body)
    assert made.status_code == 200, made.text
    assert made.json()["id"] == sid and made.json()["tenant_id"] == ws.store.tenant_id
    # read_project by name: an array with the statistics
    listed = ws.http.get("/sessions", params={"name": "exp-1", "include_stats": "True", "limit": 1})
    assert isinstance(listed.json(), list) and listed.json()[0]["run_count"] == 0
    assert listed.json()[0]["test_run_number"] == 1
    # PATCH: nulls mean unchanged
    patched = ws.http.patch(f"/sessions/{sid}", json={
        "name": None, "description": None, "end_time": None,
        "extra": {"metadata": {"dataset_version": "2026-01-01T00:00:00+00:00",
                               "num_repetitions": 1}}})
    assert patched.status_code == 200, patched.text
    got = ws.http.get(f"/sessions/{sid}").json()
    assert got["name"] == "exp-1" and got["reference_dataset_id"] == ds["id"]
    assert got["extra"]["metadata"]["dataset_version"] == "2026-01-01T00:00:00+00:00"
    ws.http.patch(f"/sessions/{sid}", json={"description": "done", "end_time": 1767225600000})
    got = ws.http.get(f"/sessions/{sid}", params={"include_stats": "true"}).json()
    assert got["description"] == "done" and got["end_time"].startswith("2026-01-01T00:00:00")
    assert "run_count" in got
    # duplicate names conflict; upsert returns the existing project
    dup = ws.http.post("/sessions", json={"name": "exp-1"})
    assert dup.status_code == 409 and "exp-1" in dup.json()["detail"]
    assert ws.http.post("/sessions", params={"upsert": "true"},
                        json={"name": "exp-1"}).json()["id"] == sid
    # the tenant lookup the Python SDK makes
    assert ws.http.get("/sessions",
                       params={"limit": 1}).json()[0]["tenant_id"] == ws.store.tenant_id
    assert ws.http.get("/sessions", params={"reference_dataset": ds["id"]}).json()[0]["id"] == sid
    assert ws.http.get("/sessions", params={"reference_free": "true"}).json() == []
    assert ws.http.delete(f"/sessions/{sid}").status_code == 200
    assert ws.http.get(f"/sessions/{sid}").status_code == 404
    assert ws.http.get("/sessions", params={"name": "exp-1"}).json() == []


def test_datasets_examples_and_versions(ws: Workspace) -> None:
    ds = ws.http.post("/datasets", json={"name": "qa", "data_type": "kv", "description": "x",
                                         "extra": {"metadata": {"team": "a"}}}).json()
    assert ds["metadata"] == {"team": "a"} and ds["example_count"] == 0
    assert ws.http.post("/datasets", json={"name": "qa"}).status_code == 409
    bulk = ws.http.post("/examples/bulk", json=[
        {"dataset_id": ds["id"], "inputs": {"q": "1+1"}, "outputs": {"a": "2"}, "split": "test"},
        {"dataset_id": ds["id"], "inputs": {"q": "2+2"}, "outputs": {"a": "4"}},
    ])
    assert bulk.status_code == 200, bulk.text
    v1 = ws.http.get(f"/datasets/{ds['id']}/version", params={"as_of": "latest"}).json()["as_of"]
    assert ws.http.put(f"/datasets/{ds['id']}/tags",
                       json={"tag": "v1", "as_of": v1}).status_code == 200
    # multipart upload, as both SDKs do it
    ex_id = str(uuid.uuid4())
    body, headers = multipart([(ex_id, {"created_at": "2026-01-01T00:00:00+00:00",
                                        "metadata": {"src": "mp"}}),
                               (f"{ex_id}.inputs", {"q": "3+3"}), (f"{ex_id}.outputs", {"a": "6"})])
    up = ws.http.post(f"/v1/platform/datasets/{ds['id']}/examples", content=body, headers=headers)
    assert up.status_code == 201, up.text
    assert up.json()["example_ids"] == [ex_id] and up.json()["count"] == 1
    assert ws.http.get(f"/examples/{ex_id}").json()["metadata"]["src"] == "mp"
    listed = ws.http.get("/examples", params={"dataset": ds["id"], "offset": 0, "limit": 100,
                                              "inline_s3_urls": "True"}).json()
    assert [e["inputs"]["q"] for e in listed] == ["1+1", "2+2", "3+3"]
    assert [e["inputs"]["q"] for e in ws.http.get(
        "/examples", params={"dataset": ds["id"], "splits": ["test"]}).json()] == ["1+1"]
    assert len(ws.http.get("/examples", params={"dataset": ds["id"], "as_of": "v1"}).json()) == 2
    assert len(ws.http.get("/examples", params={
        "dataset": ds["id"], "metadata": json.dumps({"src": "mp"})}).json()) == 1
    # update and delete make new versions; old versions stay readable
    first = listed[0]["id"]
    assert ws.http.patch(f"/examples/{first}", json={"outputs": {"a": "two"}}).status_code == 200
    assert ws.http.get(f"/examples/{first}", params={"as_of": "v1"}).json()["outputs"] == {"a": "2"}
    bulk_patch = ws.http.patch("/examples/bulk", json=[{"id": first, "metadata": {"m": 1}}])
    assert bulk_patch.json()["count"] == 1
    assert ws.http.delete("/examples", params={"example_ids": [ex_id]}).json()["count"] == 1
    assert ws.http.get(f"/examples/{ex_id}").status_code == 404
    versions = ws.http.get(f"/datasets/{ds['id']}/versions").json()
    assert len(versions) >= 4 and any(v["tags"] == ["v1"] for v in versions)
    assert ws.http.get(f"/datasets/{ds['id']}/version", params={"tag": "v1"}).json()["as_of"] == v1
    # dataset reads and patch
    assert ws.http.get("/datasets",
                       params={"name": "qa", "limit": 1}).json()[0]["example_count"] == 2
    assert ws.http.get(f"/datasets/{ds['id']}", params={"limit": 1}).json()["name"] == "qa"
    assert ws.http.patch(f"/datasets/{ds['id']}", json={"name": "qa2"}).json()["name"] == "qa2"
    assert ws.http.delete(f"/datasets/{ds['id']}").status_code == 200
    assert ws.http.get(f"/datasets/{ds['id']}").status_code == 404


def test_examples_multipart_upsert_and_patch(ws: Workspace) -> None:
    ds = ws.http.post("/datasets", json={"name": "up"}).json()
    ex_id = str(uuid.uuid4())
    body, headers = multipart([(ex_id, {"dataset_id": ds["id"]}), (f"{ex_id}.inputs", {"x": 1})])
    assert ws.http.post("/v1/platform/examples/multipart", content=body,
                        headers=headers).status_code == 201
    body, headers = multipart([(ex_id, {"dataset_id": ds["id"], "split": "train"}),
                               (f"{ex_id}.inputs", {"x": 2})])
    assert ws.http.post("/v1/platform/examples/multipart", content=body,
                        headers=headers).status_code == 201
    got = ws.http.get(f"/examples/{ex_id}").json()
    assert got["inputs"] == {"x": 2} and got["split"] == ["train"]
    body, headers = multipart([(ex_id, {}), (f"{ex_id}.outputs", {"y": 3})])
    resp = ws.http.patch(f"/v1/platform/datasets/{ds['id']}/examples", content=body,
                         headers=headers)
    assert resp.status_code == 200, resp.text
    assert ws.http.get(f"/examples/{ex_id}").json()["outputs"] == {"y": 3}


def test_feedback_create_list_read_delete(ws: Workspace) -> None:
    run = make_run("r", session="fb")
    ws.http.post("/runs", json=run)
    sid = str(ws.store.projects.read(project_name="fb").id)
    one = ws.http.post("/feedback", json={"run_id": run["id"], "key": "acc", "score": 0.5,
                                          "comment": "ok", "feedback_source": {"type": "api"}})
    assert one.status_code == 200, one.text
    fid = one.json()["id"]
    many = ws.http.post("/feedback", json=[
        {"run_id": run["id"], "key": "label", "value": "good"},
        {"session_id": sid, "key": "summary", "score": 1},
    ])
    assert len(many.json()) == 2
    assert ws.http.get(f"/feedback/{fid}").json()["score"] == 0.5
    assert {f["key"] for f in ws.http.get("/feedback",
                                          params={"run": [run["id"]]}).json()} == {"acc", "label"}
    assert [f["key"] for f in ws.http.get("/feedback",
                                          params={"key": ["summary"]}).json()] == ["summary"]
    assert len(ws.http.get("/feedback", params={"session": [sid]}).json()) == 3
    stats = ws.http.get(f"/sessions/{sid}", params={"include_stats": True}).json()
    assert stats["feedback_stats"]["label"]["values"] == {"good": 1}
    assert stats["session_feedback_stats"]["summary"]["avg"] == 1.0
    assert ws.http.delete(f"/feedback/{fid}").status_code == 200
    assert ws.http.get(f"/feedback/{fid}").status_code == 404
