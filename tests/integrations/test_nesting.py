"""Runs started by code inside a framework's step nest under that step's run.

A LangGraph node or tool, or an Agents SDK function tool, is user code: it calls a ``@traceable``
helper, a ``trace()`` block, another framework's agent. Those runs belong under the step that
called them (as LangSmith nests them), in the same trace, under ``evaluate()`` and outside any
assay run where tracing is on. The real packages against the scripted model on 127.0.0.1.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="needs assay[langgraph]")
pytest.importorskip("agents", reason="needs assay[openai-agents]")

from agents import Runner, function_tool, set_trace_processors
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from assay._sync import run_sync
from assay.client import Client
from assay.demo import ScriptedModelServer
from assay.evals import ReliabilityEvaluator
from assay.evaluation import evaluate
from assay.integrations import _openai_agents, instrument
from assay.tracing import get_current_run_tree, trace, traceable, tracing_context

from .conftest import CITIES, city_dataset, population
from .conftest import flat_runs as _flat
from .test_openai_agents import geo_agent


@pytest.fixture(scope="module", autouse=True)
def hooks() -> None:
    """Both frameworks' hooks, the Agents SDK's processor alone (nothing exported to OpenAI)."""
    instrument("langchain")
    instrument("openai-agents")
    set_trace_processors([_openai_agents.processor()])


@traceable(name="atlas")
def atlas(city: str) -> str:  # sync: the C traced call where it is built
    return population(city)


@traceable(name="normalise")
def normalise(text: str) -> str:
    return text.strip()


@traceable(name="count_turn")
async def count_turn(n: int) -> int:  # async: the Python wrapper
    return n


@tool
def lookup_city(city: str) -> str:
    """The population of a city."""
    return atlas(city)


def city_graph(srv: ScriptedModelServer, tools: list[Any]) -> Any:
    """prepare (a node of user code: a traced helper, a ``trace`` block) -> model <-> tools."""
    model = ChatOpenAI(model="gpt-4o-mini", base_url=srv.base_url, api_key="scripted",
                       max_retries=0).bind_tools(tools)

    def prepare(state: MessagesState) -> dict[str, Any]:  # sync: run in LangGraph's threads
        normalise(str(state["messages"][-1].content))
        with trace("check", inputs={"n": len(state["messages"])}) as run:
            run.outputs = {"ok": True}
        return {}

    async def call_model(state: MessagesState) -> dict[str, Any]:
        await count_turn(len(state["messages"]))
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("prepare", prepare)
    g.add_node("model", call_model)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile()


def _by_name(runs: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for run in runs:
        out.setdefault(run.name, []).append(run)
    return out


def _check_city_trace(runs: list[Any], city: str) -> None:
    """The traced helpers sit under the graph step that called them, in its trace."""
    by_id, named = {r.id: r for r in runs}, _by_name(runs)
    (prepare,) = named["prepare"]
    assert [by_id[r.parent_run_id].name for r in named["normalise"]] == ["prepare"]
    assert [by_id[r.parent_run_id].name for r in named["check"]] == ["prepare"]
    assert named["normalise"][0].parent_run_id == prepare.id
    assert [by_id[r.parent_run_id].name for r in named["count_turn"]] == ["model", "model"]
    (tool_run,) = named["lookup_city"]
    (helper,) = named["atlas"]
    assert helper.parent_run_id == tool_run.id
    assert helper.inputs == {"city": city} and str(CITIES[city]) in str(helper.outputs)
    assert len({r.trace_id for r in runs}) == 1


def test_traced_helpers_in_a_graphs_nodes_and_tools_nest_under_them_in_evaluate(
        srv: ScriptedModelServer, db: Client) -> None:
    data = city_dataset(db, ["Paris", "Berlin"])
    rows = list(evaluate(city_graph(srv, [lookup_city]), data=data, client=db,
                         evaluators=[ReliabilityEvaluator(None)], max_concurrency=2))
    db.flush()
    assert len(rows) == 2
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        runs = _flat(db.read_run(row["run"].id, load_child_runs=True))
        _check_city_trace(runs, city)
        assert runs[0].id == row["run"].id  # the example's root holds it all
        assert row["evaluation_results"]["results"][0].score == 1


def test_outside_any_run_the_helpers_join_the_graphs_trace(srv: ScriptedModelServer,
                                                           db: Client) -> None:
    """Tracing on, no assay run: one trace per graph call, the helpers inside it (before, each
    helper was a trace of its own)."""
    project = f"nest-{uuid.uuid4().hex[:8]}"
    graph = city_graph(srv, [lookup_city])
    with tracing_context(enabled=True, client=db, project_name=project):
        run_sync(graph.ainvoke({"messages": [("user", "How many people live in Lima?")]}))
    db.flush()
    roots = list(db.list_runs(project_name=project, is_root=True))
    assert [r.name for r in roots] == ["LangGraph"]
    _check_city_trace(list(db.list_runs(project_name=project, trace_id=roots[0].id)), "Lima")


def test_current_run_tree_in_a_tool_is_the_tools_run(srv: ScriptedModelServer,
                                                     db: Client) -> None:
    """``get_current_run_tree()`` inside a tool answers the tool's run (metadata set on it
    is stored on it), as LangSmith's does."""
    seen: list[Any] = []

    @tool
    def tagged_lookup(city: str) -> str:
        """The population of a city."""
        run = get_current_run_tree()
        seen.append(run)
        run.metadata["source"] = "atlas"
        return population(city)

    project = f"nest-{uuid.uuid4().hex[:8]}"
    with tracing_context(enabled=True, client=db, project_name=project), trace("outer") as outer:
        run_sync(city_graph(srv, [tagged_lookup]).ainvoke(
            {"messages": [("user", "How many people live in Cairo?")]}))
    db.flush()
    runs = list(db.list_runs(project_name=project, trace_id=outer.id))
    (tool_run,) = [r for r in runs if r.run_type == "tool"]
    assert [str(r.id) for r in seen] == [str(tool_run.id)]
    assert tool_run.extra["metadata"]["source"] == "atlas"


