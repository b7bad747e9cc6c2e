"""Bad input of every kind: a 4xx JSON error naming the problem, never a 500, never a partial
write."""

from __future__ import annotations

import gzip
import json
import uuid
from typing import Any

import pytest
import zstandard

from assay.errors import NotFoundError

from ._wire import BOUNDARY, make_run, multipart
from .conftest import TEST_MAX_BODY, Workspace

MP = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}


def _expect(resp: Any, status: int, *words: str) -> dict[str, Any]:
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert isinstance(body["detail"], str) and body["error"], body
    for word in words:
        assert word in body["detail"], (word, body)
    return body  # type: ignore[no-any-return]


def _nothing_written(ws: Workspace) -> None:
    assert ws.store.runs.list() == []
    assert ws.store.feedback.list() == []


def test_malformed_and_mistyped_bodies(ws: Workspace) -> None:
    h = ws.http
    _expect(h.post("/datasets", content=b'{"name": "x"',
                   headers={"content-type": "application/json"}),
            400, "not valid JSON")
    _expect(h.post("/datasets", content=b""), 400, "empty")
    _expect(h.post("/feedback", content=b'{"key": "k", "score": NaN, "run_id": null}'), 400, "NaN")
    _expect(h.post("/feedback", content=b'{"key": "k", "score": 1e999}'), 400, "out of range")
    _expect(h.post("/datasets", content=b"\xff\xfe{}"), 400)
    _expect(h.post("/datasets", json=["not", "an", "object"]), 422, "JSON object")
    _expect(h.post("/datasets", json={"name": 123}), 422, "name")
    _expect(h.post("/datasets", json={}), 422, "name")
    _expect(h.post("/sessions", json={"name": "p", "reference_dataset_id": "nope"}), 422,
            "reference_dataset_id")
    _expect(h.post("/feedback", json={"key": "k", "score": "high", "run_id": str(uuid.uuid4())}),
            422, "score")
    _expect(h.post("/feedback", json={"key": "k"}), 422, "run_id")
    _expect(h.post("/runs", json={"id": "not-a-uuid", "name": "r"}), 422, "id")
    _expect(h.post("/runs", json={**make_run(), "start_time": "yesterday"}), 422, "start_time")
    _expect(h.post("/runs", json={**make_run(), "end_time": 10**30}), 422, "end_time")
    _expect(h.post("/runs", json={**make_run(), "inputs": [1, 2]}), 422, "inputs")
    _expect(h.post("/runs", json={**make_run(), "tags": "a,b"}), 422, "tags")
    _expect(h.post("/runs", json={"id": str(uuid.uuid4())}), 422, "missing required field")
    _expect(h.post("/runs/batch", json={"post": [make_run(), {"id": 5}]}), 422, "post[1]")
    _expect(h.post("/runs/batch", json={"posts": []}), 422, "posts")
    _expect(h.post("/runs/query", json={"filter": 'eq(name, "x"'}), 422, "filter")
    _expect(h.post("/runs/query", json={"trace_filter": 'gt(latency, "soon")'}), 422, "latency")
    _expect(h.post("/runs/query", json={"filter": 5}), 422, "filter")
    many = [str(uuid.uuid4()) for _ in range(10_001)]  # past what one statement may bind
    _expect(h.post("/runs/query", json={"id": many}), 422, "id")
    _expect(h.post("/api/v2/runs/query", json={"ids": many, "project_ids": many[:1]}), 422, "ids")
    assert h.post("/runs/query", json={"id": many[:10_000]}).status_code == 200
    _expect(h.post("/runs/query", json={"cursor": "abc"}), 422, "cursor")
    _expect(h.get("/sessions", params={"limit": "many"}), 422, "limit")
    _expect(h.get("/datasets/not-a-uuid"), 422, "dataset_id")
    _expect(h.get("/examples", params={"dataset": str(uuid.uuid4()), "metadata": "{oops"}), 400,
            "metadata")
    ds = h.post("/datasets", json={"name": "d"}).json()
    body = _expect(h.post("/examples/bulk", json=[
        {"dataset_id": ds["id"], "inputs": {"a": 1}},
        {"dataset_id": ds["id"], "inputs": "not a mapping"},
    ]), 422, "inputs")
    assert body.get("index") == 1 or "body[1]" in body["detail"]
    assert ws.store.examples.list(dataset_id=ds["id"]) == []
    _nothing_written(ws)


def test_unknown_ids_and_routes(ws: Workspace) -> None:
    missing = str(uuid.uuid4())
    for path in (f"/datasets/{missing}", f"/examples/{missing}", f"/sessions/{missing}",
                 f"/runs/{missing}", f"/feedback/{missing}"):
        _expect(ws.http.get(path), 404, missing)
    _expect(ws.http.patch(f"/sessions/{missing}", json={"name": "x"}), 404, missing)
    _expect(ws.http.delete(f"/feedback/{missing}"), 404, missing)
    _expect(ws.http.post("/examples", json={"dataset_id": missing, "inputs": {}}), 404, missing)
    _expect(ws.http.post("/sessions", json={"name": "e", "reference_dataset_id": missing}), 404)
    _expect(ws.http.get("/no/such/endpoint"), 404, "/no/such/endpoint")
    _expect(ws.http.put("/info"), 405, "PUT")


