"""OpenAI Agents SDK as it is: ``Agent`` + ``Runner.run`` with function tools and a handoff,
the real package against the scripted model on 127.0.0.1 (``OpenAIChatCompletionsModel`` over
an ``AsyncOpenAI`` client). Capture goes through the SDK's tracing processor interface.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs assay[openai-agents]")

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunContextWrapper,
    Runner,
    function_tool,
    set_trace_processors,
)
from openai import AsyncOpenAI

from assay._sync import run_sync
from assay.client import Client
from assay.demo import ScriptedModelServer, ScriptedReply
from assay.errors import InvalidInputError
from assay.evals import (
    AccuracyEvaluator,
    ReliabilityEvaluator,
    extract_tool_calls,
)
from assay.evaluation import evaluate
from assay.integrations import _openai_agents, adapter_for, instrument
from assay.llm import OpenAIJudge

from .conftest import (
    CITIES,
    CLAUDE,
    GEMINI,
    check_examples_apart,
    check_parallel_calls,
    check_priced,
    city_dataset,
    get_time,
    get_weather,
    population,
    run_accuracy_and_performance,
)
from .conftest import flat_runs as _flat
from .conftest import run_tree as _tree

_lookup = population


@function_tool
def lookup_city(city: str) -> str:
    """The population of a city."""
    return _lookup(city)


@function_tool(failure_error_function=None)  # the SDK re-raises: the run fails
def strict_lookup_city(city: str) -> str:
    """The population of a city (errors are not sent back to the model)."""
    return _lookup(city)


@pytest.fixture(scope="module", autouse=True)
def no_export() -> None:
    """The SDK's default processor would export traces to OpenAI: keep assay's alone (the
    SDK's supported ``set_trace_processors``), installed first so it is not added twice."""
    instrument("openai-agents")
    set_trace_processors([_openai_agents.processor()])


def _model(srv: ScriptedModelServer) -> OpenAIChatCompletionsModel:
    return OpenAIChatCompletionsModel(
        model="gpt-4o-mini",
        openai_client=AsyncOpenAI(base_url=srv.base_url, api_key="scripted", max_retries=0))


def geo_agent(srv: ScriptedModelServer, tool: Any = lookup_city) -> Agent:
    return Agent(name="geo", instructions="Answer with the tool's figure.", tools=[tool],
                 model=_model(srv))


def triage_agent(srv: ScriptedModelServer) -> Agent:
    return Agent(name="triage", instructions="Hand city questions to geo.",
                 handoffs=[geo_agent(srv)], model=_model(srv))


def _dataset(client: Client, cities: list[str], name: str = "cities") -> str:
    return city_dataset(client, cities, name,
                        question="How many people live in {city}? Use lookup_city.")


def _city(row: Any) -> str:
    return row["example"].inputs["question"].split("?")[0].split()[-1]


def test_agent_in_evaluate_stores_llm_and_tool_runs(srv: ScriptedModelServer,
                                                    db: Client) -> None:
    results = evaluate(geo_agent(srv), data=_dataset(db, ["Paris", "Berlin"]), client=db,
                       evaluators=[ReliabilityEvaluator(None)])
    rows = list(results)
    assert len(rows) == 2
    for row in rows:
        city = _city(row)
        outputs = row["run"].outputs
        assert outputs["output"] == f"Answer: {city} has {CITIES[city]} people"
        assert outputs["last_agent"] == "geo"
        runs = _tree(db, row)
        llms = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(llms) == 2 and len(tools) == 1
        for llm in llms:
            meta = llm.extra["metadata"]
            assert meta["ls_provider"] == "openai" and meta["ls_model_name"] == "gpt-4o-mini"
            assert llm.prompt_tokens > 0 and llm.completion_tokens > 0
            assert llm.total_cost and llm.total_cost > 0
            assert llm.inputs["messages"]  # what the SDK sent
        assert tools[0].name == "lookup_city" and tools[0].inputs == {"city": city}
        assert tools[0].outputs == {"output": f"{city} has {CITIES[city]} people"}
        by_id = {r.id: r for r in runs}
        # nested as the SDK nested it: root -> workflow -> agent -> turn -> tool
        chain = []
        parent = by_id.get(tools[0].parent_run_id)
        while parent is not None:
            chain.append(parent.name)
            parent = by_id.get(parent.parent_run_id)
        assert chain[-1] == row["run"].name and "geo" in chain and "Agent workflow" in chain
        scores = {r.key: r.score for r in row["evaluation_results"]["results"]}
        assert scores == {"reliability": 1.0}


def test_a_run_outside_any_assay_run_is_a_trace_of_its_own_where_tracing_is_on(
        srv: ScriptedModelServer, db: Client) -> None:
    """A service running its agent with no assay run around it: where tracing is on, each
    SDK trace is a root run (its name, its metadata, its ``group_id`` as the thread), holding
    the SDK's spans as under evaluate(), with the conversation's first input and last answer;
    where tracing is off nothing is stored."""
    import uuid

    from agents import trace as sdk_trace

    from assay.tracing import tracing_context

    agent, project = geo_agent(srv), f"sdk-prod-{uuid.uuid4().hex[:8]}"
    ask = "How many people live in {}? Use lookup_city."
    Runner.run_sync(agent, ask.format("Paris"))  # tracing off: not recorded
    with tracing_context(enabled=True, client=db, project_name=project):
        Runner.run_sync(agent, ask.format("Berlin"))  # the SDK's own trace per run
        for city in ("Paris", "Madrid"):
            with sdk_trace("support", group_id="chat-1", metadata={"user": "u7"}):
                Runner.run_sync(agent, ask.format(city))
    db.flush()
    roots = sorted(db.list_runs(project_name=project, is_root=True), key=lambda r: r.start_time)
    assert [r.name for r in roots] == ["Agent workflow", "support", "support"]
    for root, city in zip(roots, ("Berlin", "Paris", "Madrid"), strict=True):
        runs = _flat(db.read_run(root.id, load_child_runs=True))
        assert [r.run_type for r in runs].count("llm") == 2
        (tool,) = [r for r in runs if r.run_type == "tool"]
        assert tool.inputs == {"city": city} and all(r.trace_id == root.id for r in runs)
        assert ask.format(city) in json.dumps(root.inputs)
        # the SDK's own trace is the root itself, not a root over a run of the same name
        assert ("Agent workflow" in [r.name for r in runs[1:]]) == (city != "Berlin")
        assert f"{city} has {CITIES[city]} people" in json.dumps(root.outputs)
    assert roots[1].extra["metadata"]["user"] == "u7"
    (thread,) = db.list_threads(project_name=project)
    assert thread["thread_id"] == "chat-1" and thread["count"] == 2


def test_handoff_and_tool_calls_from_run_result(srv: ScriptedModelServer, db: Client) -> None:
    triage = triage_agent(srv)
    results = evaluate(triage, data=_dataset(db, ["Madrid"], "handoff"), client=db,
                       evaluators=[ReliabilityEvaluator(None)])
    (row,) = list(results)
    runs = _tree(db, row)
    names = [r.name for r in runs]
    assert "handoff -> geo" in names and "triage" in names and "geo" in names
    handoff = runs[names.index("handoff -> geo")]
    assert handoff.run_type == "chain" and handoff.outputs == {"to_agent": "geo"}
    assert row["run"].outputs["last_agent"] == "geo"
    assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {"reliability": 1.0}
    # the SDK's own RunResult: tool calls with arguments (handoffs are not tool calls)
    result = run_sync(Runner.run(triage, "How many people live in Lima? Use lookup_city."))
    calls = extract_tool_calls(result)
    assert [(c.name, c.args) for c in calls] == [("lookup_city", {"city": "Lima"})]
    assert ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Lima"}}]).run(
        result).passed


