"""LangGraph / LangChain as they are: the real packages against the scripted model on 127.0.0.1.

A prebuilt ReAct agent and a hand-built StateGraph with a ToolNode, both on ``ChatOpenAI``
pointed at ``ScriptedModelServer``. No decorator or wrapper is written here: the adapter maps
queries and results, LangChain's own callback system (through assay's configure hook) records
the llm and tool runs.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

import pytest
from compiled_paths import is_in_use, needs_c

pytest.importorskip("langgraph", reason="needs assay[langgraph]")

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from assay.client import Client
from assay.demo import ScriptedModelServer, ScriptedReply
from assay.errors import InvalidInputError
from assay.evals import (
    AccuracyEvaluator,
    PerformanceEvaluator,
    ReliabilityEvaluator,
)
from assay.evaluation import evaluate
from assay.integrations import adapter_for, set_framework_tracing
from assay.llm import OpenAIJudge
from assay.tracing import tracing_context

from .conftest import (
    CITIES,
    check_parallel_calls,
    city_dataset,
    get_time,
    get_weather,
    population,
    run_accuracy_and_performance,
)
from .conftest import flat_runs as _flat
from .conftest import run_tree as _tree

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


@tool
def lookup_city(city: str) -> str:
    """The population of a city."""
    return population(city)


def _model(srv: ScriptedModelServer, *, streaming: bool = False) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=srv.base_url, api_key="scripted",
                      max_retries=0, streaming=streaming, stream_usage=streaming)


def react_agent(srv: ScriptedModelServer, *, streaming: bool = False) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(_model(srv, streaming=streaming), [lookup_city])


def state_graph(srv: ScriptedModelServer) -> Any:
    """A hand-built graph: model node -> ToolNode -> model, until the model stops calling."""
    model = _model(srv, streaming=True).bind_tools([lookup_city])

    def call_model(state: MessagesState) -> dict[str, Any]:  # sync: run in LangGraph's threads
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("model", call_model)
    g.add_node("tools", ToolNode([lookup_city]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile()


def _dataset(client: Client, cities: list[str]) -> str:
    return city_dataset(client, cities, answer=lambda c: str(CITIES.get(c, "")))


def test_react_agent_in_evaluate_stores_llm_and_tool_runs(srv: ScriptedModelServer,
                                                          db: Client) -> None:
    agent = react_agent(srv)
    data = _dataset(db, ["Paris", "Berlin"])
    results = evaluate(agent, data=data, client=db,
                       evaluators=[ReliabilityEvaluator(None).as_evaluator(client=db)])
    rows = list(results)
    assert len(rows) == 2
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        # outputs are JSON-safe: the answer text and the serialized messages
        outputs = row["run"].outputs
        assert outputs["output"] == f"Answer: {city} has {CITIES[city]} people"
        assert [m["role"] for m in outputs["messages"]] == ["user", "assistant", "tool",
                                                            "assistant"]
        runs = _tree(db, row)
        llms = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(llms) == 2 and len(tools) == 1
        for llm in llms:
            meta = llm.extra["metadata"]
            assert meta["ls_provider"] == "openai" and meta["ls_model_name"] == "gpt-4o-mini"
            assert llm.prompt_tokens > 0 and llm.completion_tokens > 0
            assert llm.total_cost and llm.total_cost > 0  # priced by genai-prices
            assert llm.inputs["messages"][0] == {"role": "user",
                                                 "content": f"How many people live in {city}?"}
        assert tools[0].name == "lookup_city" and tools[0].inputs == {"city": city}
        assert tools[0].outputs == {"output": f"{city} has {CITIES[city]} people"}
        # nested as LangChain nested it: root -> LangGraph -> node -> ... -> tool
        names = {r.id: r.name for r in runs}
        assert names[tools[0].parent_run_id] == "tools"
        top = [r.name for r in runs if r.parent_run_id == row["run"].id]
        assert top == ["LangGraph"]  # the graph's own chain run, under the example's root
        assert not any("ChannelWrite" in r.name for r in runs)  # hidden steps left out
        scores = {r.key: r.score for r in row["evaluation_results"]["results"]}
        assert scores == {"reliability": 1.0}


def test_langchain_create_agent_is_evaluated_and_traced_as_a_graph(srv: ScriptedModelServer,
                                                                   db: Client) -> None:
    """LangChain 1.x's ``create_agent`` (where LangGraph's deprecation of
    ``create_react_agent`` sends users; a LangGraph graph too): the three evaluators take it,
    ``evaluate`` stores its llm and tool runs under the graph's nodes, the tool calls come
    from the trace and from the graph state's messages."""
    from langchain.agents import create_agent

    agent = create_agent(_model(srv), [lookup_city])
    results = evaluate(agent, data=_dataset(db, ["Lima", "Cairo"]), client=db,
                       evaluators=[ReliabilityEvaluator(None).as_evaluator(client=db)])
    for row in results:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        assert row["run"].outputs["output"] == f"Answer: {city} has {CITIES[city]} people"
        runs = _tree(db, row)
        names = {r.id: r.name for r in runs}
        llms = [r for r in runs if r.run_type == "llm"]
        (tool_run,) = [r for r in runs if r.run_type == "tool"]
        assert len(llms) == 2 and all(names[r.parent_run_id] == "model" for r in llms)
        assert all(r.total_cost and r.prompt_tokens for r in llms)
        assert tool_run.inputs == {"city": city} and names[tool_run.parent_run_id] == "tools"
        assert [r.name for r in runs if r.parent_run_id == row["run"].id] == ["LangGraph"]
        assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {
            "reliability": 1.0}
    judge = OpenAIJudge("gpt-4o-mini", base_url=srv.base_url, api_key="scripted")
    accuracy = AccuracyEvaluator(judge, agent, "How many people live in Lima?",
                                 str(CITIES["Lima"])).run()
    assert accuracy.average_score == 9.0
    assert PerformanceEvaluator(agent, "How many people live in Lima?", num_iterations=2,
                                warmup_runs=0).run().latency_stats["average"] > 0
    state = agent.invoke({"messages": [("user", "How many people live in Cairo?")]})
    assert ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Cairo"}}]).run(
        state).passed


