"""Conversation threads on SQLite and PostgreSQL: root runs grouped by the thread id their
metadata names (``session_id``, ``thread_id`` or ``conversation_id``), each thread's summary
computed independently here from the runs, the filter language's ``thread_id``."""

from __future__ import annotations

import statistics
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay.client import Client
from assay.errors import InvalidInputError, NotFoundError
from assay.store import Store

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _turn(client: Client, project: str, meta: dict[str, Any] | None, i: int, *,
          seconds: float = 1.0, tokens: int = 0, error: str | None = None) -> str:
    """A root chain (one turn) with an llm child carrying the tokens and cost."""
    root = uuid.uuid4()
    start = T0 + timedelta(minutes=i)
    client.create_run("turn", {"question": f"q{i}"}, "chain", id=root, project_name=project,
                      start_time=start, extra={"metadata": meta} if meta else None)
    if tokens:
        client.create_run("model", {"messages": []}, "llm", id=uuid.uuid4(),
                          parent_run_id=root, trace_id=root, project_name=project,
                          start_time=start,
                          end_time=start + timedelta(seconds=seconds / 2),
                          outputs={"answer": "x"},
                          extra={"metadata": {"usage_metadata": {"input_tokens": tokens,
                                                                 "output_tokens": 1,
                                                                 "total_tokens": tokens + 1}}})
    client.update_run(root, end_time=start + timedelta(seconds=seconds), error=error,
                      outputs=None if error else {"answer": f"a{i}"})
    return str(root)


@pytest.fixture
def conversations(client: Client) -> tuple[Client, str, dict[str, list[str]]]:
    project = f"bot-{uuid.uuid4().hex[:6]}"
    ids: dict[str, list[str]] = {"a": [], "b": [], "c": []}
    ids["a"].append(_turn(client, project, {"thread_id": "a"}, 0, seconds=1, tokens=10))
    ids["b"].append(_turn(client, project, {"session_id": "b", "thread_id": "ignored"}, 1,
                          seconds=2))
    ids["a"].append(_turn(client, project, {"thread_id": "a"}, 2, seconds=3, tokens=20,
                          error="boom"))
    ids["c"].append(_turn(client, project, {"conversation_id": 7}, 3, seconds=4))
    ids["a"].append(_turn(client, project, {"thread_id": "a", "user": "u"}, 4, seconds=5))
    _turn(client, project, None, 5)  # no thread
    _turn(client, project, {"other": "x"}, 6)  # no thread either
    return client, project, ids


def _store(client: Client) -> Store:
    return client._backend  # the store the test's client writes


def test_threads_of_a_project(conversations: tuple[Client, str, dict[str, list[str]]]) -> None:
    client, project, ids = conversations
    store = _store(client)
    pid = store.projects.read(project_name=project).id
    found = store.threads.list(pid)
    # the most recently active first; session_id wins over thread_id; a number is its text
    assert [(t.thread_id, t.count) for t in found] == [("a", 3), ("7", 1), ("b", 1)]
    a = found[0]
    assert (str(a.first_trace_id), str(a.last_trace_id)) == (ids["a"][0], ids["a"][-1])
    assert a.min_start_time == T0 and a.max_start_time == T0 + timedelta(minutes=4)
    assert a.num_errored_turns == 1 and a.last_error == "boom"
    assert a.first_inputs == '{"question":"q0"}' and a.last_outputs == '{"answer":"a4"}'
    assert a.total_tokens == 32 and a.prompt_tokens == 30  # the llm children's, summed
    latencies = [1.0, 3.0, 5.0]
    assert a.latency_p50 == pytest.approx(statistics.median(latencies))
    assert a.latency_p99 == pytest.approx(3.0 + (5.0 - 3.0) * 0.98)
    assert [t.thread_id for t in store.threads.list(pid, limit=1, offset=1)] == ["7"]
    since = store.threads.list(pid, min_start_time=T0 + timedelta(minutes=2))
    assert {(t.thread_id, t.count) for t in since} == {("a", 2), ("7", 1)}
    assert [t.thread_id for t in store.threads.list(pid, filter='neq(error, null)')] == ["a"]


def test_a_threads_turns_and_stats(conversations: tuple[Client, str, dict[str, list[str]]],
                                   ) -> None:
    client, project, ids = conversations
    store = _store(client)
    pid = store.projects.read(project_name=project).id
    assert [str(r.id) for r in store.threads.traces(pid, "a")] == ids["a"]
    assert [str(r.id) for r in store.threads.traces(pid, "a", order="desc")] == ids["a"][::-1]
    assert store.threads.traces(pid, "nope") == []
    stats = store.threads.stats(pid, "a")
    assert stats is not None and stats.count == 3 and stats.total_tokens == 32
    assert store.threads.stats(pid, "nope") is None
    client.create_feedback(ids["a"][0], "helpful", score=1)
    client.create_feedback(ids["a"][1], "helpful", score=0)
    pooled = store.threads.stats(pid, "a")
    assert pooled is not None and pooled.feedback_stats is not None
    assert pooled.feedback_stats["helpful"]["n"] == 2 and pooled.feedback_stats[
        "helpful"]["avg"] == 0.5


def test_thread_id_in_the_filter_language(
        conversations: tuple[Client, str, dict[str, list[str]]]) -> None:
    client, project, ids = conversations
    roots = list(client.list_runs(project_name=project, filter='eq(thread_id, "a")'))
    assert sorted(str(r.id) for r in roots) == sorted(ids["a"])
    both = list(client.list_runs(project_name=project, filter='in(thread_id, ["b", "7"])'))
    assert sorted(str(r.id) for r in both) == sorted(ids["b"] + ids["c"])
    with pytest.raises(InvalidInputError, match="thread_id takes a string"):
        list(client.list_runs(project_name=project, filter="eq(thread_id, 3)"))


def test_unknown_project_is_named(store: Store) -> None:
    with pytest.raises(NotFoundError):
        store.threads.list(uuid.uuid4())


def test_one_threads_turns_are_read_through_the_thread_index(
        conversations: tuple[Client, str, dict[str, list[str]]]) -> None:
    """The thread index (migration 0016) holds the expression the queries spell, so one
    thread's turns are a range of it, not a walk over the project's roots' JSON (on PostgreSQL
    with sequential scans off: a few rows would be scanned anyway)."""
    from sqlalchemy import select, text

    from assay.store._run_filter import thread_id_sql
    from assay.store._tables import runs

    client, project, _ = conversations
    store = _store(client)
    pid = store.projects.read(project_name=project).id
    dialect = store.engine.dialect.name
    query = select(runs.c.id).where(*store.threads._where(pid),
                                    thread_id_sql(runs, dialect) == "a")
    sql = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    with store.engine.connect() as conn:
        if dialect == "postgresql":
            conn.execute(text("SET enable_seqscan = off"))
            plan = " ".join(r[0] for r in conn.execute(text("EXPLAIN " + sql)))
        else:
            plan = " ".join(r[-1] for r in conn.execute(text("EXPLAIN QUERY PLAN " + sql)))
        assert len(conn.execute(query).all()) == 3
    assert "ix_runs_session_thread" in plan, plan
