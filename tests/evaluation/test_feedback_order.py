"""An experiment's feedback is never stored before the run it scores: a process killed in
between would leave feedback pointing at no run (read_project counted it; only a resume mended
it). ``assay db check`` finds feedback whose run is missing."""

from __future__ import annotations

import json
import threading
import time
import uuid

from typer.testing import CliRunner

from assay import evaluate
from assay.cli import app
from assay.client import Client
from assay.store import Store

from .conftest import make_dataset, unique

N = 6


def _exact(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


def test_feedback_waits_for_its_runs(client: Client) -> None:
    data = make_dataset(client, unique("order"), N)
    writer = client._tracing_writer()
    runs_may_go = threading.Event()
    writer.hold(runs_may_go)  # the runs wait in the writer's queue, as behind a slow write
    calls: list[int] = []

    def target(inputs: dict) -> dict:
        calls.append(inputs["x"])
        return {"y": 2 * inputs["x"]}

    out: list = []
    thread = threading.Thread(target=lambda: out.append(
        evaluate(target, data=data, evaluators=[_exact], client=client)))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(calls) < N and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) == N
        time.sleep(0.5)  # 25 of the feedback sink's intervals: it would have written by now
        assert list(client.list_feedback()) == []
    finally:
        runs_may_go.set()
        thread.join(60)
    assert not thread.is_alive() and out
    exp = client.read_project(project_name=out[0].experiment_name)
    roots = {r.id for r in client.list_runs(project_id=exp.id, is_root=True)}
    feedback = list(client.list_feedback(project_ids=[exp.id]))
    assert len(roots) == N and {f.run_id for f in feedback} == roots


def _check(url: str) -> tuple[int, dict]:
    out = CliRunner().invoke(app, ["db", "check", "--db", url, "--json"])
    return out.exit_code, json.loads(out.output)


def test_db_check_finds_feedback_without_its_run(sqlite_url: str) -> None:
    with Store.open(sqlite_url) as store:
        client = Client(store=store)
        data = make_dataset(client, "checked", 3)
        res = evaluate(lambda inputs: {"y": 2 * inputs["x"]}, data=data, evaluators=[_exact],
                       client=client)
        client.flush()
        assert _check(sqlite_url) == (0, {"checked": 1, "mismatched": [], "repaired": False})

        exp = client.read_project(project_name=res.experiment_name)
        lost = uuid.uuid4()  # as a process killed between the two writes left it
        client.create_feedback(run_id=lost, key="exact", score=1.0, project_id=exp.id)
        client.create_feedback(run_id=uuid.uuid4(), key="exact", score=0.0, project_id=exp.id)
        client.create_feedback(key="summary", score=1.0, project_id=exp.id)  # no run: fine
    code, report = _check(sqlite_url)
    assert code == 1
    assert report["mismatched"] == [{"project": res.experiment_name, "id": str(exp.id),
                                     "fields": ["feedback_without_run"],
                                     "feedback_without_run": 2}]
    out = CliRunner().invoke(app, ["db", "check", "--db", sqlite_url])
    text = " ".join(out.output.split())  # as rich wrapped it
    assert "feedback_without_run (2 rows)" in text and "resume the experiment" in text
