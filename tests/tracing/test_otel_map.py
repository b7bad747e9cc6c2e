"""The span -> run mapping shared by AssaySpanProcessor and /otel/v1/traces, convention by
convention (attribute sets as the instrumentations write them)."""

from __future__ import annotations

import json

from assay.tracing._otel_map import SpanEvent, SpanView, span_fields

T0 = 1_700_000_000_000_000_000


def view(attrs: dict, events: list[SpanEvent] | None = None, **kw: object) -> SpanView:
    return SpanView(trace_id="ab" * 16, span_id="cd" * 8, parent_span_id=None,
                    name=str(kw.pop("name", "span")), start_ns=T0, end_ns=T0 + 10**9,
                    attributes=attrs, events=events or [], **kw)  # type: ignore[arg-type]


def test_openinference_llm_with_indexed_messages_and_tool_calls() -> None:
    out = span_fields(view({
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
        "llm.provider": "OpenAI", "llm.token_count.prompt": 11,
        "llm.token_count.completion": 7, "llm.token_count.total": 18,
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "be brief",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "weather?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
            '{"city": "Lima"}',
        "metadata": json.dumps({"user": "u1"}), "tag.tags": ("beta",), "session.id": "s1"}))
    assert out["run_type"] == "llm"
    assert out["inputs"]["messages"] == [{"role": "system", "content": "be brief"},
                                         {"role": "user", "content": "weather?"}]
    [msg] = out["outputs"]["messages"]
    assert msg["tool_calls"][0]["function"] == {"name": "weather", "arguments": {"city": "Lima"}}
    meta = out["metadata"]
    assert meta["usage_metadata"] == {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
    assert meta["ls_model_name"] == "gpt-4o-mini" and meta["ls_provider"] == "openai"
    assert meta["user"] == "u1" and out["tags"] == ["beta"]
    assert meta["session_id"] == "s1" and "otel_attributes" not in meta  # its thread


def test_cached_tokens_are_itemised_in_either_convention() -> None:
    """Cache reads and writes (Anthropic's prompt caching) as the GenAI conventions and
    OpenInference name them: itemised for the store to price at their own rates, not copied
    into the leftover attributes."""
    from assay._usage import derive_usage

    for attrs in ({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5000,
                   "gen_ai.usage.cache_read.input_tokens": 1000,
                   "gen_ai.usage.cache_creation.input_tokens": 3000},
                  {"openinference.span.kind": "LLM", "llm.token_count.prompt": 5000,
                   "llm.token_count.prompt_details.cache_read": 1000,
                   "llm.token_count.prompt_details.cache_write": 3000}):
        out = span_fields(view({**attrs, "gen_ai.request.model": "claude-sonnet-4-6",
                                "llm.model_name": "claude-sonnet-4-6",
                                "gen_ai.system": "anthropic", "llm.provider": "anthropic",
                                "gen_ai.usage.output_tokens": 10,
                                "llm.token_count.completion": 10}))
        usage = out["metadata"]["usage_metadata"]
        assert usage["input_token_details"] == {"cache_read": 1000, "cache_creation": 3000}
        assert not any("cache" in k for k in out["metadata"].get("otel_attributes", {}))
        priced = derive_usage({"run_type": "llm", "extra": {"metadata": out["metadata"]}})
        plain = derive_usage({"run_type": "llm", "extra": {"metadata": {
            **out["metadata"], "usage_metadata": {"input_tokens": 5000, "output_tokens": 10}}}})
        assert priced["prompt_cost"] != plain["prompt_cost"] and priced["prompt_cost"] > 0


def test_openllmetry_workflow_tool_and_chat() -> None:
    chat = span_fields(view({
        "llm.request.type": "chat", "gen_ai.system": "Anthropic",
        "gen_ai.request.model": "claude-3-5-haiku-latest", "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 4, "llm.usage.total_tokens": 34,
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "hello",
        "traceloop.association.properties.customer": "acme"}))
    assert chat["run_type"] == "llm"
    assert chat["inputs"] == {"messages": [{"role": "user", "content": "hi"}]}
    assert chat["outputs"] == {"messages": [{"role": "assistant", "content": "hello"}]}
    assert chat["metadata"]["usage_metadata"]["total_tokens"] == 34
    assert chat["metadata"]["ls_provider"] == "anthropic"
    assert chat["metadata"]["customer"] == "acme"
    tool = span_fields(view({"traceloop.span.kind": "tool", "traceloop.entity.name": "search",
                             "traceloop.entity.input": '{"q": "x"}',
                             "traceloop.entity.output": '"found"'}))
    assert (tool["run_type"], tool["name"]) == ("tool", "search")
    # the output as OpenLLMetry serializes it (JSON: '"found"' is the text found)
    assert tool["inputs"] == {"q": "x"} and tool["outputs"] == {"output": "found"}
    flow = span_fields(view({"traceloop.span.kind": "workflow", "traceloop.entity.name": "plan",
                             "traceloop.entity.input": '{"goal": 1}'}))
    assert (flow["run_type"], flow["name"], flow["inputs"]) == ("chain", "plan", {"goal": 1})


def test_langsmith_otel_mode_round_trips_inputs_outputs_metadata_and_project() -> None:
    out = span_fields(view({
        "langsmith.span.kind": "retriever", "langsmith.trace.name": "docs",
        "langsmith.trace.session_name": "prod", "langsmith.metadata.team": "geo",
        "langsmith.span.tags": "a, b", "gen_ai.prompt": json.dumps({"query": "q"}),
        "gen_ai.completion": json.dumps({"documents": [1, 2]})}))
    assert (out["run_type"], out["name"], out["project"]) == ("retriever", "docs", "prod")
    assert out["inputs"] == {"query": "q"} and out["outputs"] == {"documents": [1, 2]}
    assert out["metadata"]["team"] == "geo" and out["tags"] == ["a", "b"]


def test_genai_errors_first_token_and_event_messages() -> None:
    events = [SpanEvent("gen_ai.user.message", T0, {"content": "hi"}),
              SpanEvent("gen_ai.content.first_token", T0 + 250_000_000, {}),
              SpanEvent("gen_ai.choice", T0 + 10**9, {"index": 0, "message": '{"content": "yo"}'}),
              SpanEvent("exception", T0 + 10**9, {"exception.type": "TimeoutError",
                                                  "exception.message": "slow"})]
    out = span_fields(view({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                            "gen_ai.usage.input_tokens": "not a number"}, events,
                           error=True, status_message="slow"))
    assert out["inputs"] == {"messages": [{"role": "user", "content": "hi"}]}
    assert out["outputs"] == {"choices": [{"index": 0, "message": {"content": "yo"}}]}
    assert out["events"] == [{"name": "new_token", "time": "2023-11-14T22:13:20.250000+00:00"}]
    assert out["error"].startswith("TimeoutError: slow")
    assert "usage_metadata" not in out["metadata"]  # a token count that is not a number


def test_metadata_and_leftover_attributes_in_one_pass() -> None:
    """Metadata from ``langsmith.metadata.*``, then ``traceloop.association.properties.*``,
    then OpenInference's ``metadata`` (later sources win); what no convention consumes is kept
    in ``otel_attributes`` (tuples as lists), indexed messages and consumed keys are not."""
    out = span_fields(view({
        "langsmith.metadata.team": "geo", "langsmith.metadata.shared": "ls",
        "traceloop.association.properties.shared": "tl",
        "traceloop.association.properties.user": '{"id": 7}',
        "metadata": json.dumps({"env": "prod"}),
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
        "llm.request.type": "chat", "gen_ai.request.model": "m",
        "http.status_code": 200, "peer.hosts": ("a", "b"),
    }))
    meta = out["metadata"]
    assert meta["team"] == "geo" and meta["shared"] == "tl" and meta["user"] == {"id": 7}
    assert meta["env"] == "prod" and meta["ls_model_name"] == "m"
    assert out["inputs"] == {"messages": [{"role": "user", "content": "hi"}]}
    assert meta["otel_attributes"] == {"http.status_code": 200, "peer.hosts": ["a", "b"]}


def _aisdk_request(**extra: object) -> dict:
    """A Vercel AI SDK 6 model request as its telemetry sends it: ``ai.*`` only."""
    return {"ai.operationId": "ai.streamText.doStream", "operation.name": "ai.streamText.doStream",
            "ai.model.id": "claude-sonnet-4-5", "ai.model.provider": "anthropic.messages",
            "ai.response.model": "claude-sonnet-4-5-20250929",
            "ai.prompt.messages": json.dumps([{"role": "user", "content": [
                {"type": "text", "text": "How many people live in Lima?"}]}]),
            "ai.response.text": "", "ai.response.toolCalls": json.dumps([
                {"toolCallId": "t1", "toolName": "lookup_city", "input": '{"city":"Lima"}'}]),
            "ai.response.msToFirstChunk": 250.5, "ai.usage.inputTokens": 1200,
            "ai.usage.outputTokens": 40, "ai.usage.totalTokens": 1240,
            "ai.usage.inputTokenDetails.cacheReadTokens": 1000,
            "ai.usage.inputTokenDetails.cacheWriteTokens": 150,
            "ai.telemetry.functionId": "geo", "ai.telemetry.metadata.user": "u1",
            "ai.settings.maxRetries": 2, **extra}


def test_vercel_ai_sdk_request_tool_and_call() -> None:
    """The AI SDK's own attributes (versions 4-6 send no gen_ai.operation.name): its model
    requests are llm runs with model, provider, tokens, cache counts and the first chunk
    (``ai.response.msToFirstChunk`` after the span's start); its tool calls tool runs with
    the serialized arguments and result read back; the call around them a chain run whose
    summed usage is not stored again."""
    out = span_fields(view(_aisdk_request(), name="ai.streamText.doStream"))
    assert out["run_type"] == "llm" and out["name"] == "ai.streamText.doStream"
    meta = out["metadata"]
    assert meta["ls_model_name"] == "claude-sonnet-4-5-20250929"
    assert meta["ls_provider"] == "anthropic"
    assert meta["usage_metadata"] == {
        "input_tokens": 1200, "output_tokens": 40, "total_tokens": 1240,
        "input_token_details": {"cache_read": 1000, "cache_creation": 150}}
    assert meta["user"] == "u1" and meta["ai.telemetry.functionId"] == "geo"
    assert meta["otel_attributes"] == {"operation.name": "ai.streamText.doStream",
                                       "ai.settings.maxRetries": 2}
    assert out["inputs"]["messages"][0]["content"][0]["text"] == "How many people live in Lima?"
    [msg] = out["outputs"]["messages"]
    assert msg["tool_calls"] == [{"id": "t1", "type": "function", "function": {
        "name": "lookup_city", "arguments": '{"city":"Lima"}'}}]
    [first] = out["events"]
    assert first["name"] == "new_token"
    assert first["time"].endswith(":20.250500+00:00")  # T0 + 250.5 ms

    tool = span_fields(view({"ai.operationId": "ai.toolCall", "ai.toolCall.name": "lookup_city",
                             "ai.toolCall.id": "t1", "ai.toolCall.args": '{"city":"Lima"}',
                             "ai.toolCall.result": '"Lima has 9943800 people"'},
                            name="ai.toolCall"))
    assert tool["run_type"] == "tool" and tool["name"] == "lookup_city"
    assert tool["inputs"] == {"city": "Lima"}
    assert tool["outputs"] == {"output": "Lima has 9943800 people"}
    assert tool["metadata"]["tool_call_id"] == "t1"

    call = span_fields(view({"ai.operationId": "ai.generateText", "ai.model.id": "gpt-4o",
                             "ai.model.provider": "openai.chat",
                             "ai.prompt": json.dumps({"prompt": "Lima?"}),
                             "ai.response.text": "9.9 million", "ai.usage.promptTokens": 30,
                             "ai.usage.completionTokens": 9}, name="ai.generateText"))
    assert call["run_type"] == "chain" and call["name"] == "ai.generateText"  # no functionId
    assert call["inputs"] == {"prompt": "Lima?"} and call["outputs"] == {"output": "9.9 million"}
    named = span_fields(view({"ai.operationId": "ai.streamText",
                              "ai.telemetry.functionId": "geo"}, name="ai.streamText"))
    assert named["name"] == "geo" and named["metadata"]["ai.operationId"] == "ai.streamText"
    assert "usage_metadata" not in call["metadata"] and not call["events"]


def test_vercel_ai_sdk_4_names_and_embeddings() -> None:
    """Version 4's token names (prompt and completion tokens, ``args``), a generated object,
    and an embedding request."""
    out = span_fields(view({"ai.operationId": "ai.generateObject.doGenerate",
                            "ai.model.id": "gpt-4o-mini", "ai.model.provider": "openai.chat",
                            "ai.usage.promptTokens": 20, "ai.usage.completionTokens": 5,
                            "ai.response.object": '{"city": "Lima"}'}))
    assert out["run_type"] == "llm" and out["outputs"] == {"output": {"city": "Lima"}}
    assert out["metadata"]["usage_metadata"] == {"input_tokens": 20, "output_tokens": 5,
                                                 "total_tokens": 25}
    assert not out["events"]  # not streamed
    emb = span_fields(view({"ai.operationId": "ai.embedMany.doEmbed",
                            "ai.model.id": "text-embedding-3-small",
                            "ai.model.provider": "openai.embedding",
                            "ai.values": ("Lima", "Cusco"), "ai.usage.tokens": 4}))
    assert emb["run_type"] == "embedding" and emb["inputs"] == {"input": ["Lima", "Cusco"]}
    assert emb["metadata"]["usage_metadata"]["input_tokens"] == 4


def test_a_model_call_that_names_no_operation_is_an_llm_run() -> None:
    """Google ADK's legacy ``call_llm`` span (its schema 1): a requested model and token
    counts, no ``gen_ai.operation.name``: an llm run, priced; a span with a model and no
    usage stays a chain."""
    out = span_fields(view({"gen_ai.system": "gcp.vertex.agent",
                            "gen_ai.request.model": "gemini-2.5-flash",
                            "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 8},
                           name="call_llm"))
    assert out["run_type"] == "llm"
    assert out["metadata"]["usage_metadata"]["input_tokens"] == 120
    assert out["metadata"]["ls_model_name"] == "gemini-2.5-flash"
    plain = span_fields(view({"gen_ai.request.model": "gemini-2.5-flash"}, name="plan"))
    assert plain["run_type"] == "chain"


def test_strands_agents_spans_agent_chat_and_tool_with_event_messages() -> None:
    """Strands Agents' spans as strands-agents 1.62 sends them (tried by hand: it needs
    openai<3, which the dev extra's OpenAI Agents SDK does not allow): the agent's span names
    its model and sums its calls' usage (a chain: the tokens stay on the chat spans), the
    chat's time to first token is in milliseconds, a tool's arguments and result are events."""
    agent = span_fields(view({
        "gen_ai.operation.name": "invoke_agent", "gen_ai.system": "strands-agents",
        "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 16,
        "gen_ai.usage.output_tokens": 7}, [
        SpanEvent("gen_ai.user.message", T0, {"content": '[{"text": "Lima?"}]'}),
        SpanEvent("gen_ai.choice", T0 + 5, {"message": "9.9 million", "finish_reason": "end"})],
        name="invoke_agent geo"))
    assert agent["run_type"] == "chain" and "usage_metadata" not in agent["metadata"]
    assert agent["inputs"] == {"messages": [{"role": "user", "content": [{"text": "Lima?"}]}]}
    assert agent["outputs"] == {"choices": [{"message": "9.9 million", "finish_reason": "end"}]}
    chat = span_fields(view({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                             "gen_ai.usage.input_tokens": 6, "gen_ai.usage.output_tokens": 2,
                             "gen_ai.server.time_to_first_token": 408}, name="chat"))
    assert chat["run_type"] == "llm"
    [first] = chat["events"]
    assert first["time"].endswith(":20.408000+00:00")  # 408 ms (the span lasts 1 s)
    in_seconds = span_fields(view({"gen_ai.operation.name": "chat",
                                   "gen_ai.server.time_to_first_token": 0.25}))
    assert in_seconds["events"][0]["time"].endswith(":20.250000+00:00")
    tool = span_fields(view({"gen_ai.operation.name": "execute_tool",
                             "gen_ai.tool.name": "lookup_city", "gen_ai.tool.call.id": "t1"}, [
        SpanEvent("gen_ai.tool.message", T0, {"role": "tool", "content": '{"city": "Lima"}'}),
        SpanEvent("gen_ai.choice", T0 + 5, {"message": '[{"text": "9.9 million"}]'})]))
    assert tool["inputs"] == {"city": "Lima"} and tool["outputs"] == {"output": "9.9 million"}


def test_a_streamed_response_written_chunk_by_chunk_is_one_message() -> None:
    """Google ADK writes a streamed call's output as one message per chunk (an empty finish
    reason on all but the last): stored as the one message it is, its text joined; finished
    choices (each with a finish reason) stay apart."""
    chunks = [{"role": "assistant", "parts": [{"type": "text", "content": text}],
               "finish_reason": reason}
              for text, reason in (("Answer:", ""), (" 10.1", ""), (" million", "stop"))]
    chunks[1]["parts"].append({"type": "tool_call", "id": "c1", "name": "f", "arguments": {}})
    attrs = {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "m"}
    out = span_fields(view({**attrs, "gen_ai.output.messages": json.dumps(chunks)}))
    assert out["outputs"] == {"messages": [{"role": "assistant", "finish_reason": "stop", "parts": [
        {"type": "text", "content": "Answer: 10.1"},
        {"type": "tool_call", "id": "c1", "name": "f", "arguments": {}},
        {"type": "text", "content": " million"}]}]}
    choices = [{"role": "assistant", "parts": [{"type": "text", "content": t}],
                "finish_reason": "stop"} for t in ("one", "two")]
    out = span_fields(view({**attrs, "gen_ai.output.messages": json.dumps(choices)}))
    assert out["outputs"] == {"messages": choices}


def test_adks_wrapping_of_a_plain_tool_result_is_taken_off() -> None:
    """Google ADK sends a tool's plain return value as ``{"result": value}``: stored as the
    value (as its plugin path stores it); the same dict from another sender stays whole."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_city",
             "gen_ai.tool.call.arguments": '{"city": "Lima"}',
             "gen_ai.tool.call.result": '{"result": "Lima has 9943800 people"}'}
    adk = span_fields(view(attrs, scope="gcp.vertex.agent"))
    assert adk["outputs"] == {"output": "Lima has 9943800 people"}
    assert adk["inputs"] == {"city": "Lima"}
    other = span_fields(view(attrs, scope="my.tools"))
    assert other["outputs"] == {"output": {"result": "Lima has 9943800 people"}}



def test_a_conversation_id_names_the_thread_unless_the_metadata_does() -> None:
    out = span_fields(view({"gen_ai.operation.name": "invoke_agent",
                            "gen_ai.conversation.id": "c-1"}))
    assert out["metadata"]["thread_id"] == "c-1" and "otel_attributes" not in out["metadata"]
    mine = span_fields(view({"gen_ai.conversation.id": "c-1", "session.id": "s-1",
                             "langsmith.metadata.thread_id": "mine"}))
    assert mine["metadata"]["thread_id"] == "mine" and "session_id" not in mine["metadata"]
    both = span_fields(view({"gen_ai.conversation.id": 42, "session.id": "s-1"}))
    assert both["metadata"]["thread_id"] == "42" and "session_id" not in both["metadata"]


def test_langsmith_otel_mode_keeps_a_tools_arguments_and_result() -> None:
    """LangSmith's tracer in OpenTelemetry mode sends a tool run's inputs and outputs as
    gen_ai.prompt / gen_ai.completion (JSON objects), with execute_tool as its operation."""
    out = span_fields(view({
        "langsmith.span.kind": "tool", "gen_ai.operation.name": "execute_tool",
        "gen_ai.prompt": '{"city": "Lima"}', "gen_ai.completion": '{"output": "Sunny in Lima"}'},
        name="get_weather"))
    assert out["run_type"] == "tool" and out["name"] == "get_weather"
    assert out["inputs"] == {"city": "Lima"} and out["outputs"] == {"output": "Sunny in Lima"}
    plain = span_fields(view({"langsmith.span.kind": "tool", "gen_ai.completion": "42"}))
    assert plain["outputs"] == {"output": "42"}  # not an object: the result as sent


def test_openllmetry_string_results_and_openinference_tags_as_json_text() -> None:
    out = span_fields(view({"traceloop.span.kind": "workflow",
                            "traceloop.entity.output": '"a joke"', "tag.tags": '["a", "b"]'}))
    assert out["outputs"] == {"output": "a joke"} and out["tags"] == ["a", "b"]
    assert span_fields(view({"tag.tags": "a, b"}))["tags"] == ["a", "b"]
