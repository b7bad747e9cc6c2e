"""pydantic-ai as it is: the real Agent (OpenAI provider) against the scripted model server.

The agent object goes straight into the three evaluators and into ``evaluate()``; its model and
tool calls become llm and tool runs under each example's root, through assay's run-level
capability when assay runs the agent and through pydantic-ai's own OpenTelemetry
instrumentation (which assay installs) when a plain function does; no set-up by the user.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs assay[pydantic-ai]")

from pydantic_ai import RunContext  # noqa: E402 - after the skip

from assay.client import Client
from assay.demo import ScriptedModelServer, ScriptedReply
from assay.errors import InvalidInputError
from assay.evals import (
    AccuracyEvaluator,
    AgentUnderTest,
    PerformanceEvaluator,
    ReliabilityEvaluator,
    extract_tool_calls,
)
from assay.evaluation import aevaluate, evaluate
from assay.integrations import adapter_for, set_framework_tracing
from assay.llm import OpenAIJudge
from assay.schemas import Run
from assay.tracing import trace, tracing_context

from .conftest import (
    CLAUDE,
    GEMINI,
    check_parallel_calls,
    check_priced,
    get_time,
    get_weather,
    make_pydantic_agent,
)

CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito", "Dakar", "Hanoi"]


@pytest.fixture
def db(sqlite_url: str) -> Client:
    return Client(database_url=sqlite_url)


def _data(cities: list[str]) -> list[dict[str, Any]]:
    return [{"inputs": {"question": f"get_weather for {city}"},
             "outputs": {"expected_tool_calls": [{"name": "get_weather",
                                                  "args": {"city": city}}]}}
            for city in cities]


def _tree(client: Client, run: Any) -> Run:
    client.flush()
    return client.read_run(run.id, load_child_runs=True)


def _walk(run: Run) -> list[Run]:
    out = [run]
    for child in run.child_runs or []:
        out.extend(_walk(child))
    return out


def test_the_three_evaluators_take_the_agent_directly(model: ScriptedModelServer,
                                                      pydantic_agent: Any) -> None:
    judge = OpenAIJudge("gpt-4o-mini", base_url=model.base_url)
    accuracy = AccuracyEvaluator(judge, pydantic_agent, "get_weather for Paris",
                                 "sunny in Paris", num_iterations=2).run()
    assert [it.error for it in accuracy.iterations] == [None, None]
    assert accuracy.generated_output == "Answer: sunny in Paris" and accuracy.average_score == 9

    perf = PerformanceEvaluator(pydantic_agent, "get_weather for Rome", num_iterations=2,
                                warmup_runs=0).run()
    assert perf.agent == "pydantic-ai:weather" and len(perf.all_runs) == 2
    assert all(r.latency_seconds > 0 for r in perf.all_runs)

    result = AgentUnderTest(pydantic_agent).call("get_weather for Oslo")  # the native result
    reliability = ReliabilityEvaluator([{"name": "get_weather", "args": {"city": "Oslo"}}])
    assert reliability.run(result).passed
    wrong = ReliabilityEvaluator([{"name": "get_weather", "args": {"city": "Rome"}}]).run(result)
    assert not wrong.passed and wrong.argument_mismatches


def test_the_agent_evaluators_run_inside_evaluate_one_example_at_a_time(
        model: ScriptedModelServer, pydantic_agent: Any, client: Client) -> None:
    """PerformanceEvaluator/AccuracyEvaluator.as_evaluator() in evaluate() at its default
    concurrency (evaluators called on its event loop): the agent runs on that loop, where its
    HTTP client lives (it ran on a loop of its own and failed: "bound to a different event
    loop"), and the evaluators still answer when called directly."""
    perf = PerformanceEvaluator(pydantic_agent, num_iterations=2, warmup_runs=0).as_evaluator()
    judge = OpenAIJudge("gpt-4o-mini", base_url=model.base_url)
    accuracy = AccuracyEvaluator(judge).as_evaluator()
    data = [{"inputs": {"question": f"get_weather for {c}"},
             "outputs": {"answer": f"sunny in {c}"}} for c in ("Paris", "Rome")]
    rows = list(evaluate(pydantic_agent, data=data, evaluators=[perf, accuracy], client=client))
    for row in rows:
        results = {r.key: r for r in row["evaluation_results"]["results"]}
        assert results["latency_seconds"].score > 0, results["latency_seconds"].comment
        assert results["memory_peak_bytes"].score > 0
        assert results["accuracy"].score is not None, results["accuracy"].comment
    direct = perf({"question": "get_weather for Oslo"})  # outside any loop: a plain call
    assert {r["key"] for r in direct["results"]} >= {"latency_seconds"}


def test_an_evaluator_that_runs_the_agent_again_must_await_it_and_is_told_so(
        model: ScriptedModelServer, pydantic_agent: Any, client: Client) -> None:
    """A user's evaluator that runs the agent under test: awaited in an async evaluator it
    runs on evaluate()'s loop, where the agent's HTTP client lives, and scores; a sync one
    calling ``run_sync`` finds evaluate()'s loop running (at max_concurrency=2, on a thread:
    runs it on a loop of its own, which pydantic-ai's client refuses, now and then): the
    error result says what to change."""
    async def awaits(inputs: dict[str, Any]) -> dict[str, Any]:
        result = await pydantic_agent.run(inputs["question"])
        return {"key": "again", "score": float("sunny" in result.output)}

    def blocks(inputs: dict[str, Any]) -> dict[str, Any]:
        result = pydantic_agent.run_sync(inputs["question"])
        return {"key": "again_sync", "score": float("sunny" in result.output)}

    data = [{"inputs": {"question": f"get_weather for {c}"}} for c in ("Paris", "Rome")]
    for concurrency in (0, 2):  # (0: evaluate()'s default, evaluators called on its loop)
        rows = list(evaluate(pydantic_agent, data=data, evaluators=[awaits, blocks],
                             client=client, max_concurrency=concurrency))
        assert len(rows) == 2
        for row in rows:
            results = {r.key: r for r in row["evaluation_results"]["results"]}
            assert results["again"].score == 1.0, results["again"].comment
            if concurrency and "again_sync" in results:
                continue  # on a thread it may get a connection not yet bound to a loop
            assert results["blocks"].score is None
            assert "event loop" in results["blocks"].comment
            assert "make the evaluator async and await the agent" in results["blocks"].comment


def test_evaluate_stores_llm_and_tool_runs_under_each_example_at_concurrency_8(
        model: ScriptedModelServer, pydantic_agent: Any, client: Client) -> None:
    results = evaluate(pydantic_agent, data=_data(CITIES),
                       evaluators=[ReliabilityEvaluator(None).as_evaluator()],
                       client=client, max_concurrency=8)
    rows = list(results)
    assert len(rows) == len(CITIES)
    for row, city in zip(rows, CITIES, strict=True):
        root = _tree(client, row["run"])
        assert root.name == "weather" and root.error is None
        assert root.outputs == {"output": f"Answer: sunny in {city}"}
        runs = _walk(root)
        llms = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(llms) == 2 and len(tools) == 1, [(r.run_type, r.name) for r in runs]
        for llm in llms:
            assert llm.metadata["ls_model_name"] == "gpt-4o-mini"
            assert llm.metadata["ls_provider"] == "openai"
            assert llm.prompt_tokens and llm.completion_tokens
            assert llm.total_tokens == llm.prompt_tokens + llm.completion_tokens
            assert llm.total_cost and llm.total_cost > 0  # genai-prices knows gpt-4o-mini
            assert llm.trace_id == root.id
        (tool,) = tools
        assert tool.name == "get_weather" and tool.inputs == {"city": city}  # its own example
        assert tool.outputs == {"output": f"sunny in {city}"} and tool.trace_id == root.id
        # nested as pydantic-ai nests them: the agent run holds the model and tool calls
        (agent_run,) = root.child_runs or []
        assert {r.id for r in agent_run.child_runs or []} == {r.id for r in llms + tools}
        assert [r.key for r in row["evaluation_results"].results] == ["reliability"]
        assert row["evaluation_results"].results[0].score == 1.0


async def test_aevaluate_and_a_plain_function_streaming_inside(model: ScriptedModelServer,
                                                               pydantic_agent: Any,
                                                               db: Client) -> None:
    """A plain function target calling the agent (streamed) is traced too: the framework was
    imported, so evaluate() instrumented it. Streamed calls carry their first token."""
    async def target(inputs: dict[str, Any]) -> dict[str, Any]:
        async with pydantic_agent.run_stream(inputs["question"]) as streamed:
            return {"answer": await streamed.get_output()}

    results = await aevaluate(target, data=_data(["Lima", "Cairo"]), client=db,
                              max_concurrency=2)
    async for row in results:
        root = _tree(db, row["run"])
        llms = [r for r in _walk(root) if r.run_type == "llm"]
        assert llms and all(r.first_token_time is not None for r in llms)
        assert all(r.first_token_time >= r.start_time for r in llms)
        assert [r.name for r in _walk(root) if r.run_type == "tool"] == ["get_weather"]


def test_reliability_reads_the_trace_and_the_result_alike(model: ScriptedModelServer,
                                                          pydantic_agent: Any,
                                                          db: Client) -> None:
    row = next(iter(evaluate(pydantic_agent, data=_data(["Quito"]), client=db)))
    from_trace = extract_tool_calls(_tree(db, row["run"]))
    from_result = extract_tool_calls(AgentUnderTest(pydantic_agent).call("get_weather for Quito"))
    assert [(c.name, c.args) for c in from_trace] == [("get_weather", {"city": "Quito"})]
    assert [(c.name, c.args) for c in from_result] == [("get_weather", {"city": "Quito"})]


def test_a_failing_tool_and_a_failing_model_call_are_on_the_right_runs(
        model: ScriptedModelServer, db: Client) -> None:
    agent = make_pydantic_agent(model.base_url, failing_tool=True)
    rows = list(evaluate(agent, data=_data(["Atlantis", "Dakar"]), client=db))
    broken, fine = (_tree(db, r["run"]) for r in rows)
    assert "no weather station in Atlantis" in (broken.error or "")
    (tool,) = [r for r in _walk(broken) if r.run_type == "tool"]
    assert "no weather station in Atlantis" in (tool.error or "")
    assert fine.error is None and fine.outputs == {"output": "Answer: sunny in Dakar"}

    model.script(ScriptedReply(status=400, body={"error": {"message": "scripted bad request"}}))
    (row,) = list(evaluate(agent, data=_data(["Hanoi"]), client=db))
    root = _tree(db, row["run"])
    assert "scripted bad request" in (root.error or "")
    (llm,) = [r for r in _walk(root) if r.run_type == "llm"]
    assert "scripted bad request" in (llm.error or "")


def test_the_switch_turns_framework_runs_off(model: ScriptedModelServer, pydantic_agent: Any,
                                            db: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    set_framework_tracing(False)
    try:
        (row,) = list(evaluate(pydantic_agent, data=_data(["Paris"]), client=db))
    finally:
        set_framework_tracing(None)
    root = _tree(db, row["run"])
    assert root.outputs == {"output": "Answer: sunny in Paris"} and not root.child_runs

    monkeypatch.setenv("ASSAY_FRAMEWORK_TRACING", "false")
    (row,) = list(evaluate(pydantic_agent, data=_data(["Rome"]), client=db))
    assert not _tree(db, row["run"]).child_runs
    monkeypatch.delenv("ASSAY_FRAMEWORK_TRACING")
    (row,) = list(evaluate(pydantic_agent, data=_data(["Oslo"]), client=db))
    assert len(_walk(_tree(db, row["run"]))) == 5  # root, agent run, 2 llm, 1 tool


def test_spans_are_recorded_only_under_an_assay_run(model: ScriptedModelServer,
                                                    pydantic_agent: Any, db: Client) -> None:
    from assay.integrations import _pydantic_ai

    adapter_for(pydantic_agent)  # installs the instrumentation
    tracer = _pydantic_ai._settings.tracer
    with tracer.start_as_current_span("outside") as span:
        assert not span.is_recording()  # pydantic-ai then skips building its attributes
    with trace("outer", client=db, project_name="pai-trace", enabled=True) as outer:
        with tracer.start_as_current_span("inside") as span:
            assert span.is_recording()
        AgentUnderTest(pydantic_agent).call("get_weather for Lima")
    root = _tree(db, outer)
    names = [r.name for r in _walk(root)]
    assert names[:2] == ["outer", "inside"] and "get_weather" in names


def test_runs_outside_assay_runs_have_no_instrumentation(model: ScriptedModelServer,
                                                          db: Client) -> None:
    """With assay's default installed, an agent run outside any assay run (or with framework
    tracing off) is not instrumented at all (pydantic-ai's idle instrumentation costs ~10% of
    an agent's CPU); under an assay run, the same agent gets assay's settings."""
    from opentelemetry.trace import NoOpTracer
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from assay.integrations import _pydantic_ai

    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted")), name="weather")
    tracers: list[Any] = []

    @agent.tool
    def get_weather(ctx: RunContext[None], city: str) -> str:
        """The weather of a city."""
        tracers.append(ctx.tracer)
        return f"sunny in {city}"

    adapter_for(agent)  # installs assay's default
    assert isinstance(_pydantic_ai.installed_default(type(agent)), _pydantic_ai.UnderAssayRuns)
    agent.run_sync("get_weather for Lima")
    with trace("outer", client=db, project_name="pai-default", enabled=True):
        agent.run_sync("get_weather for Quito")
        set_framework_tracing(False)
        try:
            agent.run_sync("get_weather for Oslo")
        finally:
            set_framework_tracing(None)
    assert [isinstance(t, NoOpTracer) for t in tracers] == [True, False, True]
    assert tracers[1] is _pydantic_ai._settings.tracer


def test_a_run_outside_any_assay_run_is_a_trace_of_its_own_where_tracing_is_on(
        model: ScriptedModelServer, pydantic_agent: Any, db: Client) -> None:
    """A service calling its agent with no assay run around it: where tracing is on
    (``tracing_context(enabled=True)``, as ``ASSAY_TRACING=true``) each agent run is a root
    run of the context's project, its model and tool calls under it, in the thread the
    context names (not the conversation id pydantic-ai gives each run); where it is off, or
    with framework tracing off, nothing is stored."""
    adapter_for(pydantic_agent)  # installs the instrumentation, as instrument_frameworks()
    project = f"pai-prod-{uuid.uuid4().hex[:8]}"
    pydantic_agent.run_sync("get_weather for Lima")  # tracing off: not recorded
    with tracing_context(enabled=True, client=db, project_name=project,
                         metadata={"thread_id": "t-1"}):
        pydantic_agent.run_sync("get_weather for Quito")
        set_framework_tracing(False)
        try:
            pydantic_agent.run_sync("get_weather for Oslo")
        finally:
            set_framework_tracing(None)
        pydantic_agent.run_sync("get_weather for Lima")
    db.flush()
    roots = list(db.list_runs(project_name=project, is_root=True))
    assert len(roots) == 2
    for root in roots:
        runs = _walk(_tree(db, root))
        assert [r.run_type for r in runs].count("llm") == 2
        (tool,) = [r for r in runs if r.run_type == "tool"]
        assert tool.name == "get_weather" and tool.outputs
        assert all(r.trace_id == root.id for r in runs)
        assert all(r.total_tokens for r in runs if r.run_type == "llm")
    cities = sorted(next(r for r in _walk(_tree(db, root)) if r.run_type == "tool")
                    .inputs["city"] for root in roots)
    assert cities == ["Lima", "Quito"]
    (thread,) = db.list_threads(project_name=project)
    assert thread["thread_id"] == "t-1" and thread["count"] == 2


def _shape(root: Run) -> str:
    """The runs under an example's root, as compared across capture paths: the model's tool
    call ids (fresh each call) left out, and of an error its first line (the traceback's
    frames above the tool differ by path)."""
    import re

    return re.sub(r"call_[0-9a-f]+", "call_", repr([
        (r.name, r.run_type, r.inputs, r.outputs, r.prompt_tokens, r.completion_tokens,
         r.total_cost, (r.error or "").split("\n")[0]) for r in _walk(root)[1:]]))


def test_runs_assay_makes_skip_pydantic_ais_instrumentation(model: ScriptedModelServer,
                                                            db: Client) -> None:
    """evaluate(agent) runs the agent with assay's capability in place of pydantic-ai's own
    OpenTelemetry instrumentation (which costs its agents a quarter of their CPU); a plain
    function calling the same agent goes through that instrumentation (the span path). Both
    store the same runs, field for field; only the span path carries OTel metadata."""
    agent = make_pydantic_agent(model.base_url, failing_tool=True)

    async def plain(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"output": (await agent.run(inputs["question"])).output}

    shapes = {}
    for path, target in (("native", agent), ("spans", plain)):
        rows = list(evaluate(target, data=_data(["Paris", "Atlantis"]), client=db))
        roots = [_tree(db, r["run"]) for r in rows]
        agent_run = roots[0].child_runs[0]
        otel = [k for r in _walk(roots[0])[1:] for k in r.metadata if k.startswith("otel_")]
        assert bool(otel) is (path == "spans"), path
        assert agent_run.name == "invoke_agent weather"
        # the agent run's inputs: its prompt (they were empty on both paths)
        assert agent_run.inputs == {"input": roots[0].inputs["question"]}, path
        assert [r.run_type for r in _walk(agent_run)] == ["chain", "llm", "tool", "llm"]
        assert "no weather station in Atlantis" in (roots[1].error or "")
        shapes[path] = [_shape(root) for root in roots]
        first_llm = _walk(agent_run)[1]
        assert first_llm.inputs["system"] == [{"type": "text",
                                               "content": "Answer with the tool's result."}]
    assert shapes["native"] == shapes["spans"]
    assert "RuntimeError: no weather station in Atlantis" in shapes["native"][1]


def test_an_agent_with_its_own_instrumentation_keeps_it(model: ScriptedModelServer,
                                                        db: Client) -> None:
    """An agent instrumented by its user (``agent.instrument = settings``) is run as it is: its
    spans still go to the user's exporter, never replaced by assay's capability."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from assay.integrations import _pydantic_ai
    from assay.integrations._pydantic_ai_native import capture_for

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = make_pydantic_agent(model.base_url)
    adapter_for(agent)  # assay's global instrumentation installed
    assert capture_for(agent, _pydantic_ai._settings) is not None  # a plain agent: assay's
    agent.instrument = InstrumentationSettings(tracer_provider=provider)
    assert capture_for(agent, _pydantic_ai._settings) is None
    (row,) = list(evaluate(agent, data=_data(["Rome"]), client=db))
    assert row["run"].outputs == {"output": "Answer: sunny in Rome"}
    names = [s.name for s in exporter.get_finished_spans()]
    assert "invoke_agent weather" in names and any(n.startswith("chat ") for n in names)


def test_runs_assay_makes_carry_no_capability_of_assays(model: ScriptedModelServer,
                                                        db: Client) -> None:
    """evaluate(agent) wraps the agent's model and tools instead of giving its run a
    capability (any run-level capability costs pydantic-ai ~5% of the agent's CPU): the run's
    capabilities are the agent's own, and its model and tool calls are still runs."""
    from pydantic_ai.capabilities.abstract import leaf_capabilities

    agent = make_pydantic_agent(model.base_url)
    own = [type(c) for c in leaf_capabilities(agent._root_capability)]
    seen: list[list[type]] = []

    @agent.tool
    def get_time(ctx: RunContext[None], city: str) -> str:
        """The time in a city."""
        seen.append([type(c) for c in leaf_capabilities(ctx.root_capability)])
        return f"noon in {city}"

    (row,) = list(evaluate(agent, data=[{"inputs": {"question": "get_time for Lima"}}],
                           client=db))
    assert seen == [own]
    (agent_run,) = _tree(db, row["run"]).child_runs or []
    assert [(r.run_type, r.name) for r in _walk(agent_run)] == [
        ("chain", "invoke_agent weather"), ("llm", "chat gpt-4o-mini"), ("tool", "get_time"),
        ("llm", "chat gpt-4o-mini")]
    assert _walk(agent_run)[2].outputs == {"output": "noon in Lima"}


def test_a_delegate_agent_nests_under_its_tool_run(model: ScriptedModelServer,
                                                  db: Client) -> None:
    """A tool that runs another agent: that agent's runs hang from the tool's run (the tool run
    is the current assay run while the tool runs)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    weather = make_pydantic_agent(model.base_url)
    planner = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted")), name="planner")

    @planner.tool_plain
    async def ask_weather(city: str) -> str:
        """Ask the weather agent."""
        return (await weather.run(f"get_weather for {city}")).output

    (row,) = list(evaluate(planner, data=[{"inputs": {"question": "ask_weather for Lima"}}],
                           client=db))
    root = _tree(db, row["run"])
    assert root.outputs == {"output": "Answer: Answer: sunny in Lima"}
    (agent_run,) = root.child_runs or []
    tool = _walk(agent_run)[2]
    assert (tool.run_type, tool.name) == ("tool", "ask_weather")
    (inner,) = tool.child_runs or []
    assert inner.name == "invoke_agent weather"
    assert [r.run_type for r in _walk(inner)] == ["chain", "llm", "tool", "llm"]
    assert tool.outputs == {"output": "Answer: sunny in Lima"}


def test_an_agents_other_toolsets_are_traced_in_their_order(model: ScriptedModelServer,
                                                           db: Client) -> None:
    """Toolsets given to the agent (besides its own tools) are wrapped in their place: the
    model is offered the tools in the same order as without assay, each call a tool run,
    field for field as on the span path."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.toolsets import FunctionToolset

    extra = FunctionToolset()

    @extra.tool_plain
    def get_time(city: str) -> str:
        """The time in a city."""
        return f"noon in {city}"

    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted")), name="weather", toolsets=[extra])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    async def plain(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"output": (await agent.run(inputs["question"])).output}

    data = [{"inputs": {"question": "get_time then get_weather for Oslo"}}]
    shapes, offered = {}, {}
    for path, target in (("native", agent), ("spans", plain)):
        model.reset()
        (row,) = list(evaluate(target, data=data, client=db))
        root = _tree(db, row["run"])
        shapes[path] = _shape(root)
        offered[path] = [t["function"]["name"] for t in model.requests[0]["tools"]]
        assert [r.name for r in _walk(root) if r.run_type == "tool"] == ["get_time",
                                                                         "get_weather"]
    assert offered["native"] == offered["spans"] == ["get_weather", "get_time"]
    assert shapes["native"] == shapes["spans"]


async def test_an_override_in_force_keeps_the_capability_path(model: ScriptedModelServer,
                                                              db: Client) -> None:
    """An agent run under the user's ``agent.override(model=...)`` is traced through assay's
    capability (the wrapped model given to the run would be overridden: no llm runs)."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    agent = make_pydantic_agent(model.base_url)
    other = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=model.base_url,
                                                                api_key="scripted"))
    with agent.override(model=other):
        results = await aevaluate(agent, data=_data(["Lima"]), client=db)
        rows = [row async for row in results]
    (agent_run,) = _tree(db, rows[0]["run"]).child_runs or []
    assert [(r.run_type, r.name) for r in _walk(agent_run)] == [
        ("chain", "invoke_agent weather"), ("llm", "chat gpt-4o"), ("tool", "get_weather"),
        ("llm", "chat gpt-4o")]


def test_a_streamed_run_assay_makes_has_the_span_paths_runs(model: ScriptedModelServer,
                                                           db: Client) -> None:
    """An agent whose runs stream (a capability of its own handling the event stream): the
    streamed requests are llm runs as on the span path, tokens and answer included."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.process_event_stream import ProcessEventStream
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    events: list[Any] = []

    async def handle(ctx: RunContext[None], stream: Any) -> None:
        async for event in stream:
            events.append(event)

    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted")), name="weather",
        capabilities=[ProcessEventStream(handle)])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    async def plain(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"output": (await agent.run(inputs["question"])).output}

    shapes = {}
    for path, target in (("native", agent), ("spans", plain)):
        (row,) = list(evaluate(target, data=_data(["Lima"]), client=db))
        root = _tree(db, row["run"])
        shapes[path] = _shape(root)
        llms = [r for r in _walk(root) if r.run_type == "llm"]
        assert len(llms) == 2 and all(r.prompt_tokens and r.outputs for r in llms), path
    assert events and all(model.requests[i].get("stream") for i in range(len(model.requests)))
    # (the span path sums a streamed call's price in another order: the last digit differs)
    assert _costs_rounded(shapes["native"]) == _costs_rounded(shapes["spans"])


def _costs_rounded(shape: str) -> str:
    import re

    return re.sub(r"\d\.\d+e-\d+", lambda m: f"{float(m.group()):.6g}", shape)


def test_an_unnamed_agent_keeps_no_name_of_assays_making(model: ScriptedModelServer,
                                                         db: Client) -> None:
    """pydantic-ai names an unnamed agent after the variable its caller holds it in: assay's
    adapter holds it in none, so the agent stays unnamed and its run is "invoke_agent agent",
    as on the capability path."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    unnamed = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted")))

    @unnamed.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    rows = list(evaluate(unnamed, data=_data(["Lima", "Oslo"]), client=db))
    assert unnamed.name is None
    for row in rows:
        (agent_run,) = _tree(db, row["run"]).child_runs or []
        assert agent_run.name == "invoke_agent agent"
        assert [r.run_type for r in _walk(agent_run)] == ["chain", "llm", "tool", "llm"]


@dataclass
class Atlas:
    """A pydantic-ai agent's deps (module level: pydantic-ai resolves the tool's annotation)."""

    weather: dict[str, str]


def test_an_agent_that_needs_deps_runs_with_them(model: ScriptedModelServer, db: Client) -> None:
    """An agent with ``deps_type``: ``with_run_args(agent, deps=...)`` runs it with them under
    evaluate() and the evaluators, traced as the agent itself is (the tool run reads the deps);
    the agent alone runs with none, and its tool fails on them, as pydantic-ai's own run does."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from assay.integrations import with_run_args

    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted")), name="atlas", deps_type=Atlas)

    @agent.tool
    def get_weather(ctx: RunContext[Atlas], city: str) -> str:
        """The weather of a city."""
        return ctx.deps.weather[city]

    bound = with_run_args(agent, deps=Atlas({"Oslo": "snow in Oslo"}))
    results = evaluate(bound, data=_data(["Oslo"]), client=db,
                       evaluators=[ReliabilityEvaluator(["get_weather"])])
    (row,) = list(results)
    assert row["run"].error is None and "snow in Oslo" in row["run"].outputs["output"]
    runs = _walk(_tree(db, row["run"]))
    (tool,) = [r for r in runs if r.run_type == "tool"]
    assert tool.outputs and "snow in Oslo" in str(tool.outputs)
    assert [r for r in runs if r.run_type == "llm"]
    judge = OpenAIJudge("gpt-4o-mini", base_url=model.base_url, api_key="scripted")
    assert AccuracyEvaluator(judge, bound, "get_weather for Oslo", "snow").run() \
        .average_score == 9.0
    alone = AccuracyEvaluator(judge, agent, "get_weather for Oslo", "snow").run()
    assert "'NoneType' object has no attribute 'weather'" in str(alone.iterations[0].error)
    with pytest.raises(InvalidInputError, match=r"pydantic-ai agent's run: context, max_turns "
                                                 r"\(it takes output_type, "):
        with_run_args(agent, context=1, max_turns=2)  # refused by name, before anything runs


def test_a_chat_dataset_gives_the_earlier_turns_as_history(model: ScriptedModelServer,
                                                            db: Client,
                                                            pydantic_agent: Any) -> None:
    """An example in LangSmith's chat format: the last user message is the prompt and the
    turns before it pydantic-ai's message history, so the model sees the whole conversation."""
    ds = db.create_dataset("chat-history")
    db.create_examples(dataset_id=ds.id, examples=[{"inputs": {"messages": [
        {"role": "system", "content": "You know the weather."},
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hi! Which city?"},
        {"role": "user", "content": "get_weather for Quito"}]}}])
    (row,) = list(evaluate(pydantic_agent, data=ds.name, client=db))
    assert row["run"].error is None and "sunny in Quito" in row["run"].outputs["output"]
    sent = [(m["role"], m.get("content")) for m in model.requests[0]["messages"]]
    assert ("user", "Hello.") in sent and ("assistant", "Hi! Which city?") in sent
    assert sent[-1] == ("user", "get_weather for Quito")


def test_an_output_type_through_its_output_tool_is_stored_as_its_fields(
        model: ScriptedModelServer, db: Client) -> None:
    """An agent with a pydantic ``output_type`` in pydantic-ai's default mode (the model calls
    its ``final_result`` tool): the run's outputs hold the answer's JSON text and its fields,
    the agent's own tool call is judged and the output tool is no tool run."""
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    class Weather(BaseModel):
        city: str
        summary: str

    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=model.base_url, api_key="scripted")), name="typed", output_type=Weather)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    (row,) = list(evaluate(agent, data=_data(["Quito"]), client=db,
                           evaluators=[ReliabilityEvaluator(["get_weather"])]))
    assert row["run"].error is None
    structured = row["run"].outputs["structured_output"]
    assert structured["city"] == "Quito" and set(structured) == {"city", "summary"}
    assert json.loads(row["run"].outputs["output"]) == structured
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    tools = [r.name for r in _walk(_tree(db, row["run"])) if r.run_type == "tool"]
    assert tools == ["get_weather"], tools


