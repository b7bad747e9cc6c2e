"""Dataset features of the official ``langsmith`` SDK against ``assay serve`` (SQLite and
PostgreSQL): ``upload_csv``, ``diff_dataset_versions``, ``list_examples(filter=...)`` and the
dataset's ``inputs_schema``/``outputs_schema`` enforced on every example written; assay's own
Client, local and remote, giving the same answers."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest

from assay import Client
from assay.errors import ExampleValidationError, InvalidInputError

from .conftest import Workspace


def _ls(ws: Workspace) -> Any:
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


CSV = b"question,context,answer\nWhat is 2+2?,math,4\n\"Capital of France, please\",geo,Paris\n"


def test_upload_csv_through_the_sdk(ws: Workspace, tmp_path: Any) -> None:
    from langsmith.utils import LangSmithError

    ls = _ls(ws)
    path = tmp_path / "qa.csv"
    path.write_bytes(CSV)
    ds = ls.upload_csv(str(path), input_keys=["question", "context"], output_keys=["answer"],
                       description="from a file")
    assert ds.name == "qa.csv" and ds.description == "from a file"
    got = sorted(ls.list_examples(dataset_id=ds.id), key=lambda e: e.outputs["answer"])
    assert [(e.inputs, e.outputs) for e in got] == [
        ({"question": "What is 2+2?", "context": "math"}, {"answer": "4"}),
        ({"question": "Capital of France, please", "context": "geo"}, {"answer": "Paris"})]
    # a (name, file) tuple, and the dataset name given
    named = ls.upload_csv(("other.csv", io.BytesIO(CSV)), input_keys=["question"],
                          output_keys=[], name="named")
    assert named.name == "named" and named.example_count == 2
    # a column that is not there: refused, nothing created
    with pytest.raises(LangSmithError, match="no column"):
        ls.upload_csv(("bad.csv", io.BytesIO(CSV)), input_keys=["nope"], output_keys=[],
                      name="bad")
    with pytest.raises(LangSmithError, match="already exists"):
        ls.upload_csv(str(path), input_keys=["question"], output_keys=["answer"])
    assert sorted(d.name for d in ls.list_datasets()) == ["named", "qa.csv"]


def test_bad_csv_uploads_leave_nothing(ws: Workspace) -> None:
    files = {"file": ("rows.csv", b"a,b\n1,2,3\n", "text/csv")}
    resp = ws.http.post("/datasets/upload", data={"input_keys": ["a"], "name": "x"}, files=files)
    assert resp.status_code == 422 and "more cells than columns" in resp.json()["detail"]
    resp = ws.http.post("/datasets/upload", data={"input_keys": ["a"], "name": "x"},
                        files={"file": ("rows.csv", b"\xff\xfe\x00bad", "text/csv")})
    assert resp.status_code == 422 and "UTF-8" in resp.json()["detail"]
    resp = ws.http.post("/datasets/upload", data={"name": "x"},
                        files={"file": ("rows.csv", b"a\n1\n", "text/csv")})
    assert resp.status_code == 422 and "input_keys" in resp.json()["detail"]
    assert ws.http.get("/datasets").json() == []


def test_diff_dataset_versions_through_the_sdk(ws: Workspace) -> None:
    ls = _ls(ws)
    ds = ls.create_dataset("diffed")
    made = ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": str(i)}, "outputs": {"a": str(i)}} for i in range(3)])
    ids = [str(i) for i in made["example_ids"]]
    ls.update_dataset_tag(dataset_id=ds.id, as_of=ls.read_dataset(dataset_id=ds.id).modified_at,
                          tag="v1")
    ls.update_example(ids[0], outputs={"a": "changed"})
    ls.delete_example(ids[1])
    new = ls.create_example(inputs={"q": "new"}, dataset_id=ds.id)
    ls.update_dataset_tag(dataset_id=ds.id, as_of=ls.read_dataset(dataset_id=ds.id).modified_at,
                          tag="v2")
    diff = ls.diff_dataset_versions(ds.id, from_version="v1", to_version="v2")
    assert [str(i) for i in diff.examples_added] == [str(new.id)]
    assert [str(i) for i in diff.examples_modified] == [ids[0]]
    assert [str(i) for i in diff.examples_removed] == [ids[1]]
    back = ls.diff_dataset_versions(dataset_name="diffed", from_version="v2", to_version="v1")
    assert [str(i) for i in back.examples_removed] == [str(new.id)]
    assert [str(i) for i in back.examples_added] == [ids[1]]
    same = ls.diff_dataset_versions(ds.id, from_version="v2", to_version="latest")
    assert same.examples_added == same.examples_modified == same.examples_removed == []
    from langsmith.utils import LangSmithNotFoundError

    with pytest.raises(LangSmithNotFoundError):
        ls.diff_dataset_versions(ds.id, from_version="nope", to_version="v2")


def test_list_examples_filter_through_the_sdk(ws: Workspace) -> None:
    from langsmith.utils import LangSmithError

    ls = _ls(ws)
    ds = ls.create_dataset("filtered")
    ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": "a"}, "metadata": {"foo": "bar", "baz": 1}},
        {"inputs": {"q": "b"}, "metadata": {"foo": "qux", "baz": 2}},
        {"inputs": {"q": "Refund me"}, "metadata": {"foo": "bar"}},
        {"inputs": {"q": "d"}},
    ])

    def qs(flt: str, **kw: Any) -> list[str]:
        return sorted(e.inputs["q"] for e in ls.list_examples(dataset_id=ds.id, filter=flt, **kw))

    assert qs('exists(metadata, "baz")') == ["a", "b"]
    assert qs('eq(metadata.foo, "bar")') == ["Refund me", "a"]
    assert qs('and(not(has(metadata, \'{"foo": "bar"}\')), exists(metadata, "baz"))') == ["b"]
    assert qs('or(gt(metadata.baz, 1), search("refund"))') == ["Refund me", "b"]
    assert qs('neq(metadata.foo, "bar")') == ["b", "d"]
    assert qs('eq(metadata.foo, "bar")', limit=1) in (["a"], ["Refund me"])
    with pytest.raises(LangSmithError, match=r"unknown function \W*near"):
        qs('near(metadata, "x")')
    with pytest.raises(LangSmithError, match=r"unknown attribute \W*color"):
        qs('eq(color, "red")')


SCHEMA = {"type": "object", "properties": {"q": {"type": "string"},
                                           "n": {"type": "integer", "minimum": 0}},
          "required": ["q"], "additionalProperties": False}


def test_dataset_schemas_are_enforced_through_the_sdk(ws: Workspace) -> None:
    from langsmith.utils import LangSmithError

    ls = _ls(ws)
    ds = ls.create_dataset("typed", inputs_schema=SCHEMA,
                           outputs_schema={"type": "object", "required": ["a"]})
    assert ls.read_dataset(dataset_id=ds.id).inputs_schema == SCHEMA
    ok = ls.create_example(inputs={"q": "hi", "n": 1}, outputs={"a": 1}, dataset_id=ds.id)
    bad_id = str(uuid.uuid4())
    with pytest.raises(LangSmithError, match=rf"example {bad_id}: inputs.n does not match"):
        ls.create_examples(dataset_id=ds.id, examples=[
            {"inputs": {"q": "fine"}, "outputs": {"a": 1}},
            {"inputs": {"q": "x", "n": -1}, "outputs": {"a": 1}, "id": bad_id}])
    with pytest.raises(LangSmithError, match=r"outputs does not match .*\Wa\W+ is a required"):
        ls.create_example(inputs={"q": "x"}, outputs={"b": 1}, dataset_id=ds.id)
    with pytest.raises(LangSmithError, match=r"inputs does not match .*\Wextra\W"):
        ls.update_example(ok.id, inputs={"q": "x", "extra": True})
    # nothing of a refused batch was written, and the refused update left the example as it was
    assert [e.inputs for e in ls.list_examples(dataset_id=ds.id)] == [{"q": "hi", "n": 1}]
    with pytest.raises(LangSmithError, match="inputs_schema is not valid JSON Schema"):
        ls.create_dataset("broken", inputs_schema={"type": "no-such-type"})
    assert not ls.has_dataset(dataset_name="broken")


@pytest.fixture(params=["local", "remote"])
def both(request: pytest.FixtureRequest, ws: Workspace) -> Client:
    if request.param == "local":
        return Client(store=ws.store)
    return Client(api_url=ws.server.url, api_key=ws.key)


def test_assay_client_dataset_tools_local_and_remote(both: Client, ws: Workspace,
                                                     tmp_path: Any) -> None:
    c = both
    ds = c.create_dataset("typed", inputs_schema=SCHEMA)
    c.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": "a"}, "metadata": {"k": 1}}, {"inputs": {"q": "b"}}])
    with pytest.raises(ExampleValidationError, match="inputs.q does not match") as err:
        c.create_examples(dataset_id=ds.id, examples=[{"inputs": {"q": "c"}},
                                                      {"inputs": {"q": 3}}])
    assert err.value.index == 1
    with pytest.raises(InvalidInputError, match="not valid JSON Schema"):
        c.create_dataset("broken", outputs_schema={"required": "a"})
    # a new schema must hold for the examples already there
    with pytest.raises(InvalidInputError, match="inputs does not match .*'n' is a required"):
        c.update_dataset(ds.id, inputs_schema={**SCHEMA, "required": ["n"]})
    loose = {"type": "object"}
    assert c.update_dataset(ds.id, inputs_schema=loose).inputs_schema_definition == loose
    c.create_example(inputs={"q": 3}, dataset_id=ds.id)  # the looser schema lets it in
    assert [e.inputs["q"] for e in c.list_examples(dataset_id=ds.id,
                                                   filter='exists(metadata, "k")')] == ["a"]
    with pytest.raises(InvalidInputError, match="unknown function"):
        list(c.list_examples(dataset_id=ds.id, filter="nope(metadata)"))
    v1 = c.read_dataset(dataset_id=ds.id).modified_at
    (first,) = c.list_examples(dataset_id=ds.id, filter='eq(inputs.q, "a")')
    c.delete_example(first.id)
    diff = c.diff_dataset_versions(ds.id, from_version=v1, to_version="latest")
    assert diff.examples_removed == [first.id] and not diff.examples_added
    path = tmp_path / "rows.csv"
    path.write_bytes(CSV)
    up = c.upload_csv(path, input_keys=["question"], output_keys=["answer"], name="csv")
    assert sorted(e.outputs["answer"] for e in c.list_examples(dataset_id=up.id)) == ["4",
                                                                                      "Paris"]


def test_a_csv_upload_is_read_as_a_csv_import_is(ws: Workspace) -> None:
    """The server's upload and ``assay datasets import`` read CSV through one reader: a row cut
    short, an open quote are refused by line, Excel's BOM is read, a quoted cell keeps its
    line breaks."""
    def upload(body: bytes) -> Any:
        return ws.http.post("/datasets/upload", data={"input_keys": ["a"],
                                                      "output_keys": ["b"], "name": "x"},
                            files={"file": ("rows.csv", body, "text/csv")})

    short = upload(b"a,b\n1,2\n3\n")
    assert short.status_code == 422
    assert "rows.csv:3: fewer cells than columns" in short.json()["detail"]
    quoted = upload(b'a,b\n"open,2\n3,4\n')
    assert quoted.status_code == 422 and "malformed CSV" in quoted.json()["detail"]
    assert ws.http.get("/datasets").json() == []
    done = upload(b'\xef\xbb\xbfa,b\n"two\nlines",2\n')
    assert done.status_code == 200, done.text
    (example,) = ws.http.get("/examples", params={"dataset": done.json()["id"]}).json()
    assert example["inputs"] == {"a": "two\nlines"} and example["outputs"] == {"b": "2"}
