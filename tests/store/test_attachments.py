"""Example and run attachments in the store (SQLite and PostgreSQL): content-addressed blobs,
versions, operations, checks, and nothing half written."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from assay.client import Client
from assay.errors import ExampleValidationError, InvalidInputError, NotFoundError
from assay.store import Store
from assay.store._attachments import AttachmentTooLarge, check_upload, operations
from assay.store._tables import blobs, example_attachments, run_attachments

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x10JFIF" + bytes(300)
PDF = b"%PDF-1.7\n" + b"x" * 200


def _blob_count(store: Store) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(blobs)
                            .where(blobs.c.tenant_id == store.tenant_id)).scalar_one()


def _names(client: Client, ex_id: object, **kw: object) -> dict[str, bytes]:
    ex = client.read_example(ex_id, **kw)  # type: ignore[arg-type]
    return {n: a["reader"].read() for n, a in (ex.attachments or {}).items()}


def test_blobs_are_content_addressed_and_deduplicated(client: Client, store: Store) -> None:
    ds = client.create_dataset("d")
    made = client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"i": i},
         "attachments": {"img": ("image/png", PNG), "doc": ("application/pdf", PDF)}}
        for i in range(3)])
    assert _blob_count(store) == 2  # six attachments, two distinct contents
    ex = client.read_example(made["example_ids"][0])
    img = ex.attachments["img"]
    assert img["mime_type"] == "image/png" and img["reader"].read() == PNG
    assert ex.attachments["doc"]["reader"].read() == PDF
    stored = store.attachments.of_examples([ex.id])[str(ex.id)]["img"]
    import hashlib

    assert stored.sha256 == hashlib.sha256(PNG).hexdigest() and stored.size == len(PNG)
    # ranges are cut in SQL
    assert store.attachments.read_blob(stored.sha256, 3, 5) == PNG[3:8]
    assert store.attachments.read_blob(stored.sha256, len(PNG) - 2) == PNG[-2:]


def test_versions_keep_their_attachments(client: Client, store: Store) -> None:
    ds = client.create_dataset("d")
    ex = client.create_example({"q": 1}, dataset_id=ds.id,
                               attachments={"img": ("image/png", PNG),
                                            "note": ("text/plain", b"v1")})
    v1 = client.read_example(ex.id).modified_at
    # an update of other fields keeps every attachment (references copied, bytes not)
    client.update_example(ex.id, inputs={"q": 2})
    assert set(_names(client, ex.id)) == {"img", "note"}
    v2 = client.read_example(ex.id).modified_at
    # rename one, drop the other (not retained), add a new one
    client.update_example(ex.id, attachments={"photo": ("image/jpeg", JPEG)},
                          attachments_operations={"rename": {"img": "pic"}, "retain": []})
    now = _names(client, ex.id)
    assert now == {"pic": PNG, "photo": JPEG}
    assert _names(client, ex.id, as_of=v1) == {"img": PNG, "note": b"v1"}
    assert _names(client, ex.id, as_of=v2) == {"img": PNG, "note": b"v1"}
    # a new file under an existing name replaces it in the new version only
    client.update_example(ex.id, attachments={"pic": ("image/png", PNG[:-1])})
    assert _names(client, ex.id)["pic"] == PNG[:-1]
    # listing: only when asked for, and of the version listed
    listed = list(client.list_examples(dataset_id=ds.id, include_attachments=True))
    assert set(listed[0].attachments) == {"pic", "photo"}
    assert next(iter(client.list_examples(dataset_id=ds.id))).attachments is None
    old = list(client.list_examples(dataset_id=ds.id, as_of=v1, include_attachments=True))
    assert set(old[0].attachments) == {"img", "note"}
    # a deleted example's versions keep theirs
    client.delete_example(ex.id)
    assert _names(client, ex.id, as_of=v2) == {"img": PNG, "note": b"v1"}


def test_operations_are_checked_and_atomic(client: Client, store: Store) -> None:
    ds = client.create_dataset("d")
    ex = client.create_example({"q": 1}, dataset_id=ds.id, attachments={
        "a": ("text/plain", b"A"), "b": ("text/plain", b"B")})
    before = client.read_example(ex.id).modified_at
    with pytest.raises(InvalidInputError, match="does not have.*'zzz'"):
        client.update_example(ex.id, inputs={"q": 9},
                              attachments_operations={"retain": ["zzz"]})
    # nothing of the refused update: no new version, same files
    assert client.read_example(ex.id).modified_at == before
    assert client.read_example(ex.id).inputs == {"q": 1}
    # a swap of names works in one update
    client.update_example(ex.id, attachments_operations={"rename": {"a": "b", "b": "a"}})
    assert _names(client, ex.id) == {"a": b"B", "b": b"A"}
    with pytest.raises(InvalidInputError, match="two attachments renamed to one name"):
        operations({"rename": {"a": "x", "b": "x"}})
    with pytest.raises(InvalidInputError, match="retain"):
        operations({"keep": ["a"]})


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "a\\b", "..", "x\x00y", "", "n" * 300])
def test_names_are_labels_never_paths(name: str) -> None:
    with pytest.raises(InvalidInputError, match="attachment name"):
        check_upload(name, "text/plain", b"x")


@pytest.mark.parametrize(("mime", "data", "problem"), [
    ("image/png", JPEG, "not image/png"),
    ("image/jpeg", PNG, "not image/jpeg"),
    ("application/pdf", b"hello", "not application/pdf"),
    ("audio/wav", b"RIFF\x00\x00\x00\x00AVI ", "not audio/wav"),
    ("image/png", b"", "not image/png"),
    ("application/json", b"{not json", "not JSON"),
    ("text/plain", PNG, "binary file"),
    ("not a mime", b"x", "not a MIME type"),
])
def test_a_lying_mime_type_is_refused(mime: str, data: bytes, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        check_upload("f", mime, data)


def test_honest_types_pass() -> None:
    for mime, data in [("image/png", PNG), ("image/jpeg", JPEG), ("application/pdf", PDF),
                       ("audio/wav", b"RIFF\x00\x00\x00\x00WAVEfmt "),
                       ("audio/mpeg", b"ID3\x04rest"), ("video/mp4", b"\x00\x00\x00\x18ftypmp42"),
                       ("application/octet-stream", PNG), ("text/csv; charset=utf-8", b"a,b\n1,2"),
                       ("application/json", b'{"a": 1}'), ("application/x-custom", b"\x00\x01")]:
        assert check_upload("f", mime, data).mime_type == mime.split(";")[0]


def test_size_limit_names_the_limit() -> None:
    with pytest.raises(AttachmentTooLarge, match="over the limit of 100 bytes") as err:
        check_upload("big", "application/octet-stream", bytes(101), max_bytes=100)
    assert err.value.limit == 100
    assert check_upload("ok", "application/octet-stream", bytes(100), max_bytes=100).data


def test_refused_batch_writes_nothing(client: Client, store: Store) -> None:
    ds = client.create_dataset("d")
    dup = str(uuid.uuid4())
    with pytest.raises(ExampleValidationError, match="duplicate"):
        client.create_examples(dataset_id=ds.id, examples=[
            {"id": dup, "inputs": {}, "attachments": {"img": ("image/png", PNG)}},
            {"id": dup, "inputs": {}, "attachments": {"doc": ("application/pdf", PDF)}}])
    with pytest.raises(InvalidInputError, match="not image/png"):
        client.create_examples(dataset_id=ds.id, examples=[
            {"inputs": {}, "attachments": {"ok": ("application/pdf", PDF)}},
            {"inputs": {}, "attachments": {"bad": ("image/png", PDF)}}])
    assert list(client.list_examples(dataset_id=ds.id)) == []
    assert _blob_count(store) == 0


def test_run_attachments(store: Store) -> None:
    run_id = str(uuid.uuid4())
    assert store.attachments.set_runs({run_id: [check_upload("img", "image/png", PNG)]}) == 1
    store.attachments.set_runs({run_id: [check_upload("img", "image/jpeg", JPEG),
                                         check_upload("log", "text/plain", b"ok")]})
    found = store.attachments.of_runs([run_id, str(uuid.uuid4())])
    assert list(found) == [run_id]
    assert {n: a.mime_type for n, a in found[run_id].items()} == {"img": "image/jpeg",
                                                                   "log": "text/plain"}


def test_workspaces_never_share_blobs(store: Store) -> None:
    other = store.for_tenant(str(uuid.uuid4()))
    run_id = str(uuid.uuid4())
    store.attachments.set_runs({run_id: [check_upload("img", "image/png", PNG)]})
    sha = store.attachments.of_runs([run_id])[run_id]["img"].sha256
    assert store.attachments.read_blob(sha) == PNG
    with pytest.raises(NotFoundError):
        other.attachments.read_blob(sha)
    assert other.attachments.of_runs([run_id]) == {}


def test_deleted_dataset_blobs_are_collected(client: Client, store: Store) -> None:
    ds = client.create_dataset("d")
    client.create_example({"q": 1}, dataset_id=ds.id, attachments={"img": ("image/png", PNG)})
    keep = client.create_dataset("keep")
    client.create_example({"q": 1}, dataset_id=keep.id,
                          attachments={"doc": ("application/pdf", PDF)})
    shared = client.create_dataset("shares-the-pdf")
    client.create_example({"q": 1}, dataset_id=shared.id,
                          attachments={"doc": ("application/pdf", PDF), "img": ("image/png", PNG)})
    client.delete_dataset(dataset_id=shared.id)  # its PNG is still used by "d", its PDF by "keep"
    assert _blob_count(store) == 2
    client.delete_dataset(dataset_id=ds.id)  # the PNG's last user
    with store.engine.connect() as conn:  # the example rows went with the dataset
        assert conn.execute(select(func.count()).select_from(example_attachments)
                            .where(example_attachments.c.tenant_id == store.tenant_id)
                            ).scalar_one() == 1
    assert _blob_count(store) == 1
    assert store.attachments.collect() == 0  # nothing left over
    ex = next(iter(client.list_examples(dataset_id=keep.id, include_attachments=True)))
    assert ex.attachments["doc"]["reader"].read() == PDF


def _run_attachment_rows(store: Store) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(run_attachments)
                            .where(run_attachments.c.tenant_id == store.tenant_id)).scalar_one()


def test_run_attachments_go_with_their_traces_and_projects(client: Client, store: Store) -> None:
    """Deleting traces (``delete_traces``) or a whole project drops the runs' attachment rows
    and the blobs nothing else names; a blob an example still uses stays."""
    def trace(project: str) -> str:
        rid = str(uuid.uuid4())
        store.runs.upsert(posts=[{"id": rid, "trace_id": rid, "name": "r", "run_type": "chain",
                                  "start_time": "2026-01-01T00:00:00Z", "session_name": project}])
        return rid

    a, b, c = trace("p"), trace("p"), trace("other")
    child = str(uuid.uuid4())
    store.runs.upsert(posts=[{"id": child, "trace_id": a, "parent_run_id": a, "name": "c",
                              "run_type": "llm", "start_time": "2026-01-01T00:00:01Z",
                              "session_name": "p"}])
    store.attachments.set_runs({
        a: [check_upload("img", "image/png", PNG)], child: [check_upload("log", "text/plain",
                                                                         b"child only")],
        b: [check_upload("doc", "application/pdf", PDF)],
        c: [check_upload("doc", "application/pdf", PDF), check_upload("jpg", "image/jpeg", JPEG)]})
    ds = client.create_dataset("uses-the-png")
    client.create_example({"q": 1}, dataset_id=ds.id, attachments={"img": ("image/png", PNG)})
    assert (_run_attachment_rows(store), _blob_count(store)) == (5, 4)

    project = store.projects.read(project_name="p")
    assert store.runs.delete_traces(project.id, trace_ids=[a]) == 2  # the root and its child
    assert store.attachments.of_runs([a, child]) == {}
    assert (_run_attachment_rows(store), _blob_count(store)) == (3, 3)  # the PNG: an example's
    ex = next(iter(client.list_examples(dataset_id=ds.id, include_attachments=True)))
    assert ex.attachments["img"]["reader"].read() == PNG

    store.projects.delete(project_name="p")  # b's PDF is still c's
    assert store.attachments.of_runs([b]) == {}
    assert (_run_attachment_rows(store), _blob_count(store)) == (2, 3)
    store.projects.delete(project_name="other")
    assert (_run_attachment_rows(store), _blob_count(store)) == (0, 1)
    assert store.attachments.collect() == 0  # nothing was left over


def test_filesystem_paths_need_the_opt_in(client: Client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    ds = client.create_dataset("d")
    f = Path(tmp_path) / "x.png"
    f.write_bytes(PNG)
    with pytest.raises(InvalidInputError, match="dangerously_allow_filesystem"):
        client.create_example({"q": 1}, dataset_id=ds.id, attachments={"img": ("image/png", f)})
    ex = client.create_example({"q": 1}, dataset_id=ds.id, attachments={"img": ("image/png", f)},
                               dangerously_allow_filesystem=True)
    assert _names(client, ex.id) == {"img": PNG}


def test_evaluate_hands_attachments_to_target_and_evaluators(client: Client) -> None:
    from assay import evaluate

    ds = client.create_dataset("mm")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": i}, "outputs": {"size": len(PNG) + i}, "metadata": {"i": i},
         "attachments": {"img": ("image/png", PNG + bytes(i))}} for i in range(3)])

    def target(inputs: dict, attachments: dict, metadata: dict) -> dict:
        data = attachments["img"]["reader"].read()  # read to the end: evaluators get it rewound
        assert attachments["img"]["mime_type"] == "image/png" and metadata["i"] == inputs["q"]
        return {"size": len(data)}

    def same_size(outputs: dict, reference_outputs: dict, attachments: dict) -> dict:
        return {"key": "size_ok", "score": int(
            outputs["size"] == reference_outputs["size"]
            == len(attachments["img"]["reader"].read()))}

    res = evaluate(target, data="mm", evaluators=[same_size], client=client)
    rows = list(res)
    assert [r["run"].outputs["size"] for r in rows] == [len(PNG) + i for i in range(3)]
    assert [r["evaluation_results"]["results"][0].score for r in rows] == [1, 1, 1]

    async def atarget(inputs: dict, attachments: dict) -> dict:  # async targets too
        return {"n": len(attachments)}

    assert [r["run"].outputs for r in evaluate(atarget, data="mm", client=client)] == [{"n": 1}] * 3
    # a target of the inputs alone is called as before (and the files are never read)
    assert [r["run"].outputs for r in evaluate(lambda inputs: {"q": inputs["q"]}, data="mm",
                                               client=client)] == [{"q": i} for i in range(3)]


def test_readers_fetch_on_first_read(client: Client, store: Store) -> None:
    from sqlalchemy import event

    ds = client.create_dataset("lazy")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"i": i}, "attachments": {"img": ("image/png", PNG + bytes(i))}}
        for i in range(5)])
    reads: list[str] = []

    def count(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        if "FROM blobs" in statement:
            reads.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        listed = list(client.list_examples(dataset_id=ds.id, include_attachments=True))
        assert reads == []  # listed with their files, none fetched yet
        reader = listed[2].attachments["img"]["reader"]
        reader.seek(0)
        assert reads == [] and reader.tell() == 0
        assert reader.read(4) == PNG[:4] and len(reads) == 1
        reader.seek(0)
        assert reader.read() == PNG + bytes(2) and len(reads) == 1  # fetched once
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