def test_a_graph_with_a_checkpointer_runs_each_call_on_a_thread_of_its_own(
        srv: ScriptedModelServer, db: Client) -> None:
    """A graph compiled with a checkpointer (memory, persistence: common in production)
    refuses a call without a ``thread_id``. Each call assay makes is a conversation of its
    own on a new thread: no error, and no example's answer carries the messages of one run
    before it (the state of each is its own four messages)."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    agent = create_agent(_model(srv), [lookup_city], checkpointer=saver)
    results = evaluate(agent, data=_dataset(db, ["Osaka", "Sydney"]), client=db,
                       num_repetitions=2, evaluators=[ReliabilityEvaluator(None)])
    rows = list(results)
    assert len(rows) == 4
    for row in rows:
        assert row["run"].error is None
        assert [m["role"] for m in row["run"].outputs["messages"]] == [
            "user", "assistant", "tool", "assistant"]
        assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {
            "reliability": 1.0}
    judge = OpenAIJudge("gpt-4o-mini", base_url=srv.base_url, api_key="scripted")
    accuracy = AccuracyEvaluator(judge, agent, "How many people live in Osaka?",
                                 str(CITIES["Osaka"]), num_iterations=2).run()
    assert accuracy.average_score == 9.0
    threads = set(saver.storage)  # the saver's checkpoints, by thread id
    assert len(threads) == 6 and all(t.startswith("assay-") for t in threads)
    # a thread of the caller's own (with_run_args' config): the conversation goes on there
    from assay.evals import AgentUnderTest
    from assay.integrations import with_run_args

    mine = with_run_args(agent, config={"configurable": {"thread_id": "mine"}})
    first = AgentUnderTest(mine).call("How many people live in Osaka?")
    second = AgentUnderTest(mine).call("How many people live in Sydney?")
    assert len(first["messages"]) == 4 and len(second["messages"]) == 8
    assert "mine" in saver.storage
    with pytest.raises(InvalidInputError, match=r"LangChain runnable: deps \(it takes config, "
                                                 r"stream\)"):
        with_run_args(agent, deps=1)


def test_a_response_format_is_stored_under_the_key_every_adapter_uses(
        srv: ScriptedModelServer, db: Client) -> None:
    """``create_agent(..., response_format=Model)``: the state's ``structured_response`` is
    kept, and its fields are ``outputs["structured_output"]`` too, as pydantic-ai's, the
    Agents SDK's, Upsonic's and CrewAI's structured answers are; the tool call is judged."""
    from langchain.agents import create_agent
    from pydantic import BaseModel

    class CityFigure(BaseModel):
        city: str
        population: int

    agent = create_agent(_model(srv), [lookup_city], response_format=CityFigure)
    data = _dataset(db, ["Lima"])
    (row,) = list(evaluate(agent, data=data, client=db, evaluators=[ReliabilityEvaluator(None)]))
    figure = {"city": "Lima", "population": CITIES["Lima"]}
    assert row["run"].outputs["structured_output"] == figure
    assert row["run"].outputs["structured_response"] == figure
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    plain = list(evaluate(create_agent(_model(srv), [lookup_city]), data=data, client=db))
    assert "structured_output" not in plain[0]["run"].outputs
    # a runnable's own model answer (with_structured_output's) is one; a message list is not
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    from assay.evals import AgentUnderTest

    typed = AgentUnderTest(RunnableLambda(lambda q: CityFigure(city="Lima", population=1)))
    assert typed.adapter.outputs(typed.call("q"))["structured_output"] == {"city": "Lima",
                                                                   "population": 1}
    chat = AgentUnderTest(RunnableLambda(lambda q: [AIMessage("one"), AIMessage("two")]))
    assert "structured_output" not in chat.adapter.outputs(chat.call("q"))


def test_a_graph_of_its_own_state_takes_a_string_on_its_question_channel() -> None:
    """A graph whose state has no ``messages`` but a question-like channel: a plain string
    query goes to that channel (LangGraph refused a bare string: "Expected dict"); a dict is
    passed as it is, and a graph with no such channel gets the string unchanged."""
    from typing import TypedDict

    from assay.evals import AgentUnderTest

    class QA(TypedDict):
        question: str
        answer: str

    def respond(state: QA) -> dict[str, str]:
        return {"answer": state["question"].upper()}

    g = StateGraph(QA)
    g.add_node("respond", respond)
    g.add_edge(START, "respond")
    g.add_edge("respond", END)
    graph = g.compile()
    adapter = adapter_for(graph)
    assert adapter is not None
    assert adapter.prepare("how big is Lima?") == {"question": "how big is Lima?"}
    assert adapter.prepare({"question": "q", "answer": ""}) == {"question": "q", "answer": ""}
    assert AgentUnderTest(graph).call("how big is Lima?")["answer"] == "HOW BIG IS LIMA?"
    perf = PerformanceEvaluator(graph, "how big is Lima?", num_iterations=2, warmup_runs=0).run()
    assert perf.latency_stats["average"] > 0

    class Other(TypedDict):
        payload: str

    h = StateGraph(Other)
    h.add_node("echo", lambda state: state)
    h.add_edge(START, "echo")
    h.add_edge("echo", END)
    other = adapter_for(h.compile())
    assert other is not None and other.prepare("as is") == "as is"


