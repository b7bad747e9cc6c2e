"""The Vercel AI SDK (npm ``ai``, pinned in js/package.json) traced to ``/otel/v1/traces``.

The AI SDK's telemetry (versions 4-6, ``experimental_telemetry``) sends its own ``ai.*``
attributes and no ``gen_ai.operation.name``: what it calls the model, a tool or itself is read
from ``ai.operationId`` (``tracing/_otel_aisdk.py``). Its agent runs against the scripted model
through ``@ai-sdk/openai`` (Responses and Chat Completions), exported by OpenTelemetry's own
Node tracer and protobuf exporter, as an AI SDK app does it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from pricing_checks import check_priced

from assay.demo import ScriptedModelServer

from .conftest import Server
from .test_js_sdk import JS, node  # noqa: F401 - the fixture: node, with js/ installed
from .test_otlp import ENDPOINT, _check_tree


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(first_token_delay=0.01) as srv:
        yield srv


def test_an_ai_sdk_agent_is_traced_with_tokens_tools_and_first_token(
        server: Server, model: ScriptedModelServer, node: str) -> None:  # noqa: F811
    key, store = server.new_key()
    proc = subprocess.run([node, "ai_sdk.mjs", model.base_url, server.url + ENDPOINT, key],
                          cwd=JS, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    answers = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answers["chat"] == answers["responses"] == {
        "agent": "Answer: Paris has 2102650 people", "streamed": "You asked: capital of Peru?"}
    runs = _check_tree(store, "ai-sdk-app")
    roots = sorted((r for r in runs if r.parent_run_id is None), key=lambda r: r.start_time)
    # per API: the agent's call (two model requests, a tool call between) and the stream's,
    # each named by its telemetry's functionId
    assert [r.name for r in roots] == ["geo"] * 4
    assert [r.extra["metadata"]["ai.operationId"] for r in roots] == [
        "ai.generateText", "ai.streamText"] * 2
    children: dict = {}
    for r in runs:
        children.setdefault(r.parent_run_id, []).append(r)
    for agent, streamed in (roots[0:2], roots[2:4]):
        assert agent.run_type == "chain" and agent.inputs == {
            "prompt": "How many people live in Paris?"}
        assert agent.outputs == {"output": "Answer: Paris has 2102650 people"}
        assert agent.extra["metadata"]["user"] == "u1"
        assert not agent.prompt_tokens  # its requests' sum: stored on them, not again
        kids = children[agent.id]
        assert sorted(r.run_type for r in kids) == ["llm", "llm", "tool"]
        [call] = [r for r in kids if r.run_type == "tool"]
        # (a tool this quick may start in the millisecond the next request does: the JS
        # SDK's clock; the two requests told apart by what they answered)
        first, second = sorted((r for r in kids if r.run_type == "llm"),
                               key=lambda r: "tool_calls" not in r.outputs["messages"][0])
        assert first.start_time <= call.start_time <= second.start_time
        assert call.name == "lookup_city" and call.inputs == {"city": "Paris"}
        assert call.outputs == {"output": "Paris has 2102650 people"}
        [asked] = first.outputs["messages"][0]["tool_calls"]
        assert asked["function"]["name"] == "lookup_city"
        for llm in (first, second):
            assert llm.extra["metadata"]["ls_model_name"] == "gpt-4o-mini"
            assert llm.extra["metadata"]["ls_provider"] == "openai"
            assert llm.prompt_tokens and llm.completion_tokens and llm.total_cost
            assert llm.first_token_time is None  # not streamed
        assert second.outputs["messages"][0]["content"] == "Answer: Paris has 2102650 people"
        [request] = children[streamed.id]
        assert request.run_type == "llm" and request.name == "ai.streamText.doStream"
        assert request.prompt_tokens == 3 and request.completion_tokens == 5
        assert request.first_token_time is not None
        # after the scripted model's 10 ms before its first chunk, inside the request
        assert (request.first_token_time - request.start_time).total_seconds() >= 0.01
        assert request.first_token_time <= request.end_time


def test_an_ai_sdk_agent_on_claude_is_priced_with_its_cache_writes_and_reads(
        server: Server, node: str) -> None:  # noqa: F811
    """``@ai-sdk/anthropic`` with a system prompt marked for an hour-long cache write, asked
    twice: the first request's writes (the hour-long ones from Anthropic's usage in the SDK's
    provider metadata) and the second's reads are itemised and priced at their own rates, as
    genai-prices prices them, with the input counting every input token."""
    from assay._usage import cache_counts

    key, store = server.new_key()
    with ScriptedModelServer() as claude:  # (its own: a model keeps the prefixes it cached)
        proc = subprocess.run([node, "ai_sdk_claude.mjs", claude.url, server.url + ENDPOINT,
                               key], cwd=JS, capture_output=True, text=True, timeout=120,
                              check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        "You asked: What is the capital of Peru?"] * 2
    runs = _check_tree(store, "ai-sdk-claude")
    wrote, read = sorted((r for r in runs if r.run_type == "llm"), key=lambda r: r.start_time)
    (r1, w1, h1), (r2, w2, h2) = (
        cache_counts(check_priced(llm, "anthropic", "claude-sonnet-4-5"))
        for llm in (wrote, read))
    assert r1 == 0 and w1 == h1 > 1000  # written, for an hour
    assert r2 == w1 and w2 == h2 == 0  # read back
    assert wrote.prompt_tokens > w1 and read.prompt_tokens > r2  # the input counts them
