"""``POST /otel/v1/traces`` with the real OpenTelemetry exporter and real instrumentations.

Spans are made by the OpenTelemetry SDK and sent by ``opentelemetry-exporter-otlp-proto-http``
(protobuf; its JSON form is the same request encoded by the exporter's own encoder and written
as OTLP/JSON), by OpenInference's OpenAI instrumentor around the official ``openai`` client
talking to the scripted model on 127.0.0.1, by pydantic-ai's own instrumentation, and by the
official ``langsmith`` SDK in its OTel mode. What the store holds is checked against what was
sent, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Status, StatusCode

from assay.demo import ScriptedModelServer
from assay.store import Store

from .conftest import Server

ENDPOINT = "/otel/v1/traces"


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def _exporter(server: Server, key: str, project: str | None = "otlp-app") -> OTLPSpanExporter:
    headers = {"x-api-key": key}
    if project:
        headers["Langsmith-Project"] = project
    return OTLPSpanExporter(endpoint=server.url + ENDPOINT, headers=headers)


def _agent_spans(provider: TracerProvider, *, fail_tool: bool = False) -> None:
    """An agent turn as GenAI semantic conventions describe it: chat, tool, chat."""
    tracer = provider.get_tracer("agent-app")
    with tracer.start_as_current_span("invoke_agent weather", attributes={
            "gen_ai.operation.name": "invoke_agent", "input.value": '{"question": "Paris?"}'}):
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.system": "openai", "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 200,
                "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Paris?"}])}):
            time.sleep(0.002)
        with tracer.start_as_current_span("execute_tool lookup", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": "2.1 million"}) as tool:
            if fail_tool:
                tool.record_exception(LookupError("no such city"))
                tool.set_status(Status(StatusCode.ERROR, "no such city"))
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.system": "openai", "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 30}):
            pass


def _check_tree(store: Store, project: str) -> list:
    [proj] = [p for p in store.projects.list() if p.name == project]
    runs = store.runs.list(project_ids=[str(proj.id)])
    by_id = {r.id: r for r in runs}
    for r in runs:
        if r.parent_run_id is None:
            assert r.trace_id == r.id and "." not in r.dotted_order
        else:  # every child sits below its parent, whatever order the spans arrived in
            parent = by_id[r.parent_run_id]
            assert r.dotted_order.startswith(parent.dotted_order + ".")
            assert r.trace_id == parent.trace_id
    return runs


def test_the_real_exporter_stores_a_tree_with_tokens_cost_and_errors(server: Server) -> None:
    key, store = server.new_key()
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(_exporter(server, key)))  # child spans first
    _agent_spans(provider)
    _agent_spans(provider, fail_tool=True)
    provider.shutdown()
    runs = _check_tree(store, "otlp-app")
    assert len(runs) == 8
    llm = [r for r in runs if r.run_type == "llm"]
    assert sorted(r.prompt_tokens for r in llm) == [1000, 1000, 1200, 1200]
    assert all(r.extra["metadata"]["ls_model_name"] == "gpt-4o-mini" for r in llm)
    assert all(r.total_cost and r.total_cost > 0 for r in llm)  # priced by genai-prices
    assert llm[0].inputs.get("messages") or llm[1].inputs.get("messages")
    tools = [r for r in runs if r.run_type == "tool"]
    assert {t.name for t in tools} == {"lookup"}
    assert all(t.inputs == {"city": "Paris"} for t in tools)
    assert sorted((t.error or "")[:24] for t in tools) == ["", "LookupError: no such cit"]
    roots = [r for r in runs if r.parent_run_id is None]
    assert len(roots) == 2 and all(r.inputs == {"question": "Paris?"} for r in roots)
    assert roots[0].extra["runtime"]["service"] == "weather-agent"
    [proj] = [p for p in store.projects.list() if p.name == "otlp-app"]
    stats = store.projects.read(project_id=proj.id, include_stats=True)
    assert stats.run_count == 2
    assert stats.prompt_tokens == 4400 and stats.completion_tokens == 460
    assert stats.total_cost == pytest.approx(sum(r.total_cost for r in llm))


def test_a_conversation_id_on_the_spans_makes_threads(server: Server) -> None:
    """The GenAI conventions' ``gen_ai.conversation.id`` (and OpenInference's ``session.id``)
    on an agent's root span: its turns are one thread, with the llm calls' tokens."""
    from assay import Client

    key, store = server.new_key()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter(server, key, "otlp-chat")))
    tracer = provider.get_tracer("chat-app")
    for conversation, attr in [("conv-1", "gen_ai.conversation.id"),
                               ("conv-1", "gen_ai.conversation.id"), ("s-7", "session.id")]:
        with tracer.start_as_current_span("invoke_agent bot", attributes={
                "gen_ai.operation.name": "invoke_agent", attr: conversation,
                "input.value": '{"question": "hi"}'}):
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.system": "openai", "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 2}):
                pass
    provider.shutdown()
    client = Client(store=store)
    threads = client.list_threads(project_name="otlp-chat")
    assert [(t["thread_id"], t["count"], t["total_tokens"]) for t in threads] == [
        ("s-7", 1, 12), ("conv-1", 2, 24)]


def _request(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def _json_body(spans: list[ReadableSpan]) -> dict:
    """The exporter's own request as OTLP/JSON (ids in hex, as the OTLP spec says)."""
    data = json_format.MessageToDict(encode_spans(spans))
    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in s:
                        s[k] = base64.b64decode(s[k]).hex()
    return data


