"""Tool calls in execution order from run trees, runs, messages, names and tool_calls objects."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay._ids import dotted_segment
from assay.errors import InvalidInputError
from assay.evals import ToolCall, extract_tool_calls
from assay.schemas import Run

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def make_run(name: str, run_type: str, at: int, parent: Run | None = None,
             inputs: dict[str, Any] | None = None) -> Run:
    rid = uuid.uuid4()
    start = T0 + timedelta(milliseconds=at)
    seg = dotted_segment(start, rid)
    run = Run(id=rid, name=name, run_type=run_type, start_time=start, inputs=inputs or {},
              trace_id=parent.trace_id if parent else rid,
              parent_run_id=parent.id if parent else None,
              dotted_order=f"{parent.dotted_order}.{seg}" if parent else seg, child_runs=[])
    if parent is not None:
        parent.child_runs = [*(parent.child_runs or []), run]
    return run


def names(calls: list[ToolCall]) -> list[str]:
    return [c.name for c in calls]


def test_run_tree_in_execution_order_with_nested_tools() -> None:
    root = make_run("agent", "chain", 0)
    llm = make_run("model", "llm", 1, root)
    step2 = make_run("step", "chain", 20, root)
    late = make_run("summarize", "tool", 30, step2, {"text": "abc"})
    early = make_run("search", "tool", 10, root, {"query": "weather"})
    inner = make_run("fetch", "tool", 25, step2, {"url": "http://x"})
    nested = make_run("parse", "tool", 26, inner, {"input": '{"format": "html"}'})
    assert llm and early and late and nested
    # children were attached out of order on purpose: the order comes from dotted order
    calls = extract_tool_calls(root)
    assert names(calls) == ["search", "fetch", "parse", "summarize"]
    assert calls[0].args == {"query": "weather"}
    assert calls[2].args == {"format": "html"}  # LangChain-style {"input": "<json>"} unwrapped
    assert calls[0].id == str(early.id)


def test_flat_list_of_runs_any_order() -> None:
    root = make_run("agent", "chain", 0)
    a = make_run("a", "tool", 5, root)
    b = make_run("b", "tool", 7, root)
    c = make_run("c", "tool", 9, b)
    flat = [c, root, b, a]
    for r in flat:
        r.child_runs = None  # as list_runs returns them
    assert names(extract_tool_calls(flat)) == ["a", "b", "c"]


def test_runs_without_dotted_order_use_start_time_and_dicts_work() -> None:
    runs = [{"name": "second", "run_type": "tool", "start_time": T0 + timedelta(seconds=2),
             "inputs": {"x": 1}},
            {"name": "first", "run_type": "tool", "start_time": T0, "inputs": {}},
            {"name": "ignored", "run_type": "llm", "start_time": T0}]
    assert names(extract_tool_calls(runs)) == ["first", "second"]


def test_openai_messages() -> None:
    messages = [
        {"role": "system", "content": "be useful"},
        {"role": "user", "content": "weather in Paris and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}},
            {"id": "c2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
        {"role": "assistant", "function_call": {"name": "legacy", "arguments": "{}"}},
        {"role": "assistant", "tool_calls": [
            {"id": "c3", "type": "function",
             "function": {"name": "broken", "arguments": "{not json"}}]},
        {"role": "assistant", "content": "Paris sunny, Rome rain."},
    ]
    calls = extract_tool_calls(messages)
    assert names(calls) == ["get_weather", "get_weather", "legacy", "broken"]
    assert calls[1].args == {"city": "Rome"} and calls[1].id == "c2"
    assert calls[3].args == "{not json"  # kept raw; argument matching will reject it


def test_openai_sdk_message_objects() -> None:
    from openai.types.chat import ChatCompletionMessage

    msg = ChatCompletionMessage.model_validate({
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "x", "type": "function",
                        "function": {"name": "lookup", "arguments": '{"k": 1}'}}]})
    calls = extract_tool_calls([msg])
    assert calls == [ToolCall(name="lookup", args={"k": 1}, id="x")]


def test_anthropic_blocks_and_langchain_style() -> None:
    history = [
        {"role": "assistant", "content": [
            {"type": "text", "text": "let me check"},
            {"type": "tool_use", "id": "tu1", "name": "search", "input": {"q": "x"}}]},
        {"type": "ai", "content": "", "tool_calls": [
            {"name": "calculator", "args": {"expr": "1+1"}, "id": "lc1", "type": "tool_call"}]},
        {"type": "tool", "content": "2", "tool_call_id": "lc1"},
    ]
    calls = extract_tool_calls(history)
    assert [(c.name, c.args) for c in calls] == [("search", {"q": "x"}),
                                                  ("calculator", {"expr": "1+1"})]


def test_pydantic_ai_messages() -> None:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    history = [
        ModelRequest(parts=[UserPromptPart(content="hi")]),
        ModelResponse(parts=[ToolCallPart(tool_name="roll_die", args={"sides": 6},
                                          tool_call_id="p1")]),
        ModelRequest(parts=[ToolReturnPart(tool_name="roll_die", content="4",
                                           tool_call_id="p1")]),
        ModelResponse(parts=[ToolCallPart(tool_name="get_name", args='{"who": "player"}',
                                          tool_call_id="p2"), TextPart(content="done")]),
    ]
    calls = extract_tool_calls(history)
    assert [(c.name, c.args, c.id) for c in calls] == [
        ("roll_die", {"sides": 6}, "p1"), ("get_name", {"who": "player"}, "p2")]


def test_tool_names_and_objects_with_tool_calls() -> None:
    assert names(extract_tool_calls(["a", "b", "a"])) == ["a", "b", "a"]
    assert extract_tool_calls([]) == [] and extract_tool_calls(None) == []

    @dataclass
    class Task:  # Upsonic's Task records tool_name + params
        description: str
        tool_calls: list[dict[str, Any]] = field(default_factory=list)

    task = Task("q", [{"tool_name": "search", "params": {"q": "x"}, "tool_result": "..."},
                      {"tool_name": "write", "params": {}}])
    calls = extract_tool_calls(task)
    assert [(c.name, c.args) for c in calls] == [("search", {"q": "x"}), ("write", {})]
    assert names(extract_tool_calls({"tool_calls": ["x", {"name": "y", "args": {}}]})) == ["x", "y"]
    state = {"messages": [{"role": "assistant", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "z", "arguments": ""}}]}]}
    assert extract_tool_calls(state) == [ToolCall(name="z", args={}, id="1")]


@pytest.mark.parametrize("bad,match", [
    ("search", "not a string"),
    (42, "cannot read tool calls from a int"),
    ([{"foo": 1}], "item 0"),
    ([""], "empty"),
])
def test_unreadable_sources_are_named(bad: Any, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        extract_tool_calls(bad)


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"id": f"call-{name}-{len(args)}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def test_parallel_calls_of_one_answer_come_in_the_models_order() -> None:
    """Tools that one llm answer asked for at once start in whatever order the framework's
    threads reach them (CrewAI swaps them about one time in four): the calls come back in the
    answer's order (by name and arguments, in either output shape), each batch on its own; a
    tool run that no answer listed keeps its place."""
    root = make_run("agent", "chain", 0)
    first = make_run("model", "llm", 1, root)
    first.outputs = {"output": [_call("get_time", city="Paris"), _call("get_weather",
                                                                       city="Paris")]}
    make_run("get_weather", "tool", 5, root, {"city": "Paris"})  # started first
    make_run("get_time", "tool", 6, root, {"city": "Paris"})
    second = make_run("model", "llm", 10, root)
    second.outputs = {"messages": [{"role": "assistant", "content": None, "tool_calls": [
        _call("search", q="a"), _call("search", q="b")]}]}
    make_run("search", "tool", 12, root, {"q": "b"})
    make_run("search", "tool", 13, root, {"q": "a"})
    make_run("summarize", "tool", 20, root, {"text": "x"})
    calls = extract_tool_calls(root)
    assert [(c.name, c.args) for c in calls] == [
        ("get_time", {"city": "Paris"}), ("get_weather", {"city": "Paris"}),
        ("search", {"q": "a"}), ("search", {"q": "b"}), ("summarize", {"text": "x"})]
    third = make_run("model", "llm", 30, root)  # the GenAI conventions' message parts
    third.outputs = {"messages": [{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "c5", "name": "get_time", "arguments": '{"city": "Oslo"}'},
        {"type": "tool_call", "id": "c6", "name": "get_weather", "arguments": {"city": "Oslo"}},
    ]}]}
    make_run("get_weather", "tool", 31, root, {"city": "Oslo"})
    make_run("get_time", "tool", 32, root, {"city": "Oslo"})
    assert [(c.name, c.args) for c in extract_tool_calls(root)][-2:] == [
        ("get_time", {"city": "Oslo"}), ("get_weather", {"city": "Oslo"})]
    assert [c.id for c in extract_tool_calls(third.outputs["messages"])] == ["c5", "c6"]
    flat = [root, *(root.child_runs or [])]
    for r in flat:
        r.child_runs = None  # a flat list, as list_runs returns it, in any order
    assert [c.name for c in extract_tool_calls(list(reversed(flat)))] == [
        "get_time", "get_weather", "search", "search", "summarize", "get_time", "get_weather"]