def test_state_graph_streams_first_token_and_tool_calls_from_state(
        srv: ScriptedModelServer, db: Client) -> None:
    graph = state_graph(srv)
    adapter = adapter_for(graph)
    assert adapter is not None and adapter.framework == "langchain"
    results = evaluate(graph, data=_dataset(db, ["Tokyo"]), client=db,
                       evaluators=[ReliabilityEvaluator(["lookup_city"])])
    (row,) = list(results)
    runs = _tree(db, row)
    llms = [r for r in runs if r.run_type == "llm"]
    assert len(llms) == 2
    for llm in llms:
        assert any(e["name"] == "new_token" for e in llm.events)  # streamed: first token
        assert llm.first_token_time is not None and llm.first_token_time >= llm.start_time
        assert llm.total_tokens > 0  # usage chunk of the stream
    tool_run = next(r for r in runs if r.run_type == "tool")
    assert tool_run.inputs == {"city": "Tokyo"}
    # the framework's own result: its message list gives the same call
    state = graph.invoke({"messages": [("user", "How many people live in Osaka?")]})
    calls = adapter.tool_calls(state)  # (a plain dict: the adapter knows it is a graph state)
    assert [(c.name, c.args) for c in calls] == [("lookup_city", {"city": "Osaka"})]
    assert ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Osaka"}}]).run(
        state).passed


def test_query_mapping() -> None:
    graph = state_graph_for_mapping()
    adapter = adapter_for(graph)
    assert adapter.prepare("hi") == {"messages": [("user", "hi")]}
    fits = {"messages": [("user", "hi")]}
    assert adapter.prepare(fits) == fits  # already the state: passed through
    assert adapter.prepare({"question": "hi"}) == {"messages": [("user", "hi")]}


def state_graph_for_mapping() -> Any:
    g = StateGraph(MessagesState)
    g.add_node("echo", lambda s: {"messages": []})
    g.add_edge(START, "echo")
    return g.compile()


def test_tool_error_is_on_the_tool_run_and_the_experiment_goes_on(
        srv: ScriptedModelServer, db: Client) -> None:
    agent = react_agent(srv)
    results = evaluate(agent, data=_dataset(db, ["Atlantis", "Lima"]), client=db,
                       evaluators=[ReliabilityEvaluator(None)])
    rows = {r["example"].inputs["question"].split()[-1].rstrip("?"): r for r in results}
    assert set(rows) == {"Atlantis", "Lima"}
    bad = _tree(db, rows["Atlantis"])
    tool_run = next(r for r in bad if r.run_type == "tool")
    assert tool_run.error and "LookupError" in tool_run.error and "Atlantis" in tool_run.error
    root = bad[0]
    assert root.error and "Atlantis" in root.error  # the example's root carries it
    good = _tree(db, rows["Lima"])
    assert good[0].error is None
    assert next(r for r in good if r.run_type == "tool").outputs == {
        "output": f"Lima has {CITIES['Lima']} people"}


def test_a_tool_call_the_model_garbled_is_kept_in_the_llm_runs_output(
        srv: ScriptedModelServer, db: Client) -> None:
    """Arguments that are not JSON: LangChain keeps the call apart (``invalid_tool_calls``)
    and the graph runs no tool; the llm run's output shows what the model sent, and why it
    was not run (it showed a reply with no call at all)."""
    srv.script(ScriptedReply(tool_calls=[{"name": "lookup_city", "arguments": '{"city": "Li'}]))
    project = f"garbled-{uuid.uuid4().hex[:8]}"
    with tracing_context(enabled=True, client=db, project_name=project):
        react_agent(srv).invoke({"messages": [("user", "How many people live in Lima?")]})
    db.flush()
    runs = list(db.list_runs(project_name=project))
    assert not [r for r in runs if r.run_type == "tool"]
    (llm,) = [r for r in runs if r.run_type == "llm"]
    (message,) = llm.outputs["messages"]
    (call,) = message["invalid_tool_calls"]
    assert call["name"] == "lookup_city" and call["args"] == '{"city": "Li'
    assert call["error"]


def test_concurrency_8_keeps_examples_apart(srv: ScriptedModelServer, db: Client) -> None:
    agent = react_agent(srv)
    cities = list(CITIES) * 2
    results = evaluate(agent, data=_dataset(db, cities), client=db, max_concurrency=8,
                       evaluators=[ReliabilityEvaluator(None)])
    rows = list(results)
    assert len(rows) == 16
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        runs = _tree(db, row)
        tools = [r for r in runs if r.run_type == "tool"]
        assert [t.inputs for t in tools] == [{"city": city}]
        assert {r.trace_id for r in runs} == {row["run"].id}
        assert sum(r.run_type == "llm" for r in runs) == 2
        scores = {r.key: r.score for r in row["evaluation_results"]["results"]}
        assert scores["reliability"] == 1.0


def test_each_evaluator_runs_many_times_on_one_agent(srv: ScriptedModelServer) -> None:
    agent = react_agent(srv)
    run_accuracy_and_performance(srv, agent, "Paris", "Cairo")
    reliability = ReliabilityEvaluator(["lookup_city"])
    for _ in range(3):
        state = agent.invoke({"messages": [("user", "How many people live in Cairo?")]})
        assert reliability.run(state).passed


def test_switch_off_records_no_framework_runs(srv: ScriptedModelServer, db: Client) -> None:
    set_framework_tracing(False)
    try:
        results = evaluate(react_agent(srv), data=_dataset(db, ["Sydney"]), client=db,
                           evaluators=[ReliabilityEvaluator(None).as_evaluator(client=db),
                                       ReliabilityEvaluator(["lookup_city"])])
        (row,) = list(results)
        assert row["run"].outputs["output"].startswith("Answer: Sydney")
        assert len(_tree(db, row)) == 1  # the example's root alone
        # no tool runs: the calls are read from the graph's own result (its messages)
        assert [(r.key, r.score) for r in row["evaluation_results"]["results"]] == [
            ("reliability", 1.0), ("reliability", 1.0)]
        stored = db.read_run(row["run"].id)  # read without its children, as a user may
        result = ReliabilityEvaluator([{"name": "lookup_city", "args": {"city": "Sydney"}}]
                                      ).run(stored)
        assert result.passed and result.actual_tool_calls == ["lookup_city"]
    finally:
        set_framework_tracing(None)


