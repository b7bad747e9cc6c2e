"""One adapter for sync/async callables and invoke/ainvoke/run/do/do_async objects."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from pydantic import BaseModel

from assay.errors import InvalidInputError
from assay.evals import AgentUnderTest, output_text


def echo(q: str) -> str:
    return f"sync:{q}"


async def aecho(q: str) -> str:
    await asyncio.sleep(0)
    return f"async:{q}"


class Runnable:  # LangChain / LangGraph shape: both invoke and ainvoke
    def invoke(self, q: Any) -> str:
        return f"invoke:{q}"

    async def ainvoke(self, q: Any) -> str:
        return f"ainvoke:{q}"


class UpsonicLike:
    def do(self, task: Any) -> str:
        return f"do:{task}"

    async def do_async(self, task: Any) -> str:
        return f"do_async:{task}"


class SyncOnly:
    def do(self, task: Any) -> str:
        return f"do:{task}"


class AsyncRun:
    async def run(self, q: str) -> str:
        return f"run:{q}"


class SyncRun:
    def run(self, q: str) -> str:
        return f"syncrun:{q}"


class CallableObj:
    async def __call__(self, q: str) -> str:
        return f"call:{q}"


CASES = [
    (echo, False, "sync:q"),
    (aecho, True, "async:q"),
    (lambda q: f"lambda:{q}", False, "lambda:q"),
    (functools.partial(aecho), True, "async:q"),
    (Runnable(), True, "ainvoke:q"),
    (UpsonicLike(), True, "do_async:q"),
    (SyncOnly(), False, "do:q"),
    (AsyncRun(), True, "run:q"),
    (SyncRun(), False, "syncrun:q"),
    (CallableObj(), True, "call:q"),
    (UpsonicLike().do, False, "do:q"),
]


@pytest.mark.parametrize("target,is_async,expected", CASES)
async def test_every_shape_async(target: Any, is_async: bool, expected: str) -> None:
    agent = AgentUnderTest(target)
    assert agent.is_async is is_async
    assert await agent.acall("q") == expected
    assert await agent.acall("q", offload_sync=True) == expected


@pytest.mark.parametrize("target,is_async,expected", CASES)
def test_every_shape_sync(target: Any, is_async: bool, expected: str) -> None:
    assert AgentUnderTest(target).call("q") == expected


def test_mappers_and_zero_argument_agents() -> None:
    graph = Runnable()
    agent = AgentUnderTest(graph, input_mapper=lambda q: {"messages": [("user", q)]},
                           output_mapper=lambda r: r.upper())
    assert agent.call("hi") == "ainvoke:{'messages': [('user', 'hi')]}"
    assert agent.text(agent.call("hi")) == "AINVOKE:{'MESSAGES': [('USER', 'HI')]}"
    calls = []
    zero = AgentUnderTest(lambda: calls.append(1) or "done")
    assert zero.call("ignored") == "done" and calls == [1]


def test_sync_callable_returning_a_coroutine() -> None:
    agent = AgentUnderTest(lambda q: aecho(q))
    assert agent.is_async is False
    assert agent.call("x") == "async:x"
    assert asyncio.run(agent.acall("x")) == "async:x"


def test_pydantic_ai_agent() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    agent = AgentUnderTest(Agent(TestModel(custom_output_text="Paris")))
    assert agent.is_async and agent.description == "pydantic-ai:Agent"
    assert agent.text(agent.call("capital of France?")) == "Paris"


def test_not_an_agent() -> None:
    with pytest.raises(InvalidInputError, match="agent_under_test must be a callable"):
        AgentUnderTest(42)


class Answer(BaseModel):
    text: str


class Msg(BaseModel):
    content: str


def test_output_text() -> None:
    assert output_text("plain") == "plain"
    assert output_text(None) == ""
    assert output_text({"output": "o", "other": 1}) == "o"
    assert output_text({"messages": [{"content": "first"}, Msg(content="last")]}) == "last"
    assert output_text(Msg(content="c")) == "c"
    assert output_text(Answer(text="t")) == '{"text":"t"}'
    assert output_text({"x": 1, "y": 2}) == '{"x": 1, "y": 2}'
    assert output_text([1, 2]) == "[1, 2]"
    assert output_text(42) == "42"