def test_parallel_tool_calls_keep_the_models_order(db: Client) -> None:
    """Both tools called in one model reply (pydantic-ai runs them at once, the first slower):
    the trace and the reliability verdict keep the model's order (``check_parallel_calls``)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    with ScriptedModelServer(parallel_tool_calls=True) as par:
        agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
            base_url=par.base_url, api_key="scripted")), name="clock",
            tools=[get_time, get_weather])
        check_parallel_calls(db, par, agent)


@pytest.mark.parametrize("how", ["stream", "handler"])
def test_a_streamed_run_gives_each_llm_run_its_first_token(how: str, db: Client) -> None:
    """``with_run_args(agent, stream=True)``, or an ``event_stream_handler`` of the user's
    (which makes pydantic-ai stream each model request, and still gets every event): each llm
    run gets the time of its first chunk (pydantic-ai's own ``time_to_first_chunk``), after
    the model's first-token delay and within the call."""
    from assay.integrations import with_run_args

    seen: list[Any] = []

    async def handler(ctx: Any, events: Any) -> None:
        async for event in events:
            seen.append(event)

    with ScriptedModelServer(first_token_delay=0.05) as slow:
        agent = make_pydantic_agent(slow.base_url)
        bound = with_run_args(agent, **({"stream": True} if how == "stream"
                                         else {"event_stream_handler": handler}))
        rows = list(evaluate(bound, data=_data(["Lima", "Cairo"]), client=db,
                             max_concurrency=2, evaluators=[ReliabilityEvaluator(None)]))
        assert all(body.get("stream") for body in slow.requests)
    assert bool(seen) == (how == "handler")
    for row in rows:
        assert row["run"].error is None and "sunny in" in row["run"].outputs["output"]
        llms = [r for r in _walk(_tree(db, row["run"])) if r.run_type == "llm"]
        assert len(llms) == 2
        for llm in llms:
            assert llm.first_token_time is not None
            assert llm.start_time <= llm.first_token_time <= llm.end_time
            assert (llm.first_token_time - llm.start_time).total_seconds() >= 0.04
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]