def test_step_conversion_reuses_a_message_dict_only_while_the_message_is_unchanged() -> None:
    """A message in every step's inputs and outputs is converted once, then taken from a memo:
    the same dict while the message's fields are the same objects, a new one once a field is set
    anew (LangGraph names an agent's answer after its llm run ended), and ``to_json`` (what the
    adapter hands to callers) always a fresh copy."""
    from langchain_core.messages import AIMessage, HumanMessage

    from assay.integrations._langchain import _step_json, to_json

    ai = AIMessage("", tool_calls=[{"name": "lookup_city", "args": {"city": "Paris"},
                                    "id": "c1"}])
    state = {"messages": [HumanMessage("hi"), ai]}
    first = _step_json(state)
    again = _step_json({"messages": state["messages"]})
    assert again == first and again["messages"][1] is first["messages"][1]
    assert first["messages"][1] == {"role": "assistant", "content": "",
                                    "tool_calls": [{"id": "c1", "name": "lookup_city",
                                                    "args": {"city": "Paris"}}]}
    ai.name = "geo"  # set after the model's run, as create_react_agent(name=...) does
    named = _step_json(state)["messages"][1]
    assert named is not first["messages"][1] and named["name"] == "geo"
    ai.content = "Paris has 2102650 people"
    assert _step_json(state)["messages"][1]["content"] == "Paris has 2102650 people"
    fresh = to_json(state)
    assert fresh == _step_json(state) and fresh["messages"][1] is not named
    fresh["messages"][1]["content"] = "changed by a caller"
    assert _step_json(state)["messages"][1]["content"] == "Paris has 2102650 people"


@needs_c
def test_the_compiled_step_conversion_gives_the_pythons_result() -> None:
    """``_step_json``'s walk in C (``_cstep.c``) against the Python it stands in for, on the
    values a graph's steps carry and the odd ones: messages, tuples, keys that are not text,
    mappings and sets of other classes, a LangGraph ``Send``, a pydantic model, subclasses of
    the scalars, and nesting past the depth limit (the repr)."""
    import enum
    from collections import OrderedDict

    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.types import Command, Send
    from pydantic import BaseModel

    from assay.integrations import _langchain
    from assay.tracing._run_tree import SPEEDUPS

    assert is_in_use(getattr(SPEEDUPS, "step_json", None), "assay.tracing._speedups")

    class Kind(enum.Enum):
        A = "a"

    class Model(BaseModel):
        x: int
        tags: list[str]

    class Text(str):
        pass

    ai = AIMessage("", tool_calls=[{"name": "lookup_city", "args": {"city": "Paris"},
                                    "id": "c1"}])
    deep: Any = "bottom"
    for _ in range(30):
        deep = {"d": [deep]}
    values = [
        {"messages": [HumanMessage("hi"), ai, ToolMessage("2102650", tool_call_id="c1")],
         "remaining_steps": 24},
        [Send("tools", {"messages": [ai], "n": (1, 2.5, None, True)})],
        {1: "int key", None: ["none key"], (1, 2): {"tuple": "key"}, "ok": Kind.A},
        OrderedDict(a=frozenset({3}), b={4}), Model(x=1, tags=["t"]), Text("sub"), deep,
        ("a", ["b", {"c": (Text("d"),)}]), 7, None, "plain",
        # walked on in C from inside a Send or another mapping: the limit still counts from
        # the step's top (a value at depth 24 inside is converted, one deeper is its repr)
        [Send("tools", {"state": deep})], {"x": [Send("tools", [deep])]},
        OrderedDict(deep=deep, sends=[Send("a", OrderedDict(m=[ai]))]),
        # a node's Command (LangChain 1.x's create_agent): its fields walked like the rest
        Command(update={"messages": [ai]}, goto=[Send("tools", {"messages": [ai]})]),
        {"out": Command(goto="model", resume={"deep": deep})},
    ]
    for value in values:
        assert _langchain._step_json(value) == _langchain._step_json_py(value), value
    command = _langchain._step_json(Command(update={"messages": [ai]}, goto=[Send("t", 1)]))
    assert command == {"graph": None, "resume": None,
                       "update": {"messages": [_langchain._message_json(ai)]},
                       "goto": [{"send": "t", "arg": 1}]}
    step = _langchain._step_json  # the C walk, its depth after the value
    assert step({"a": ["b"]}, 23) == {"a": ["b"]}
    assert step({"a": ["b"]}, 24) == {"a": repr(["b"])}  # list too deep
    assert step({"a": 1}, 25) == repr({"a": 1})  # past the limit
    assert step({"a": 1}, 24) == {"a": 1}
    with pytest.raises(TypeError, match="depth: int"):
        step({"a": 1}, "deep")