def test_multipart_problems(ws: Workspace) -> None:
    run = make_run()
    rid = run["id"]
    cases = [
        ([(f"post.{rid}", run), (f"post.{rid}.nonsense", {})], 422, "nonsense"),
        ([(f"post.{rid}", run), ("runs.x", {})], 422, "runs.x"),
        ([(f"post.{rid}", run), (f"post.{rid}", run)], 422, "twice"),
        ([(f"post.{rid}.inputs", {"a": 1})], 422, "without"),
        ([("post.not-a-uuid", run)], 422, "not-a-uuid"),
        ([(f"post.{rid}", b"{broken")], 400, f"post.{rid}"),
        ([(f"post.{rid}", [1, 2])], 422, "JSON object"),
        ([(f"post.{rid}", {**run, "id": str(uuid.uuid4())})], 422, "differs"),
        ([(f"post.{rid}", run), (f"feedback.{uuid.uuid4()}", {"key": "k", "score": "bad"})],
         422, "score"),
    ]
    for parts, status, word in cases:
        body, headers = multipart(parts)
        _expect(ws.http.post("/runs/multipart", content=body, headers=headers), status, word)
    # framing problems
    _expect(ws.http.post("/runs/multipart", content=b"--x\r\n", headers={
        "content-type": "multipart/form-data"}), 400, "boundary")
    _expect(ws.http.post("/runs/multipart", content=b"{}", headers={
        "content-type": "application/json"}), 415, "multipart/form-data")
    body, _ = multipart([(f"post.{rid}", run)])
    _expect(ws.http.post("/runs/multipart", content=body[: len(body) // 2], headers=MP), 400,
            "closing boundary")
    _expect(ws.http.post("/runs/multipart", content=b"garbage without boundaries", headers=MP), 400)
    # example uploads: unknown parts and attachments are named
    ds = ws.http.post("/datasets", json={"name": "mp"}).json()
    ex = str(uuid.uuid4())
    for parts, word in (([(ex, {}), (f"{ex}.bogus", {})], "bogus"),
                        ([("not-an-id", {})], "not-an-id"),
                        ([(ex, {}), (f"{ex}.attachment.img", b"..")], "attachment")):
        body, headers = multipart(parts)
        _expect(ws.http.post(f"/v1/platform/datasets/{ds['id']}/examples", content=body,
                             headers=headers), 422, word)
    assert ws.store.examples.list(dataset_id=ds["id"]) == []
    _nothing_written(ws)


def test_bad_compression(ws: Workspace) -> None:
    body, headers = multipart([(f"post.{uuid.uuid4()}", make_run())])
    for encoding, data, word in (
        ("zstd", b"not zstd at all", "zstd"),
        ("gzip", b"not gzip at all", "gzip"),
        ("gzip", gzip.compress(body)[:-12], "truncated"),
        ("br", body, "br"),
    ):
        _expect(ws.http.post("/runs/multipart", content=data,
                             headers={**headers, "content-encoding": encoding}),
                415 if encoding == "br" else 400, word)
    _expect(ws.http.post("/runs/batch", content=b"\x28\xb5\x2f\xfd garbage",
                         headers={"content-encoding": "zstd"}), 400, "zstd")
    # a compressed JSON body is fine
    run = make_run("gz")
    ok = ws.http.post("/runs/batch", content=gzip.compress(json.dumps({"post": [run]}).encode()),
                      headers={"content-encoding": "gzip", "content-type": "application/json"})
    assert ok.status_code == 202, ok.text
    assert [r.name for r in ws.store.runs.list()] == ["gz"]


def test_size_limits_and_zip_bombs(ws: Workspace) -> None:
    big = make_run("big", inputs={"blob": "x" * (TEST_MAX_BODY + 10)})
    body = _expect(ws.http.post("/runs/batch", json={"post": [big]}), 413, str(TEST_MAX_BODY))
    assert body["limit"] == TEST_MAX_BODY

    def chunks():  # no Content-Length: the cap applies while streaming
        payload = json.dumps({"post": [big]}).encode()
        for i in range(0, len(payload), 64 * 1024):
            yield payload[i: i + 64 * 1024]

    _expect(ws.http.post("/runs/batch", content=chunks()), 413, "limit")
    bomb = b'{"post": [' + b" " * (8 * TEST_MAX_BODY) + b"]}"  # 8x the cap once inflated
    z = zstandard.ZstdCompressor(level=19).compress(bomb)
    g = gzip.compress(bomb, 9)
    assert len(z) < 10_000 and len(g) < 20_000
    _expect(ws.http.post("/runs/batch", content=z, headers={"content-encoding": "zstd"}), 413,
            "decompressed")
    _expect(ws.http.post("/runs/batch", content=g, headers={"content-encoding": "gzip"}), 413,
            "decompressed")
    mp_bomb, headers = multipart([(f"post.{uuid.uuid4()}",
                                   make_run(inputs={"b": "y" * (2 * TEST_MAX_BODY)}))],
                                 encoding="zstd")
    _expect(ws.http.post("/runs/multipart", content=mp_bomb, headers=headers), 413)
    _nothing_written(ws)
    # the server's decompressor, kept per thread, is whole again after a refused bomb and a
    # corrupt frame: the next compressed bodies arrive intact
    _expect(ws.http.post("/runs/batch", content=b"\x28\xb5\x2f\xfd garbage",
                         headers={"content-encoding": "zstd"}), 400, "zstd")
    runs = [make_run(f"after-{i}", inputs={"i": i}) for i in range(3)]
    for run in runs:
        ok = ws.http.post("/runs/batch", content=zstandard.ZstdCompressor().compress(
            json.dumps({"post": [run]}).encode()), headers={"content-encoding": "zstd"})
        assert ok.status_code == 202, ok.text
    stored = {r.name: r.inputs for r in ws.store.runs.list()}
    assert stored == {f"after-{i}": {"i": i} for i in range(3)}


def test_no_partial_write_when_a_later_item_fails(ws: Workspace) -> None:
    good = make_run("good", session="atomic")
    # fails in validation
    body, headers = multipart([(f"post.{good['id']}", good),
                               (f"feedback.{uuid.uuid4()}", {"key": "k", "score": [1]})])
    _expect(ws.http.post("/runs/multipart", content=body, headers=headers), 422)
    # fails inside the database transaction, after the runs were written: all rolled back
    _, other = ws.server.new_key()
    foreign = other.projects.create("theirs")
    bad = make_run("bad")
    bad["session_id"] = str(foreign.id)
    _expect(ws.http.post("/runs/batch", json={"post": [good, bad]}), 404, str(foreign.id))
    taken = other.feedback.create(session_id=str(foreign.id), key="k", score=1)
    body, headers = multipart([(f"post.{good['id']}", good),
                               (f"feedback.{taken.id}", {"id": str(taken.id), "key": "k",
                                                         "run_id": good["id"], "score": 0})])
    _expect(ws.http.post("/runs/multipart", content=body, headers=headers), 409)
    _nothing_written(ws)
    with pytest.raises(NotFoundError):
        ws.store.projects.read(project_name="atomic")
    assert other.feedback.read(taken.id).score == 1


GARBAGE = [b"", b"{", b"[]", b"null", b"0", b'"x"', b"\xff\xfe\x00", b'{"id": "x"}',
           b'{"post": "x", "patch": 7}', b'[{"id": null}]', b'{"name": {"a": 1}}',
           b'{"inputs": [], "dataset_id": "' + str(uuid.uuid4()).encode() + b'"}',
           b'{"key": "", "run_id": 1}', b'{"session": "x", "limit": -1}',
           b'{"extra": "x", "end_time": true, "name": null}', b'{"tag": 1, "as_of": []}',
           b'{"id": "00000000-0000-0000-0000-000000000000", "start_time": "2026-13-45"}']


def test_garbage_never_gives_a_500(ws: Workspace) -> None:
    rid = str(uuid.uuid4())
    targets = [("POST", "/datasets"), ("PATCH", f"/datasets/{rid}"), ("POST", "/examples"),
               ("POST", "/examples/bulk"), ("PATCH", "/examples/bulk"),
               ("PATCH", f"/examples/{rid}"),
               ("POST", "/sessions"), ("PATCH", f"/sessions/{rid}"), ("POST", "/runs"),
               ("PATCH", f"/runs/{rid}"), ("POST", "/runs/batch"), ("POST", "/runs/query"),
               ("POST", "/feedback"), ("PUT", f"/datasets/{rid}/tags"), ("POST", "/runs/multipart"),
               ("POST", f"/v1/platform/datasets/{rid}/examples")]
    for method, path in targets:
        for data in GARBAGE:
            for headers in ({}, MP, {"content-encoding": "zstd"}):
                resp = ws.http.request(method, path, content=data, headers=headers)
                assert resp.status_code < 500, (method, path, data, headers, resp.text)
                if resp.status_code >= 400:
                    assert resp.json()["detail"]
                elif path not in (f"/runs/{rid}", "/runs/query"):  # a query; an early patch
                    assert data == b"[]", (method, path, data, resp.text)  # empty batch
    assert {str(r.id) for r in ws.store.runs.list()} <= {rid}
    assert ws.store.feedback.list() == []
