"""Google's Agent Development Kit as it is: an ``Agent`` with a tool, a ``SequentialAgent`` of
two, an ``App`` and a Runner of the user's own, the real package against the scripted Gemini API
on 127.0.0.1 (``assay[google-adk]``, in the dev extra). Capture goes through ADK's plugin
interface.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="needs assay[google-adk]")

from google.adk.agents import Agent, SequentialAgent
from google.adk.apps import App
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import types

from assay._sync import run_sync
from assay.client import Client
from assay.demo import ScriptedModelServer
from assay.evals import (
    ReliabilityEvaluator,
    extract_tool_calls,
)
from assay.evaluation import evaluate
from assay.integrations import (
    adapter_for,
    adk_plugin,
    framework_of,
    set_framework_tracing,
    with_run_args,
)
from assay.tracing import trace

from .conftest import (
    CITIES,
    GEMINI,
    check_examples_apart,
    check_priced,
    city_dataset,
    population,
    run_accuracy_and_performance,
)
from .conftest import run_tree as _tree


def lookup_city(city: str) -> str:
    """The population of a city."""
    return population(city)


def gemini(srv: ScriptedModelServer) -> Gemini:
    return Gemini(model=GEMINI, base_url=srv.url, client_kwargs={"api_key": "scripted"})


def geo_agent(srv: ScriptedModelServer, name: str = "geo") -> Agent:
    return Agent(name=name, model=gemini(srv), instruction="Answer with lookup_city's figure.",
                 tools=[lookup_city])


def _dataset(client: Client, cities: list[str], name: str = "cities") -> str:
    # (the city quoted: the scripted model takes a quoted phrase as the tool's argument)
    return city_dataset(client, cities, name, question="How many people live in '{city}'?")


def _city(row: Any) -> str:
    return row["example"].inputs["question"].split("'")[1]


def _parents(runs: list[Any], run: Any) -> list[str]:
    by_id = {r.id: r for r in runs}
    names, parent = [], by_id.get(run.parent_run_id)
    while parent is not None:
        names.append(parent.name)
        parent = by_id.get(parent.parent_run_id)
    return names


@pytest.mark.parametrize("stream", [False, True])
def test_agent_in_evaluate_stores_its_agent_llm_and_tool_runs(srv: ScriptedModelServer,
                                                              db: Client, stream: bool) -> None:
    """The agent object as it is: per example a tree root -> agent -> llm, tool, llm; each llm
    run names Google and the model, has its messages, tokens and price (and, streamed, its
    first token); the tool run its arguments and result; reliability reads them."""
    agent = geo_agent(srv)
    target = with_run_args(agent, stream=True) if stream else agent
    rows = list(evaluate(target, data=_dataset(db, ["Paris", "Lima"]), client=db,
                         evaluators=[ReliabilityEvaluator(None)]))
    assert len(rows) == 2
    for row in rows:
        city = _city(row)
        answer = f"{city} has {CITIES[city]} people"
        assert row["run"].outputs["output"] == f"Answer: {answer}"
        assert row["run"].outputs["tool_calls"][0]["args"] == {"city": city}
        runs = _tree(db, row)
        assert [(r.run_type, r.name) for r in runs] == [
            ("chain", "geo"), ("chain", "geo"), ("llm", GEMINI), ("tool", "lookup_city"),
            ("llm", GEMINI)]
        agent_run, first, tool, second = runs[1:]
        assert agent_run.inputs == {"input": f"How many people live in '{city}'?"}
        assert agent_run.outputs == {"output": f"Answer: {answer}"}
        for llm in (first, second):
            check_priced(llm, "google", GEMINI)
            assert (llm.first_token_time is not None) is stream
            assert llm.inputs["system"][0]["content"].startswith("Answer with lookup_city")
            assert llm.parent_run_id == agent_run.id
        call = first.outputs["messages"][0]["parts"][0]
        assert (call["type"], call["name"], call["arguments"]) == (
            "tool_call", "lookup_city", {"city": city})
        assert second.inputs["messages"][-1]["role"] == "tool"  # the tool's answer, sent back
        assert tool.inputs == {"city": city} and tool.outputs == {"output": answer}
        assert tool.parent_run_id == agent_run.id
        assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {
            "reliability": 1.0}


def test_a_traced_helper_in_a_tool_nests_under_the_tool_run(srv: ScriptedModelServer,
                                                            db: Client) -> None:
    """A tool's code that calls a ``@traceable`` function (sync and async tools): its run is
    the tool run's child, in the example's trace."""
    from assay.tracing import traceable

    @traceable(name="atlas")
    def atlas(city: str) -> str:
        return population(city)

    def lookup_city(city: str) -> str:
        """The population of a city."""
        return atlas(city)

    async def alookup_city(city: str) -> str:
        """The population of a city."""
        return atlas(city)

    for tool in (lookup_city, alookup_city):
        agent = Agent(name="geo", model=gemini(srv), tools=[tool],
                      instruction=f"Answer with {tool.__name__}'s figure.")
        (row,) = evaluate(agent, data=_dataset(db, ["Cairo"], tool.__name__), client=db)
        runs = _tree(db, row)
        by_id = {r.id: r for r in runs}
        (helper,) = [r for r in runs if r.name == "atlas"]
        assert by_id[helper.parent_run_id].name == tool.__name__
        assert by_id[helper.parent_run_id].run_type == "tool"
        assert helper.inputs == {"city": "Cairo"} and helper.trace_id == row["run"].id


def test_a_sequential_agent_nests_its_agents_and_the_users_runner_takes_the_plugin(
        srv: ScriptedModelServer, db: Client) -> None:
    """A ``SequentialAgent`` of a researcher (with the tool) and a writer: each agent's runs
    under its own chain run, both under the sequence's. A Runner of the user's own, called in a
    plain function, is traced once its App has ``adk_plugin()``."""
    researcher = geo_agent(srv, "researcher")
    writer = Agent(name="writer", model=gemini(srv),
                   instruction="Write one sentence with the figure.")
    pipeline = SequentialAgent(name="pipeline", sub_agents=[researcher, writer])
    (row,) = list(evaluate(pipeline, data=_dataset(db, ["Cairo"], "sequence"), client=db))
    runs = _tree(db, row)
    by_name = {r.name: r for r in runs if r.run_type == "chain"}
    assert by_name["researcher"].parent_run_id == by_name["pipeline"].id
    assert by_name["writer"].parent_run_id == by_name["pipeline"].id
    tool = next(r for r in runs if r.run_type == "tool")
    assert _parents(runs, tool)[:2] == ["researcher", "pipeline"]
    llms = [r for r in runs if r.run_type == "llm"]
    assert [_parents(runs, r)[0] for r in llms] == ["researcher", "researcher", "writer"]

    runner = InMemoryRunner(app=App(name="mine", root_agent=geo_agent(srv),
                                    plugins=[adk_plugin()]))

    async def own(inputs: dict[str, Any]) -> dict[str, Any]:
        session = await runner.session_service.create_session(app_name="mine", user_id="u")
        text = ""
        async for event in runner.run_async(
                user_id="u", session_id=session.id,
                new_message=types.Content(role="user", parts=[types.Part(text=inputs[
                    "question"])])):
            if event.is_final_response() and event.content and event.content.parts:
                text = event.content.parts[0].text or text
        return {"answer": text}

    (row,) = list(evaluate(own, data=_dataset(db, ["Osaka"], "own-runner"), client=db,
                           evaluators=[ReliabilityEvaluator(["lookup_city"])]))
    runs = _tree(db, row)
    assert [r.run_type for r in runs] == ["chain", "chain", "llm", "tool", "llm"]
    assert runs[3].inputs == {"city": "Osaka"}
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]


def test_an_invocation_outside_any_assay_run_is_a_trace_of_its_own_where_tracing_is_on(
        srv: ScriptedModelServer, db: Client) -> None:
    """A service running its own ``Runner`` (its App with ``adk_plugin()``) and no assay run:
    where tracing is on, each invocation is a root run named for its agent, the user's
    message in and the agent's answer out, its agent, model and tool runs under it, ADK's
    session as the thread; where tracing is off nothing is stored."""
    import uuid

    from assay._sync import run_sync
    from assay.tracing import tracing_context

    runner = InMemoryRunner(app=App(name="mine", root_agent=geo_agent(srv),
                                    plugins=[adk_plugin()]))
    project = f"adk-prod-{uuid.uuid4().hex[:8]}"

    async def chat(cities: list[str]) -> str:
        session = await runner.session_service.create_session(app_name="mine", user_id="u7")
        for city in cities:
            message = types.Content(role="user", parts=[types.Part(
                text=f"How many people live in '{city}'?")])
            async for _ in runner.run_async(user_id="u7", session_id=session.id,
                                            new_message=message):
                pass
        return str(session.id)

    run_sync(chat(["Lima"]))  # tracing off: not recorded
    with tracing_context(enabled=True, client=db, project_name=project):
        session_id = run_sync(chat(["Osaka", "Cairo"]))
    db.flush()
    roots = sorted(db.list_runs(project_name=project, is_root=True), key=lambda r: r.start_time)
    assert [r.name for r in roots] == ["geo", "geo"]
    for root, city in zip(roots, ("Osaka", "Cairo"), strict=True):
        assert root.inputs == {"input": f"How many people live in '{city}'?"}
        assert city in root.outputs["output"] and root.extra["metadata"]["user_id"] == "u7"
        runs = [r for r in db.list_runs(project_name=project, trace_id=root.id)]
        # the root is the agent's run (no "geo" run under a "geo" root)
        assert sorted(r.run_type for r in runs) == ["chain", "llm", "llm", "tool"]
        (tool,) = [r for r in runs if r.run_type == "tool"]
        assert tool.inputs == {"city": city}
    (thread,) = db.list_threads(project_name=project)
    assert thread["thread_id"] == session_id and thread["count"] == 2


def test_a_transfer_nests_the_agent_handed_to_under_the_one_handing_over(
        srv: ScriptedModelServer, db: Client) -> None:
    """``triage`` hands over to its sub-agent ``geo`` (ADK's ``transfer_to_agent``, a tool call
    as ADK makes it): geo's runs sit under triage's, as ADK nests them."""
    def lookup_city(city: str) -> str:  # (the scripted model quotes ADK's hand-over note)
        """The population of a city."""
        return f"{city}: 5 people"

    geo = Agent(name="geo", model=gemini(srv), instruction="Use lookup_city.",
                tools=[lookup_city], description="answers city questions",
                disallow_transfer_to_parent=True, disallow_transfer_to_peers=True)
    triage = Agent(name="triage", model=gemini(srv), instruction="Hand over to geo.",
                   sub_agents=[geo])
    ds = db.create_dataset("transfer")
    db.create_examples(dataset_id=ds.id, examples=[{"inputs": {
        "question": "How many people live in 'Lima'? transfer_to_agent 'geo'"}}])
    (row,) = list(evaluate(triage, data="transfer", client=db))
    runs = _tree(db, row)
    assert [(r.run_type, r.name, _parents(runs, r)[0] if r.parent_run_id else None)
            for r in runs[1:]] == [
        ("chain", "triage", "triage"), ("llm", GEMINI, "triage"),
        ("tool", "transfer_to_agent", "triage"), ("chain", "geo", "triage"),
        ("llm", GEMINI, "geo"), ("tool", "lookup_city", "geo"), ("llm", GEMINI, "geo")]
    assert runs[3].inputs == {"agent_name": "geo"}
    assert [c["name"] for c in row["run"].outputs["tool_calls"]] == [
        "transfer_to_agent", "lookup_city"]


def test_a_workflow_keeps_its_branches_apart_and_answers_with_its_last_node(
        srv: ScriptedModelServer, db: Client) -> None:
    """An ADK 2 ``Workflow``: two agents from START at once, each one's calls under its own
    run; the function node that ends it (after a join) gives the answer."""
    from google.adk.workflow import START, JoinNode, Workflow

    def shout(node_input: dict[str, Any]) -> str:
        return " / ".join(str(v) for v in node_input.values()).upper()

    first, second = geo_agent(srv, "first"), geo_agent(srv, "second")
    join = JoinNode(name="join")
    flow = Workflow(name="flow", edges=[(START, first), (START, second), (first, join),
                                        (second, join), (join, shout)])
    (row,) = list(evaluate(flow, data=_dataset(db, ["Lima"], "workflow"), client=db))
    runs = _tree(db, row)
    for name in ("first", "second"):
        mine = [r for r in runs if r.run_type != "chain" and _parents(runs, r)[0] == name]
        assert [r.run_type for r in mine] == ["llm", "tool", "llm"]
    answer = row["run"].outputs["output"]  # (the join's inputs, shouted)
    assert answer.count(f"ANSWER: LIMA HAS {CITIES['Lima']} PEOPLE") == 2, answer


def test_an_app_keeps_its_plugins_and_gets_assays(srv: ScriptedModelServer, db: Client) -> None:
    """An ``App`` is run as it is (its own plugins called too), with assay's plugin added once."""
    from google.adk.plugins.base_plugin import BasePlugin

    seen: list[str] = []

    class Counting(BasePlugin):
        async def before_tool_callback(self, *, tool: Any, **_: Any) -> None:
            seen.append(tool.name)

    app = App(name="geo_app", root_agent=geo_agent(srv), plugins=[Counting(name="counting")])
    adapter = adapter_for(app)
    assert adapter is not None and adapter.name == "geo_app"
    (row,) = list(evaluate(app, data=_dataset(db, ["Tokyo"], "app"), client=db))
    assert seen == ["lookup_city"]
    assert [r.run_type for r in _tree(db, row)] == ["chain", "chain", "llm", "tool", "llm"]
    assert len(app.plugins) == 1  # the user's App is not changed