def test_tool_errors_are_on_the_tool_run_and_the_experiment_goes_on(
        srv: ScriptedModelServer, db: Client) -> None:
    # the SDK's default: the error goes back to the model, the agent answers anyway
    results = evaluate(geo_agent(srv), data=_dataset(db, ["Atlantis", "Lima"], "soft"),
                       client=db)
    rows = {_city(r): r for r in results}
    bad = _tree(db, rows["Atlantis"])
    tool_run = next(r for r in bad if r.run_type == "tool")
    # the SDK's default error function hides the exception's details from the model and its
    # own trace alike: the tool run says it failed, and what the model was told
    assert tool_run.error and "lookup_city" in tool_run.error
    assert "error occurred" in tool_run.outputs["output"]
    assert _tree(db, rows["Lima"])[0].error is None
    # a tool that re-raises: the agent run fails, the example's root carries it
    strict = geo_agent(srv, strict_lookup_city)
    ds = db.create_dataset("strict")
    db.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"question": f"How many people live in {c}?"}} for c in ("Atlantis", "Cairo")])
    rows = {r["example"].inputs["question"].split()[-1].rstrip("?"): r
            for r in evaluate(strict, data="strict", client=db)}
    bad = _tree(db, rows["Atlantis"])
    assert bad[0].error and "Atlantis" in bad[0].error
    assert next(r for r in bad if r.run_type == "tool").error
    good = _tree(db, rows["Cairo"])
    assert good[0].error is None and good[0].outputs["output"].startswith("Answer: Cairo")


