"""CrewAI as it is: a crew of two agents with a tool, the real package against the scripted model
on 127.0.0.1. crewai pins openai<3, so this runs in a venv of its own: ``.ci/crewai``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("crewai", reason="needs assay[crewai] (a venv of its own: .ci/crewai)")

# no network: crewai's own telemetry and trace upload off (read when crewai starts a crew)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import LLM, Agent, Crew, Flow, Process, Task
from crewai.flow.flow import listen, start
from crewai.tools import tool
from pydantic import BaseModel

from assay._sync import run_sync
from assay.client import Client
from assay.demo import ScriptedModelServer
from assay.errors import InvalidInputError
from assay.evals import (
    AccuracyEvaluator,
    PerformanceEvaluator,
    ReliabilityEvaluator,
    extract_tool_calls,
)
from assay.evaluation import evaluate
from assay.integrations import adapter_for, with_run_args
from assay.llm import JudgeOptions, OpenAIJudge

from .conftest import (
    CITIES,
    CLAUDE,
    GEMINI,
    check_parallel_calls,
    check_priced,
    city_dataset,
    get_time,
    get_weather,
    population,
)
from .conftest import run_tree as _tree


@tool("lookup_city")
def lookup_city(city: str) -> str:
    """The population of a city."""
    return population(city)


def crew(srv: ScriptedModelServer, tool: Any = lookup_city) -> Crew:
    llm = LLM(model="openai/gpt-4o-mini", base_url=srv.base_url, api_key="scripted")
    researcher = Agent(role="researcher", goal="Find city figures with lookup_city",
                       backstory="A careful researcher.", tools=[tool], llm=llm,
                       max_iter=3, verbose=False)
    writer = Agent(role="writer", goal="Write one sentence", backstory="A terse writer.",
                   llm=llm, max_iter=2, verbose=False)
    # (the city quoted: the scripted model takes a quoted phrase as the tool's argument)
    research = Task(description="{question} Use lookup_city for '{city}'.",
                    expected_output="a figure",
                    agent=researcher)
    write = Task(description="Write the answer to: {question}", expected_output="a sentence",
                 agent=writer, context=[research])
    return Crew(agents=[researcher, writer], tasks=[research, write],
                process=Process.sequential, verbose=False)


def _dataset(client: Client, cities: list[str], name: str = "cities") -> str:
    return city_dataset(client, cities, name, city_input=True)  # (the crew's {city})


def _city(row: Any) -> str:
    return row["example"].inputs["question"].split()[-1].rstrip("?")


def test_crew_in_evaluate_stores_llm_and_tool_runs(srv: ScriptedModelServer,
                                                   db: Client) -> None:
    results = evaluate(crew(srv), data=_dataset(db, ["Paris", "Berlin"]), client=db,
                       evaluators=[ReliabilityEvaluator(None)])
    rows = list(results)
    assert len(rows) == 2
    for row in rows:
        city = _city(row)
        outputs = row["run"].outputs
        assert [t["agent"] for t in outputs["tasks"]] == ["researcher", "writer"]
        assert f"{CITIES[city]}" in outputs["tasks"][0]["output"]
        runs = _tree(db, row)
        llms = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(llms) >= 3 and len(tools) == 1, [(r.name, r.run_type) for r in runs]
        for llm in llms:
            meta = llm.extra["metadata"]
            assert meta["ls_provider"] == "openai" and meta["ls_model_name"] == "gpt-4o-mini"
            assert llm.prompt_tokens > 0 and llm.completion_tokens > 0
        assert tools[0].name == "lookup_city" and tools[0].inputs == {"city": city}
        assert f"{CITIES[city]}" in str(tools[0].outputs["output"])
        by_id = {r.id: r for r in runs}
        chain = []
        parent = by_id.get(tools[0].parent_run_id)
        while parent is not None:
            chain.append(parent.name)
            parent = by_id.get(parent.parent_run_id)
        assert "researcher" in chain and chain[-1] == row["run"].name
        assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {
            "reliability": 1.0}


def test_a_traced_helper_in_a_tool_nests_under_the_tool_run(srv: ScriptedModelServer,
                                                            db: Client) -> None:
    """A tool's code that calls a ``@traceable`` function: its run is the tool run's child
    (CrewAI's open scopes name the tool's started event; its run, made on a bus worker, is
    waited for), under ``evaluate()`` and outside any assay run where tracing is on."""
    import uuid

    from assay.integrations import _crewai
    from assay.tracing import traceable, tracing_context

    @traceable(name="atlas")
    def atlas(city: str) -> str:
        return population(city)

    @tool("lookup_city")
    def traced_lookup(city: str) -> str:
        """The population of a city."""
        return atlas(city)

    def check(runs: list[Any], city: str) -> None:
        by_id = {r.id: r for r in runs}
        (helper,) = [r for r in runs if r.name == "atlas"]
        assert by_id[helper.parent_run_id].run_type == "tool"
        assert by_id[helper.parent_run_id].name == "lookup_city"
        assert helper.inputs == {"city": city}

    (row,) = evaluate(crew(srv, traced_lookup), data=_dataset(db, ["Osaka"]), client=db)
    check(_tree(db, row), "Osaka")
    project = f"crew-nest-{uuid.uuid4().hex[:8]}"
    with tracing_context(enabled=True, client=db, project_name=project):
        crew(srv, traced_lookup).kickoff(
            inputs={"question": "How many people live in Cairo?", "city": "Cairo"})
    _crewai._flush_bus()
    db.flush()
    (root,) = db.list_runs(project_name=project, is_root=True)
    check(list(db.list_runs(project_name=project, trace_id=root.id)), "Cairo")


def test_a_kickoff_outside_any_assay_run_is_a_trace_of_its_own_where_tracing_is_on(
        srv: ScriptedModelServer, db: Client) -> None:
    """A service kicking off its crew with no assay run around it: where tracing is on, the
    kickoff is a root run with the crew's tasks, agents, model and tool calls under it; where
    it is off nothing is stored."""
    import uuid

    from assay.integrations import _crewai, instrument_frameworks
    from assay.tracing import tracing_context

    assert instrument_frameworks("crewai") == ["crewai"]
    project = f"crew-prod-{uuid.uuid4().hex[:8]}"
    crew(srv).kickoff(inputs={"question": "How many people live in Lima?", "city": "Lima"})
    with tracing_context(enabled=True, client=db, project_name=project):
        crew(srv).kickoff(inputs={"question": "How many people live in Paris?", "city": "Paris"})
    _crewai._flush_bus()  # (the listeners run on the bus's threads)
    db.flush()
    (root,) = db.list_runs(project_name=project, is_root=True)
    assert root.name == "crew" and root.inputs["inputs"]["city"] == "Paris"
    runs = list(db.list_runs(project_name=project, trace_id=root.id))
    tools = [r for r in runs if r.run_type == "tool"]
    assert [(t.name, t.inputs) for t in tools] == [("lookup_city", {"city": "Paris"})]
    assert sum(r.run_type == "llm" for r in runs) >= 3
    assert {"researcher", "writer"} <= {r.name for r in runs}


def test_tool_calls_from_crew_output(srv: ScriptedModelServer) -> None:
    the_crew = crew(srv)
    output = run_sync(adapter_for(the_crew).arun({"question": "How many people live in Lima?",
                                                  "city": "Lima"}))
    calls = extract_tool_calls(output)
    assert [(c.name, c.args) for c in calls] == [("lookup_city", {"city": "Lima"})]
    assert ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Lima"}}]).run(
        output).passed


def test_tool_error_is_on_the_tool_run_and_the_experiment_goes_on(
        srv: ScriptedModelServer, db: Client) -> None:
    results = evaluate(crew(srv), data=_dataset(db, ["Atlantis", "Lima"], "err"), client=db)
    rows = {_city(r): r for r in results}
    assert set(rows) == {"Atlantis", "Lima"}
    bad = _tree(db, rows["Atlantis"])
    errors = [r.error for r in bad if r.run_type == "tool" and r.error]
    assert errors and any("Atlantis" in e for e in errors), [(r.name, r.error) for r in bad]
    good = _tree(db, rows["Lima"])
    assert good[0].error is None


def test_concurrency_8_keeps_examples_apart(srv: ScriptedModelServer, db: Client) -> None:
    results = evaluate(crew(srv), data=_dataset(db, list(CITIES), "many"), client=db,
                       max_concurrency=8, evaluators=[ReliabilityEvaluator(None)])
    rows = list(results)
    assert len(rows) == 8
    for row in rows:
        runs = _tree(db, row)
        assert [t.inputs for t in runs if t.run_type == "tool"] == [{"city": _city(row)}]
        assert {r.trace_id for r in runs} == {row["run"].id}


def test_one_agent_at_concurrency_8_never_fails_or_mixes(srv: ScriptedModelServer,
                                                          db: Client) -> None:
    """A single ``Agent`` under evaluate() at ``max_concurrency=8``: CrewAI's Agent keeps its
    executor's state between kickoffs (concurrent kickoffs on one Agent failed with
    PydanticUserError, about half of them), so each call kicks off a copy, as a Crew's does."""
    researcher = _researcher(srv)
    rows = list(evaluate(researcher, data=_dataset(db, list(CITIES), "agents"), client=db,
                         max_concurrency=8, evaluators=[ReliabilityEvaluator(None)]))
    assert len(rows) == 8
    for row in rows:
        assert row["run"].error is None, row["run"].error
        runs = _tree(db, row)
        assert [t.inputs for t in runs if t.run_type == "tool"] == [{"city": _city(row)}]
        assert {r.trace_id for r in runs} == {row["run"].id}
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]


