"""The seed's Python snippet, with only its imports changed to assay, on a fresh store.

The payload it prints is checked against figures computed here, independently, from the runs
and feedback the experiment stored (numpy percentiles over root-run latencies, counts, ...).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from assay.client import Client
from assay.store import Store

from .conftest import ROOT

SNIPPET = '''
from assay import Client
client = Client()
# Create a dataset
dataset_name = "HelloDataset"
dataset = client.create_dataset(dataset_name=dataset_name)
examples = [
    {
        "inputs": {"input": "Harrison"},
        "outputs": {"expected": "Hello Harrison"},
    },
    {
        "inputs": {"input": "Ankush"},
        "outputs": {"expected": "Hello Ankush"},
    },
]
client.create_examples(dataset_id=dataset.id, examples=examples)

from assay.schemas import Example, Run
dataset_name = "HelloDataset"
def foo_label(root_run: Run, example: Example) -> dict:
    return {"score": 1, "key": "foo"}
from assay import evaluate
results = evaluate(
    lambda inputs: "Hello " + inputs["input"],
    data=dataset_name,
    evaluators=[foo_label],
    experiment_prefix="Hello",
)
resp = client.read_project(project_name=results.experiment_name, include_stats=True)
print(resp.json(indent=2))
'''


def _git_repo(path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.name", "Seed Tester")
    git("config", "user.email", "seed@example.com")
    (path / "agent.py").write_text("x = 1\n")
    git("add", "agent.py")
    git("commit", "-q", "-m", "first")
    (path / "agent.py").write_text("x = 2\n")  # dirty


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")


def test_seed_snippet_prints_the_right_payload(fresh_url: str, tmp_path: Path) -> None:
    import os
    import sys

    _git_repo(tmp_path)
    env = {**os.environ, "ASSAY_DATABASE_URL": fresh_url,
           "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", SNIPPET], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)

    store = Store.open(fresh_url)
    try:
        client = Client(store=store)
        ds = client.read_dataset(dataset_name="HelloDataset")
        exp = client.read_project(project_name=payload["name"])
        roots = list(client.list_runs(project_id=exp.id, is_root=True))
        fb = list(client.list_feedback(project_ids=[exp.id]))
        version = client.read_dataset_version(dataset_id=ds.id, tag="latest")
        others = [p for p in client.list_projects(reference_dataset_id=ds.id)]
    finally:
        store.close()

    latencies = [(r.end_time - r.start_time).total_seconds() for r in roots]
    assert payload["run_count"] == len(roots) == 2
    assert payload["latency_p50"] == pytest.approx(np.percentile(latencies, 50), abs=1e-6)
    assert payload["latency_p99"] == pytest.approx(np.percentile(latencies, 99), abs=1e-6)
    assert payload["first_token_p50"] is None and payload["first_token_p99"] is None
    assert payload["total_tokens"] == payload["prompt_tokens"] == payload["completion_tokens"] == 0
    assert payload["total_cost"] is None
    assert payload["error_rate"] == sum(r.error is not None for r in roots) / len(roots) == 0
    assert payload["streaming_rate"] == 0
    scores = [f.score for f in fb if f.key == "foo"]
    assert payload["feedback_stats"] == {
        "foo": {"n": len(scores), "avg": float(np.mean(scores)), "stdev": float(np.std(scores)),
                "values": {}}}
    assert len(scores) == 2
    assert payload["session_feedback_stats"] == {}
    assert payload["run_facets"] == []
    assert payload["test_run_number"] == len(others) == 1
    assert payload["reference_dataset_id"] == str(ds.id)
    assert payload["tenant_id"]
    assert payload["name"].startswith("Hello-")
    assert payload["last_run_start_time"] is not None
    last = max(r.start_time for r in roots)
    assert payload["last_run_start_time"].startswith(last.strftime("%Y-%m-%dT%H:%M:%S"))
    assert payload["start_time"] <= payload["last_run_start_time"] <= payload["end_time"]
    meta = payload["extra"]["metadata"]
    assert meta["dataset_version"] == version.as_of.isoformat()
    assert meta["dataset_splits"] == ["base"]
    assert meta["num_repetitions"] == 1
    assert "revision_id" in meta and meta["revision_id"] is None
    git = meta["git"]
    assert set(git) == {"tags", "dirty", "branch", "commit", "repo_name", "remote_url",
                        "author_name", "commit_time", "author_email"}
    assert git["dirty"] is True and git["branch"] == "main"
    assert git["author_name"] == "Seed Tester" and git["author_email"] == "seed@example.com"
    assert git["repo_name"] == tmp_path.name and len(git["commit"]) == 40
    for r in roots:  # one root per example, linked, with its repetition
        assert r.reference_example_id is not None and r.metadata["repetition"] == 0
        assert r.outputs == {"output": "Hello " + r.inputs["input"]}


def test_model_dump_json_and_json_agree(client: Client) -> None:
    from assay import evaluate

    ds = client.create_dataset("d")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"a": 1}}])
    res = evaluate(lambda i: i, data="d", evaluators=[lambda outputs: True], client=client)
    resp = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert json.loads(resp.json(indent=2)) == json.loads(resp.model_dump_json(indent=2))
    assert json.loads(resp.json(indent=2))["feedback_stats"]["lambda"]["avg"] == 1.0