@needs_c
def test_a_steps_json_column_splices_each_messages_text_made_once() -> None:
    """The writer's JSON column of a step's state (``Deferred.encode``: ``_step_fragments``,
    each message's dict as an ``orjson.Fragment`` of its text) is the text the dicts give,
    byte for byte: for states sharing messages, a message set anew, text the column escapes
    (NUL, U+FDD0, a lone surrogate: its slow path, from the plain conversion), and a message
    whose dict orjson refuses (an integer past 64 bits: the dict, then the slow path). A
    message's text is made once while its dict is the one in use."""
    import orjson
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.types import Send

    from assay._json import Deferred
    from assay.integrations import _langchain
    from assay.store._fold_columns import WRITER_COLUMNS, column_text, encoded_rows
    from assay.tracing._run_tree import SPEEDUPS

    assert is_in_use(getattr(SPEEDUPS, "step_fragments", None), "assay.tracing._speedups")
    fragments = _langchain._step_fragments
    assert fragments is not None
    at = WRITER_COLUMNS.index("inputs")

    def column(value: Any, encode: Any) -> str:
        row = [None] * len(WRITER_COLUMNS)
        row[at] = Deferred(value, _langchain._step_json, encode)
        text: str = encoded_rows([row])[0][at]
        return text

    ask = HumanMessage("How many people live in Paris? \u00e9t\u00e9")
    call = AIMessage("", tool_calls=[{"name": "lookup_city", "args": {"city": "Paris"},
                                      "id": "c1"}])
    answer = ToolMessage("2102650", tool_call_id="c1")
    states = [
        {"messages": [ask]}, {"messages": [ask, call]}, {"messages": [ask, call, answer]},
        {"messages": [ask, call, answer], "sends": [Send("tools", {"messages": [ask, call]})]},
        {"messages": [HumanMessage("nul \x00 inside")], "n": 1},
        {"messages": [HumanMessage("escape char \ufdd0 inside")]},
        {"messages": [HumanMessage("lone \ud800 surrogate")]},
        {"messages": [AIMessage("", tool_calls=[{"name": "big", "args": {"n": 2**70},
                                                 "id": "c2"}])]},
    ]
    for state in states:
        want = column(state, None)
        assert column(state, fragments) == want, state
        assert want == column_text(_langchain._step_json(state))
    # the column took the fragments: each message's text kept in its memo entry
    fresh = [HumanMessage("one"), AIMessage("two"), HumanMessage("three")]
    assert column({"messages": fresh}, fragments) == column({"messages": fresh}, None)
    kept = [_langchain._CONVERTED[id(m)][-1] for m in fresh]
    assert all(isinstance(k, orjson.Fragment) for k in kept)
    assert fragments({"messages": fresh})["messages"] == kept
    # a message's text made once: the same Fragment while its dict stays the memo's
    first = fragments({"messages": [ask, call]})["messages"]
    again = fragments({"messages": [call, ask]})["messages"]
    assert first[0] is again[1] and first[1] is again[0]
    assert isinstance(first[0], orjson.Fragment)
    ask.content = "changed"  # a field set anew: converted again, a new text
    changed = fragments({"messages": [ask]})["messages"][0]
    assert changed is not first[0]
    assert column({"messages": [ask]}, fragments) == column({"messages": [ask]}, None)
    assert '"changed"' in column({"messages": [ask]}, fragments)
    with pytest.raises(TypeError, match="step_fragments"):
        SPEEDUPS.step_fragments({}, None, None, [], None, 1)  # type: ignore[union-attr]


def test_the_kept_metadata_are_the_same_in_c_and_in_python() -> None:
    """``_speedups.pick`` (what a run keeps of a step's LangChain metadata) and its Python
    twin: the kept keys present and not None, in ``_KEPT_METADATA``'s order, or None."""
    from assay.integrations import _lc_capture
    from assay.tracing._run_tree import SPEEDUPS

    compiled = is_in_use(getattr(SPEEDUPS, "pick", None), "assay.tracing._speedups")
    keys = _lc_capture._KEPT_METADATA
    cases: list[dict[str, Any]] = [
        {}, {"other": 1}, {"langgraph_node": "agent", "langgraph_step": 1, "x": 2},
        {"ls_provider": None, "ls_model_name": "gpt-4o-mini", "langgraph_step": 0},
        {k: k for k in reversed(keys)}, {"ls_temperature": 0.0, "ls_max_tokens": None},
    ]
    picks = [_lc_capture._kept_metadata_py] + (
        [lambda m: SPEEDUPS.pick(m, keys)] if compiled else [])  # type: ignore[union-attr]
    for pick in picks:
        for metadata in cases:
            want = {k: metadata[k] for k in keys if metadata.get(k) is not None} or None
            picked = pick(metadata)
            assert picked == want, metadata
            assert picked is None or list(picked) == list(want or ())  # in the keys' order
        assert pick({"langgraph_step": 0}) == {"langgraph_step": 0}  # 0 is kept
    if compiled:
        with pytest.raises(TypeError, match="pick"):
            SPEEDUPS.pick([("a", 1)], keys)  # type: ignore[union-attr,arg-type]


def test_chain_runs_store_each_steps_state_as_chat_messages(srv: ScriptedModelServer,
                                                            db: Client) -> None:
    """A graph's state goes into its chain runs converted on the writer's thread: the stored
    runs hold chat-message dicts, each node the state it saw."""
    row = next(iter(evaluate(react_agent(srv), data=_dataset(db, ["Paris"]), client=db)))
    runs = sorted(_tree(db, row), key=lambda r: r.dotted_order)
    question = {"role": "user", "content": "How many people live in Paris?"}
    agents = [r for r in runs if r.name == "agent"]
    assert [[m["role"] for m in r.inputs["messages"]] for r in agents] == [
        ["user"], ["user", "assistant", "tool"]]
    assert agents[0].inputs["messages"] == [question]
    call = agents[0].outputs["messages"][0]["tool_calls"][0]
    assert call["name"] == "lookup_city" and call["args"] == {"city": "Paris"}
    tools_node = next(r for r in runs if r.name == "tools")
    assert tools_node.outputs["messages"][0]["content"] == population("Paris")
    graph = next(r for r in runs if r.name == "LangGraph")
    assert [m["role"] for m in graph.outputs["messages"]] == ["user", "assistant", "tool",
                                                             "assistant"]