def test_each_evaluator_runs_many_times_on_one_crew(srv: ScriptedModelServer) -> None:
    the_crew = crew(srv)
    judge = OpenAIJudge("gpt-4o-mini", base_url=srv.base_url, api_key="scripted",
                        options=JudgeOptions(timeout=5))
    accuracy = AccuracyEvaluator(judge, the_crew, "How many people live in Paris?", "Paris",
                                 input_mapper=lambda q: {"question": q, "city": "Paris"})
    for _ in range(3):
        assert accuracy.run().average_score == 9.0
    performance = PerformanceEvaluator(the_crew, {"question": "How many people live in Osaka?",
                                                  "city": "Osaka"},
                                       num_iterations=1, warmup_runs=0)
    for _ in range(3):
        assert len(performance.run().all_runs) == 1


def test_streamed_llm_calls_get_their_first_token(srv: ScriptedModelServer, db: Client) -> None:
    llm = LLM(model="openai/gpt-4o-mini", base_url=srv.base_url, api_key="scripted",
              stream=True)
    agent = Agent(role="writer", goal="Write one sentence", backstory="A terse writer.", llm=llm,
                  max_iter=2, verbose=False)
    streamed = Crew(agents=[agent], tasks=[Task(description="Say hello to {question}",
                                                expected_output="a sentence", agent=agent)])
    ds = db.create_dataset("stream")
    db.create_examples(dataset_id=ds.id, examples=[{"inputs": {"question": "Lima"}}])
    (row,) = list(evaluate(streamed, data="stream", client=db))
    llms = [r for r in _tree(db, row) if r.run_type == "llm"]
    assert llms and all(r.first_token_time is not None for r in llms)
    assert all(r.start_time <= r.first_token_time <= r.end_time for r in llms)


