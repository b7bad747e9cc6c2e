"""assay's own Client in remote mode: one scenario, run locally and against the server, agrees."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from assay.client import Client
from assay.errors import (
    AuthError,
    ConflictError,
    ExampleValidationError,
    InvalidInputError,
    NotFoundError,
)

from .conftest import Server


def scenario(client: Client, tmp: Path) -> dict[str, Any]:
    """Datasets, examples, versions, projects, runs and feedback through Client methods only."""
    out: dict[str, Any] = {}
    ds = client.create_dataset("scn", description="d", metadata={"m": 1})
    made = client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": i}, "outputs": {"a": 2 * i}, "split": "test" if i % 2 else "train"}
        for i in range(5)])
    assert made["count"] == 5
    with pytest.raises(ExampleValidationError) as bad:
        client.create_examples(dataset_name="scn", examples=[{"inputs": {}}, {"inputs": 5}])
    out["bad_index"] = bad.value.index
    with pytest.raises(ConflictError):
        client.create_dataset("scn")
    with pytest.raises(NotFoundError):
        client.read_dataset(dataset_name="nope")
    out["has"] = (client.has_dataset(dataset_name="scn"), client.has_dataset(dataset_name="nope"))
    v1 = client.read_dataset_version(dataset_id=ds.id, as_of=datetime.now(UTC))
    client.update_dataset_tag(dataset_id=ds.id, as_of=v1.as_of, tag="v1")
    test = list(client.list_examples(dataset_name="scn", splits=["test"]))
    out["test_split"] = [e.inputs["q"] for e in test]
    client.update_dataset_splits(dataset_name="scn", split_name="hard", example_ids=[test[0].id])
    out["splits"] = (client.list_dataset_splits(dataset_id=ds.id),
                     client.list_dataset_splits(dataset_name="scn", as_of="v1"))
    client.update_example(test[0].id, outputs={"a": -1})
    client.delete_example(test[1].id)
    out["now"] = sorted((e.inputs["q"], e.outputs["a"])
                        for e in client.list_examples(dataset_id=ds.id))
    out["v1"] = sorted((e.inputs["q"], e.outputs["a"])
                       for e in client.list_examples(dataset_id=ds.id, as_of="v1"))
    out["read_old"] = client.read_example(test[0].id, as_of="v1").outputs
    out["versions"] = len(list(client.list_dataset_versions(dataset_id=ds.id)))
    out["paged"] = [e.inputs["q"] for e in client.list_examples(dataset_id=ds.id, offset=1,
                                                                limit=2)]
    path = tmp / "scn.jsonl"
    out["exported"] = client.export_dataset(path, dataset_name="scn")
    copy = client.import_dataset(path, dataset_name="scn-copy")
    out["copy_count"] = copy.example_count
    out["dataset"] = client.update_dataset(dataset_name="scn", description="d2").description

    project = client.create_project("scn-exp", reference_dataset_id=ds.id, metadata={"k": "v"})
    start = datetime(2026, 2, 1, tzinfo=UTC)
    rid, cid = uuid.uuid4(), uuid.uuid4()
    root_order = start.strftime("%Y%m%dT%H%M%S%fZ") + str(rid)
    child_start = start + timedelta(milliseconds=5)
    client.create_run("root", {"q": 1}, "chain", project_name="scn-exp", id=rid, start_time=start,
                      trace_id=rid, dotted_order=root_order)
    client.create_run("llm", {"p": "x"}, "llm", project_name="scn-exp", id=cid,
                      start_time=child_start, trace_id=rid, parent_run_id=rid,
                      dotted_order=f"{root_order}.{child_start.strftime('%Y%m%dT%H%M%S%fZ')}{cid}",
                      extra={"metadata": {"usage_metadata": {"input_tokens": 10,
                                                             "output_tokens": 5},
                                          "ls_provider": "openai", "ls_model_name": "gpt-4o-mini"}},
                      events=[{"name": "new_token",
                               "time": (start + timedelta(milliseconds=30)).isoformat()}])
    client.update_run(cid, outputs={"t": "y"}, end_time=start + timedelta(milliseconds=50))
    client.update_run(rid, outputs={"a": 2}, end_time=start + timedelta(milliseconds=100))
    extra_trace = uuid.uuid4()
    client.create_run("stray", {}, "chain", project_name="scn-exp", id=extra_trace,
                      start_time=start + timedelta(seconds=1))
    out["deleted"] = client.store.runs.delete_traces(project.id, trace_ids=[extra_trace])
    fb = client.create_feedback(rid, "acc", score=1, comment="c", value="right")
    changed = client.update_feedback(fb.id, score=0, comment=None)  # value kept
    out["feedback_updated"] = (changed.score, changed.value, changed.comment)
    client.create_feedback(key="summary", project_id=project.id, score=0.5)
    stats = client.read_project(project_name="scn-exp", include_stats=True)
    out["stats"] = {k: getattr(stats, k) for k in (
        "run_count", "latency_p50", "latency_p99", "first_token_p50", "total_tokens",
        "prompt_tokens", "completion_tokens", "total_cost", "error_rate", "test_run_number")}
    out["feedback_stats"] = {k: v.model_dump() for k, v in (stats.feedback_stats or {}).items()}
    out["session_feedback"] = {k: v.avg for k, v in (stats.session_feedback_stats or {}).items()}
    out["runs"] = [r.name for r in client.list_runs(project_name="scn-exp")]
    out["roots"] = [r.name for r in client.list_runs(project_id=project.id, is_root=True)]
    out["llm_runs"] = [r.total_tokens for r in client.list_runs(project_name="scn-exp",
                                                                run_type="llm")]
    out["filtered"] = [r.name for r in client.list_runs(
        project_name="scn-exp", filter='and(eq(run_type, "llm"), gt(total_tokens, 10))',
        trace_filter='eq(name, "root")')]
    with pytest.raises(InvalidInputError, match="unknown attribute 'colour'"):
        list(client.list_runs(project_name="scn-exp", filter='eq(colour, "red")'))
    tree = client.read_run(rid, load_child_runs=True)
    out["tree"] = [c.name for c in tree.child_runs or []]
    out["updated"] = client.update_project(project.id, description="done",
                                           metadata={"k2": "v2"}).metadata
    out["projects"] = sorted(p.name for p in client.list_projects(reference_dataset_name="scn"))
    out["feedback"] = sorted(f.key for f in client.list_feedback(run_ids=[rid]))
    out["feedback_read"] = client.read_feedback(fb.id).value
    client.delete_feedback(fb.id)
    with pytest.raises(NotFoundError):
        client.read_feedback(fb.id)
    out["has_project"] = client.has_project("scn-exp")
    client.delete_project(project_name="scn-exp")
    out["has_project_after"] = client.has_project("scn-exp")
    client.delete_dataset(dataset_name="scn")
    out["datasets_left"] = [d.name for d in client.list_datasets()]
    return out


def test_remote_client_matches_local(server: Server, sqlite_url: str, tmp_path: Path) -> None:
    local = scenario(Client(database_url=sqlite_url), tmp_path)
    key, _ = server.new_key()
    remote_client = Client(api_url=server.url, api_key=key)
    assert remote_client.is_remote and "api_url" in repr(remote_client)
    remote = scenario(remote_client, tmp_path)
    assert remote == local
    assert local["bad_index"] == 1 and local["stats"]["run_count"] == 1
    assert local["stats"]["total_tokens"] == 15 and local["stats"]["total_cost"] > 0
    assert local["feedback_stats"]["acc"]["values"] == {"right": 1}
    assert local["feedback_stats"]["acc"]["avg"] == 0.0  # the updated score counts
    assert local["feedback_updated"] == (0.0, "right", None)
    assert local["tree"] == ["llm"] and local["runs"] == ["root", "llm"] and local["deleted"] == 1
    assert local["filtered"] == ["llm"]
    assert local["splits"] == (["hard", "test", "train"], ["test", "train"])


def test_remote_client_from_env_and_auth_errors(server: Server,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    key, view = server.new_key()
    monkeypatch.setenv("ASSAY_API_URL", server.url)
    monkeypatch.setenv("ASSAY_API_KEY", key)
    client = Client()
    client.create_dataset("via-env")
    assert [d.name for d in view.datasets.list()] == ["via-env"]
    with pytest.raises(AuthError):
        Client(api_url=server.url, api_key="asy_wrong").list_datasets().__next__()


def test_a_database_url_given_as_the_server_url_is_refused_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Client("sqlite:///x.db")`` (the database URL in the first argument) says so at once,
    instead of failing at the first request while traced runs go nowhere."""
    for wrong in (f"sqlite:///{tmp_path}/x.db", str(tmp_path / "x.db"),
                  "postgresql://u@127.0.0.1/db"):
        with pytest.raises(InvalidInputError, match="database_url") as err:
            Client(wrong)
        assert repr(wrong) in str(err.value)
    monkeypatch.setenv("ASSAY_API_URL", "localhost:1984")  # no scheme: named too
    with pytest.raises(InvalidInputError, match="localhost:1984"):
        Client()
    assert not (tmp_path / "x.db").exists()
    local = Client(database_url=f"sqlite:///{tmp_path}/x.db")  # the right way still works
    local.create_dataset("fine")
    assert [d.name for d in local.list_datasets()] == ["fine"]