def test_concurrency_8_keeps_examples_apart(srv: ScriptedModelServer, db: Client) -> None:
    check_examples_apart(db, geo_agent(srv), _dataset(db, list(CITIES) * 2, "many"), _city)


def test_each_evaluator_runs_many_times_on_one_agent(srv: ScriptedModelServer) -> None:
    agent = geo_agent(srv)  # one AsyncOpenAI client, bound to the loop it first ran on
    run_accuracy_and_performance(srv, agent, "Paris", "Osaka")
    reliability = ReliabilityEvaluator(["lookup_city"])
    adapter = adapter_for(agent)
    for _ in range(3):
        assert reliability.run(run_sync(adapter.arun("How many people live in Osaka?"))).passed


def test_responses_api_spans_become_llm_runs(db: Client) -> None:
    """A response span's cached-token details reach the llm run (fed through the SDK's own span
    functions: the scripted server reports no cached tokens)."""
    import asyncio

    from agents.tracing import agent_span, response_span
    from agents.tracing import trace as sdk_trace
    from openai.types.responses import Response

    from assay.tracing import trace

    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4o-mini",
        "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Paris", "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 11, "output_tokens": 3, "total_tokens": 14,
                  "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}}})

    async def main() -> Any:
        async with trace("example", client=db, enabled=True) as root:
            with sdk_trace("Agent workflow"), agent_span("geo"), response_span(response):
                pass
        return root

    root = asyncio.run(main())
    db.flush()
    runs = _flat(db.read_run(root.id, load_child_runs=True))
    (llm,) = [r for r in runs if r.run_type == "llm"]
    assert llm.name == "gpt-4o-mini" and llm.extra["metadata"]["ls_provider"] == "openai"
    assert (llm.prompt_tokens, llm.completion_tokens) == (11, 3)
    assert llm.total_cost and llm.total_cost > 0
    assert llm.outputs["output"][0]["content"][0]["text"] == "Paris"
    assert [r.name for r in runs] == ["example", "geo", "gpt-4o-mini"]  # (a trace is no run)


def _responses_agent(srv: ScriptedModelServer) -> Agent:
    """On the SDK's default model class: the Responses API (``POST /v1/responses``)."""
    model = OpenAIResponsesModel(
        model="gpt-4o-mini",
        openai_client=AsyncOpenAI(base_url=srv.base_url, api_key="scripted", max_retries=0))
    return Agent(name="geo", instructions="Answer with the tool's figure.",
                 tools=[lookup_city], model=model)


def test_responses_api_agent_end_to_end(srv: ScriptedModelServer, db: Client) -> None:
    """The default model class, traced and evaluated: llm runs (model, tokens, cost) and tool
    runs from the SDK's response and function spans, reliability from the trace."""
    srv.reset()
    agent = _responses_agent(srv)
    results = evaluate(agent, data=_dataset(db, ["Paris", "Tokyo"], "responses"), client=db,
                       evaluators=[ReliabilityEvaluator(None)])
    rows = list(results)
    assert len(rows) == 2
    assert srv.requests and all("input" in body for body in srv.requests)  # the Responses API
    for row in rows:
        city = _city(row)
        assert row["run"].outputs["output"] == f"Answer: {city} has {CITIES[city]} people"
        runs = _tree(db, row)
        llms = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(llms) == 2 and len(tools) == 1
        for llm in llms:
            assert llm.name == "gpt-4o-mini"
            assert llm.extra["metadata"]["ls_provider"] == "openai"
            assert llm.prompt_tokens > 0 and llm.completion_tokens > 0
            assert llm.total_cost and llm.total_cost > 0
            assert llm.inputs["input"]  # the input items the SDK sent
        first, second = sorted(llms, key=lambda r: r.start_time)
        assert first.outputs["output"][0]["type"] == "function_call"
        assert second.outputs["output"][0]["content"][0]["text"].startswith("Answer:")
        assert tools[0].name == "lookup_city" and tools[0].inputs == {"city": city}
        assert tools[0].outputs == {"output": f"{city} has {CITIES[city]} people"}
        assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {
            "reliability": 1.0}
    # the SDK's own RunResult, read by the reliability evaluator
    result = run_sync(Runner.run(agent, "How many people live in Cairo? Use lookup_city."))
    assert ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Cairo"}}]).run(
        result).passed


