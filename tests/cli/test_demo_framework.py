"""``assay demo --framework``: a real framework's agent on the bundled scripted model, key-free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.client import Client
from assay.demo._frameworks import FRAMEWORK_DATASET, framework_examples

runner = CliRunner()


MODULES = {"langgraph": "langgraph", "openai-agents": "agents", "pydantic-ai": "pydantic_ai",
           "upsonic": "upsonic", "google-adk": "google.adk"}


@pytest.mark.parametrize("framework", list(MODULES))
def test_demo_framework_stores_the_framework_trace(framework: str, sqlite_url: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip(MODULES[framework])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # key-free, whatever the shell has
    result = runner.invoke(app, ["demo", "--framework", framework, "--db", sqlite_url,
                                 "--json", "--repetitions", "1"], terminal_width=200)
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    n = len(framework_examples())
    assert stats["run_count"] == n
    client = Client(database_url=sqlite_url)
    try:
        exp = client.read_project(project_name=stats["name"])
        assert exp.reference_dataset_id == client.read_dataset(
            dataset_name=FRAMEWORK_DATASET).id
        runs = list(client.list_runs(project_id=exp.id))
        llm = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(tools) == n and sum(t.error is not None for t in tools) == 1  # Atlantis
        assert len(llm) >= 2 * n - 1 and all(r.total_tokens > 0 for r in llm)  # (Atlantis: 1+)
        assert stats["total_tokens"] == sum(r.total_tokens for r in llm)
        assert stats["total_cost"] > 0
        fs = stats["feedback_stats"]
        assert fs["tools"]["avg"] == 1.0 and fs["correct"]["avg"] == pytest.approx((n - 1) / n)
    finally:
        client.close()


def test_demo_framework_names_the_choices(sqlite_url: str) -> None:
    result = runner.invoke(app, ["demo", "--framework", "smolagents", "--db", sqlite_url])
    assert result.exit_code != 0
    assert "smolagents" in result.output and "langgraph" in result.output


def test_an_unknown_framework_is_refused_before_a_store_is_made(tmp_path: Path) -> None:
    where = tmp_path / "new" / "assay.db"
    result = runner.invoke(app, ["demo", "--framework", "bogus", "--db", str(where)])
    assert result.exit_code == 2, result.output
    assert "unknown demo framework 'bogus'" in " ".join(result.output.split())
    assert not (tmp_path / "new").exists()  # (the store was created, then the name refused)


def test_the_upsonic_demo_prints_its_table_without_upsonics_step_logs(tmp_path: Path) -> None:
    """Upsonic logs each pipeline step at INFO on the console: ~50 lines came before the
    demo's table. Its own process, as a user runs it (Upsonic reads its level at import)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("upsonic")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("UPSONIC_", "ASSAY_")) and k != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-c", "from assay.cli import main; main()", "demo", "--framework",
         "upsonic", "--repetitions", "1", "--db", f"sqlite:///{tmp_path / 'up.db'}"],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert "runs" in done.stdout and "Pipeline started" not in said
    assert "| upsonic." not in said