@pytest.mark.parametrize("stream", [False, True])
def test_claude_llm_calls_name_anthropic_and_price_its_cache(stream: bool, db: Client) -> None:
    """CrewAI's native Anthropic LLM (``crewai[anthropic]``) against the scripted Messages
    API: its events name the bare model, so the provider comes from the LLM object; CrewAI
    marks its prompts for caching, so the first call writes the cache and the next reads it,
    each priced at its own rate."""
    with ScriptedModelServer() as claude:
        llm = LLM(model=f"anthropic/{CLAUDE}", base_url=claude.url, api_key="scripted",
                  stream=stream)
        agent = Agent(role="researcher", goal="Find city figures with lookup_city",
                      backstory="A careful researcher.", tools=[lookup_city], llm=llm,
                      max_iter=3, verbose=False)
        rows = list(evaluate(agent, data=_dataset(db, ["Paris"], f"claude{stream}"), client=db,
                             evaluators=[ReliabilityEvaluator(None)]))
    (row,) = rows
    assert row["run"].error is None and "2102650" in str(row["run"].outputs)
    llms = [r for r in _tree(db, row) if r.run_type == "llm"]
    assert len(llms) == 2
    first, second = (check_priced(r, "anthropic", CLAUDE) for r in llms)
    assert first.get("cache_creation", 0) > 0 and second.get("cache_read", 0) > 0
    assert all((r.first_token_time is not None) == stream for r in llms)
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_llm_calls_have_their_input_tokens_and_thinking(stream: bool, db: Client) -> None:
    """CrewAI's native Gemini LLM (``crewai[google-genai]``) against the scripted Gemini API:
    CrewAI names its input tokens ``prompt_token_count`` (they were stored as 0 and their cost
    left out) and counts the thinking tokens in its completion tokens; implicit caching
    played, so the second call's cached tokens are priced as cache reads."""
    from assay.demo._gemini import THOUGHTS

    with ScriptedModelServer(prompt_caching=True) as gemini:
        llm = LLM(model=f"gemini/{GEMINI}", api_key="scripted", stream=stream,
                  thinking_config={"thinking_budget": 64},
                  client_params={"http_options": {"base_url": gemini.url}})
        agent = Agent(role="researcher", goal="Find city figures with lookup_city",
                      backstory="A careful researcher.", tools=[lookup_city], llm=llm,
                      max_iter=3, verbose=False)
        (row,) = list(evaluate(agent, data=_dataset(db, ["Sydney"], f"gemini{stream}"),
                               client=db, evaluators=[ReliabilityEvaluator(None)]))
    assert row["run"].error is None and str(CITIES["Sydney"]) in str(row["run"].outputs)
    llms = [r for r in _tree(db, row) if r.run_type == "llm"]
    assert len(llms) == 2
    first, second = (check_priced(r, "gemini", GEMINI) for r in llms)
    assert "cache_read" not in first and second["cache_read"] > 0
    assert all(r.prompt_tokens > 0 and r.completion_tokens > THOUGHTS for r in llms)
    assert all((r.first_token_time is not None) == stream for r in llms)
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]