def _spans() -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _agent_spans(provider)
    return list(memory.get_finished_spans())  # children first, root last


def test_json_and_gzip_bodies_and_any_arrival_order(server: Server) -> None:
    key, store = server.new_key()
    headers = {"x-api-key": key, "Langsmith-Project": "json-app"}
    spans = _spans()
    root = spans[-1]
    with httpx.Client(base_url=server.url, headers=headers) as http:
        # the second child alone, then the first as gzipped JSON, then the root, then all again
        r = http.post(ENDPOINT, content=_request(spans[1:2]),
                      headers={"content-type": "application/x-protobuf"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
        body = gzip.compress(json.dumps(_json_body(spans[:1])).encode())
        r = http.post(ENDPOINT, content=body, headers={"content-type": "application/json",
                                                         "content-encoding": "gzip"})
        assert r.status_code == 200 and r.json() == {}
        [orphans] = [p for p in store.projects.list() if p.name == "json-app"]
        visible = store.runs.list(project_ids=[str(orphans.id)])
        assert len(visible) == 2  # a trace whose root has not arrived is visible already
        http.post(ENDPOINT, content=_request([root]),
                  headers={"content-type": "application/x-protobuf"})
        http.post(ENDPOINT, json=_json_body(spans))  # a retrying exporter: stored once
    runs = _check_tree(store, "json-app")
    assert len(runs) == 4
    [top] = [r for r in runs if r.parent_run_id is None]
    assert top.name == "invoke_agent weather"
    assert {r.parent_run_id for r in runs if r.id != top.id} == {top.id}


def test_bad_input_is_refused_clearly_and_nothing_else_is_lost(server: Server) -> None:
    key, store = server.new_key()
    headers = {"x-api-key": key, "Langsmith-Project": "bad-app"}
    good = _request(_spans())
    with httpx.Client(base_url=server.url, headers=headers) as http:
        r = http.post(ENDPOINT, content=good[: len(good) // 2],
                      headers={"content-type": "application/x-protobuf"})
        assert r.status_code == 400 and "ExportTraceServiceRequest" in r.json()["detail"]
        r = http.post(ENDPOINT, content=b"<xml/>", headers={"content-type": "text/xml"})
        assert r.status_code == 415 and "application/x-protobuf" in r.json()["detail"]
        deep = '{"arrayValue": {"values": [' * 600 + "]}}" * 600  # past Python's depth
        r = http.post(ENDPOINT, content=f'{{"resourceSpans": [], "x": {deep}}}',
                      headers={"content-type": "application/json"})
        assert r.status_code == 400 and "too deeply" in r.json()["detail"]
        r = http.post(ENDPOINT, content=b"\0" * (2 * 1024 * 1024),
                      headers={"content-type": "application/x-protobuf"})
        assert r.status_code == 413
        r = httpx.post(server.url + ENDPOINT, content=good,
                       headers={"content-type": "application/x-protobuf"})
        assert r.status_code == 401
        data = _json_body(_spans())
        spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
        spans[0]["spanId"] = "abcd"  # wrong length
        spans[1]["startTimeUnixNano"] = str(int((time.time() + 10 * 86400) * 1e9))
        spans[2]["attributes"].append({"key": "gen_ai.usage.input_tokens",
                                       "value": {"stringValue": "many"}})  # wrong type: kept
        r = http.post(ENDPOINT, json=data)
        assert r.status_code == 200
        partial = r.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "2"
        assert "span abcd" in partial["errorMessage"]
        assert "more than a day in the future" in partial["errorMessage"]
        r = http.post(ENDPOINT, content=good, headers={"content-type": "application/x-protobuf"})
        assert r.status_code == 200
    runs = _check_tree(store, "bad-app")
    # the good request's four spans, and the two accepted spans of the partial one (its
    # second chat, whose token count was not a number, kept without tokens; and its root)
    assert len(runs) == 6
    assert sorted(r.prompt_tokens or 0 for r in runs if r.run_type == "llm") == [0, 1000, 1200]


def test_openinference_instrumented_openai_client(server: Server, model: ScriptedModelServer
                                                  ) -> None:
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    key, store = server.new_key()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter(server, key, "oi-app")))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        client = openai.OpenAI(base_url=model.base_url, api_key="scripted", max_retries=0)
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("answer", attributes={
                "openinference.span.kind": "CHAIN", "input.value": "capital?"}):
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "capital of Peru?"}])
            _streamed_call(client, "capital of Chile?")
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    runs = _check_tree(store, "oi-app")
    llm, streamed = sorted((r for r in runs if r.run_type == "llm"), key=lambda r: r.start_time)
    [chain] = [r for r in runs if r.run_type == "chain"]
    assert llm.parent_run_id == chain.id and chain.inputs == {"input": "capital?"}
    # its "First Token Stream Event", on the streamed call only
    assert llm.first_token_time is None
    _check_first_token(streamed)
    assert llm.extra["metadata"]["ls_model_name"].startswith("gpt-4o-mini")
    assert llm.prompt_tokens == 3 and llm.completion_tokens == 5  # the scripted usage
    assert llm.inputs["messages"][0]["content"] == "capital of Peru?"
    assert "You asked" in json.dumps(llm.outputs)
    assert llm.total_cost and llm.total_cost > 0


