"""The scripted model's Gemini API (agents on Google's models), driven by the official
``google-genai`` client over real HTTP: function calls, streams, thinking tokens, implicit
caching, a forced function, faults."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("google.genai", reason="needs google-genai (assay[dev])")

from google import genai
from google.genai import errors, types

from assay.demo import ScriptedModelServer
from assay.demo._gemini import THOUGHTS

MODEL = "gemini-2.5-flash"
QUESTION = "How many people live in 'Paris'?"
SYSTEM = "You answer questions about cities with the lookup tool and nothing else."
LOOKUP = types.FunctionDeclaration(
    name="lookup_city", description="A city's population.",
    parameters=types.Schema(type="OBJECT", properties={"city": types.Schema(type="STRING")},
                            required=["city"]))


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(prompt_caching=True) as server:
        yield server


@pytest.fixture
def client(srv: ScriptedModelServer) -> Any:
    srv.reset()
    return genai.Client(api_key="scripted", http_options=types.HttpOptions(base_url=srv.url))


def _config(**kw: Any) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        system_instruction=SYSTEM, tools=[types.Tool(function_declarations=[LOOKUP])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True), **kw)


def _after_call(first: Any, result: str) -> list[Any]:
    return [types.Content(role="user", parts=[types.Part(text=QUESTION)]),
            first.candidates[0].content,
            types.Content(role="user", parts=[types.Part.from_function_response(
                name="lookup_city", response={"output": result})])]


def test_calls_a_function_then_answers_with_its_result_from_the_cache(client: Any) -> None:
    """Gemini's upper-case schema types read as JSON schema; the second request begins with
    the first's contents, which the played implicit cache serves."""
    first = client.models.generate_content(model=MODEL, contents=QUESTION, config=_config())
    (call,) = first.function_calls
    assert call.name == "lookup_city" and call.args == {"city": "Paris"}
    assert first.usage_metadata.prompt_token_count == len(f"{SYSTEM} {QUESTION}".split())
    assert not first.usage_metadata.cached_content_token_count
    second = client.models.generate_content(
        model=MODEL, contents=_after_call(first, "Paris has 2102650 people"), config=_config())
    assert second.text == "Answer: Paris has 2102650 people"
    usage = second.usage_metadata
    assert usage.cached_content_token_count == first.usage_metadata.prompt_token_count
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count


def test_streams_a_word_a_chunk_with_thinking_tokens_in_the_last(client: Any) -> None:
    chunks = list(client.models.generate_content_stream(
        model=MODEL, contents="Say hello",
        config=types.GenerateContentConfig(thinking_config=types.ThinkingConfig(
            thinking_budget=64))))
    assert "".join(c.text or "" for c in chunks) == "You asked: Say hello" and len(chunks) == 4
    assert [c.usage_metadata is not None for c in chunks] == [False, False, False, True]
    usage = chunks[-1].usage_metadata
    assert usage.thoughts_token_count == THOUGHTS and usage.candidates_token_count == 4
    assert usage.total_token_count == usage.prompt_token_count + 4 + THOUGHTS
    calls = [c for c in client.models.generate_content_stream(
        model=MODEL, contents=QUESTION, config=_config()) if c.function_calls]
    assert [c.function_calls[0].args for c in calls] == [{"city": "Paris"}]


def test_a_forced_function_gets_an_instance_of_its_schema(client: Any) -> None:
    """A JSON-schema declaration (``parameters_json_schema``, as pydantic-ai sends it) forced
    by ``mode=ANY`` with one allowed name: called with an instance of its schema."""
    answer = types.FunctionDeclaration(name="CityAnswer", parameters_json_schema={
        "type": "object", "properties": {"city": {"type": "string"},
                                         "population": {"type": "integer"}},
        "required": ["city", "population"]})
    first = client.models.generate_content(model=MODEL, contents=QUESTION, config=_config())
    got = client.models.generate_content(
        model=MODEL, contents=_after_call(first, "Paris has 2102650 people"),
        config=types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[LOOKUP, answer])],
            tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
                mode="ANY", allowed_function_names=["CityAnswer"])),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)))
    (call,) = got.function_calls
    assert call.name == "CityAnswer" and call.args == {"city": "Paris", "population": 2102650}


def test_faults_come_as_google_errors(srv: ScriptedModelServer, client: Any) -> None:
    srv.fail_next(429, retry_after=0)
    with pytest.raises(errors.ClientError) as err:
        client.models.generate_content(model=MODEL, contents=QUESTION)
    assert err.value.code == 429
    srv.fail_next(503)
    with pytest.raises(errors.ServerError):
        client.models.generate_content(model=MODEL, contents=QUESTION)