def _weather_run(db: Client, model: Any, settings: Any, stream: bool) -> list[Run]:
    """An agent on ``model`` with a weather tool, one example under evaluate() (streamed or
    not): answered with the tool's result, its tool run, reliability 1.0, each llm run's
    first token exactly when streamed; returns its llm runs."""
    from pydantic_ai import Agent

    from assay.integrations import with_run_args

    agent = Agent(model, name="weather", model_settings=settings,
                  instructions="Answer with the weather tool's result and nothing else.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    target = with_run_args(agent, stream=True) if stream else agent
    (row,) = list(evaluate(target, data=_data(["Lima"]), client=db,
                           evaluators=[ReliabilityEvaluator(None)]))
    assert row["run"].error is None and "sunny in Lima" in row["run"].outputs["output"]
    runs = _walk(_tree(db, row["run"]))
    llms = [r for r in runs if r.run_type == "llm"]
    assert len(llms) == 2
    assert all((r.first_token_time is not None) == stream for r in llms)
    assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": "Lima"}]
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    return llms


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_on_claude_with_cached_instructions(stream: bool, db: Client) -> None:
    """pydantic-ai's ``AnthropicModel`` against the scripted Messages API, its instructions
    cached for an hour (``anthropic_cache_instructions="1h"``): each llm run names Anthropic
    and the model, the first writes the cache and the second reads it, each priced at its own
    rate (an hour-long write at twice the input price); streamed, each gets its first token."""
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    with ScriptedModelServer() as claude:
        llms = _weather_run(db, AnthropicModel(CLAUDE, provider=AnthropicProvider(
            base_url=claude.url, api_key="scripted")),
            AnthropicModelSettings(anthropic_cache_instructions="1h"), stream)
    first, second = (check_priced(r, "anthropic", CLAUDE) for r in llms)
    assert first["cache_creation"] == first["ephemeral_1h_input_tokens"] > 0
    assert second["cache_read"] == first["cache_creation"]


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_on_gemini_with_thinking_and_implicit_caching(stream: bool, db: Client) -> None:
    """pydantic-ai's ``GoogleModel`` against the scripted Gemini API with a thinking budget:
    each llm run names Google and the model, its output tokens hold the thinking tokens
    (billed as output), the second call's cached tokens are priced as cache reads;
    streamed, each gets its first token."""
    from google import genai
    from google.genai import types
    from pydantic_ai.models.google import GoogleModel, GoogleModelSettings
    from pydantic_ai.providers.google import GoogleProvider

    from assay.demo._gemini import THOUGHTS

    with ScriptedModelServer(prompt_caching=True) as gemini:
        client = genai.Client(api_key="scripted", http_options=types.HttpOptions(
            base_url=gemini.url))
        llms = _weather_run(db, GoogleModel(GEMINI, provider=GoogleProvider(client=client)),
                            GoogleModelSettings(google_thinking_config={"thinking_budget": 64}),
                            stream)
    first, second = (check_priced(r, "google", GEMINI) for r in llms)
    assert "cache_read" not in first and second["cache_read"] > 0
    assert all(r.completion_tokens > THOUGHTS for r in llms)


def test_a_streamed_run_on_the_capability_path_has_its_first_token(db: Client) -> None:
    """An agent the no-capability path cannot run exactly (a subclass of ``Agent``) is traced
    through assay's capability; run streamed (``with_run_args(agent, stream=True)``), each llm
    run has its first token, from the time to first chunk pydantic-ai measures (the handler of
    ``wrap_model_request`` returns the whole response)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from assay.integrations import with_run_args
    from assay.integrations._pydantic_ai_direct import direct_for

    class WeatherAgent(Agent):  # type: ignore[type-arg]
        pass

    slow = ScriptedModelServer(first_token_delay=0.02).start()
    agent = WeatherAgent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=slow.base_url, api_key="scripted")), name="weather")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    assert direct_for(agent) is None  # the capability path
    try:
        (row,) = list(evaluate(with_run_args(agent, stream=True), data=_data(["Lima"]),
                               client=db))
    finally:
        slow.stop()
    assert row["run"].outputs == {"output": "Answer: sunny in Lima"}
    llms = [r for r in _walk(_tree(db, row["run"])) if r.run_type == "llm"]
    assert len(llms) == 2
    for llm in llms:
        assert llm.prompt_tokens and llm.first_token_time is not None
        # after the scripted model's 20 ms before its first chunk, inside the request
        assert (llm.first_token_time - llm.start_time).total_seconds() >= 0.02
        assert llm.first_token_time <= llm.end_time