def _streamed_call(client: Any, question: str) -> None:
    """A streamed chat completion through ``client``, read to its end (with its usage)."""
    for _ in client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}],
            stream=True, stream_options={"include_usage": True}):
        pass


def _check_first_token(run: Any) -> None:
    """A streamed llm run: priced, with a first token inside the call, after the scripted
    model's delay before its first chunk."""
    assert run.prompt_tokens == 3 and run.completion_tokens == 5 and run.total_cost
    assert run.first_token_time is not None
    assert run.start_time < run.first_token_time <= run.end_time


def test_openllmetry_instrumented_openai_client(server: Server, model: ScriptedModelServer
                                                ) -> None:
    """Traceloop's OpenLLMetry (``opentelemetry-instrumentation-openai``): the GenAI
    conventions' messages as parts, and an event per streamed chunk, whose first is the
    first token. (In a process of its own, as an application runs it: its instrumentor's
    ``uninstrument`` leaves the openai package's streams wrapped for the tests after it.)"""
    key, store = server.new_key()
    script = textwrap.dedent('''
        import sys
        import openai
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        model_url, endpoint, key = sys.argv[1:]
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=endpoint, headers={"x-api-key": key, "Langsmith-Project": "ol-app"})))
        OpenAIInstrumentor().instrument(tracer_provider=provider)
        client = openai.OpenAI(base_url=model_url, api_key="scripted", max_retries=0)
        tool = {"type": "function", "function": {
            "name": "lookup_city", "description": "A city's population.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
        with provider.get_tracer("app").start_as_current_span("answer"):
            client.chat.completions.create(model="gpt-4o-mini", tools=[tool], messages=[
                {"role": "user", "content": "How many people live in Paris?"}])
            for _ in client.chat.completions.create(
                    model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                    messages=[{"role": "user", "content": "capital of Chile?"}]):
                pass
        provider.shutdown()
    ''')
    done = subprocess.run([sys.executable, "-c", script, model.base_url, server.url + ENDPOINT,
                           key], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = _check_tree(store, "ol-app")
    [chain] = [r for r in runs if r.run_type == "chain"]
    called, streamed = sorted((r for r in runs if r.run_type == "llm"),
                              key=lambda r: r.start_time)
    assert called.parent_run_id == chain.id == streamed.parent_run_id
    assert called.extra["metadata"]["ls_model_name"] == "gpt-4o-mini"
    assert called.prompt_tokens == 6 and called.completion_tokens == 2 and called.total_cost
    assert called.first_token_time is None  # not streamed
    [asked] = called.inputs["messages"]
    assert asked["parts"][0]["content"] == "How many people live in Paris?"
    [part] = called.outputs["messages"][0]["parts"]
    assert part["type"] == "tool_call" and part["name"] == "lookup_city"
    assert part["arguments"] == {"city": "Paris"}
    _check_first_token(streamed)


def test_logfire_spans_are_named_by_their_message(server: Server, model: ScriptedModelServer,
                                                  tmp_path: Any) -> None:
    """Pydantic's Logfire, exporting over OTLP (its own exporter, from the standard
    environment variables): a span is named by its message template, the run by the message
    (what Logfire's UI shows); its OpenAI instrumentation's calls are llm runs with tokens."""
    key, store = server.new_key()
    script = tmp_path / "app.py"  # a file: Logfire reads the caller's source for its messages
    script.write_text(textwrap.dedent('''
        import sys
        import logfire
        import openai

        logfire.configure(send_to_logfire=False, console=False)
        client = openai.OpenAI(base_url=sys.argv[1], api_key="scripted", max_retries=0)
        logfire.instrument_openai(client)
        with logfire.span("answer {city}", city="Lima"):
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "capital of Peru?"}])
            client.responses.create(model="gpt-4o-mini", input="capital of Chile?")
        logfire.force_flush()
    '''))
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": server.url + ENDPOINT,
           "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={key},Langsmith-Project=logfire-app"}
    done = subprocess.run([sys.executable, str(script), model.base_url], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    runs = _check_tree(store, "logfire-app")
    by_name = {r.name: r for r in runs}
    assert set(by_name) == {"answer Lima", "Chat Completion with 'gpt-4o-mini'",
                            "Responses API with 'gpt-4o-mini'"}
    root = by_name["answer Lima"]
    assert root.parent_run_id is None
    assert root.extra["metadata"]["otel_attributes"]["city"] == "Lima"
    for name in ("Chat Completion with 'gpt-4o-mini'", "Responses API with 'gpt-4o-mini'"):
        llm = by_name[name]
        assert llm.run_type == "llm" and llm.parent_run_id == root.id
        assert llm.prompt_tokens == 3 and llm.completion_tokens == 5 and llm.total_cost


def test_pydantic_ai_instrumentation(server: Server, model: ScriptedModelServer) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    key, store = server.new_key()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter(server, key, "pai-app")))
    llm_model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted"))
    agent = Agent(llm_model)
    agent.instrument = InstrumentationSettings(tracer_provider=provider)  # this agent only

    @agent.tool_plain
    def lookup_city(city: str) -> str:
        return f"{city}: 2.1 million people"

    result = agent.run_sync("use lookup_city for 'Paris'")
    provider.shutdown()
    assert "2.1 million" in result.output
    runs = _check_tree(store, "pai-app")
    assert sum(r.run_type == "llm" for r in runs) == 2
    [tool] = [r for r in runs if r.run_type == "tool"]
    assert tool.name == "lookup_city" and tool.inputs == {"city": "Paris"}
    assert all(r.prompt_tokens for r in runs if r.run_type == "llm")
    assert len([r for r in runs if r.parent_run_id is None]) == 1


