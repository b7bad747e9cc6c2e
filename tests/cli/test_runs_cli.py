"""``assay runs list`` / ``show`` over a real SQLite store: filters, tables, --json, exit codes."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.store import Store

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


def _run(name: str, run_type: str, start: float, seconds: float, parent: dict | None = None,
         **fields: Any) -> dict[str, Any]:
    rid = str(uuid.uuid4())
    t = T0 + timedelta(seconds=start)
    seg = t.strftime("%Y%m%dT%H%M%S%fZ") + rid
    return {"id": rid, "trace_id": parent["trace_id"] if parent else rid, "name": name,
            "run_type": run_type, "session_name": "support-bot", "start_time": t,
            "end_time": t + timedelta(seconds=seconds),
            "dotted_order": f"{parent['dotted_order']}.{seg}" if parent else seg,
            **({"parent_run_id": parent["id"]} if parent else {}), **fields}


@pytest.fixture
def db(sqlite_url: str) -> tuple[str, dict[str, str]]:
    good = _run("agent", "chain", 0, 3.0, tags=["prod"])
    llm = _run("chat", "llm", 0.1, 2.5, parent=good, extra={"metadata": {
        "ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
        "usage_metadata": {"input_tokens": 900, "output_tokens": 100, "total_tokens": 1000}}})
    tool = _run("search_docs", "tool", 2.7, 0.2, parent=good)
    bad = _run("agent", "chain", 10, 0.5, error=(  # as other SDKs send it: a bare traceback
        'Traceback (most recent call last):\n  File "agent.py", line 3, in run\n'
        "TimeoutError: upstream\n"))
    with Store.open(sqlite_url) as store:
        store.runs.upsert(posts=[good, llm, tool, bad])
        store.feedback.create_many([{"run_id": good["id"], "key": "correct", "score": 1},
                                    {"run_id": bad["id"], "key": "correct", "score": 0}])
    return sqlite_url, {"good": good["id"], "llm": llm["id"], "tool": tool["id"],
                        "bad": bad["id"]}


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich sizes its tables to the terminal; these tests read them as a 200-column one."""
    from assay.cli import _common

    monkeypatch.setattr(_common.console, "width", 200)


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["runs", *args], terminal_width=200)


def test_list_with_filters(db: tuple[str, dict[str, str]]) -> None:
    url, ids = db
    slow_llm = run("list", "--db", url, "-p", "support-bot",
                   "--filter", 'and(eq(run_type, "llm"), gt(latency, "1s"))')
    assert slow_llm.exit_code == 0, slow_llm.output
    assert ids["llm"] in slow_llm.output and "1000" in slow_llm.output and "$0.0" in slow_llm.output
    assert ids["good"] not in slow_llm.output

    failed = run("list", "--db", url, "--root", "--errors")
    assert failed.exit_code == 0 and ids["bad"] in failed.output
    assert "TimeoutError: upstream" in failed.output and ids["good"] not in failed.output

    in_good = run("list", "--db", url, "--json", "--run-type", "tool",
                  "--trace-filter", 'and(eq(feedback_key, "correct"), eq(feedback_score, 1))')
    assert in_good.exit_code == 0, in_good.output
    assert [r["id"] for r in json.loads(in_good.output)] == [ids["tool"]]

    texts = json.loads(run("list", "--db", url, "--json", "-q", "timeout").output)
    assert [r["id"] for r in texts] == [ids["bad"]]
    newest = json.loads(run("list", "--db", url, "--json", "--root").output)
    assert [r["id"] for r in newest] == [ids["bad"], ids["good"]]  # newest first
    one = run("list", "--db", url, "--root", "--limit", "1")
    assert "--limit shows more" in one.output
    both = run("list", "--db", url, "--root", "--limit", "2")  # exactly the limit: no more
    assert ids["good"] in both.output and "--limit shows more" not in both.output
    assert len(json.loads(run("list", "--db", url, "--root", "--limit", "1", "--json").output)) == 1
    none = run("list", "--db", url, "--filter", 'eq(name, "nobody")')
    assert none.exit_code == 0 and "no runs match" in none.output


def test_bad_filter_exits_2_naming_it(db: tuple[str, dict[str, str]]) -> None:
    url, _ = db
    result = run("list", "--db", url, "--filter", 'gt(latency, "fast")')
    assert result.exit_code == 2
    assert "latency takes seconds" in result.output and "at character 4" in result.output


def test_an_unknown_run_type_is_refused_naming_the_types(db: tuple[str, dict[str, str]]) -> None:
    """It matched no run and said so with exit 0, as if no run of a real type had been made."""
    url, _ = db
    result = run("list", "--db", url, "--run-type", "bogus")
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "'bogus' is not a run type" in said
    assert "chain, llm, tool, retriever, embedding, prompt, parser" in said
    assert "no runs match" not in said
    assert run("list", "--db", url, "--run-type", "retriever").exit_code == 0  # known, none


def test_show_prints_the_tree(db: tuple[str, dict[str, str]]) -> None:
    url, ids = db
    result = run("show", ids["good"], "--db", url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "agent" in lines[0] and "chain" in lines[0]
    assert any("chat" in ln and "1000 tokens" in ln for ln in lines[1:])
    chat = next(i for i, ln in enumerate(lines) if "chat" in ln)
    tool = next(i for i, ln in enumerate(lines) if "search_docs" in ln)
    assert chat < tool  # in the order they ran
    as_json = json.loads(run("show", ids["good"], "--db", url, "--json").output)
    assert sorted(c["name"] for c in as_json["child_runs"]) == ["chat", "search_docs"]
    assert run("show", str(uuid.uuid4()), "--db", url).exit_code == 3
    assert run("show", "not-a-uuid", "--db", url).exit_code == 2


def test_experiment_rows_filtered(db: tuple[str, dict[str, str]]) -> None:
    url, ids = db
    shown = CliRunner().invoke(app, ["experiments", "show", "support-bot", "--db", url, "--json",
                                     "--filter", 'and(eq(feedback_key, "correct"), '
                                                 'eq(feedback_score, 0))'])
    assert shown.exit_code == 0, shown.output
    assert [r["id"] for r in json.loads(shown.output)["runs"]] == [ids["bad"]]
    everything = CliRunner().invoke(app, ["experiments", "show", "support-bot", "--db", url,
                                          "--json"])
    assert {r["id"] for r in json.loads(everything.output)["runs"]} == {ids["good"], ids["bad"]}


def test_the_error_line_for_either_layout() -> None:
    from assay.cli._common import error_line
    from assay.tracing._run_tree import format_error

    try:
        raise LookupError("no city named 'Atlantis'")
    except LookupError as exc:
        ours = format_error(exc)  # "Type: message", then the traceback
    assert error_line(ours) == "LookupError: no city named 'Atlantis'"
    bare = 'Traceback (most recent call last):\n  File "a.py", line 1\nValueError: bad\n'
    assert error_line(bare) == "ValueError: bad"
    assert error_line("plain message") == "plain message"
    assert error_line(None) is None and error_line("  \n ") is None
