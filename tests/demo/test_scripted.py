"""The scripted model server behind `assay demo --framework` and the framework tests, driven by
the official ``openai`` client over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from assay.demo import ScriptedModelServer, ScriptedReply

TOOLS = [
    {"type": "function", "function": {"name": "lookup_city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculator", "parameters": {
        "type": "object", "properties": {"expression": {"type": "string"},
                                         "places": {"type": "integer"}},
        "required": ["expression", "places"]}}},
]


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(answers={"capital of France": "Paris"}) as server:
        yield server


@pytest.fixture
def client(srv: ScriptedModelServer) -> openai.OpenAI:
    srv.reset()
    return openai.OpenAI(base_url=srv.base_url, api_key="scripted", max_retries=0)


def test_calls_the_named_tools_in_order_then_answers_with_their_results(client: openai.OpenAI
                                                                        ) -> None:
    msgs: list[dict] = [{"role": "user", "content": "use calculator on 3 then lookup_city 'Lima'"}]
    seen = []
    for result in ("6", "9.9 million"):
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS)
        call = reply.choices[0].message.tool_calls[0]
        seen.append((call.function.name, json.loads(call.function.arguments)))
        assert reply.choices[0].finish_reason == "tool_calls"
        msgs += [reply.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": result}]
    assert seen == [("calculator", {"expression": "Lima", "places": 3}),
                    ("lookup_city", {"city": "Lima"})]
    final = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS)
    assert final.choices[0].message.content == "Answer: 6; 9.9 million"
    assert final.usage.prompt_tokens > 0 and final.usage.completion_tokens == 4


def test_after_a_handoff_the_agent_handed_to_calls_its_own_tool(client: openai.OpenAI
                                                                 ) -> None:
    """An OpenAI Agents SDK handoff (``transfer_to_geo``, not among the tools offered now) is
    no result of the agent handed to: it calls its own tool, then quotes that tool's result
    alone. A result of another tool that is not offered (a tool the agent does not have) is
    still quoted, as before."""
    msgs: list[dict] = [
        {"role": "user", "content": "How many people live in Paris?"},
        {"role": "assistant", "tool_calls": [{"id": "h1", "type": "function", "function": {
            "name": "transfer_to_geo", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "h1", "content": '{"assistant": "geo"}'}]
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS[:1])
    call = reply.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "lookup_city", {"city": "Paris"})
    msgs += [reply.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "2102650"}]
    final = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS[:1])
    assert final.choices[0].message.content == "Answer: 2102650"
    unknown = [msgs[0], {"role": "assistant", "tool_calls": [{"id": "t1", "type": "function",
                                                              "function": {"name": "teleport",
                                                                           "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "t1", "content": "Tool 'teleport' not found"}]
    again = client.chat.completions.create(model="gpt-4o-mini", messages=unknown,
                                           tools=TOOLS[:1])
    assert again.choices[0].message.content == "Answer: Tool 'teleport' not found"


def test_streams_with_usage_only_when_asked(client: openai.OpenAI) -> None:
    def chunks(**kw: object) -> list:
        return list(client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "capital of France?"}], stream=True,
            **kw))
    with_usage = chunks(stream_options={"include_usage": True})
    text = "".join(c.choices[0].delta.content or "" for c in with_usage if c.choices)
    assert text == "Paris"
    assert with_usage[-1].usage is not None and with_usage[-1].usage.completion_tokens == 1
    assert all(c.usage is None for c in chunks())


def test_verdicts_compare_expected_and_generated(client: openai.OpenAI) -> None:
    def verdict(expected: str, generated: str) -> dict:
        data = json.dumps({"expected_output": expected, "generated_output": generated})
        reply = client.chat.completions.create(model="m", response_format={"type": "json_object"},
                                               messages=[{"role": "user", "content": data}])
        return json.loads(reply.choices[0].message.content)
    assert verdict("Paris", "It is Paris.")["score"] == 9
    wrong = verdict("Paris", "Berlin")
    assert wrong["score"] == 3 and wrong["is_met"] is False


def test_an_output_schema_gets_an_instance_after_the_tools(client: openai.OpenAI) -> None:
    """A json_schema that is no verdict (an agent's own output type, nested through $defs):
    tools first, then an instance of the schema from the question and the tool results; a
    schema with a ``score`` is still a judge's and gets a verdict."""
    city = {"type": "object", "properties": {
        "name": {"type": "string"}, "population": {"type": "integer"},
        "country": {"anyOf": [{"$ref": "#/$defs/Country"}, {"type": "null"}]}},
        "required": ["name", "population", "country"],
        "$defs": {"Country": {"type": "object", "properties": {"code": {"type": "string"},
                                                                "eu": {"type": "boolean"}}}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "City", "schema": city}}
    msgs: list[dict] = [{"role": "user", "content": "How many people live in Paris?"}]
    first = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS[:1],
                                           response_format=fmt)  # type: ignore[arg-type]
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup_city"
    msgs += [first.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "2102650"}]
    final = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS[:1],
                                           response_format=fmt)  # type: ignore[arg-type]
    assert json.loads(final.choices[0].message.content) == {
        "name": "Paris", "population": 2102650, "country": {"code": "Paris", "eu": True}}
    judge = {"type": "json_schema", "json_schema": {"name": "Verdict", "schema": {
        "type": "object", "properties": {"score": {"type": "integer"}}}}}
    data = json.dumps({"expected_output": "Paris", "generated_output": "Paris"})
    verdict = client.chat.completions.create(model="m", response_format=judge,  # type: ignore[arg-type]
                                             messages=[{"role": "user", "content": data}])
    assert json.loads(verdict.choices[0].message.content)["score"] == 9


