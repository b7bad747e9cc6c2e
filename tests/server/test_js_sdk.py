"""The official ``langsmith`` npm package (pinned in js/package.json) against a real assay server.

``npm install`` runs once per test session when a package of ``js/package.json`` is missing. In CI
(``CI=true``) a missing node/npm or a failed install fails the run; elsewhere the tests skip
with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from ._checks import check_experiment, parse_printed_json
from .conftest import Workspace, sdk_env
from .test_python_sdk import SEED

JS = Path(__file__).parent / "js"
# js/package.json's packages the tests import (installed again when one is missing)
PACKAGES = ("langsmith", "ai", "@ai-sdk/openai", "@ai-sdk/anthropic",
            "@opentelemetry/exporter-trace-otlp-proto")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def node() -> str:
    node_bin, npm_bin = shutil.which("node"), shutil.which("npm")
    if node_bin is None or npm_bin is None:
        _unavailable("node and npm are needed for the JS SDK tests (install Node.js 20+)")
    if not all((JS / "node_modules" / name / "package.json").exists() for name in PACKAGES):
        proc = subprocess.run([npm_bin, "install", "--no-audit", "--no-fund"], cwd=JS,
                              capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            _unavailable(f"npm install failed in {JS}: {proc.stderr[-2000:]}")
    return node_bin  # type: ignore[return-value]


def _node(node: str, script: str, ws: Workspace, *args: str) -> str:
    proc = subprocess.run([node, script, *args], cwd=JS, env=sdk_env(ws.server, ws.key),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_seed_js_is_the_seed_typescript_minus_types() -> None:
    text = SEED.read_text(encoding="utf-8")
    ts = text[text.index('import { Client } from "langsmith";'):].splitlines()
    ts = [line for line in ts if not line.startswith("import type")]
    ts = [re.sub(r": (Run|Example|EvaluationResult)\b", "", line) for line in ts]
    ours = (JS / "seed.mjs").read_text().splitlines()
    ours = [line for line in ours[ours.index(ts[0]):] if line.strip()]  # after our header
    assert ours == [line for line in ts if line.strip()]


def test_seed_js_snippet(node: str, ws: Workspace) -> None:
    prepared = parse_printed_json(_node(node, "prepare.mjs", ws))
    dataset = ws.store.datasets.read(dataset_name="HelloDataset")
    assert prepared["dataset_id"] == str(dataset.id) and dataset.example_count == 2
    printed = parse_printed_json(_node(node, "seed.mjs", ws))
    # JS waits for its trace batches before evaluate() returns: the printed stats are complete
    assert printed["run_count"] == 2
    assert printed["feedback_stats"]["foo"]["n"] == 2
    assert printed["feedback_stats"]["foo"]["avg"] == 1
    assert printed["test_run_number"] == 1
    stats = check_experiment(ws.store, ws.http, printed["name"], runs=2, feedback={"foo": (2, 1.0)})
    assert stats["latency_p50"] == printed["latency_p50"]
    assert stats["latency_p99"] == printed["latency_p99"]
    # JS sends end_time as epoch milliseconds: stored as the right instant, not micro-seconds
    project = ws.store.projects.read(project_name=printed["name"])
    for run in ws.store.runs.list(project_ids=[str(project.id)]):
        assert run.end_time is not None and run.end_time.year == run.start_time.year
        assert 0 <= (run.end_time - run.start_time).total_seconds() < 60
        assert run.outputs == {"output": "Hello " + run.inputs["input"]}


def test_update_feedback_with_the_official_js_client(node: str, ws: Workspace) -> None:
    from ._wire import make_run

    example = str(uuid.uuid4())
    run = make_run("scored", session="js-fb-update", reference_example_id=example)
    other = make_run("other", session="js-fb-update")
    assert ws.http.post("/runs/batch", json={"post": [run, other]}).status_code == 202
    printed = parse_printed_json(_node(node, "feedback.mjs", ws, run["id"], example))
    assert (printed["score"], printed["value"], printed["comment"]) == (1, "bad", None)
    assert printed["bySource"] == {"model": ["judge"], "api": ["q"]}
    assert printed["forExample"] == [run["id"]]
    stored = ws.store.feedback.read(printed["id"])
    assert stored.score == 1.0 and stored.comment is None and stored.value == "bad"
    stats = ws.store.projects.read(project_name="js-fb-update", include_stats=True)
    assert stats.feedback_stats["q"].n == 1 and stats.feedback_stats["q"].avg == 1.0
