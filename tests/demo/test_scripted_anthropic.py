"""The scripted model's Anthropic Messages API (agents on Claude), driven by the official
``anthropic`` client over real HTTP: tool use, streams, prompt caching, forced tools, faults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from assay.demo import ScriptedModelServer

MODEL = "claude-sonnet-4-6"
QUESTION = "How many people live in 'Paris'?"
TOOLS: list[Any] = [{"name": "lookup_city", "description": "A city's population.",
                     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                      "required": ["city"]}}]
SYSTEM = "You answer questions about cities with the lookup tool and nothing else."


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def client(srv: ScriptedModelServer) -> anthropic.Anthropic:
    srv.reset()
    return anthropic.Anthropic(base_url=srv.url, api_key="scripted", max_retries=0)


def _after_tool(first: Any, result: str) -> list[Any]:
    (use,) = [b for b in first.content if b.type == "tool_use"]
    return [{"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                              for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                          "content": [{"type": "text", "text": result}]}]}]


def test_calls_a_tool_then_answers_with_its_result(client: anthropic.Anthropic) -> None:
    first = client.messages.create(model=MODEL, max_tokens=100, tools=TOOLS, system=SYSTEM,
                                   messages=[{"role": "user", "content": QUESTION}])
    assert first.stop_reason == "tool_use" and first.model == MODEL
    (use,) = first.content
    assert use.type == "tool_use" and use.name == "lookup_city" and use.input == {"city": "Paris"}
    assert first.usage.input_tokens == len(f"{SYSTEM} {QUESTION}".split())
    second = client.messages.create(model=MODEL, max_tokens=100, tools=TOOLS, system=SYSTEM,
                                    messages=_after_tool(first, "Paris has 2102650 people"))
    assert second.stop_reason == "end_turn"
    assert [b.text for b in second.content if b.type == "text"] == [
        "Answer: Paris has 2102650 people"]
    assert second.usage.output_tokens == 5


def test_streams_text_and_tool_arguments_with_the_whole_usage_at_the_end(
        client: anthropic.Anthropic) -> None:
    with client.messages.stream(model=MODEL, max_tokens=100, tools=TOOLS,
                                messages=[{"role": "user", "content": QUESTION}]) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and "message_stop" in kinds
    deltas = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta"
                     and e.delta.type == "input_json_delta")
    assert json.loads(deltas) == {"city": "Paris"}
    assert final.content[0].type == "tool_use" and final.stop_reason == "tool_use"
    (delta,) = [e for e in events if e.type == "message_delta"]
    # the whole usage in message_delta, as Anthropic sends it (LangChain reads it from there)
    assert delta.usage.input_tokens == final.usage.input_tokens == len(QUESTION.split())
    with client.messages.stream(model=MODEL, max_tokens=100,
                                messages=[{"role": "user", "content": "Say hello"}]) as stream:
        pieces = list(stream.text_stream)
    assert "".join(pieces) == "You asked: Say hello" and len(pieces) == 4


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_a_cache_breakpoint_writes_its_prefix_once_then_reads_it(client: anthropic.Anthropic,
                                                                  ttl: str) -> None:
    system: Any = [{"type": "text", "text": SYSTEM,
                    "cache_control": {"type": "ephemeral", "ttl": ttl}}]
    cached = len(SYSTEM.split())
    usages = [client.messages.create(model=MODEL, max_tokens=100, tools=TOOLS, system=system,
                                     messages=[{"role": "user", "content": q}]).usage
              for q in (QUESTION, QUESTION, "And 'Lima'?")]
    first, again, other = usages
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (cached, 0)
    assert first.cache_creation is not None
    split = (first.cache_creation.ephemeral_5m_input_tokens,
             first.cache_creation.ephemeral_1h_input_tokens)
    assert split == ((cached, 0) if ttl == "5m" else (0, cached))
    for usage in (again, other):  # the same prefix, whatever follows it
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, cached)
    # input_tokens leaves the cached tokens out, as Anthropic counts them
    assert first.input_tokens == again.input_tokens == len(QUESTION.split())
    plain = client.messages.create(model=MODEL, max_tokens=100, system=SYSTEM,
                                   messages=[{"role": "user", "content": QUESTION}]).usage
    assert (plain.cache_creation_input_tokens, plain.cache_read_input_tokens) == (0, 0)


def test_a_forced_tool_gets_an_instance_of_its_schema_on_the_beta_path(
        client: anthropic.Anthropic) -> None:
    answer = {"name": "CityAnswer", "input_schema": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "population": {"type": "integer"}},
        "required": ["city", "population"]}}
    got = client.beta.messages.create(  # (POST /v1/messages?beta=true, as Upsonic calls it)
        model=MODEL, max_tokens=100, tools=[*TOOLS, answer],
        tool_choice={"type": "tool", "name": "CityAnswer"},
        messages=_after_tool(client.messages.create(
            model=MODEL, max_tokens=100, tools=TOOLS,
            messages=[{"role": "user", "content": QUESTION}]), "Paris has 2102650 people"))
    (use,) = got.content
    assert use.type == "tool_use" and use.name == "CityAnswer"
    assert use.input == {"city": "Paris", "population": 2102650}


def test_faults_come_as_anthropic_errors(srv: ScriptedModelServer,
                                         client: anthropic.Anthropic) -> None:
    srv.fail_next(429, retry_after=0)
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(model=MODEL, max_tokens=10,
                               messages=[{"role": "user", "content": QUESTION}])
    srv.fail_next(529)
    with pytest.raises(anthropic.APIStatusError) as err:
        client.messages.create(model=MODEL, max_tokens=10,
                               messages=[{"role": "user", "content": QUESTION}])
    assert err.value.status_code == 529