def test_errors_are_on_their_runs_and_the_experiment_goes_on(srv: ScriptedModelServer,
                                                             db: Client) -> None:
    """A raising tool: the tool run, the agent's and the example's root carry it; a failing
    model call: the llm run does; the other examples are answered."""
    rows = {_city(r): r for r in evaluate(geo_agent(srv),
                                          data=_dataset(db, ["Atlantis", "Sydney"], "bad"),
                                          client=db)}
    bad = _tree(db, rows["Atlantis"])
    tool = next(r for r in bad if r.run_type == "tool")
    assert tool.error and "no city named 'Atlantis'" in tool.error
    assert bad[0].error and "Atlantis" in bad[0].error  # the root
    assert bad[1].error and "Atlantis" in bad[1].error  # the agent
    assert _tree(db, rows["Sydney"])[0].error is None

    srv.fail_next(400, message="scripted refusal")  # (not retried)
    (row,) = list(evaluate(geo_agent(srv), data=_dataset(db, ["Berlin"], "model-fails"),
                           client=db))
    runs = _tree(db, row)
    llm = next(r for r in runs if r.run_type == "llm")
    assert llm.error and "scripted refusal" in llm.error
    assert runs[0].error and "scripted refusal" in runs[0].error
    assert not any(r.run_type == "tool" for r in runs)