def test_a_step_keeps_the_state_it_saw_when_the_graph_changes_it_later(db: Client) -> None:
    """The conversion waits for the writer, so the handler copies a state's containers when the
    step starts and ends: a list appended to or a key set afterwards is not in the run."""
    import uuid

    from langchain_core.messages import AIMessage, HumanMessage

    from assay.integrations._langchain import handler
    from assay.tracing import trace

    from .conftest import flat_runs

    h = handler()
    messages: list[Any] = [HumanMessage("hi")]
    state: dict[str, Any] = {"messages": messages, "step": 1}
    rid = uuid.uuid4()
    with trace("root", client=db, enabled=True) as root:
        h.on_chain_start({"name": "agent"}, state, run_id=rid, parent_run_id=None)
        messages.append(AIMessage("later"))
        state["step"] = 2
        h.on_chain_end({"messages": messages, "notes": {"k": [1]}}, run_id=rid)
        messages.append(AIMessage("even later"))
        # read in process (an evaluator's run tree): the step's values, converted
        (seen,) = [r for r in flat_runs(root.to_run()) if r.name == "agent"]
        assert seen.inputs == {"messages": [{"role": "user", "content": "hi"}], "step": 1}
        assert seen.outputs["notes"] == {"k": [1]}
    db.flush()
    stored = next(r for r in flat_runs(db.read_run(root.id, load_child_runs=True))
                  if r.name == "agent")
    assert stored.inputs == {"messages": [{"role": "user", "content": "hi"}], "step": 1}
    assert stored.outputs == {"messages": [{"role": "user", "content": "hi"},
                                           {"role": "assistant", "content": "later"}],
                              "notes": {"k": [1]}}


def test_steps_are_logged_on_the_agents_thread_and_built_when_read(db: Client) -> None:
    """A callback only logs the step (no run made on the agent's thread); the runs are built
    when the tree is read in process, with the times of the callbacks, not of the build."""
    import time
    import uuid

    from langchain_core.messages import AIMessage

    from assay.integrations._langchain import handler
    from assay.tracing import trace

    from .conftest import flat_runs

    h = handler()
    graph, model = uuid.uuid4(), uuid.uuid4()
    with trace("root", client=db, enabled=True) as root:
        with h._lock:  # held: the writer's thread may not build them meanwhile
            before = time.time()
            h.on_chain_start({"name": "LangGraph"}, {"messages": []}, run_id=graph,
                             parent_run_id=None)
            h.on_llm_start({"name": "fake"}, ["hi"], run_id=model, parent_run_id=graph)
            h.on_llm_new_token("H", run_id=model)
            h.on_llm_new_token("i", run_id=model)
            response = type("R", (), {"generations": [[type("G", (), {
                "message": AIMessage("Hi", usage_metadata={
                    "input_tokens": 3, "output_tokens": 1, "total_tokens": 4})})()]],
                "llm_output": None})()
            h.on_llm_end(response, run_id=model)
            h.on_chain_end({"messages": []}, run_id=graph)
            after = time.time()
            assert root._kids is None and len(h._log) == 5  # logged, nothing built yet
        time.sleep(0.05)
        runs = {r.name: r for r in flat_runs(root.to_run())}
    assert not h._log
    llm = runs["fake"]
    assert llm.parent_run_id == runs["LangGraph"].id and runs["LangGraph"].parent_run_id == root.id
    for run in (llm, runs["LangGraph"]):
        assert before <= run.start_time.timestamp() <= run.end_time.timestamp() <= after
    assert llm.first_token_time is not None
    assert before <= llm.first_token_time.timestamp() <= after
    assert [e["name"] for e in llm.events] == ["new_token"]  # once, not per token
    assert llm.total_tokens == 4 and llm.inputs == {"prompts": ["hi"]}


def test_logged_steps_are_stored_by_flush_and_built_by_the_writer(db: Client) -> None:
    """Nothing reads the tree: the writer's thread builds the logged steps at its next tick,
    and ``flush()`` builds whatever is still logged before it returns."""
    import time
    import uuid

    from assay.integrations._langchain import handler
    from assay.tracing import trace

    from .conftest import flat_runs

    h = handler()
    with trace("root", client=db, enabled=True) as root:
        step = uuid.uuid4()
        with h._lock:
            h.on_chain_start({"name": "node"}, {"x": 1}, run_id=step, parent_run_id=None)
            h.on_chain_end({"x": 2}, run_id=step)
        deadline = time.monotonic() + 5
        while h._log and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not h._log and root._kids and root._kids[0].name == "node"  # the writer's
        with h._lock:
            h.on_chain_start({"name": "late"}, "q", run_id=(late := uuid.uuid4()),
                             parent_run_id=None)
            h.on_chain_end("a", run_id=late)
        db.flush()  # (waits for the lock, then builds "late" itself)
        assert not h._log
    db.flush()
    stored = {r.name: r for r in flat_runs(db.read_run(root.id, load_child_runs=True))}
    assert stored["node"].inputs == {"x": 1} and stored["node"].outputs == {"x": 2}
    assert stored["late"].inputs == {"input": "q"} and stored["late"].outputs == {"output": "a"}


def test_a_step_joins_the_assay_run_current_when_it_started(db: Client) -> None:
    """A step whose LangChain parent is not one of assay's goes under the assay run current
    when the callback came, not when the log is built (another example's run by then)."""
    import uuid

    from assay.integrations._langchain import handler
    from assay.tracing import trace

    from .conftest import flat_runs

    h = handler()
    step = uuid.uuid4()
    with h._lock:
        with trace("first", client=db, enabled=True) as first:
            h.on_chain_start({"name": "step"}, {}, run_id=step, parent_run_id=uuid.uuid4())
            h.on_chain_end({}, run_id=step)
        with trace("second", client=db, enabled=True) as second:
            pass
    assert [r.name for r in flat_runs(second.to_run())] == ["second"]
    assert [r.name for r in flat_runs(first.to_run())] == ["first", "step"]