def test_readme_handoff_on_the_default_model_answers_with_the_tool(
        srv: ScriptedModelServer) -> None:
    """The README's example: a triage agent handing to geo on the SDK's default model (the
    Responses API), a question that does not name the tool. The agent handed to calls its own
    tool (the scripted model counts the handoff's result as none of its own) and the judge
    finds the figure; before, geo answered with the handoff's result and scored 3."""
    srv.reset()
    geo = _responses_agent(srv)
    triage = Agent(name="triage", instructions="Hand city questions to geo.", handoffs=[geo],
                   model=geo.model)
    judge = OpenAIJudge("gpt-4o-mini", base_url=srv.base_url, api_key="scripted")
    result = AccuracyEvaluator(judge, triage, "How many people live in Paris?",
                               str(CITIES["Paris"])).run()
    assert result.generated_output == f"Answer: Paris has {CITIES['Paris']} people"
    assert result.average_score == 9.0
    calls = [item["name"] for body in srv.requests for item in body.get("input") or []
             if isinstance(item, dict) and item.get("type") == "function_call"]
    assert calls[:1] == ["transfer_to_geo"] and "lookup_city" in calls


def test_an_output_type_is_stored_as_text_and_as_its_fields(srv: ScriptedModelServer,
                                                             db: Client) -> None:
    """An agent with an ``output_type`` (a pydantic model): the run's outputs hold its JSON
    text and its fields (``structured_output``, as pydantic-ai's runs do)."""
    from pydantic import BaseModel

    class City(BaseModel):
        city: str
        population: int

    srv.reset()
    srv.script(ScriptedReply(content='{"city": "Paris", "population": 2102650}'))
    agent = Agent(name="geo", instructions="Answer as a City.", output_type=City,
                  model=_model(srv))
    (row,) = list(evaluate(agent, data=_dataset(db, ["Paris"], "typed"), client=db))
    outputs = row["run"].outputs
    assert outputs["structured_output"] == {"city": "Paris", "population": 2102650}
    assert City.model_validate_json(outputs["output"]) == City(city="Paris", population=2102650)


def test_chat_inputs_are_the_conversation(srv: ScriptedModelServer, db: Client) -> None:
    """An example in the chat format of LangSmith's chat datasets (``messages`` of role and
    content): the SDK gets the conversation as input items, the last user message the one the
    agent answers (before, the dict went in as JSON text and the tool got the wrong city)."""
    srv.reset()
    ds = db.create_dataset("chat-inputs")
    db.create_examples(dataset_id=ds.id, examples=[{"inputs": {"messages": [
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hi! Ask me about a city."},
        {"role": "user", "content": "How many people live in Lima?"}]}}])
    (row,) = list(evaluate(geo_agent(srv), data=ds.name, client=db))
    assert row["run"].error is None
    assert row["run"].outputs["output"] == f"Answer: Lima has {CITIES['Lima']} people"
    sent = srv.requests[0]["messages"]
    assert [(m["role"], m["content"]) for m in sent if m["role"] != "system"] == [
        ("user", "Hello."), ("assistant", "Hi! Ask me about a city."),
        ("user", "How many people live in Lima?")]


@function_tool(name_override="lookup_city")
def lookup_city_in_context(ctx: RunContextWrapper[dict[str, int]], city: str) -> str:
    """The population of a city, from the run's context."""
    return f"{city} has {ctx.context[city]} people"