def test_openai_cached_prompt_tokens_are_priced_as_cache_reads(db: Client) -> None:
    """OpenAI's automatic prompt caching (played by the scripted model): CrewAI reports the
    cached tokens of each call; its second call reads the first's prompt from the cache."""
    with ScriptedModelServer(prompt_caching=True) as cached:
        agent = _researcher(cached)
        (row,) = list(evaluate(agent, data=_dataset(db, ["Lima"], "cached"), client=db))
    llms = [r for r in _tree(db, row) if r.run_type == "llm"]
    details = [check_priced(r, "openai", "gpt-4o-mini") for r in llms]
    assert len(details) == 2 and details[0] == {} and details[1]["cache_read"] > 0


class CityFigure(BaseModel):
    city: str
    population: int


def _researcher(srv: ScriptedModelServer) -> Agent:
    llm = LLM(model="openai/gpt-4o-mini", base_url=srv.base_url, api_key="scripted")
    return Agent(role="researcher", goal="Find city figures with lookup_city",
                 backstory="A careful researcher.", tools=[lookup_city], llm=llm, max_iter=3,
                 verbose=False)


def test_structured_output_of_a_task_and_of_an_agent(srv: ScriptedModelServer,
                                                      db: Client) -> None:
    """A task's ``output_pydantic`` and an agent's ``response_format`` (given with
    ``with_run_args``): the run's outputs hold the answer's fields (``structured_output``, as
    the other frameworks' runs do), the crew's per task too; the tool call is still judged."""
    researcher = _researcher(srv)
    typed = Crew(agents=[researcher], tasks=[Task(
        description="{question} Use lookup_city for '{city}'.", expected_output="a figure",
        agent=researcher, output_pydantic=CityFigure)], verbose=False)
    (row,) = list(evaluate(typed, data=_dataset(db, ["Cairo"], "typed"), client=db,
                           evaluators=[ReliabilityEvaluator(None)]))
    figure = {"city": "Cairo", "population": CITIES["Cairo"]}
    assert row["run"].outputs["structured_output"] == figure
    assert row["run"].outputs["tasks"][0]["structured_output"] == figure
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]

    bound = with_run_args(_researcher(srv), response_format=CityFigure)
    (row,) = list(evaluate(bound, data=_dataset(db, ["Osaka"], "agent-typed"), client=db,
                           evaluators=[ReliabilityEvaluator(None)]))
    assert row["run"].outputs["structured_output"] == {"city": "Osaka",
                                                       "population": CITIES["Osaka"]}
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    plain = run_sync(adapter_for(_researcher(srv)).arun("How many people live in 'Osaka'?"))
    assert "structured_output" not in adapter_for(researcher).outputs(plain)