def test_a_helper_waits_for_its_step_being_built_on_another_thread(db: Client) -> None:
    """A step's run is built from the callback log by whichever thread settles it first (the
    writer at its tick, a reader). A helper started inside the step while another thread has
    taken the step's start from the log but not built it yet waits for that build: it nested
    under the run above the step (a failure seen once in CI)."""
    from langchain_core.runnables import RunnableLambda

    from assay.integrations._langchain import handler

    capture = handler()
    taken, step_running = threading.Event(), threading.Event()

    def slow_settle() -> None:  # a settle that has popped the log and is still building
        with capture._lock:
            step_running.wait(10)
            events = list(capture._log)
            capture._log.clear()
            taken.set()
            time.sleep(0.3)
            capture._log.extendleft(reversed(events))

    def step(x: str) -> str:
        step_running.set()
        assert taken.wait(10)
        return normalise(x)

    settler = threading.Thread(target=slow_settle)
    project = f"nest-{uuid.uuid4().hex[:8]}"
    with tracing_context(enabled=True, client=db, project_name=project), trace("outer") as outer:
        settler.start()
        RunnableLambda(step, name="step").invoke(" Lima ")
    settler.join()
    db.flush()
    runs = {r.name: r for r in db.list_runs(project_name=project, trace_id=outer.id)}
    assert runs["step"].parent_run_id == outer.id
    assert runs["normalise"].parent_run_id == runs["step"].id


# -- another framework's agent inside a graph's tool ---------------------------------------------
@function_tool
def sdk_lookup_city(city: str) -> str:
    """The population of a city."""
    return atlas(city)


def _sdk_tool(srv: ScriptedModelServer) -> Any:
    @tool
    async def ask_geo(city: str) -> str:
        """Ask the geography agent how many people live in a city."""
        result = await Runner.run(geo_agent(srv, sdk_lookup_city),
                                  f"How many people live in {city}? Use sdk_lookup_city.")
        return str(result.final_output)

    return ask_geo


def _check_sdk_inside_tool(runs: list[Any], city: str) -> None:
    """The SDK's runs (its workflow, the agent, its model and tool calls) under the graph's
    tool run that ran it, the traced helper under the SDK's tool run, all one trace."""
    by_id, named = {r.id: r for r in runs}, _by_name(runs)
    (helper,) = named["atlas"]
    (sdk_tool,) = named["sdk_lookup_city"]
    assert helper.parent_run_id == sdk_tool.id and helper.inputs == {"city": city}
    above, run = [], sdk_tool
    while run.parent_run_id is not None:
        run = by_id[run.parent_run_id]
        above.append(run.name)
    assert above.index("geo") < above.index("ask_geo") < above.index("tools")
    assert above[-1] == "LangGraph"
    llms = [r for r in runs if r.run_type == "llm"]
    assert len(llms) == 4  # the graph's two model calls, the agent's two
    assert sum("ask_geo" in _names_above(r, by_id) for r in llms) == 2
    assert len({r.trace_id for r in runs}) == 1