def test_an_output_tool_is_called_with_an_instance_after_the_tools(client: openai.OpenAI
                                                                    ) -> None:
    """An output tool on offer (pydantic-ai's and Upsonic's ``final_result``): the agent's own
    tools first (never the output tool first, though offered first), then the output tool
    with an instance of its schema, strings from the question and numbers from the results."""
    final = {"type": "function", "function": {"name": "final_result", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "population": {"type": "integer"}},
        "required": ["city", "population"]}}}
    tools = [final, TOOLS[0]]
    msgs: list[dict] = [{"role": "user", "content": "How many people live in 'Paris'?"}]
    first = client.chat.completions.create(model="m", messages=msgs, tools=tools,  # type: ignore[arg-type]
                                           tool_choice="required")
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup_city"
    msgs += [first.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": '{"func": "2102650"}'}]
    done = client.chat.completions.create(model="m", messages=msgs, tools=tools,  # type: ignore[arg-type]
                                          tool_choice="required")
    answer = done.choices[0].message
    assert answer.content is None and answer.tool_calls[0].function.name == "final_result"
    assert json.loads(answer.tool_calls[0].function.arguments) == {
        "city": "Paris", "population": 2102650}


def test_tool_arguments_come_from_the_prose_not_a_json_schema(client: openai.OpenAI) -> None:
    """A prompt that carries a JSON schema (CrewAI's ``output_pydantic`` asks for its format
    that way) or instructions after the question (CrewAI's task prompt): the argument is the
    question's city, not a quoted key of the schema nor an instruction's word."""
    schema = json.dumps({"properties": {"city": {"title": "City", "type": "string"}},
                         "additionalProperties": False}, indent=2)
    text = f"Use lookup_city for 'Cairo'. Format your answer by this schema: {schema}"
    reply = client.chat.completions.create(model="m", tools=TOOLS[:1],  # type: ignore[arg-type]
                                           messages=[{"role": "user", "content": text}])
    call = reply.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"city": "Cairo"}
    # unquoted: a name inside the question, not the words of the instructions after it
    text = "How many people live in Lima?\n\nThis is the criteria: you MUST return a figure."
    reply = client.chat.completions.create(model="m", tools=TOOLS[:1],  # type: ignore[arg-type]
                                           messages=[{"role": "user", "content": text}])
    call = reply.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"city": "Lima"}


def test_parallel_tool_calls_come_in_one_reply_in_the_texts_order() -> None:
    """``parallel_tool_calls=True``: the tools named in the text are called in one reply, in
    the order the text names them; a request with ``parallel_tool_calls: false`` gets one."""
    with ScriptedModelServer(parallel_tool_calls=True) as par:
        client = openai.OpenAI(base_url=par.base_url, api_key="scripted", max_retries=0)
        msgs = [{"role": "user", "content": "Use calculator, then lookup_city for 'Oslo'"}]
        reply = client.chat.completions.create(model="m", messages=msgs,  # type: ignore[arg-type]
                                               tools=TOOLS)  # type: ignore[arg-type]
        assert [c.function.name for c in reply.choices[0].message.tool_calls] == [
            "calculator", "lookup_city"]
        one = client.chat.completions.create(model="m", messages=msgs,  # type: ignore[arg-type]
                                             tools=TOOLS, parallel_tool_calls=False)  # type: ignore[arg-type]
        assert [c.function.name for c in one.choices[0].message.tool_calls] == ["calculator"]