def test_a_chat_dataset_is_an_agents_conversation_and_a_crews_question(
        srv: ScriptedModelServer, db: Client) -> None:
    """An example in LangSmith's chat format: an Agent is kicked off with the whole
    conversation (CrewAI's message list); a Crew's ``{question}`` gets its last user message
    (an inputs dict without one is the same rule's, ``_registry.query_text``)."""
    ds = db.create_dataset("crew-chat")
    db.create_examples(dataset_id=ds.id, examples=[{"inputs": {"messages": [
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hi! Which city?"},
        {"role": "user", "content": "How many people live in 'Sydney'?"}]}}])
    first = len(srv.requests)
    (row,) = list(evaluate(_researcher(srv), data=ds.name, client=db))
    assert row["run"].error is None and str(CITIES["Sydney"]) in row["run"].outputs["output"]
    sent = [(m["role"], m.get("content")) for m in srv.requests[first]["messages"]]
    assert ("user", "Hello.") in sent and ("assistant", "Hi! Which city?") in sent
    assert "How many people live in 'Sydney'?" in str(sent[-1][1])
    researcher = _researcher(srv)
    asks = Crew(agents=[researcher], tasks=[Task(description="{question}",
                                                  expected_output="a figure", agent=researcher)])
    (row,) = list(evaluate(asks, data=ds.name, client=db))
    assert [r.inputs for r in _tree(db, row) if r.run_type == "tool"] == [{"city": "Sydney"}]


def test_run_args_of_a_crew_and_of_an_agent(srv: ScriptedModelServer) -> None:
    """A Crew's ``inputs`` fill its templates for every query (a query's own inputs win); what
    a kickoff does not take is refused by name before anything runs."""
    bound = with_run_args(crew(srv), inputs={"city": "Lima"})
    output = run_sync(bound.arun("How many people live in Lima?"))
    assert [(c.name, c.args) for c in extract_tool_calls(output)] == [
        ("lookup_city", {"city": "Lima"})]
    output = run_sync(bound.arun({"question": "How many people live in Cairo?", "city": "Cairo"}))
    assert [c.args for c in extract_tool_calls(output)] == [{"city": "Cairo"}]
    with pytest.raises(InvalidInputError, match=r"CrewAI Crew: max_turns \(it takes inputs, "
                                                 r"input_files\)"):
        with_run_args(crew(srv), max_turns=3)
    with pytest.raises(InvalidInputError, match=r"CrewAI Agent: inputs \(it takes "
                                                 r"response_format, input_files\)"):
        with_run_args(_researcher(srv), inputs={"city": "Lima"})
    with pytest.raises(InvalidInputError, match="a Crew's inputs must be a dict, got str"):
        with_run_args(crew(srv), inputs="Lima")


class CityState(BaseModel):
    question: str = ""
    figure: str = ""


def test_a_flow_as_it_is(srv: ScriptedModelServer, db: Client) -> None:
    """A ``Flow`` whose step kicks off a crew: evaluate() runs a new flow per example (a flow
    keeps its state), its state model gets a chat's last user message in its ``question``
    field, each step is a chain run (its state in, its result out) with the crew's runs under
    the step that kicked it off (CrewAI's own flows, its agent executor's, add none), and the
    last step's answer is the output; concurrent examples never mix."""
    llm = LLM(model="openai/gpt-4o-mini", base_url=srv.base_url, api_key="scripted")
    seen: list[str] = []

    class CityFlow(Flow[CityState]):
        @start()
        def research(self) -> str:
            seen.append(self.state.question)
            agent = Agent(role="researcher", goal="Find city figures with lookup_city",
                          backstory="A careful researcher.", tools=[lookup_city], llm=llm,
                          max_iter=3, verbose=False)
            out = Crew(agents=[agent], tasks=[Task(description=self.state.question,
                                                    expected_output="a figure", agent=agent)]
                       ).kickoff()
            self.state.figure = out.raw
            return out.raw

        @listen(research)
        def finish(self, figure: str) -> str:
            return f"Final: {figure}"

    ds = db.create_dataset("flow")
    cities = ["Paris", "Lima", "Cairo", "Tokyo"]
    db.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"messages": [{"role": "user", "content": f"How many people live in {c}?"}]},
         "outputs": {"expected_tool_calls": [{"name": "lookup_city", "args": {"city": c}}]}}
        for c in cities])
    flow = CityFlow()
    rows = list(evaluate(flow, data=ds.name, client=db, max_concurrency=4,
                         evaluators=[ReliabilityEvaluator(None)]))
    assert len(rows) == 4 and flow.state.question == ""  # the flow given is left as it was
    assert sorted(seen) == sorted(f"How many people live in {c}?" for c in cities)
    for row in rows:
        city = row["example"].inputs["messages"][0]["content"].split()[-1].rstrip("?")
        assert row["run"].error is None
        assert row["run"].outputs["output"] == f"Final: Answer: {population(city)}"
        runs = _tree(db, row)
        assert [t.inputs for t in runs if t.run_type == "tool"] == [{"city": city}]
        assert [r for r in runs if r.run_type == "llm"]
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
        by_id = {r.id: r for r in runs}
        flow_run = runs[1]  # the flow's own run under the example's root
        assert flow_run.name == "CityFlow" and flow_run.parent_run_id == runs[0].id
        steps = [r for r in runs if r.parent_run_id == flow_run.id]
        assert [r.name for r in steps] == ["research", "finish"]
        assert steps[0].inputs["state"]["question"] == f"How many people live in {city}?"
        assert steps[1].outputs == {"output": f"Final: Answer: {population(city)}"}
        (tool,) = [r for r in runs if r.run_type == "tool"]
        above = []
        while tool.parent_run_id in by_id:
            tool = by_id[tool.parent_run_id]
            above.append(tool.name)
        assert above[-3:] == ["research", "CityFlow", row["run"].name]
        assert "researcher" in above  # (the agent's own run, not its executor's flow steps)