def test_concurrency_8_keeps_examples_apart(srv: ScriptedModelServer, db: Client) -> None:
    check_examples_apart(db, geo_agent(srv), _dataset(db, list(CITIES) * 2, "many"), _city)


def test_the_three_evaluators_run_many_times_on_one_agent(srv: ScriptedModelServer) -> None:
    """Accuracy (a judge on the scripted model), performance and reliability take the agent
    object, called again and again (one runner, its HTTP clients kept across runs); the tool
    calls are read from the framework's own result and from a session's events."""
    agent = geo_agent(srv)
    run_accuracy_and_performance(srv, agent, "'Paris'", "'Osaka'")
    adapter = adapter_for(agent)
    reliability = ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Lima"}}])
    for _ in range(3):
        result = run_sync(adapter.arun("How many people live in 'Lima'?"))
        assert reliability.run(result).passed
    calls = extract_tool_calls(result)
    assert [(c.name, c.args) for c in calls] == [("lookup_city", {"city": "Lima"})]
    runner = adapter._get_runner()
    session = run_sync(runner.session_service.get_session(
        app_name=runner.app_name, user_id="assay", session_id=result.session_id))
    assert [(c.name, c.args) for c in extract_tool_calls(session)] == [
        ("lookup_city", {"city": "Lima"})]


