"""What the CLI prints of data (names, errors, install hints) comes out as it is: rich markup is
never read into it, so ``[langgraph]`` in an install hint is not taken for a style tag and
dropped, and an error text holding ``[/x]`` does not stop the command."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.store import Store

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
BLOCKED = """
import sys
sys.modules["langgraph"] = None  # as if the extra were not installed: its import fails
sys.argv = ["assay", "demo", "--framework", "langgraph", "--db", sys.argv[1]]
from assay.cli import main
main()
"""


def test_an_install_hint_keeps_its_extra(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run([sys.executable, "-c", BLOCKED, str(tmp_path / "a.db")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 4, proc.stderr
    assert "pip install 'assay[langgraph]'" in proc.stderr, proc.stderr


def test_help_text_keeps_the_extras_names() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for extra in ("langgraph", "openai-agents", "pydantic-ai", "upsonic"):
        assert f"assay[{extra}]" in result.output


def test_names_and_errors_with_brackets_are_printed_as_they_are(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.cli import _common

    monkeypatch.setattr(_common.console, "width", 250)  # rich sizes tables to the terminal
    rid = str(uuid.uuid4())
    seg = T0.strftime("%Y%m%dT%H%M%S%fZ") + rid
    error = "ValueError: no tool [/search] for [bold]queries[/bold]"
    with Store.open(sqlite_url) as store:
        store.runs.upsert(posts=[{
            "id": rid, "trace_id": rid, "dotted_order": seg, "name": "agent[v2]",
            "run_type": "chain", "session_name": "bots[prod]", "start_time": T0,
            "end_time": T0 + timedelta(seconds=1), "error": error}])
        store.datasets.create("qa[v2]")

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, [*args, "--db", sqlite_url], terminal_width=250)
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.output

    shown = run("runs", "show", rid)
    assert "agent[v2]" in shown and "[/search]" in shown and "[bold]queries[/bold]" in shown
    assert "agent[v2]" in run("runs", "list", "--project", "bots[prod]")
    assert "qa[v2]" in run("datasets", "show", "qa[v2]")
    assert "qa[v2]" in run("datasets", "list")


def test_a_piped_table_is_not_cut_to_eighty_columns(sqlite_url: str) -> None:
    """``assay runs list | grep ...``: piped, rich laid the table out for 80 columns and cut
    every cell to a letter and an ellipsis; the table now has its content's width."""
    name = "a-rather-long-run-name-" + uuid.uuid4().hex
    rid = str(uuid.uuid4())
    with Store.open(sqlite_url) as store:
        store.runs.upsert(posts=[{
            "id": rid, "trace_id": rid, "dotted_order": T0.strftime("%Y%m%dT%H%M%S%fZ") + rid,
            "name": name, "run_type": "chain", "session_name": "wide-project-name",
            "start_time": T0, "end_time": T0 + timedelta(seconds=1)}])
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.run([sys.executable, "-c", "from assay.cli import main; main()", "runs",
                           "list", "--project",
                           "wide-project-name", "--db", sqlite_url],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    (row,) = [line for line in proc.stdout.splitlines() if rid in line]
    assert name in row and "1.00" in row  # the whole name, the latency