def test_a_failing_flow_step_carries_its_error(srv: ScriptedModelServer, db: Client) -> None:
    """A step that raises: its chain run has the error, so do the flow's and the example's
    runs, the step before it keeps its result, and the experiment goes on."""

    class Fragile(Flow[CityState]):
        @start()
        def first(self) -> str:
            return self.state.question.upper()

        @listen(first)
        def second(self, shout: str) -> str:
            if "ATLANTIS" in shout:
                raise LookupError("no such city: Atlantis")
            return shout

    ds = db.create_dataset("fragile")
    db.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"question": f"Where is {c}?"}} for c in ("Atlantis", "Lima")])
    rows = {r["example"].inputs["question"]: r
            for r in evaluate(Fragile(), data=ds.name, client=db)}
    bad = _tree(db, rows["Where is Atlantis?"])
    steps = {r.name: r for r in bad if r.name in ("first", "second")}
    assert steps["first"].error is None and steps["first"].outputs == {
        "output": "WHERE IS ATLANTIS?"}
    assert "no such city: Atlantis" in (steps["second"].error or "")
    assert "no such city: Atlantis" in (bad[0].error or "")
    good = _tree(db, rows["Where is Lima?"])
    assert good[0].error is None and good[0].outputs["output"] == "WHERE IS LIMA?"


def test_parallel_tool_calls_keep_the_models_order(db: Client) -> None:
    """Both tools called in one model reply (the first slower): the trace and the reliability
    verdict keep the model's order (``check_parallel_calls``)."""
    with ScriptedModelServer(parallel_tool_calls=True) as par:
        llm = LLM(model="openai/gpt-4o-mini", base_url=par.base_url, api_key="scripted")
        agent = Agent(role="clock", goal="Tell the time and weather", backstory="Precise.",
                      tools=[tool("get_time")(get_time), tool("get_weather")(get_weather)],
                      llm=llm, max_iter=3, verbose=False)
        check_parallel_calls(db, par, agent)


def test_a_crew_and_a_flow_made_with_stream_true_are_read_to_their_end(
        srv: ScriptedModelServer, db: Client) -> None:
    """``Crew(stream=True)`` / ``Flow(stream=True)``: a kickoff returns a streaming output
    that runs nothing until read. assay reads it to its end and judges its final result (it
    stored the streaming output's repr, with no runs, and reliability 0); the crew's llm calls
    stream, so each llm run gets its first token."""
    researcher = _researcher(srv)
    streamed = Crew(agents=[researcher], tasks=[Task(
        description="{question} Use lookup_city for '{city}'.", expected_output="a figure",
        agent=researcher)], stream=True)
    rows = list(evaluate(streamed, data=_dataset(db, ["Lima", "Tokyo"], "streamed"), client=db,
                         max_concurrency=2, evaluators=[ReliabilityEvaluator(None)]))
    assert len(rows) == 2
    for row in rows:
        assert row["run"].outputs["output"] == f"Answer: {population(_city(row))}"
        llms = [r for r in _tree(db, row) if r.run_type == "llm"]
        assert llms and all(r.first_token_time is not None for r in llms)
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]

    class Echo(Flow[CityState]):
        @start()
        def answer(self) -> str:
            return f"asked: {self.state.question}"

    (row,) = list(evaluate(Echo(stream=True), data=_dataset(db, ["Oslo"], "flow-stream"),
                           client=db))
    assert row["run"].outputs["output"] == "asked: How many people live in Oslo?"