def _names_above(run: Any, by_id: dict[Any, Any]) -> list[str]:
    names = []
    while run.parent_run_id in by_id:
        run = by_id[run.parent_run_id]
        names.append(run.name)
    return names


def test_an_agents_sdk_agent_in_a_graphs_tool_nests_under_it(srv: ScriptedModelServer,
                                                              db: Client) -> None:
    graph = city_graph(srv, [_sdk_tool(srv)])
    data = city_dataset(db, ["Osaka", "Tokyo"])
    rows = list(evaluate(graph, data=data, client=db, max_concurrency=2))
    db.flush()
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        _check_sdk_inside_tool(_flat(db.read_run(row["run"].id, load_child_runs=True)), city)

    project = f"nest-{uuid.uuid4().hex[:8]}"  # and outside any assay run, tracing on
    with tracing_context(enabled=True, client=db, project_name=project):
        run_sync(graph.ainvoke({"messages": [("user", "How many people live in Sydney?")]}))
    db.flush()
    roots = list(db.list_runs(project_name=project, is_root=True))
    assert [r.name for r in roots] == ["LangGraph"]
    _check_sdk_inside_tool(list(db.list_runs(project_name=project, trace_id=roots[0].id)),
                           "Sydney")


def test_a_graph_in_an_agents_sdk_tool_nests_under_it(srv: ScriptedModelServer,
                                                      db: Client) -> None:
    """The other way round: the SDK's agent is the target, its function tool runs a LangGraph
    graph, whose runs (a call's outermost step asks which step is running) hang from the
    SDK's tool run."""
    graph = city_graph(srv, [lookup_city])

    @function_tool
    async def ask_graph(city: str) -> str:
        """Ask the graph how many people live in a city."""
        state = await graph.ainvoke({"messages": [("user", f"How many people live in {city}?")]})
        return str(state["messages"][-1].content)

    data = city_dataset(db, ["Madrid"])
    (row,) = evaluate(geo_agent(srv, ask_graph), data=data, client=db)
    runs = _flat(db.read_run(row["run"].id, load_child_runs=True))
    by_id, named = {r.id: r for r in runs}, _by_name(runs)
    (sdk_tool,) = named["ask_graph"]
    (graph_root,) = [r for r in named["LangGraph"] if by_id[r.parent_run_id].name != "LangGraph"]
    assert graph_root.parent_run_id == sdk_tool.id
    (helper,) = named["atlas"]
    assert "ask_graph" in _names_above(helper, by_id) and helper.inputs == {"city": "Madrid"}
    assert len({r.trace_id for r in runs}) == 1


def test_a_pydantic_ai_agent_in_a_graphs_tool_nests_under_it(srv: ScriptedModelServer,
                                                             db: Client) -> None:
    """A pydantic-ai agent a graph's tool runs (traced through pydantic-ai's instrumentation,
    as a plain function calling an agent is): its agent, model and tool runs under the
    graph's tool run, in the example's trace."""
    pytest.importorskip("pydantic_ai", reason="needs assay[pydantic-ai]")
    from .conftest import make_pydantic_agent

    weather = make_pydantic_agent(srv.base_url)

    @tool
    async def ask_weather(city: str) -> str:
        """Ask the weather agent about a city."""
        return (await weather.run(f"What is the weather in {city}?")).output

    data = city_dataset(db, ["Lima"], question="What is the weather in {city}?")
    (row,) = evaluate(city_graph(srv, [ask_weather]), data=data, client=db)
    runs = _flat(db.read_run(row["run"].id, load_child_runs=True))
    by_id, named = {r.id: r for r in runs}, _by_name(runs)
    (ask,) = named["ask_weather"]
    below = [r for r in runs if "ask_weather" in _names_above(r, by_id)]
    assert {r.run_type for r in below} >= {"chain", "llm", "tool"}, [r.name for r in below]
    assert [r.name for r in below if r.run_type == "tool"] == ["get_weather"]
    assert all(r.trace_id == ask.trace_id for r in below)