def test_the_switch_and_the_match(srv: ScriptedModelServer, db: Client) -> None:
    """Framework tracing off: the agent runs, nothing of its is recorded. Outside an assay run,
    nothing is. google-genai's own objects are not taken for ADK agents."""
    set_framework_tracing(False)
    try:
        (row,) = list(evaluate(geo_agent(srv), data=_dataset(db, ["Madrid"], "off"),
                               client=db))
    finally:
        set_framework_tracing(None)
    assert row["run"].outputs["output"].startswith("Answer: Madrid")
    assert len(_tree(db, row)) == 1
    adapter = adapter_for(geo_agent(srv))
    before = len(list(db.list_runs()))
    run_sync(adapter.arun("How many people live in 'Madrid'?"))  # no assay run current
    db.flush()
    assert len(list(db.list_runs())) == before
    assert framework_of(types.Content(role="user")) is None
    assert framework_of(geo_agent(srv)) == "google-adk"
    with trace("by hand", client=db, enabled=True) as root:
        run_sync(adapter.arun("How many people live in 'Madrid'?"))
    db.flush()
    assert [r.run_type for r in _tree(db, {"run": root})] == ["chain", "chain", "llm", "tool",
                                                             "llm"]


# ADK's own OpenTelemetry spans, with an AssaySpanProcessor on the global tracer provider (a
# process of its own: the global provider is set once per process)
OTEL_SCRIPT = textwrap.dedent('''
    import asyncio, json, sys
    from opentelemetry import trace as otel
    from opentelemetry.sdk.trace import TracerProvider
    from assay.client import Client
    from assay.tracing.otel import AssaySpanProcessor

    client = Client()
    provider = TracerProvider()
    provider.add_span_processor(AssaySpanProcessor(client))
    otel.set_tracer_provider(provider)

    from google.adk.agents import Agent
    from google.adk.models import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types
    from assay.evals import ReliabilityEvaluator
    from assay.evaluation import evaluate
    from assay.tracing import trace

    def lookup_city(city: str) -> str:
        """The population of a city."""
        return f"{city} has 2102650 people"

    agent = Agent(name="geo", instruction="Answer with lookup_city.", tools=[lookup_city],
                  model=Gemini(model="gemini-2.5-flash", base_url=sys.argv[1],
                               client_kwargs={"api_key": "scripted"}))
    judge = ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Paris"}}],
                                 exact_match=True)
    [row] = evaluate(agent, client=client, evaluators=[judge.as_evaluator()], data=[
        {"inputs": {"question": "How many people live in 'Paris'?"}, "outputs": {}}])
    runner = InMemoryRunner(agent=agent, app_name="mine")  # no plugin: ADK's spans only

    async def ask(runner, app_name, city):
        session = await runner.session_service.create_session(app_name=app_name, user_id="u")
        message = types.Content(role="user", parts=[types.Part(text=f"Population of '{city}'?")])
        async for _ in runner.run_async(user_id="u", session_id=session.id,
                                        new_message=message):
            pass

    with trace("own runner", client=client, enabled=True) as mine:
        asyncio.run(ask(runner, "mine", "Lima"))
    client.flush()

    def tree(trace_id):
        return [[r.run_type, r.name, r.inputs if r.run_type == "tool" else r.prompt_tokens]
                for r in sorted(client.list_runs(trace_id=trace_id),
                                key=lambda r: r.dotted_order)]

    # a service's Runner with the plugin, tracing on, no assay run: a root of its own
    from google.adk.apps import App
    from assay.integrations import adk_plugin
    from assay.tracing import tracing_context

    served = InMemoryRunner(app=App(name="svc", root_agent=agent, plugins=[adk_plugin()]))
    with tracing_context(enabled=True, client=client, project_name="svc"):
        asyncio.run(ask(served, "svc", "Cairo"))
    client.flush()
    [served_root] = client.list_runs(project_name="svc", is_root=True)
    print(json.dumps({"evaluated": tree(row["run"].trace_id), "own": tree(mine.trace_id),
                      "scores": [r.score for r in row["evaluation_results"]["results"]],
                      "served": tree(served_root.id),
                      "svc": sorted(r.name for r in client.list_runs(project_name="svc"))}))
''')


