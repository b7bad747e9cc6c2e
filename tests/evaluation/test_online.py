"""Online evaluation of a project's production traces (``evaluate_online``, ``watch_online``,
``assay online``) on SQLite and PostgreSQL: each sampled, finished root run scored once per rule,
a stable sample, evaluator errors retried, runs still running picked up once they end, the
agent evaluators reading the run's own tool calls, and the scores in the project's statistics."""

from __future__ import annotations

import asyncio
import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay import traceable
from assay.cli import app
from assay.client import Client
from assay.errors import InvalidInputError
from assay.evals import ReliabilityEvaluator
from assay.evaluation import evaluate_online, watch_online
from assay.tracing import tracing_context

from .conftest import unique


@traceable(run_type="tool")
def lookup(city: str) -> str:
    return city.upper()


@traceable(name="agent")
def agent(question: str, use_tool: bool = True) -> dict[str, Any]:
    return {"answer": lookup(question) if use_tool else question}


def _traffic(client: Client, project: str, n: int, **kwargs: Any) -> None:
    with tracing_context(enabled=True, client=client, project_name=project):
        for i in range(n):
            agent(f"city {i}", use_tool=i % 2 == 0, **kwargs)
    client.flush()


def concise(outputs: dict[str, Any]) -> bool:
    return len(outputs["answer"]) < 8


def _by_run(client: Client, project: str) -> dict[str, list[Any]]:
    runs = list(client.list_runs(project_name=project, is_root=True))
    out: dict[str, list[Any]] = {str(r.id): [] for r in runs}
    for fb in client.list_feedback(run_ids=[r.id for r in runs]):
        out[str(fb.run_id)].append(fb)
    return out


def test_each_run_is_scored_once_per_rule(client: Client) -> None:
    project = unique("prod")
    _traffic(client, project, 6)
    reliability = ReliabilityEvaluator(["lookup"])
    first = evaluate_online(project, [concise, reliability], client=client)
    assert (first.considered, first.sampled, first.scored, first.feedback) == (6, 6, 6, 12)
    scored = _by_run(client, project)
    for fbs in scored.values():
        keys = {f.key: f.score for f in fbs}
        assert set(keys) == {"concise", "reliability"}
        assert all(f.feedback_source.metadata["online_rule"] == first.rule for f in fbs)
    # the agent evaluator read each run's own tool calls: half the runs called lookup
    assert sorted(f.score for fbs in scored.values() for f in fbs if f.key == "reliability") == [
        0.0] * 3 + [1.0] * 3
    stats = client.read_project(project_name=project, include_stats=True).feedback_stats
    assert stats["reliability"].n == 6 and stats["reliability"].avg == 0.5

    # again: nothing new; new traffic: only it; another rule: everything again
    again = evaluate_online(project, [concise, reliability], client=client)
    assert (again.scored, again.already_scored) == (0, 6)
    _traffic(client, project, 2)
    assert evaluate_online(project, [concise, reliability], client=client).scored == 2
    other = evaluate_online(project, [concise], rule="concise-v2", client=client)
    assert other.scored == 8
    assert all(len(fbs) == 3 for fbs in _by_run(client, project).values())


def test_a_stable_sample_a_filter_and_errors_retried(client: Client) -> None:
    project = unique("prod")
    _traffic(client, project, 40)
    half = evaluate_online(project, [concise], sampling_rate=0.5, rule="half", client=client)
    assert 10 < half.sampled < 30 and half.scored == half.sampled
    again = evaluate_online(project, [concise], sampling_rate=0.5, rule="half", client=client)
    assert (again.sampled, again.scored, again.already_scored) == (half.sampled, 0, half.sampled)
    assert set(again.scored_run_ids) == set()
    assert sorted(map(str, half.scored_run_ids)) == sorted(
        rid for rid, fbs in _by_run(client, project).items() if fbs)

    flaky = {"fail": True}

    def judge(outputs: dict[str, Any]) -> float:
        if flaky["fail"]:
            raise RuntimeError("judge endpoint down")
        return 1.0

    tool_runs = 'eq(name, "agent")'
    down = evaluate_online(project, [judge], rule="judge", filter=tool_runs,
                           sampling_rate=0.25, client=client)
    assert down.scored == down.errors == down.sampled > 0
    flaky["fail"] = False
    up = evaluate_online(project, [judge], rule="judge", filter=tool_runs, sampling_rate=0.25,
                         client=client)
    assert (up.scored, up.errors) == (down.scored, 0)  # retried, and replaced, not added
    judged = [f for fbs in _by_run(client, project).values() for f in fbs if f.key == "judge"]
    assert len(judged) == down.scored and all(f.score == 1.0 for f in judged)


