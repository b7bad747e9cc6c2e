"""OpenTelemetry GenAI spans -> runs: a real pydantic-ai agent, and hand-made spans."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from assay.client import Client
from assay.tracing import trace, tracing_context
from assay.tracing.otel import AssaySpanProcessor


@pytest.fixture
def provider(tclient: Client) -> Iterator[TracerProvider]:
    tp = TracerProvider()
    tp.add_span_processor(AssaySpanProcessor(tclient, project_name="otel"))
    yield tp
    tp.shutdown()


@pytest.fixture
def instrumented(provider: TracerProvider) -> Iterator[TracerProvider]:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    try:
        yield provider
    finally:
        Agent.instrument_all(False)


def make_agent():  # type: ignore[no-untyped-def]
    """A deterministic agent: FunctionModel calls get_weather, then add, then answers."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list, info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", [])
                   if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Paris"},
                                                     tool_call_id="c1")])
        if len(returns) == 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 3},
                                                     tool_call_id="c2")])
        return ModelResponse(parts=[TextPart(f"{returns[0].content}; 2+3={returns[1].content}")])

    agent = Agent(FunctionModel(model), name="weather_agent")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


def test_pydantic_ai_agent_tree(tclient: Client, instrumented: TracerProvider) -> None:
    agent = make_agent()
    result = agent.run_sync("Weather in Paris, and 2+3?")
    assert result.output == "sunny in Paris; 2+3=5"
    tclient.flush()
    [root] = list(tclient.list_runs(project_name="otel", is_root=True))
    assert root.run_type == "chain" and root.name == "invoke_agent weather_agent"
    assert root.outputs == {"output": "sunny in Paris; 2+3=5"}
    tree = tclient.read_run(root.id, load_child_runs=True)
    steps = [(r.run_type, r.name) for r in tree.child_runs]
    assert steps == [("llm", "chat function:model:"), ("tool", "get_weather"),
                     ("llm", "chat function:model:"), ("tool", "add"),
                     ("llm", "chat function:model:")]
    llm1, weather, llm2, add, llm3 = tree.child_runs
    assert weather.inputs == {"city": "Paris"} and weather.outputs == {"output": "sunny in Paris"}
    assert add.inputs == {"a": 2, "b": 3} and add.outputs == {"output": "5"}
    assert weather.metadata["tool_call_id"] == "c1"
    for llm in (llm1, llm2, llm3):
        assert llm.metadata["ls_provider"] == "function"
        assert llm.metadata["ls_model_name"] == "function:model:"
        assert llm.prompt_tokens > 0 and llm.completion_tokens > 0
        assert llm.total_cost is None  # a function model has no price
        assert llm.inputs["messages"][0]["role"] == "user"
    assert llm1.outputs["messages"][0]["parts"][0]["name"] == "get_weather"
    assert llm3.outputs["messages"][0]["parts"][0]["content"] == "sunny in Paris; 2+3=5"
    starts = [r.start_time for r in tree.child_runs]
    assert starts == sorted(starts)  # execution order
    assert all(r.trace_id == root.id and r.parent_run_id == root.id for r in tree.child_runs)


async def test_agent_spans_nest_under_the_current_assay_run(tclient: Client,
                                                            instrumented: TracerProvider) -> None:
    agent = make_agent()
    with tracing_context(enabled=True, client=tclient, project_name="eval"):
        async with trace("evaluate target", inputs={"q": "x"}) as target:
            await agent.run("Weather?")
    tclient.flush()
    tree = tclient.read_run(target.id, load_child_runs=True)
    [agent_run] = tree.child_runs
    assert agent_run.name == "invoke_agent weather_agent"
    assert agent_run.session_id == tree.session_id  # the enclosing run's project wins
    assert [r.run_type for r in agent_run.child_runs] == ["llm", "tool", "llm", "tool", "llm"]
    rec = target.to_run()  # the in-memory tree evaluators get carries the spans too
    assert [c.name for c in rec.child_runs[0].child_runs][1::2] == ["get_weather", "add"]