def test_adks_own_spans_beside_the_plugin_are_stored_once(srv: ScriptedModelServer,
                                                          tmp_path: Path) -> None:
    """A user whose global tracer provider has an ``AssaySpanProcessor``: an agent assay runs
    is recorded by the plugin only (ADK's spans of it are left out, or every step would be
    stored twice and reliability would see each call twice); a Runner of the user's own with
    no plugin is recorded from ADK's spans (content on spans, as ADK 2 sends it with
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``); a service's Runner with
    the plugin, tracing on and no assay run, is a root of its own, and ADK's spans of it are
    left to the plugin too."""
    env = {**os.environ, "ASSAY_DATABASE_URL": f"sqlite:///{tmp_path / 'assay.db'}",
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}
    done = subprocess.run([sys.executable, "-c", OTEL_SCRIPT, srv.url], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r[:2] for r in out["evaluated"]] == [
        ["chain", "geo"], ["chain", "geo"], ["llm", GEMINI], ["tool", "lookup_city"],
        ["llm", GEMINI]]
    assert out["scores"] == [1.0]
    own = out["own"]
    assert own[0][:2] == ["chain", "own runner"]
    assert [r[0] for r in own].count("llm") == 2
    assert [r[2] for r in own if r[0] == "tool"] == [{"city": "Lima"}]
    assert all(r[2] > 0 for r in own if r[0] == "llm")
    # the service's invocation, a root of its own: the plugin's runs, ADK's spans not again
    assert [r[:2] for r in out["served"]] == [
        ["chain", "geo"], ["llm", GEMINI], ["tool", "lookup_city"], ["llm", GEMINI]]
    assert out["svc"] == sorted(r[1] for r in out["served"])  # (ADK's spans: not stored)