def test_the_langsmith_sdk_in_otel_mode(server: Server) -> None:
    key, store = server.new_key()
    script = textwrap.dedent('''
        from langsmith import traceable

        @traceable(run_type="tool")
        def lookup(city: str) -> str:
            return city.upper()

        @traceable(name="agent", metadata={"team": "geo"}, tags=["otel"])
        def agent(question: str) -> str:
            return lookup(question)

        agent("paris")
        from langsmith.run_trees import get_cached_client
        get_cached_client().flush()
        from opentelemetry import trace
        trace.get_tracer_provider().shutdown()
    ''')
    env = {**os.environ, "LANGSMITH_OTEL_ENABLED": "true", "LANGSMITH_OTEL_ONLY": "true",
           "LANGSMITH_TRACING": "true", "LANGSMITH_ENDPOINT": server.url,
           "LANGSMITH_API_KEY": key, "LANGSMITH_PROJECT": "ls-otel"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    runs = _check_tree(store, "ls-otel")
    by_name = {r.name: r for r in runs}
    assert set(by_name) == {"agent", "lookup"}
    assert by_name["lookup"].run_type == "tool"
    assert by_name["lookup"].parent_run_id == by_name["agent"].id
    assert by_name["agent"].extra["metadata"]["team"] == "geo"
    assert "otel" in by_name["agent"].tags


def test_overload_answers_503_with_retry_after(server: Server, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    from assay.server import _routes_otel

    key, store = server.new_key()
    held = 0
    while _routes_otel._slots.acquire(blocking=False):  # every slot busy
        held += 1
    monkeypatch.setattr(_routes_otel, "_WAIT", 0.05)
    try:
        r = httpx.post(server.url + ENDPOINT, content=_request(_spans()),
                       headers={"x-api-key": key, "content-type": "application/x-protobuf"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
    finally:
        for _ in range(held):
            _routes_otel._slots.release()
    exporter = _exporter(server, key, "after-overload")
    assert exporter.export(_spans()) is SpanExportResult.SUCCESS
    assert len(_check_tree(store, "after-overload")) == 4


def _held_group(store: Store, batches: list[list]) -> list[BaseException | None]:
    """Store each batch from a thread of its own while the workspace's writer is held, so all
    of them queue and the next writer takes them together; each thread's outcome."""
    import threading

    from assay.server._otlp_group import _group, store_grouped

    group = _group(store)
    outcomes: list[BaseException | None] = [None] * len(batches)

    def export(i: int) -> None:
        try:
            store_grouped(store, batches[i])
        except BaseException as exc:  # noqa: BLE001 - the outcome is what is checked
            outcomes[i] = exc

    threads = [threading.Thread(target=export, args=(i,)) for i in range(len(batches))]
    with group.writer:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while len(group.queue) < len(batches) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(group.queue) == len(batches)  # all queued: one writer takes them together
    for t in threads:
        t.join(10)
    return outcomes


def test_concurrent_exports_share_a_transaction_and_a_bad_one_fails_alone(store: Store) -> None:
    """Group commit (``_otlp_group``): exports that queued meanwhile are stored in one
    transaction; if it fails, each is stored alone, so only the bad one fails and nothing of
    it is written."""
    from assay.errors import InvalidInputError
    from assay.server._otlp import decode_protobuf, to_span_runs
    from assay.store._spans import store_spans

    def items(spans: list[ReadableSpan]) -> list:
        return list(to_span_runs(store.tenant_id, decode_protobuf(_request(spans)).spans,
                                 "grouped"))

    good = [_spans() for _ in range(3)]
    outcomes = _held_group(store, [items(s) for s in good])
    assert outcomes == [None, None, None]
    assert len(_check_tree(store, "grouped")) == 12
    # a batch sent again whose first span is broken (it takes the general path, which refuses
    # it) between two new ones: those two stored, nothing of the bad one, its own error
    stored_once = _spans()
    store_spans(store, items(stored_once))
    bad = items(stored_once + _spans())  # four spans stored already, four new
    bad[0].post["inputs"] = "not an object"
    new = [_spans(), _spans()]
    outcomes = _held_group(store, [items(new[0]), bad, items(new[1])])
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], InvalidInputError)
    runs = _check_tree(store, "grouped")
    assert len(runs) == 12 + 4 + 8  # the bad batch's four new spans are not there
    project = store.projects.read(project_name="grouped", include_stats=True)
    assert project.run_count == 6  # roots: 3 + 1 + 2


def test_protobuf_spans_with_bad_ids_or_times_are_rejected_alone(server: Server) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    key, store = server.new_key()
    req = encode_spans(_spans())  # children first, the root last
    spans = req.resource_spans[0].scope_spans[0].spans
    spans[0].span_id = b"\x01\x02\x03\x04"  # 4 bytes
    spans[1].trace_id = b"\x00" * 16  # the all-zero (invalid) trace id
    spans[2].start_time_unix_nano = int((time.time() + 10 * 86400) * 1e9)
    r = httpx.post(server.url + ENDPOINT, content=req.SerializeToString(), headers={
        "x-api-key": key, "content-type": "application/x-protobuf",
        "Langsmith-Project": "pb-partial"})
    assert r.status_code == 200
    answer = ExportTraceServiceResponse.FromString(r.content)
    assert answer.partial_success.rejected_spans == 3
    message = answer.partial_success.error_message
    assert "span 01020304" in message and "is not 8 non-zero bytes" in message
    assert "trace id '" + "0" * 32 + "' is not 16 non-zero bytes" in message
    assert "more than a day in the future" in message
    runs = _check_tree(store, "pb-partial")
    assert [r.name for r in runs] == ["invoke_agent weather"]  # the one good span: the root


class _OneTrace(RandomIdGenerator):
    """Every root span in one trace: OTLP allows several parentless spans per trace."""

    def generate_trace_id(self) -> int:
        return 0x5EC00D00_00000000_00000000_00000001


def _two_roots() -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(id_generator=_OneTrace())
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("two-roots")
    for root in ("root-one", "root-two"):
        with tracer.start_as_current_span(root), tracer.start_as_current_span(f"child-of-{root}"):
            pass
    return list(memory.get_finished_spans())  # child-of-root-one, root-one, child..., root-two


def test_a_trace_with_two_root_spans_keeps_both(server: Server) -> None:
    """The second root took the first's run id (a root's is its trace's) and was dropped as a
    copy, its child moved under the other root; now each root keeps its own subtree, in one
    request or two, and an export sent again is still stored once."""
    spans = _two_roots()
    assert len({s.context.trace_id for s in spans}) == 1
    for project, requests in (("one-request", [spans]), ("two-requests", [spans[:2], spans[2:]])):
        key, store = server.new_key()
        with httpx.Client(base_url=server.url, headers={
                "x-api-key": key, "Langsmith-Project": project}) as http:
            for body in [*requests, requests[-1]]:  # the last one retried
                r = http.post(ENDPOINT, content=_request(body),
                              headers={"content-type": "application/x-protobuf"})
                assert r.status_code == 200 and r.content == b"", r.text
        runs = {r.name: r for r in store.runs.list()}
        assert sorted(runs) == ["child-of-root-one", "child-of-root-two", "root-one", "root-two"]
        one, two = runs["root-one"], runs["root-two"]
        assert one.parent_run_id is None and two.parent_run_id is None and one.id != two.id
        assert runs["child-of-root-one"].parent_run_id == one.id
        assert runs["child-of-root-two"].parent_run_id == two.id
        tree = store.runs.read(two.id, load_child_runs=True)
        assert [c.name for c in tree.child_runs] == ["child-of-root-two"]