def test_prompt_caching_reports_the_longest_prefix_seen_as_cached() -> None:
    """``prompt_caching=True`` plays OpenAI's automatic caching: a request that begins with
    an earlier request's messages has their words as ``cached_tokens`` (chat completions and
    the Responses API); off by default, where no usage has details."""
    system = {"role": "system", "content": "You look cities up for the user"}
    with ScriptedModelServer(prompt_caching=True) as cached:
        client = openai.OpenAI(base_url=cached.base_url, api_key="scripted", max_retries=0)
        first = client.chat.completions.create(model="m", messages=[  # type: ignore[arg-type]
            system, {"role": "user", "content": QUESTION}], tools=TOOLS)  # type: ignore[arg-type]
        assert first.usage is not None and first.usage.prompt_tokens_details is not None
        assert first.usage.prompt_tokens_details.cached_tokens == 0
        msgs: list[Any] = [system, {"role": "user", "content": QUESTION},
                           first.choices[0].message.model_dump(exclude_none=True),
                           {"role": "tool", "tool_call_id": "x", "content": "Paris: 2102650"}]
        second = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS)  # type: ignore[arg-type]
        assert second.usage is not None and second.usage.prompt_tokens_details is not None
        assert second.usage.prompt_tokens_details.cached_tokens == len(
            f"{system['content']} {QUESTION}".split())
        other = client.responses.create(model="m", instructions=system["content"],
                                        input="How many people live in 'Lima'?")
        assert other.usage is not None
        assert other.usage.input_tokens_details.cached_tokens == len(system["content"].split())
    with ScriptedModelServer() as plain:
        client = openai.OpenAI(base_url=plain.base_url, api_key="scripted", max_retries=0)
        for _ in range(2):
            reply = client.chat.completions.create(model="m", messages=[system])  # type: ignore[list-item]
            assert reply.usage is not None and reply.usage.prompt_tokens_details is None


def test_faults_and_scripted_replies_come_first(srv: ScriptedModelServer,
                                                client: openai.OpenAI) -> None:
    srv.fail_next(429, retry_after=0.5)
    srv.script(ScriptedReply(body={"id": "x", "object": "chat.completion", "created": 0,
                                   "model": "m", "choices": []}),
               ScriptedReply(tool_calls=[{"name": "nope", "arguments": "{bad json"}]))
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(model="m", messages=msgs)
    assert err.value.response.headers["retry-after"] == "0.5"
    assert client.chat.completions.create(model="m", messages=msgs).choices == []
    bad = client.chat.completions.create(model="m", messages=msgs).choices[0].message
    assert bad.tool_calls[0].function.arguments == "{bad json"
    assert client.chat.completions.create(model="m", messages=msgs).choices[0].message.content \
        == "You asked: hi"
    assert len(srv.requests) == 4


# -- the Responses API (the OpenAI Agents SDK's default) ----------------------------------------
RESPONSE_TOOLS: list[Any] = [{
    "type": "function", "name": "lookup_city", "description": "The population of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False}, "strict": True}]
QUESTION = "How many people live in Paris? Use lookup_city"


def test_responses_api_calls_a_tool_then_answers_with_usage(client: openai.OpenAI) -> None:
    first = client.responses.create(model="gpt-4o-mini", input=QUESTION, tools=RESPONSE_TOOLS,
                                    instructions="Use the tools.")
    (call,) = first.output
    assert call.type == "function_call" and call.name == "lookup_city"
    assert json.loads(call.arguments) == {"city": "Paris"} and call.call_id
    assert first.usage is not None and first.usage.input_tokens > 0
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    items: list[Any] = [{"role": "user", "content": QUESTION}, call.model_dump(exclude_none=True),
                        {"type": "function_call_output", "call_id": call.call_id,
                         "output": "Paris has 2102650 people"}]
    second = client.responses.create(model="gpt-4o-mini", tools=RESPONSE_TOOLS, input=items)
    assert second.output_text == "Answer: Paris has 2102650 people"
    assert second.output[0].type == "message" and second.status == "completed"


def test_responses_api_streams_events_and_a_completed_response(client: openai.OpenAI) -> None:
    with client.responses.stream(model="gpt-4o-mini", input="Say hello",
                                 ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") == len("You asked: Say hello".split())
    assert final.output_text == "You asked: Say hello" and final.usage is not None
    events = list(client.responses.create(model="gpt-4o-mini", input=QUESTION,
                                          tools=RESPONSE_TOOLS, stream=True))
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(deltas) == {"city": "Paris"}
    (done,) = [e for e in events if e.type == "response.completed"]
    assert done.response.output[0].type == "function_call"


def test_responses_api_verdicts_and_faults(srv: ScriptedModelServer,
                                           client: openai.OpenAI) -> None:
    verdict = client.responses.create(
        model="gpt-4o-mini", text={"format": {"type": "json_object"}},
        input=json.dumps({"evaluation_data": 1, "expected_output": "Paris",
                          "generated_output": "It is Paris"}))
    assert json.loads(verdict.output_text)["score"] == 9
    srv.fail_next(429, retry_after=0)
    with pytest.raises(openai.RateLimitError):
        client.responses.create(model="gpt-4o-mini", input=QUESTION)
    srv.script(ScriptedReply(tool_calls=[{"name": "teleport", "arguments": "{not json"}]))
    (call,) = client.responses.create(model="gpt-4o-mini", input=QUESTION).output
    assert call.type == "function_call" and call.name == "teleport"
    assert call.arguments == "{not json"