def test_the_switch_is_read_from_the_environment_at_each_step(
        monkeypatch: pytest.MonkeyPatch, db: Client) -> None:
    from assay.integrations._registry import framework_parent
    from assay.tracing import trace

    with trace("root", client=db, enabled=True) as root:
        assert framework_parent() is root
        monkeypatch.setenv("ASSAY_FRAMEWORK_TRACING", "off")
        assert framework_parent() is None
        monkeypatch.setenv("ASSAY_FRAMEWORK_TRACING", "1")
        assert framework_parent() is root
        monkeypatch.delenv("ASSAY_FRAMEWORK_TRACING")
        assert framework_parent() is root


def test_a_steps_copy_is_the_same_in_c_and_in_python() -> None:
    """``_speedups.snapshot`` (the chain callbacks' copy of a state) and its Python twin: the
    same copies, one level below the state too, and other values passed through as they are."""
    from assay.integrations._lc_capture import _copy_py
    from assay.tracing._run_tree import SPEEDUPS

    if SPEEDUPS is None:
        pytest.skip("the C extension is not built")
    messages: list[Any] = ["m1"]
    inner = {"k": [1]}
    state = {"messages": messages, "notes": inner, "step": 1, "t": ("a",), 2: [3]}
    for copy in (SPEEDUPS.snapshot, _copy_py):
        out = copy(state)
        assert out == state and out is not state
        assert out["messages"] is not messages and out["notes"] is not inner
        assert out["t"] is state["t"] and out[2] is not state[2]
        assert out["notes"]["k"] is inner["k"]  # one level: the items themselves are shared
        listed = copy(messages)
        assert listed == messages and listed is not messages
        for same in ("text", 1, None, ("a",), inner.items()):
            assert copy(same) is same


def test_a_ray_workers_batch_takes_the_logged_steps() -> None:
    """A Ray worker's writer only collects: what it hands back (``take``) includes the steps
    still logged, built first (nothing else builds them there when no evaluator reads the
    tree)."""
    import uuid

    from assay.evaluation._ray import _BufferClient
    from assay.integrations._langchain import handler
    from assay.tracing import trace

    h = handler()
    client = _BufferClient()
    step = uuid.uuid4()
    with h._lock:  # (nothing may build them before take())
        with trace("root", client=client, enabled=True):  # type: ignore[arg-type]  # duck-typed
            h.on_chain_start({"name": "node"}, {"x": 1}, run_id=step, parent_run_id=None)
            h.on_chain_end({"x": 2}, run_id=step)
    assert h._log
    runs = {w["name"]: w for w in client.writer.take()}
    assert set(runs) == {"root", "node"} and runs["node"]["parent_run_id"] == runs["root"]["id"]


def test_parallel_tool_calls_keep_the_models_order(db: Client) -> None:
    """Both tools called in one model reply (ToolNode runs them at once, the first slower):
    the trace and the reliability verdict keep the model's order (``check_parallel_calls``)."""
    from langchain.agents import create_agent

    with ScriptedModelServer(parallel_tool_calls=True) as par:
        agent = create_agent(_model(par), [tool(get_time), tool(get_weather)])
        # each call is a Send of its own: a tools node run each (as LangSmith shows them)
        check_parallel_calls(db, par, agent, one_parent=False)


def test_stream_true_streams_the_graphs_models_and_marks_their_first_tokens(
        srv: ScriptedModelServer, db: Client) -> None:
    """``with_run_args(graph, stream=True)``: the graph runs with ``astream(stream_mode=
    ["messages", "values"])``, so its chat model streams though built without
    ``streaming=True``; each llm run gets its first token (and, with ``stream_usage=True``, its
    tokens), the last values are the answer. Only a graph streams so: a plain runnable is
    refused by name."""
    from langchain.agents import create_agent

    from assay.integrations import with_run_args

    srv.reset()
    model = ChatOpenAI(model="gpt-4o-mini", base_url=srv.base_url, api_key="scripted",
                       max_retries=0, stream_usage=True)
    bound = with_run_args(create_agent(model, [lookup_city]), stream=True)
    rows = list(evaluate(bound, data=_dataset(db, ["Lima", "Cairo"]), client=db,
                         max_concurrency=2, evaluators=[ReliabilityEvaluator(None)]))
    assert srv.requests and all(body.get("stream") for body in srv.requests)
    assert len(rows) == 2
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        assert row["run"].outputs["output"] == f"Answer: {population(city)}"
        llms = [r for r in _tree(db, row) if r.run_type == "llm"]
        assert len(llms) == 2
        for llm in llms:
            assert llm.first_token_time is not None
            assert llm.start_time <= llm.first_token_time <= llm.end_time
            assert llm.prompt_tokens and llm.completion_tokens
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    with pytest.raises(InvalidInputError, match="stream=True runs a LangGraph graph streamed; "
                                                "ChatOpenAI is none"):
        with_run_args(model, stream=True)


PRODUCTION = '''
import sys
from assay import Client
from assay.tracing import trace, tracing_context
from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

@tool
def lookup_city(city: str) -> str:
    """The population of a city."""
    return "2,600,000"

base_url, database = sys.argv[1], sys.argv[2]
client = Client(database_url=database)
model = ChatOpenAI(model="gpt-4o-mini", base_url=base_url, api_key="scripted", max_retries=0)
agent = create_agent(model, [lookup_city])  # no evaluate(), no evaluator in this process
with tracing_context(enabled=True, client=client, project_name="prod"):
    for thread, question in [("c-1", "How many people live in Osaka?"),
                             ("c-1", "How many people live in Sydney?"),
                             ("c-2", "How many people live in Osaka?")]:
        with trace("turn", metadata={"thread_id": thread}):
            agent.invoke({"messages": [("user", question)]})
client.flush()
'''