def test_a_context_reaches_the_tools_through_with_run_args(srv: ScriptedModelServer,
                                                           db: Client) -> None:
    """``with_run_args(agent, context=..., max_turns=...)``: ``Runner.run`` gets them, the
    tools read the context, the runs are traced as the agent's are."""
    from assay.integrations import with_run_args

    srv.reset()
    agent = Agent(name="geo", instructions="Answer with the tool's figure.",
                  tools=[lookup_city_in_context], model=_model(srv))
    bound = with_run_args(agent, context={"Quito": 2800000}, max_turns=4)
    (row,) = list(evaluate(bound, data=_dataset(db, ["Quito"], "context"), client=db,
                           evaluators=[ReliabilityEvaluator(None)]))
    assert row["run"].outputs["output"] == "Answer: Quito has 2800000 people"
    assert [r.name for r in _tree(db, row) if r.run_type == "tool"] == ["lookup_city"]
    assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {"reliability": 1.0}
    assert with_run_args(bound, max_turns=2).run_kwargs == {  # type: ignore[attr-defined]
        "context": {"Quito": 2800000}, "max_turns": 2}
    with pytest.raises(InvalidInputError, match=r"Runner.run: deps \(it takes context, "
                                                 r"max_turns, "):
        with_run_args(bound, deps=1)  # refused by name, before anything runs
    from assay.evals import AgentUnderTest

    unstreamed = with_run_args(bound, stream=False)  # Runner.run, given no stream argument
    result = AgentUnderTest(unstreamed).call("How many people live in Quito? Use lookup_city.")
    assert result.final_output == "Answer: Quito has 2800000 people"


def test_responses_api_streamed_run_is_traced(srv: ScriptedModelServer, db: Client) -> None:
    """``Runner.run_streamed`` over the Responses API's SSE stream: the same runs. (The SDK's
    spans carry no first-token time and no hook sees its chunks, so a run streamed by the
    caller gets none; ``with_run_args(agent, stream=True)`` below has assay stream it.)"""
    import asyncio

    from assay.tracing import trace

    srv.reset()
    agent = _responses_agent(srv)

    async def main() -> tuple[Any, list[str]]:
        async with trace("streamed", client=db, enabled=True) as root:
            result = Runner.run_streamed(agent, "How many people live in Osaka? Use lookup_city.")
            kinds = [getattr(e.data, "type", "") async for e in result.stream_events()
                     if e.type == "raw_response_event"]
            assert result.final_output == f"Answer: Osaka has {CITIES['Osaka']} people"
        return root, kinds

    root, kinds = asyncio.run(main())
    assert all(body.get("stream") for body in srv.requests)
    assert "response.output_text.delta" in kinds and "response.completed" in kinds
    db.flush()
    runs = _flat(db.read_run(root.id, load_child_runs=True))
    llms = [r for r in runs if r.run_type == "llm"]
    assert len(llms) == 2 and all(r.total_tokens and r.total_tokens > 0 for r in llms)
    assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": "Osaka"}]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_stream_true_gives_each_llm_run_its_first_token(api: str, db: Client) -> None:
    """``with_run_args(agent, stream=True)``: assay runs it with ``Runner.run_streamed`` and
    reads its events, so each llm run (the tool call's, the answer's) gets the time of its
    first chunk, after the model's first-token delay and within the call; same answer and
    tool runs as ``Runner.run``; ``stream`` beside ``Runner.run``'s own arguments."""
    from assay.integrations import with_run_args

    with ScriptedModelServer(first_token_delay=0.05) as slow:
        client = AsyncOpenAI(base_url=slow.base_url, api_key="scripted", max_retries=0)
        model = (OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
                 if api == "chat" else OpenAIResponsesModel(model="gpt-4o-mini",
                                                              openai_client=client))
        agent = Agent(name="geo", tools=[lookup_city], model=model)
        rows = list(evaluate(with_run_args(agent, stream=True, max_turns=4),
                             data=_dataset(db, ["Lima", "Cairo"], f"stream-{api}"), client=db,
                             max_concurrency=2, evaluators=[ReliabilityEvaluator(None)]))
        assert all(body.get("stream") for body in slow.requests)
    assert len(rows) == 2
    for row in rows:
        city = _city(row)
        assert row["run"].outputs["output"] == f"Answer: {population(city)}"
        runs = _tree(db, row)
        llms = [r for r in runs if r.run_type == "llm"]
        assert len(llms) == 2
        for llm in llms:
            assert llm.first_token_time is not None
            assert llm.start_time <= llm.first_token_time <= llm.end_time
            assert (llm.first_token_time - llm.start_time).total_seconds() >= 0.04
            # a Chat Completions stream without include_usage reports no usage: unknown, not
            # 0 tokens; the Responses stream reports it
            assert (llm.total_tokens is None) if api == "chat" else llm.total_tokens
            assert llm.extra["metadata"]["ls_model_name"] == "gpt-4o-mini"
        assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": city}]
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]


