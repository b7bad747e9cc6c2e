"""Values nested past pydantic-core's depth (~250 levels) but within what ingest parses
(~1,000): stored whole and read back whole. Before, such a run made its project's reads fail
with a 500, and an example's or feedback's value was cut short at that depth ("...")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ._wire import make_run, multipart
from .conftest import Workspace


def _nest(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("route", ["batch", "multipart"])
def test_a_deep_run_reads_back_whole(ws: Workspace, route: str) -> None:
    def post(run: dict[str, Any]) -> Any:
        if route == "batch":
            return ws.http.post("/runs/batch", json={"post": [run]})
        body, headers = multipart([(f"post.{run['id']}", run)], encoding="zstd")
        return ws.http.post("/runs/multipart", content=body, headers=headers)

    project = f"deep-{route}"
    ok = make_run("ok", session=project)
    ok["inputs"] = {"x": _nest(300)}
    resp = post(ok)
    assert resp.status_code == 202, resp.text
    ws.store.settle()
    one = ws.http.get(f"/runs/{ok['id']}")
    assert one.status_code == 200, one.text
    assert one.json()["inputs"] == {"x": _nest(300)}
    listed = ws.http.post("/runs/query", json={"session": [str(one.json()["session_id"])]})
    assert listed.status_code == 200, listed.text
    assert [r["name"] for r in listed.json()["runs"]] == ["ok"]
    assert json.loads(json.dumps(listed.json()["runs"][0]["inputs"])) == {"x": _nest(300)}


def test_deep_examples_and_feedback_read_back_whole(ws: Workspace) -> None:
    """Examples and feedback past pydantic-core's depth (~200 levels) are stored and read back
    (the create answered 500 when it read the example back)."""
    ds = ws.http.post("/datasets", json={"name": "deep-ds"}).json()
    resp = ws.http.post("/examples", json={"dataset_id": ds["id"], "inputs": {"x": _nest(300)}})
    assert resp.status_code == 200, resp.text
    got = ws.http.get(f"/examples/{resp.json()['id']}")
    assert got.status_code == 200 and got.json()["inputs"] == {"x": _nest(300)}
    listed = ws.http.get("/examples", params={"dataset": ds["id"]})
    assert listed.status_code == 200 and listed.json()[0]["inputs"] == {"x": _nest(300)}
    run = make_run("scored", session="deep-fb")
    assert ws.http.post("/runs/batch", json={"post": [run]}).status_code == 202
    resp = ws.http.post("/feedback", json={"run_id": run["id"], "key": "k",
                                           "value": {"x": _nest(300)}})
    assert resp.status_code == 200, resp.text
    got = ws.http.get("/feedback", params={"run": run["id"]})
    assert got.status_code == 200 and got.json()[0]["value"] == {"x": _nest(300)}


def test_the_store_writes_deep_values_whole(sqlite_url: str) -> None:
    """pydantic-core writes a value past its depth as "..." (silently, with serialize_unknown):
    the store's encoders write it whole, through the local client and the tracer too."""
    from assay import Client, _json, traceable
    from assay.tracing import tracing_context

    deep = {"x": _nest(300)}
    assert json.loads(_json.dumps_column(deep)) == deep
    assert _json.loads_column(_json.dumps_column(deep)) == deep
    client = Client(database_url=sqlite_url)
    ds = client.create_dataset("deep-local")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": deep}])
    (ex,) = client.list_examples(dataset_id=ds.id)
    assert ex.inputs == deep and client.read_example(ex.id).inputs == deep

    @traceable(name="deep-step")
    def step(value: Any) -> Any:
        return value

    with tracing_context(enabled=True, client=client, project_name="deep-traced"):
        step(deep["x"])
    client.flush()
    (run,) = client.list_runs(project_name="deep-traced")
    assert run.outputs == {"output": deep["x"]} and run.inputs == {"value": deep["x"]}