def test_running_runs_wait_and_watch_picks_up_new_traffic(client: Client) -> None:
    project = unique("prod")
    rid = uuid.uuid4()
    client.create_run("agent", {"q": "slow"}, "chain", id=rid, project_name=project)
    _traffic(client, project, 2)
    first = evaluate_online(project, [concise], client=client)
    assert (first.scored, first.running) == (2, 1)
    client.update_run(rid, outputs={"answer": "done"})
    client.flush()

    seen: list[int] = []

    async def watch() -> list[Any]:
        return await watch_online(project, [concise], interval=0.05, passes=2,
                                  on_pass=lambda r: seen.append(r.scored), client=client)

    reports = asyncio.run(watch())
    assert seen == [1, 0] and reports[0].scored_run_ids == [rid]


def test_bad_arguments(client: Client) -> None:
    with pytest.raises(InvalidInputError, match="at least one evaluator"):
        evaluate_online("p", [], client=client)
    with pytest.raises(InvalidInputError, match="sampling_rate"):
        evaluate_online("p", [concise], sampling_rate=0, client=client)
    with pytest.raises(InvalidInputError, match="must be a list"):
        evaluate_online("p", concise, client=client)  # type: ignore[arg-type]


def test_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_url = f"sqlite:///{tmp_path / 'cli.db'}"
    project = unique("prod")
    _traffic(Client(database_url=store_url), project, 4)
    (tmp_path / "my_evals.py").write_text(textwrap.dedent('''
        from assay.evals import ReliabilityEvaluator

        def short(outputs):
            return len(outputs["answer"]) < 8

        tools = ReliabilityEvaluator(["lookup"])

        def judge(outputs):
            raise TimeoutError("the judge timed out")
    '''))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["online", project, "-e", "my_evals:short", "-e", "my_evals:tools", "--db",
            store_url]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["scored"], report["feedback"]) == (4, 8)
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "0 runs scored" in result.output
    assert "4 scored before" in result.output
    bad = runner.invoke(app, ["online", project, "-e", "my_evals:nope", "--db", store_url])
    assert bad.exit_code != 0 and "has no 'nope'" in bad.output
    # every evaluation failed: said with the first error's text, and not a success
    failing = runner.invoke(app, ["online", project, "-e", "my_evals:judge", "--db", store_url])
    assert failing.exit_code == 4, failing.output
    assert "4 runs scored" in failing.output and "4 with an evaluator error" in failing.output
    assert "first evaluator error: judge: " in failing.output and "timed out" in failing.output
    assert runner.invoke(app, [*args, "--sample", "0"]).exit_code == 2  # the range says (0, 1]


def test_watching_with_json_writes_one_line_a_pass(tmp_path: Path) -> None:
    """``assay online --watch --json``: JSON Lines on stdout, one object a pass, read as they
    come (each pass was an indented object, and Ctrl-C's 'stopped' landed among them)."""
    import signal
    import subprocess
    import sys
    import time

    store_url = f"sqlite:///{tmp_path / 'watch.db'}"
    project = unique("watched")
    _traffic(Client(database_url=store_url), project, 3)
    (tmp_path / "watch_evals.py").write_text("def short(outputs):\n"
                                             "    return len(outputs['answer']) < 8\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from assay.cli import main; main()", "online", project,
         "-e", "watch_evals:short", "--watch", "--interval", "0.2", "--json", "--db",
         store_url], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the first pass, before the process ends
    assert first["scored"] == 3
    time.sleep(0.6)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    passes = [json.loads(line) for line in out.splitlines()]
    assert passes and all(p["scored"] == 0 for p in passes)  # scored once, in the first
    assert "stopped" in err and "stopped" not in out
