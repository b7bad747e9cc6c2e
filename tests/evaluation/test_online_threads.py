"""Online evaluation of conversations (``evaluate_threads_online``) on SQLite and PostgreSQL:
each quiet thread scored once per rule as a whole conversation, feedback on its last turn, a
thread still going (or with a turn running) left for later, a thread that went on scored again,
the sample by thread, and the refusals."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay.client import Client
from assay.errors import InvalidInputError
from assay.evals import ReliabilityEvaluator
from assay.evaluation import evaluate_threads_online

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
SEEN: list[dict[str, Any]] = []


def resolved(inputs: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """A conversation-level judge: did the user say thanks at the end?"""
    SEEN.append(inputs)
    users = [m["content"] for m in inputs["messages"] if m["role"] == "user"]
    return {"key": "resolved", "score": float("thanks" in users[-1]),
            "comment": f"{len(users)} user turns; last answer {outputs.get('answer')!r}"}


def _turn(client: Client, project: str, thread: str, i: int, question: str, *,
          end: bool = True) -> str:
    rid = uuid.uuid4()
    start = T0 + timedelta(minutes=i)
    client.create_run("chat", {"question": question}, "chain", id=rid, project_name=project,
                      start_time=start, extra={"metadata": {"thread_id": thread}})
    if end:
        client.update_run(rid, end_time=start + timedelta(seconds=2),
                          outputs={"answer": question.upper()})
    return str(rid)


@pytest.fixture
def bot(client: Client) -> tuple[Client, str, dict[str, list[str]]]:
    project = f"bot-{uuid.uuid4().hex[:6]}"
    ids = {"a": [_turn(client, project, "a", 0, "my order is late"),
                 _turn(client, project, "a", 1, "it is #42"),
                 _turn(client, project, "a", 2, "thanks!")],
           "b": [_turn(client, project, "b", 3, "hello")],
           "c": [_turn(client, project, "c", 4, "still typing", end=False)]}
    return client, project, ids


def _feedback(client: Client, run_id: str) -> list[Any]:
    return list(client.list_feedback(run_ids=[run_id]))


def test_each_quiet_thread_is_scored_once_as_a_conversation(
        bot: tuple[Client, str, dict[str, list[str]]]) -> None:
    client, project, ids = bot
    SEEN.clear()
    report = evaluate_threads_online(project, [resolved], idle=timedelta(minutes=5),
                                     client=client)
    assert (report.considered, report.sampled, report.running, report.scored) == (3, 3, 1, 2)
    assert sorted(map(str, report.scored_run_ids)) == sorted([ids["a"][-1], ids["b"][-1]])
    a = next(x for x in SEEN if x["thread_id"] == "a")
    assert [m["role"] for m in a["messages"]] == ["user", "assistant"] * 3
    assert a["messages"][0]["content"] == "my order is late" and a["turns"][1] == {
        "question": "it is #42"}
    (fb,) = _feedback(client, ids["a"][-1])  # on the thread's last turn
    assert fb.key == "resolved" and fb.score == 1.0 and "3 user turns" in fb.comment
    assert fb.feedback_source.metadata["thread_id"] == "a"
    assert [f.score for f in _feedback(client, ids["b"][-1])] == [0.0]
    assert _feedback(client, ids["a"][0]) == []  # earlier turns: no thread score
    again = evaluate_threads_online(project, [resolved], idle=timedelta(minutes=5),
                                    client=client)
    assert (again.already_scored, again.scored) == (2, 0)


def test_a_thread_that_goes_on_is_scored_again(
        bot: tuple[Client, str, dict[str, list[str]]]) -> None:
    client, project, ids = bot
    evaluate_threads_online(project, [resolved], idle=timedelta(0), client=client)
    later = _turn(client, project, "b", 10, "ok thanks")
    report = evaluate_threads_online(project, [resolved], idle=timedelta(0), client=client)
    assert [str(r) for r in report.scored_run_ids] == [later]
    assert [f.score for f in _feedback(client, later)] == [1.0]
    # the conversation it has become replaces the old verdict: one score per thread and rule
    assert _feedback(client, ids["b"][0]) == []
    assert [f.score for f in _feedback(client, ids["a"][-1])] == [1.0]  # other threads' stay
    stats = client.read_project(project_name=project, include_stats=True)
    assert stats.feedback_stats["resolved"].n == 2 and stats.feedback_stats["resolved"].avg == 1.0
    human = client.create_feedback(later, "resolved", score=0.0)  # a person's: never replaced
    _turn(client, project, "b", 11, "bye")
    evaluate_threads_online(project, [resolved], idle=timedelta(0), client=client)
    assert [f.id for f in _feedback(client, later)] == [human.id]


def test_idle_waits_for_a_quiet_conversation(bot: tuple[Client, str, dict[str, list[str]]],
                                            ) -> None:
    client, project, _ = bot
    long_ago = datetime.now(UTC) - T0
    report = evaluate_threads_online(project, [resolved], idle=long_ago + timedelta(days=1),
                                     client=client)
    assert (report.running, report.scored) == (3, 0)


def test_sample_by_thread_and_agent_evaluators(bot: tuple[Client, str, dict[str, list[str]]],
                                               ) -> None:
    client, project, ids = bot
    half = evaluate_threads_online(project, [resolved], sampling_rate=0.5, rule="half",
                                   idle=timedelta(0), client=client)
    repeat = evaluate_threads_online(project, [resolved], sampling_rate=0.5, rule="half",
                                     idle=timedelta(0), client=client)
    assert half.sampled == repeat.sampled and repeat.scored == 0  # the same threads
    tools = evaluate_threads_online(project, [ReliabilityEvaluator(["lookup"])], rule="tools",
                                    idle=timedelta(0), client=client)
    assert tools.scored == 2  # it reads the last turn's own tool calls (none here)
    assert [f.score for f in _feedback(client, ids["a"][-1]) if f.key == "reliability"] == [0.0]


def test_refusals(client: Client) -> None:
    with pytest.raises(InvalidInputError, match="at least one evaluator"):
        evaluate_threads_online("p", [], client=client)
    with pytest.raises(InvalidInputError, match="idle must be"):
        evaluate_threads_online("p", [resolved], idle=5, client=client)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="sampling_rate"):
        evaluate_threads_online("p", [resolved], sampling_rate=0, client=client)


def test_the_command_line(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import textwrap

    from typer.testing import CliRunner

    from assay.cli import app

    store_url = f"sqlite:///{tmp_path / 'cli.db'}"
    client = Client(database_url=store_url)
    project = f"bot-{uuid.uuid4().hex[:6]}"
    for i, (thread, question) in enumerate([("a", "hi"), ("a", "thanks"), ("b", "yo")]):
        _turn(client, project, thread, i, question)
    client.close()
    (tmp_path / "conv_evals.py").write_text(textwrap.dedent('''
        def resolved(inputs):
            return "thanks" in inputs["messages"][-2]["content"]
    '''))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["online", project, "-e", "conv_evals:resolved", "--threads", "--db", store_url]
    result = runner.invoke(app, [*args, "--idle", "0s", "--json"])
    assert result.exit_code == 0, result.output
    assert (json.loads(result.output)["scored"], json.loads(result.output)["considered"]) == (
        2, 2)
    again = runner.invoke(app, [*args, "--idle", "0s"])
    said = " ".join(again.output.split())
    assert again.exit_code == 0 and "0 threads scored" in said and "2 scored before" in said
    waiting = runner.invoke(app, [*args, "--idle", "36500d"])
    assert "2 not quiet yet" in " ".join(waiting.output.split())  # (rich wraps lines)
    bad = runner.invoke(app, [*args, "--idle", "soon"])
    assert bad.exit_code != 0 and "--idle 'soon'" in " ".join(bad.output.split())