# -- ADK eval sets as datasets ---------------------------------------------------------------------
def _eval_set(path: Path) -> None:
    """An eval set as ADK writes one (its own models, dumped as ``adk eval`` stores them)."""
    from google.adk.evaluation.eval_case import (
        EvalCase,
        IntermediateData,
        Invocation,
        SessionInput,
    )
    from google.adk.evaluation.eval_set import EvalSet

    def turn(question: str, answer: str, city: str | None) -> Invocation:
        calls = [types.FunctionCall(name="lookup_city", args={"city": city})] if city else []
        return Invocation(
            user_content=types.Content(role="user", parts=[types.Part(text=question)]),
            final_response=types.Content(role="model", parts=[types.Part(text=answer)]),
            intermediate_data=IntermediateData(tool_uses=calls))

    cases = [EvalCase(eval_id=f"{c.lower()}-population", conversation=[
        turn(f"How many people live in '{c}'?", f"{c} has {CITIES[c]} people", c)])
        for c in ("Paris", "Tokyo")]
    cases.append(EvalCase(eval_id="two-turns", conversation=[
        turn("Hello", "Hi! Ask me about a city.", None),
        turn("How many people live in 'Cairo'?", f"Cairo has {CITIES['Cairo']} people",
             "Cairo")], session_input=SessionInput(app_name="geo", user_id="u",
                                                   state={"unit": "inhabitants"})))
    path.write_text(EvalSet(eval_set_id="cities", eval_cases=cases).model_dump_json(
        by_alias=True, exclude_none=True))


def test_an_adk_eval_set_is_a_dataset_the_agent_is_evaluated_on(
        srv: ScriptedModelServer, db: Client, tmp_path: Path, sqlite_url: str) -> None:
    """``assay datasets import cities.evalset.json``: one example per eval case (a case of two
    turns as a conversation), its expected tool calls and answer as the references; the agent
    evaluated on it scores reliability 1.0 where it calls the tool the set expects."""
    from typer.testing import CliRunner

    from assay.cli import app

    path = tmp_path / "cities.evalset.json"
    _eval_set(path)
    done = CliRunner().invoke(app, ["datasets", "import", str(path), "--db", sqlite_url])
    assert done.exit_code == 0, done.output
    examples = {e.metadata["adk_eval_id"]: e
                for e in db.list_examples(dataset_name="cities")}
    assert set(examples) == {"paris-population", "tokyo-population", "two-turns"}
    paris = examples["paris-population"]
    assert paris.inputs == {"question": "How many people live in 'Paris'?"}
    assert paris.outputs == {"answer": f"Paris has {CITIES['Paris']} people",
                             "expected_tool_calls": [{"name": "lookup_city",
                                                      "args": {"city": "Paris"}}]}
    assert examples["two-turns"].inputs == {"messages": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! Ask me about a city."},
        {"role": "user", "content": "How many people live in 'Cairo'?"}],
        "session_state": {"unit": "inhabitants"}}
    # (an instruction templated on the session's state, as ADK agents' often are)
    agent = Agent(name="geo", model=gemini(srv), tools=[lookup_city],
                  instruction="Answer with lookup_city's figure in {unit?}.")
    rows = list(evaluate(agent, data="cities", client=db,
                         evaluators=[ReliabilityEvaluator(None)]))
    assert sorted(r["evaluation_results"]["results"][0].score for r in rows) == [1.0] * 3
    for row in rows:
        assert row["run"].outputs["output"] == "Answer: " + row["example"].outputs["answer"]
        llm = _tree(db, row)[2]
        system = llm.inputs["system"][0]["content"]
        unit = "inhabitants" if "session_state" in row["example"].inputs else ""
        assert system.startswith(f"Answer with lookup_city's figure in {unit}."), system
        if unit:  # the conversation's earlier turns, as the session's history
            assert [(m["role"], m["parts"][0]["content"]) for m in llm.inputs["messages"]] == [
                ("user", "Hello"), ("assistant", "Hi! Ask me about a city."),
                ("user", "How many people live in 'Cairo'?")]