def test_a_graph_in_production_is_traced_without_evaluate_and_its_turns_make_threads(
        srv: ScriptedModelServer, tmp_path: Any) -> None:
    """A process that never runs ``evaluate()`` or an evaluator (a service in production):
    a root ``trace(...)`` block installs the hooks of the frameworks imported by then, so the
    graph's model and tool calls are runs under each turn, and the turns that name a thread
    are that thread's, with its tokens."""
    import subprocess
    import sys

    script, database = tmp_path / "service.py", tmp_path / "prod.db"
    script.write_text(PRODUCTION)
    proc = subprocess.run([sys.executable, str(script), srv.base_url, str(database)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = Client(database_url=str(database))
    runs = list(client.list_runs(project_name="prod"))
    assert sum(r.run_type == "llm" for r in runs) == 6 and sum(
        r.run_type == "tool" for r in runs) == 3
    threads = client.list_threads(project_name="prod")
    assert [(t["thread_id"], t["count"]) for t in threads] == [("c-2", 1), ("c-1", 2)]
    llm_tokens = {t["thread_id"]: sum(r.total_tokens or 0 for r in runs if r.run_type == "llm"
                                      and r.trace_id in {x.id for x in t["runs"]})
                  for t in threads}
    assert all(v > 0 for v in llm_tokens.values())
    assert {t["thread_id"]: t["total_tokens"] for t in threads} == llm_tokens


SERVICE = '''
import os
import sys
from assay import get_default_client
from assay.integrations import instrument_frameworks
from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

@tool
def lookup_city(city: str) -> str:
    """The population of a city."""
    return "2,600,000"

assert instrument_frameworks("langgraph") == ["langgraph"]  # no trace(), no evaluate()
model = ChatOpenAI(model="gpt-4o-mini", base_url=sys.argv[1], api_key="scripted", max_retries=0)
agent = create_agent(model, [lookup_city], checkpointer=InMemorySaver())

def turn(thread, question):
    agent.invoke({"messages": [("user", question)]},
                 {"configurable": {"thread_id": thread}, "metadata": {"user_id": "u7"}})

turn("c-0", "How many people live in Lima?")  # ASSAY_TRACING unset: not recorded
os.environ["ASSAY_TRACING"] = "true"
for thread, question in [("c-1", "How many people live in Osaka?"),
                         ("c-1", "And in Sydney?"), ("c-2", "How many people live in Osaka?")]:
    turn(thread, question)
get_default_client().flush()
'''


def test_a_graph_called_with_tracing_on_is_a_trace_of_its_own_with_its_thread(
        srv: ScriptedModelServer, tmp_path: Any) -> None:
    """A service that only sets ``ASSAY_TRACING=true`` and calls ``instrument_frameworks()``
    (no ``trace`` block, no evaluate()): each ``invoke`` is a root run in ``ASSAY_PROJECT``,
    with the graph's steps, model calls (tokens) and tool calls under it, the call's metadata
    kept, and LangGraph's ``configurable`` thread id as the conversation; the call made while
    tracing was off is not stored."""
    import os
    import subprocess
    import sys

    script, database = tmp_path / "service.py", tmp_path / "service.db"
    script.write_text(SERVICE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env.update(ASSAY_DATABASE_URL=str(database), ASSAY_PROJECT="svc")
    proc = subprocess.run([sys.executable, str(script), srv.base_url], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = Client(database_url=str(database))
    assert [p.name for p in client.list_projects()] == ["svc"]
    roots = sorted(client.list_runs(project_name="svc", is_root=True),
                   key=lambda r: r.start_time)
    assert [r.name for r in roots] == ["LangGraph"] * 3
    assert [r.extra["metadata"]["thread_id"] for r in roots] == ["c-1", "c-1", "c-2"]
    assert all(r.extra["metadata"]["user_id"] == "u7" for r in roots)
    for root in roots:
        runs = _flat(client.read_run(root.id, load_child_runs=True))
        llms = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(llms) == 2 and all(r.total_tokens for r in llms)
        assert [t.name for t in tools] == ["lookup_city"]
        assert all(r.trace_id == root.id for r in runs)
        assert list(root.inputs) == ["messages"]  # the graph's input as it was given
        assert root.inputs["messages"][0][0] == "user"
        assert root.outputs["messages"][-1]["content"]
    threads = client.list_threads(project_name="svc")
    assert sorted((t["thread_id"], t["count"]) for t in threads) == [("c-1", 2), ("c-2", 1)]


def test_concurrent_calls_outside_any_run_are_each_a_trace_of_their_own(
        srv: ScriptedModelServer, db: Client) -> None:
    """Eight graph calls at once with no assay run around them, tracing on: eight roots, each
    holding its own call's model and tool runs (its own city), none of another's."""
    import asyncio
    import json
    import uuid

    from assay._sync import run_sync
    from assay.integrations import instrument
    from assay.tracing import tracing_context

    instrument("langchain")
    agent, project = react_agent(srv), f"lg-prod-{uuid.uuid4().hex[:8]}"

    async def everyone() -> None:
        await asyncio.gather(*(agent.ainvoke({"messages": [
            ("user", f"How many people live in {city}?")]}) for city in CITIES))

    with tracing_context(enabled=True, client=db, project_name=project):
        run_sync(everyone())
    db.flush()
    roots = list(db.list_runs(project_name=project, is_root=True))
    assert len(roots) == len(CITIES)
    seen = set()
    for root in roots:
        (city,) = [c for c in CITIES if f"live in {c}?" in json.dumps(root.inputs)]
        runs = list(db.list_runs(project_name=project, trace_id=root.id))
        assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": city}]
        assert sum(r.run_type == "llm" for r in runs) == 2
        seen.add(city)
    assert seen == set(CITIES)