def test_a_server_that_is_not_assay_is_named_at_the_first_call() -> None:
    """ASSAY_API_URL at another service (here: one answering JSON to everything) failed at the
    first read as a pydantic validation error of a Dataset."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from assay.errors import RemoteError

    class Other(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"status": "ok", "items": []}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{other.server_address[1]}"
    try:
        with pytest.raises(RemoteError, match="is not an assay server") as err:
            next(iter(Client(api_url=url).list_datasets()))
        assert url in str(err.value) and "assay serve" in str(err.value)
    finally:
        other.shutdown()
        other.server_close()


def test_assay_evaluate_against_the_server(server: Server) -> None:
    from assay.evaluation import evaluate

    key, view = server.new_key()
    client = Client(api_url=server.url, api_key=key)
    ds = client.create_dataset("HelloDataset")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"input": n}, "outputs": {"expected": f"Hello {n}"}} for n in ("A", "B")])

    def foo_label(run, example):  # type: ignore[no-untyped-def]
        return {"score": 1, "key": "foo"}

    def exact(outputs, reference_outputs) -> bool:  # type: ignore[no-untyped-def]
        return outputs["output"] == reference_outputs["expected"]  # a plain score: compact row

    results = evaluate(lambda inputs: "Hello " + inputs["input"], data="HelloDataset",
                       evaluators=[foo_label, exact], experiment_prefix="Hello", client=client,
                       num_repetitions=2)
    stats = client.read_project(project_name=results.experiment_name, include_stats=True)
    assert stats.run_count == 4 and stats.feedback_stats["foo"].n == 4
    assert stats.feedback_stats["exact"].n == 4 and stats.feedback_stats["exact"].avg == 1.0
    assert stats.test_run_number == 1
    # it all landed in the key's workspace on the server
    assert view.projects.read(project_name=results.experiment_name,
                              include_stats=True).run_count == 4
