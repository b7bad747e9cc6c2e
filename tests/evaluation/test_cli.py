"""``assay demo`` (the main job) and ``assay experiments list/show``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.client import Client
from assay.demo import DATASET_NAME, load_examples
from assay.store import Store

runner = CliRunner()


def _invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def test_demo_json_matches_the_stored_experiment(url: str) -> None:
    before = 0
    store = Store.open(url)
    client = Client(store=store)
    try:
        if client.has_dataset(dataset_name=DATASET_NAME):
            before = len(list(client.list_projects(reference_dataset_name=DATASET_NAME)))
        stats = json.loads(_invoke("demo", "--db", url, "--json", "--repetitions", "2"))
        exp = client.read_project(project_name=stats["name"])
        roots = list(client.list_runs(project_id=exp.id, is_root=True))
        runs = list(client.list_runs(project_id=exp.id))
    finally:
        store.close()
    n = len(load_examples())
    assert stats["run_count"] == len(roots) == 2 * n
    lat = [(r.end_time - r.start_time).total_seconds() for r in roots]
    assert stats["latency_p50"] == pytest.approx(np.percentile(lat, 50), abs=1e-6)
    llm = [r for r in runs if r.run_type == "llm"]
    assert stats["total_tokens"] == sum(r.total_tokens for r in llm) > 0
    assert stats["total_cost"] == pytest.approx(sum(r.total_cost for r in llm))
    assert stats["total_cost"] > 0
    assert {r.run_type for r in runs} == {"chain", "llm", "tool"}
    assert stats["first_token_p50"] is not None and stats["streaming_rate"] > 0.5
    assert stats["error_rate"] == pytest.approx(
        sum(r.error is not None for r in roots) / len(roots))
    assert 0 < stats["error_rate"] < 0.5
    fs = stats["feedback_stats"]
    assert set(fs) == {"correct", "tools", "concise"} and 0 < fs["tools"]["avg"] < 1
    assert set(fs["correct"]["values"]) == {"CORRECT", "INCORRECT"}
    assert "pass_rate" in stats["session_feedback_stats"]
    assert stats["test_run_number"] == before + 1
    assert stats["extra"]["metadata"]["num_repetitions"] == 2


def test_demo_table_and_experiments_commands(sqlite_url: str) -> None:
    out = _invoke("demo", "--db", sqlite_url, "--repetitions", "1")
    for label in ("runs", "error rate", "latency p50 / p99", "first token p50 / p99",
                  "tokens", "cost", "feedback: correct", "feedback: tools", "test run #"):
        assert label in out, label
    listed = json.loads(_invoke("experiments", "list", "--db", sqlite_url, "--json"))
    assert len(listed) == 1 and listed[0]["run_count"] == len(load_examples())
    name = listed[0]["name"]
    assert name in _invoke("experiments", "list", "--db", sqlite_url)
    shown = json.loads(_invoke("experiments", "show", name, "--db", sqlite_url, "--json",
                               "--limit", "5"))
    assert shown["experiment"]["name"] == name and len(shown["runs"]) == 5
    assert set(shown["runs"][0]["feedback"]) == {"correct", "tools", "concise"}
    table = _invoke("experiments", "show", listed[0]["id"], "--db", sqlite_url)
    assert "latency p50 / p99" in table and "dataset version" in table
    result = runner.invoke(app, ["experiments", "show", "nope", "--db", sqlite_url])
    assert result.exit_code == 3 and "nope" in result.output


def test_assay_demo_on_a_fresh_directory(tmp_path: Path) -> None:
    """The README's first command: no API key, no store configured, nothing but the package."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASSAY_", "OPENAI", "ANTHROPIC", "LANGSMITH", "LANGCHAIN"))}
    env["COLUMNS"] = "120"
    exe = Path(sys.executable).with_name("assay")
    proc = subprocess.run([str(exe), "demo"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "latency p50 / p99" in proc.stdout and "feedback: correct" in proc.stdout
    assert (tmp_path / ".assay" / "assay.db").exists()