def test_the_older_test_json_and_bad_files(tmp_path: Path, db: Client) -> None:
    """ADK's older ``.test.json`` (a list of query / expected_tool_use / reference) imports
    too; a file that is not an eval set, or a case with no fixed conversation, is refused
    naming the file, and no dataset is made."""
    from google.adk.evaluation.conversation_scenarios import ConversationScenario
    from google.adk.evaluation.eval_case import EvalCase
    from google.adk.evaluation.eval_set import EvalSet

    from assay.errors import AssayError

    legacy = tmp_path / "old.test.json"
    legacy.write_text(json.dumps([{"query": "Population of 'Lima'?", "reference": "9943800",
                                   "expected_tool_use": [{"tool_name": "lookup_city",
                                                          "tool_input": {"city": "Lima"}}]}]))
    ds = db.import_dataset(legacy)
    (example,) = db.list_examples(dataset_id=ds.id)
    assert example.inputs == {"question": "Population of 'Lima'?"}
    assert example.outputs == {"answer": "9943800", "expected_tool_calls": [
        {"name": "lookup_city", "args": {"city": "Lima"}}]}

    bad = tmp_path / "bad.evalset.json"
    bad.write_text(json.dumps({"eval_set_id": "x", "eval_cases": [{"conversation": 3}]}))
    scenario = tmp_path / "simulated.evalset.json"
    scenario.write_text(EvalSet(eval_set_id="sim", eval_cases=[EvalCase(
        eval_id="sim-1", conversation_scenario=ConversationScenario(
            starting_prompt="Hi", conversation_plan="Ask about Lima."))]).model_dump_json())
    before = {d.name for d in db.list_datasets()}
    for path, words in ((bad, "not an ADK eval set"), (scenario, "'sim-1'")):
        with pytest.raises(AssayError) as err:
            db.import_dataset(path)
        assert str(path) in str(err.value) and words in str(err.value)
    assert {d.name for d in db.list_datasets()} == before


def test_an_output_schema_is_stored_as_text_and_as_its_fields(srv: ScriptedModelServer,
                                                              db: Client) -> None:
    """An agent with an ``output_schema`` (ADK has the model answer in its JSON): the answer is
    stored as text and, as the other frameworks' output types are, as
    ``outputs["structured_output"]``; an agent without one has none."""
    from pydantic import BaseModel

    class Figure(BaseModel):
        city: str
        population: int

    agent = Agent(name="figures", model=gemini(srv), instruction="Give the figure.",
                  output_schema=Figure)
    ds = db.create_dataset("schema")
    db.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"question": "The population of 'Lima'?"}}])
    (row,) = list(evaluate(agent, data="schema", client=db))
    out = row["run"].outputs
    assert out["structured_output"]["city"] == "Lima"
    assert json.loads(out["output"]) == out["structured_output"]
    Figure.model_validate(out["structured_output"])
    (plain,) = list(evaluate(geo_agent(srv), data=_dataset(db, ["Lima"], "plain"), client=db))
    assert "structured_output" not in plain["run"].outputs