def test_parallel_tool_calls_keep_the_models_order(db: Client) -> None:
    """Both tools called in one model reply (the SDK runs them at once, the first slower):
    the trace and the reliability verdict keep the model's order (``check_parallel_calls``)."""
    with ScriptedModelServer(parallel_tool_calls=True) as par:
        agent = Agent(name="clock", tools=[function_tool(get_time), function_tool(get_weather)],
                      model=_model(par))
        check_parallel_calls(db, par, agent)


def test_a_model_named_by_its_provider_is_priced_as_that_providers(srv: ScriptedModelServer,
                                                                   db: Client) -> None:
    """A model named ``<provider>/<model>`` (a ``LitellmModel``'s spans carry that name, as a
    gateway's such as OpenRouter's do; here an OpenAI-compatible gateway on loopback): its llm
    runs name that provider and model and cost what genai-prices asks for them (they were
    'openai' and unpriced); a served model's organisation (``meta-llama/...``) is no
    provider, and ``litellm/<provider>/<model>`` drops its prefix."""
    from assay.integrations._openai_agents import _provider

    client = AsyncOpenAI(base_url=srv.base_url, api_key="scripted", max_retries=0)
    for name, provider, model in ((f"anthropic/{CLAUDE}", "anthropic", CLAUDE),
                                  ("meta-llama/Llama-3.1-8B-Instruct", "openai",
                                   "meta-llama/Llama-3.1-8B-Instruct")):
        agent = Agent(name="geo", instructions="Answer with the tool's figure.",
                      tools=[lookup_city],
                      model=OpenAIChatCompletionsModel(model=name, openai_client=client))
        (row,) = list(evaluate(agent, data=_dataset(db, ["Lima"], "gateway"), client=db))
        llms = [r for r in _tree(db, row) if r.run_type == "llm"]
        assert len(llms) == 2
        for llm in llms:
            meta = llm.extra["metadata"]
            assert (meta["ls_provider"], meta["ls_model_name"]) == (provider, model)
            if provider == "anthropic":
                check_priced(llm, provider, model)
            else:
                assert llm.prompt_tokens > 0
    assert _provider(f"litellm/gemini/{GEMINI}") == ("gemini", GEMINI)
    assert _provider("litellm/gpt-4o") == ("openai", "gpt-4o")
    assert _provider("gpt-4o-mini") == ("openai", "gpt-4o-mini")


def test_an_azure_deployment_of_its_own_name_is_priced_by_the_users_rule(
        srv: ScriptedModelServer, db: Client) -> None:
    """An agent on an Azure OpenAI deployment named by its user: the SDK's spans carry the
    deployment's name, not the model Azure answers with, so genai-prices knows no price for it
    (an llm run with tokens and no cost); a rule of the user's own (``ASSAY_MODEL_PRICES``,
    ``set_model_prices``) prices it as the model it serves."""
    from openai import AsyncAzureOpenAI

    from assay._model_prices import set_model_prices

    azure = AsyncAzureOpenAI(azure_endpoint=srv.url, api_key="scripted",
                             api_version="2024-10-21", max_retries=0)
    agent = Agent(name="geo", instructions="Answer with the tool's figure.", tools=[lookup_city],
                  model=OpenAIChatCompletionsModel(model="prod-chat", openai_client=azure))
    data = _dataset(db, ["Lima"], "azure")
    (row,) = list(evaluate(agent, data=data, client=db))
    llms = [r for r in _tree(db, row) if r.run_type == "llm"]
    assert [r.extra["metadata"]["ls_model_name"] for r in llms] == ["prod-chat"] * 2
    assert all(r.prompt_tokens and r.total_cost is None for r in llms)
    set_model_prices([{"model": "prod-chat", "price_as": "gpt-4o-mini"}])
    try:  # (priced as the runs are stored: the rules in force until they are read back)
        (row,) = list(evaluate(agent, data=data, client=db))
        llms = [r for r in _tree(db, row) if r.run_type == "llm"]
    finally:
        set_model_prices(None)
    assert len(llms) == 2
    for llm in llms:  # named "prod-chat" as the SDK named it, priced as gpt-4o-mini
        check_priced(llm, "openai", "prod-chat", priced_as="gpt-4o-mini")
