"""Online evaluation retries what failed and only that (an evaluator that raised, beside one
that did not, is run again, the other is not), refuses a missing project instead of scoring
every project, and scores a filtered thread on the turns its filter keeps."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay import traceable
from assay.client import Client
from assay.errors import InvalidInputError
from assay.evaluation import (
    aevaluate_online,
    evaluate_online,
    evaluate_threads_online,
    watch_online,
)
from assay.tracing import tracing_context

from .conftest import unique


@traceable(name="agent")
def agent(question: str) -> dict[str, Any]:
    return {"answer": question.upper()}


def _traffic(client: Client, project: str, n: int) -> None:
    with tracing_context(enabled=True, client=client, project_name=project):
        for i in range(n):
            agent(f"city {i}")
    client.flush()


def _feedback(client: Client, project: str) -> list[Any]:
    runs = list(client.list_runs(project_name=project, is_root=True))
    return list(client.list_feedback(run_ids=[r.id for r in runs]))


class Flaky:
    """Counts its calls; raises ``TimeoutError`` while ``down``."""

    def __init__(self, result: Any = True, *, down: bool = True) -> None:
        self.down = down
        self.calls = 0
        self.result = result

    def __call__(self, outputs: dict[str, Any]) -> Any:
        self.calls += 1
        if self.down:
            raise TimeoutError("judge timed out")
        return self.result


def test_only_the_evaluator_that_raised_is_tried_again(client: Client) -> None:
    project = unique("prod")
    _traffic(client, project, 5)
    polite, flaky = Flaky(down=False), Flaky()
    polite.__name__, flaky.__name__ = "polite", "flaky"  # type: ignore[attr-defined]
    first = evaluate_online(project, [polite, flaky], rule="mixed", client=client)
    assert (first.scored, first.errors, first.feedback) == (5, 5, 10)

    flaky.down = False
    second = evaluate_online(project, [polite, flaky], rule="mixed", client=client)
    assert (second.scored, second.already_scored, second.errors) == (5, 0, 0)
    assert (second.retried, second.feedback) == (5, 5)  # the flaky rows only
    assert (polite.calls, flaky.calls) == (5, 10)
    rows = _feedback(client, project)
    assert sorted(f.key for f in rows) == ["flaky"] * 5 + ["polite"] * 5  # none doubled
    assert all(f.score == 1.0 and not (f.extra or {}).get("error") for f in rows)

    third = evaluate_online(project, [polite, flaky], rule="mixed", client=client)
    assert (third.scored, third.already_scored, third.retried) == (0, 5, 0)
    assert (polite.calls, flaky.calls) == (5, 10)


def test_a_retry_under_another_key_leaves_no_error_behind(client: Client) -> None:
    """An evaluator's error row is under its name; its score may be under another key (and
    one another evaluator writes too): the score must not replace the other evaluator's, and
    the stale error row must go, or the run would be retried on every pass."""
    project = unique("prod")
    _traffic(client, project, 3)
    ok = Flaky({"key": "quality", "score": 0.5}, down=False)
    judge = Flaky({"key": "quality", "score": 1.0})
    ok.__name__, judge.__name__ = "ok", "judge"  # type: ignore[attr-defined]
    evaluate_online(project, [ok, judge], rule="q", client=client)
    judge.down = False
    second = evaluate_online(project, [ok, judge], rule="q", client=client)
    assert (second.scored, second.errors, second.feedback) == (3, 0, 3)
    rows = _feedback(client, project)
    assert sorted(f.score for f in rows) == [0.5] * 3 + [1.0] * 3
    assert {f.key for f in rows} == {"quality"}  # the "judge" error rows are gone
    third = evaluate_online(project, [ok, judge], rule="q", client=client)
    assert (third.scored, third.already_scored) == (0, 3)
    assert (ok.calls, judge.calls) == (3, 6)


def test_a_missing_project_is_refused(client: Client) -> None:
    project = unique("prod")
    _traffic(client, project, 2)
    polite = Flaky(down=False)
    polite.__name__ = "polite"  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError, match="project_name"):
        evaluate_online(None, [polite], client=client)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="project_name"):
        evaluate_online("", [polite], client=client)
    with pytest.raises(InvalidInputError, match="project_name"):
        asyncio.run(aevaluate_online(None, [polite], client=client))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="project_name"):
        asyncio.run(watch_online(None, [polite], passes=1,  # type: ignore[arg-type]
                                 client=client))
    assert polite.calls == 0 and _feedback(client, project) == []


def _turn(client: Client, project: str, thread: str, name: str, start: datetime) -> str:
    rid = uuid.uuid4()
    client.create_run(name, {"question": name}, "chain", id=rid, project_name=project,
                      start_time=start, extra={"metadata": {"thread_id": thread}})
    client.update_run(rid, end_time=start + timedelta(seconds=2), outputs={"answer": name})
    return str(rid)


def test_a_filtered_thread_is_scored_on_the_turns_the_filter_keeps(client: Client) -> None:
    project = unique("bot")
    ago = datetime.now(UTC) - timedelta(hours=2, minutes=5)
    ids = [_turn(client, project, "t1", name, ago + timedelta(minutes=i))
           for i, name in enumerate(["chat", "chat", "background-summarize"])]
    seen: list[list[str]] = []

    def turns(inputs: dict[str, Any]) -> float:
        seen.append([t["question"] for t in inputs["turns"]])
        return float(len(inputs["turns"]))

    chats = 'eq(name, "chat")'
    first = evaluate_threads_online(project, [turns], filter=chats, idle=timedelta(minutes=1),
                                    client=client)
    assert first.scored == 1 and [str(r) for r in first.scored_run_ids] == [ids[1]]
    assert seen == [["chat", "chat"]]
    assert [f.score for f in client.list_feedback(run_ids=[ids[1]])] == [2.0]
    assert list(client.list_feedback(run_ids=[ids[2]])) == []
    for _ in range(2):
        again = evaluate_threads_online(project, [turns], filter=chats,
                                        idle=timedelta(minutes=1), client=client)
        assert (again.scored, again.already_scored) == (0, 1)
    assert len(seen) == 1


def test_a_thread_retries_only_its_failed_evaluator(client: Client) -> None:
    project = unique("bot")
    ago = datetime.now(UTC) - timedelta(hours=1)
    last = [_turn(client, project, "t", "chat", ago + timedelta(minutes=i)) for i in range(2)][-1]
    polite, flaky = Flaky(down=False), Flaky()
    polite.__name__, flaky.__name__ = "polite", "flaky"  # type: ignore[attr-defined]
    evaluate_threads_online(project, [polite, flaky], idle=timedelta(0), client=client)
    flaky.down = False
    second = evaluate_threads_online(project, [polite, flaky], idle=timedelta(0), client=client)
    assert (second.scored, second.retried, second.feedback) == (1, 1, 1)
    assert (polite.calls, flaky.calls) == (1, 2)
    assert sorted((f.key, f.score) for f in client.list_feedback(run_ids=[last])) == [
        ("flaky", 1.0), ("polite", 1.0)]
