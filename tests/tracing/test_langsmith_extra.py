"""``langsmith_extra``: LangSmith's per-call tracing options on an ``assay.traceable``
function, for sync (the C wrapper and the Python one), async, generator and async-generator
functions: what each key does to that call's run, that the function never sees the keyword,
that nothing leaks into the next call, and what is refused or logged."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from assay.client import Client
from assay.errors import InvalidInputError, NotFoundError
from assay.tracing import trace, traceable, tracing_context


def on(client: Client, project: str = "t") -> Any:
    return tracing_context(enabled=True, client=client, project_name=project)


def runs(client: Client, project: str = "t") -> dict[str, Any]:
    client.flush()
    return {r.name: r for r in client.list_runs(project_name=project)}


def test_sync_call_with_every_read_key(tclient: Client, wrapper: bool) -> None:
    seen: list[dict[str, Any]] = []

    @traceable(metadata={"app": "bot"}, tags=["base"])
    def chat(q: str, **kw: Any) -> dict[str, str]:
        seen.append(kw)
        return {"a": q.upper()}

    rid, example = uuid.uuid4(), uuid.uuid4()
    ended: list[Any] = []
    with on(tclient):
        assert chat("hi", langsmith_extra={
            "name": "turn", "metadata": {"thread_id": "t-1"}, "tags": ["vip", "base"],
            "run_id": rid, "reference_example_id": example, "on_end": ended.append,
            "run_extra": {"runtime": {"lang": "py"}}}) == {"a": "HI"}
        chat("again")  # the next call: none of it
    assert seen == [{}, {}]  # the function never sees the keyword
    got = runs(tclient)
    turn = got["turn"]
    assert turn.id == rid and turn.reference_example_id == example
    assert turn.extra["metadata"] == {**turn.extra["metadata"], "app": "bot", "thread_id": "t-1"}
    assert turn.tags == ["base", "vip"] and turn.outputs == {"a": "HI"}
    assert [r.id for r in ended] == [rid]
    plain = got["chat"]
    assert "thread_id" not in plain.extra.get("metadata", {}) and plain.tags == ["base"]


def test_project_client_and_parent(tclient: Client) -> None:
    @traceable
    def step(x: int) -> int:
        return x + 1

    with on(tclient):
        with trace("outer") as outer:
            pass
        assert step(1, langsmith_extra={"parent": outer}) == 2  # nested under a finished run
        step(2, langsmith_extra={"project_name": "elsewhere"})
    got = runs(tclient)
    assert got["step"].parent_run_id == outer.id and got["step"].trace_id == outer.id
    moved = runs(tclient, "elsewhere")["step"]
    assert moved.inputs == {"x": 2} and moved.parent_run_id is None


def test_async_generator_and_async_generator(tclient: Client) -> None:
    @traceable
    async def answer(q: str) -> str:
        return q * 2

    @traceable
    def words(q: str) -> Iterator[str]:
        yield from q.split()

    @traceable
    async def tokens(q: str) -> AsyncIterator[str]:
        for t in q.split():
            yield t

    async def collect() -> list[str]:
        return [t async for t in tokens("c d", langsmith_extra={"metadata": {"k": "agen"}})]

    with on(tclient):
        assert asyncio.run(answer("x", langsmith_extra={"metadata": {"k": "async"}})) == "xx"
        assert list(words("a b", langsmith_extra={"metadata": {"k": "gen"}})) == ["a", "b"]
        assert asyncio.run(collect()) == ["c", "d"]
    got = runs(tclient)
    assert {n: got[n].extra["metadata"]["k"] for n in ("answer", "words", "tokens")} == {
        "answer": "async", "words": "gen", "tokens": "agen"}
    assert got["words"].outputs == {"output": ["a", "b"]}


def test_off_still_calls_without_the_keyword(tclient: Client) -> None:
    @traceable
    def f(x: int) -> int:
        return x

    with tracing_context(enabled=False):
        assert f(3, langsmith_extra={"metadata": {"a": 1}}) == 3
    tclient.flush()
    with pytest.raises(NotFoundError):  # nothing traced: not even the project
        tclient.read_project(project_name="t")


def test_refused_and_logged(tclient: Client, caplog: pytest.LogCaptureFixture) -> None:
    @traceable
    def f(x: int) -> int:
        return x

    with on(tclient):
        with pytest.raises(InvalidInputError, match=r"langsmith_extra\['metadata'\]"):
            f(1, langsmith_extra={"metadata": ["not", "a", "mapping"]})
        with pytest.raises(InvalidInputError, match="must be a mapping"):
            f(1, langsmith_extra="nope")
        with pytest.raises(InvalidInputError, match="malformed 'langsmith-trace' header"):
            f(1, langsmith_extra={"parent": {"langsmith-trace": "x"}})
        with caplog.at_level(logging.WARNING, logger="assay.tracing"):
            assert f(2, langsmith_extra={"replicas": [], "metadata": {"ok": True}}) == 2
    assert "langsmith_extra['replicas'] is not read" in caplog.text
    assert runs(tclient)["f"].extra["metadata"]["ok"] is True