def test_a_traced_helper_in_a_tool_nests_under_the_tools_span(tclient: Client,
                                                              provider: TracerProvider) -> None:
    """A ``@traceable`` function a span's code calls (a pydantic-ai tool's) is a child of that
    span's run, in its trace: under an assay run and, the processor recording, outside one."""
    from opentelemetry.trace import get_current_span

    from assay.tracing import traceable

    @traceable(name="forecast")
    def forecast(city: str) -> str:
        return f"sunny in {city}"

    tracer = provider.get_tracer("test")
    with tracing_context(enabled=True, client=tclient, project_name="eval"), \
            trace("target") as target, tracer.start_as_current_span("execute_tool weather"):
        assert get_current_span().is_recording()
        forecast("Paris")
    with tracer.start_as_current_span("execute_tool weather"):  # no assay run current
        forecast("Rome")
    tclient.flush()
    tree = tclient.read_run(target.id, load_child_runs=True)
    [tool_run] = tree.child_runs
    assert [(c.name, c.inputs) for c in tool_run.child_runs] == [("forecast", {"city": "Paris"})]
    [own] = list(tclient.list_runs(project_name="otel", is_root=True))
    assert own.name == "execute_tool weather"
    [helper] = list(tclient.list_runs(project_name="otel", trace_id=own.id, is_root=False))
    assert helper.name == "forecast" and helper.parent_run_id == own.id


def test_hand_made_semconv_spans(tclient: Client, provider: TracerProvider) -> None:
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent run") as root:
        with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
            chat.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 200,
                "gen_ai.client.operation.time_to_first_chunk": 0.25,
                "gen_ai.input.messages": '[{"role": "user", "parts": []}]',
                "custom.flag": True})
        with tracer.start_as_current_span("execute_tool search") as tool:
            tool.set_attributes({"gen_ai.operation.name": "execute_tool",
                                 "gen_ai.tool.name": "search",
                                 "gen_ai.tool.call.arguments": '{"q": "otel"}'})
            tool.record_exception(LookupError("no results"))
            tool.set_status(Status(StatusCode.ERROR, "no results"))
        with tracer.start_as_current_span("embed") as emb:
            emb.set_attribute("gen_ai.operation.name", "embeddings")
    tclient.flush()
    runs = {r.name: r for r in tclient.list_runs(project_name="otel")}
    chat_run, tool_run = runs["chat gpt-4o-mini"], runs["search"]
    assert chat_run.run_type == "llm" and chat_run.total_tokens == 1200
    assert chat_run.total_cost is not None and chat_run.total_cost > 0  # priced by genai-prices
    assert chat_run.first_token_time - chat_run.start_time == timedelta(milliseconds=250)
    assert chat_run.metadata["otel_attributes"] == {"custom.flag": True}
    assert chat_run.inputs == {"messages": [{"role": "user", "parts": []}]}
    assert tool_run.run_type == "tool" and tool_run.inputs == {"q": "otel"}
    assert tool_run.status == "error" and tool_run.error.startswith("LookupError: no results")
    assert runs["embed"].run_type == "embedding"
    assert runs["agent run"].run_type == "chain" and runs["agent run"].parent_run_id is None
    root_id = runs["agent run"].id
    assert all(runs[n].parent_run_id == root_id for n in ("chat gpt-4o-mini", "search", "embed"))
    assert runs["agent run"].metadata["otel_span_id"] == format(
        root.get_span_context().span_id, "016x")


def test_two_processors_on_one_provider_store_each_span_once(tclient: Client,
                                                              provider: TracerProvider) -> None:
    """A second AssaySpanProcessor on the same provider (the user's and the one assay adds to
    the global provider for pydantic-ai) leaves the spans the first saw start to it: no run is
    stored twice, and the tree stays whole."""
    second = AssaySpanProcessor(tclient, project_name="otel-second")
    provider.add_span_processor(second)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent run"):
        with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat",
                                 "gen_ai.request.model": "gpt-4o-mini"})
    tclient.flush()
    runs = list(tclient.list_runs(project_name="otel"))
    assert sorted(r.name for r in runs) == ["agent run", "chat gpt-4o-mini"]
    by_name = {r.name: r for r in runs}
    assert by_name["chat gpt-4o-mini"].parent_run_id == by_name["agent run"].id
    assert not [p for p in tclient.list_projects() if p.name == "otel-second"]
