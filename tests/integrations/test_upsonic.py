"""Upsonic as it is: the real package (0.77.3) against the scripted model on 127.0.0.1.

An Agent with a function tool, a Team (a member agent and a combining model) and a Graph of two
tasks on two agents, on Upsonic's own ``OpenAIChatModel`` pointed at ``ScriptedModelServer``.
Nothing is decorated or wrapped for assay (``@tool(max_retries=0)`` is Upsonic's own, so a
raising tool is not retried for 31 s with backoff): the adapter runs them, Upsonic's own
OpenTelemetry instrumentation (fed to assay) records the llm and tool runs, and
``assay.evals.upsonic`` is ``upsonic.eval`` with only the import changed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import typing
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("upsonic", reason="needs assay[upsonic]")

import upsonic.eval as upsonic_eval
import upsonic.eval.models as upsonic_models
from openai import AsyncOpenAI
from pydantic import BaseModel
from upsonic import Agent, Graph, Task, Team
from upsonic.models.openai import OpenAIChatModel
from upsonic.providers.openai import OpenAIProvider
from upsonic.tools import tool

import assay.evals as assay_evals
import assay.evals.upsonic as dropin
from assay.client import Client
from assay.demo import ScriptedModelServer, ScriptedReply
from assay.errors import InvalidInputError
from assay.evaluation import evaluate
from assay.integrations import (
    adapter_for,
    require_adapter,
    set_framework_tracing,
    tool_calls_from,
    with_run_args,
)

from .conftest import (
    CITIES,
    GEMINI,
    check_parallel_calls,
    check_priced,
    city_dataset,
    flat_runs,
    get_time,
    get_weather,
    population,
)
from .conftest import run_tree as _tree


@tool(max_retries=0)
def lookup_city(city: str) -> str:
    """The population of a city."""
    return population(city)


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedModelServer]:
    # the graph's second task (no tools) is answered from this table
    with ScriptedModelServer(answers={"Summarize the answer": "Tokyo has 13960236 people"}
                             ) as server:
        yield server


def _model(srv: ScriptedModelServer) -> OpenAIChatModel:
    client = AsyncOpenAI(base_url=srv.base_url, api_key="scripted", max_retries=0)
    return OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))


def make_agent(srv: ScriptedModelServer, name: str = "atlas", **options: Any) -> Agent:
    options.setdefault("tools", [lookup_city])
    return Agent(_model(srv), name=name, **options)


# function-scoped: an agent's HTTP client belongs to the first event loop it ran on, and each
# async test here has a loop of its own (users have one: asyncio.run, or assay's process loop)
@pytest.fixture
def agent(srv: ScriptedModelServer) -> Agent:
    return make_agent(srv)


@pytest.fixture
def judge(srv: ScriptedModelServer) -> Agent:
    return Agent(_model(srv), name="judge")


def make_graph(srv: ScriptedModelServer) -> Graph:
    graph = Graph(default_agent=make_agent(srv, "grapher"), show_progress=False)
    writer = Agent(_model(srv), name="writer")  # no tools: it only rewrites the answer
    graph.add(Task("How many people live in Tokyo? Use lookup_city")
              >> Task("Summarize the answer about Tokyo", agent=writer))
    return graph


def make_team(srv: ScriptedModelServer) -> Team:
    return Team(entities=[make_agent(srv, "researcher")], mode="sequential", model=_model(srv))


def _dataset(client: Client, cities: list[str]) -> str:
    return city_dataset(client, cities, "upsonic",
                        answer=lambda c: f"{c} has {CITIES.get(c, 0)} people")


# -- the drop-in: same models, same signatures ---------------------------------------------------
def _norm(annotation: Any) -> Any:
    """``List[str]`` and ``list[str]`` compare equal, nested generics too; an Upsonic result
    model stands for assay's model of the same name."""
    if getattr(annotation, "__module__", None) == upsonic_models.__name__:
        return getattr(dropin, annotation.__name__)
    origin = typing.get_origin(annotation)
    if origin is None:
        return annotation
    return (origin, tuple(_norm(a) for a in typing.get_args(annotation)))


MODELS = ["EvaluationScore", "PerformanceRunResult", "ToolCallCheck", "AccuracyEvaluationResult",
          "PerformanceEvaluationResult", "ReliabilityEvaluationResult"]


@pytest.mark.parametrize("name", MODELS)
def test_result_models_have_upsonics_fields(name: str) -> None:
    theirs = getattr(upsonic_models, name).model_fields
    ours = getattr(dropin, name).model_fields
    assert getattr(dropin, name) is getattr(assay_evals, name)  # the drop-in re-exports assay's
    assert list(ours)[:len(theirs)] == list(theirs)  # same names, same order, first
    for field, info in theirs.items():
        mine = ours[field]
        assert _norm(mine.annotation) == _norm(info.annotation), (field, mine.annotation)
        assert mine.is_required() == info.is_required(), field
        for bound in ("ge", "le"):  # EvaluationScore.score: 1..10
            want = [m for m in info.metadata if hasattr(m, bound)]
            have = [m for m in mine.metadata if hasattr(m, bound)]
            assert [getattr(m, bound) for m in want] == [getattr(m, bound) for m in have]
    for extra in set(ours) - set(theirs):
        assert not ours[extra].is_required(), f"{name}.{extra} must be optional"
    if getattr(upsonic_models, name).model_config.get("from_attributes"):
        assert getattr(dropin, name).model_config.get("from_attributes")


@pytest.mark.parametrize("name", ["AccuracyEvaluator", "PerformanceEvaluator",
                                  "ReliabilityEvaluator"])
def test_dropin_signatures_match_upsonic(name: str) -> None:
    theirs = getattr(upsonic_eval, name)
    ours = getattr(dropin, name)
    want = [(p.name, p.default, p.kind) for p in inspect.signature(theirs).parameters.values()]
    have = [(p.name, p.default, p.kind) for p in inspect.signature(ours).parameters.values()
            if p.kind is not p.VAR_KEYWORD]
    assert have == want
    for method in ("run", "run_with_output"):
        if hasattr(theirs, method):
            mine, their = getattr(ours, method), getattr(theirs, method)
            assert inspect.iscoroutinefunction(mine) == inspect.iscoroutinefunction(their)
            assert [p.name for p in inspect.signature(mine).parameters.values()] == \
                [p.name for p in inspect.signature(their).parameters.values()]
            assert [p.default for p in inspect.signature(mine).parameters.values()] == \
                [p.default for p in inspect.signature(their).parameters.values()]


def test_dropin_refuses_exports_it_cannot_do(agent: Agent, judge: Agent) -> None:
    with pytest.raises(InvalidInputError, match="promptlayer"):
        dropin.AccuracyEvaluator(judge, agent, "q", "a", promptlayer=object())
    with pytest.raises(InvalidInputError, match="expected_tool_calls"):
        dropin.ReliabilityEvaluator([])


# -- the drop-in with real agents ----------------------------------------------------------------
async def test_dropin_accuracy_with_upsonic_judge_agent_graph_team(
        srv: ScriptedModelServer, agent: Agent, judge: Agent,
        capsys: pytest.CaptureFixture[str]) -> None:
    evaluator = dropin.AccuracyEvaluator(
        judge_agent=judge, agent_under_test=agent, query="How many people live in Paris?",
        expected_output="Paris has 2102650 people", num_iterations=2)
    assert evaluator.additional_guidelines == "No additional guidelines provided."
    result = await evaluator.run(print_results=True)
    assert "Average Score" in capsys.readouterr().out
    assert result.average_score == 9.0 and len(result.evaluation_scores) == 2
    # per-iteration outputs (Upsonic keeps only the last); Upsonic wraps a tool's result as
    # {"func": ...} before the model sees it
    assert [it.generated_output for it in result.iterations] == [
        'Answer: {"func":"Paris has 2102650 people"}'] * 2
    assert result.generated_output == result.iterations[-1].generated_output
    assert result.judge == "upsonic:gpt-4o-mini"
    # the judge agent was asked through Upsonic's structured output (its output tool)
    assert any(t["function"]["name"] == "final_result" and "is_met" in json.dumps(t)
               for body in srv.requests for t in body.get("tools") or [])

    wrong = await dropin.AccuracyEvaluator(judge, agent, "How many people live in Lima?",
                                           "Lima has 1 people").run(print_results=False)
    assert wrong.average_score == 3.0 and not wrong.evaluation_scores[0].is_met

    graph_result = await dropin.AccuracyEvaluator(
        judge, make_graph(srv), "ignored: a Graph runs its own tasks", "Tokyo 13960236",
    ).run(print_results=False)
    assert graph_result.average_score == 9.0, graph_result.iterations
    assert "13960236" in graph_result.generated_output

    team_result = await dropin.AccuracyEvaluator(
        judge, make_team(srv), "How many people live in Cairo? Use lookup_city",
        "Cairo 10025657").run(print_results=False)
    assert team_result.iterations[0].error is None, team_result.iterations
    assert "10025657" in team_result.generated_output

    scored = await evaluator.run_with_output("Paris has 2102650 people", print_results=False)
    assert scored.average_score == 9.0


async def test_dropin_performance_on_agent_graph_team(srv: ScriptedModelServer, agent: Agent
                                                      ) -> None:
    task = Task("How many people live in Berlin? Use lookup_city")
    # (each measured run is preceded by a full gc.collect, ~0.1-0.3 s with Upsonic loaded: few)
    for target, n in ((agent, 2), (make_graph(srv), 1), (make_team(srv), 1)):
        result = await dropin.PerformanceEvaluator(target, task, num_iterations=n,
                                                   warmup_runs=0).run(print_results=False)
        assert result.num_iterations == n and len(result.all_runs) == n
        assert all(r.latency_seconds > 0 for r in result.all_runs)
        assert set(result.latency_stats) >= {"average", "median", "min", "max", "std_dev"}
        assert not result.latency_measured_with_tracemalloc  # timed with tracemalloc off
    assert task.response is None  # the given Task is copied per run, as Upsonic does


async def test_dropin_reliability_from_task_tasks_and_graph(srv: ScriptedModelServer,
                                                            agent: Agent) -> None:
    task = Task("How many people live in Madrid? Use lookup_city")
    await agent.do_async(task)
    result = dropin.ReliabilityEvaluator(["lookup_city"]).run(task, print_results=False)
    assert result.passed and result.actual_tool_calls == ["lookup_city"]
    assert result.tool_calls[0].args == {"city": "Madrid"}  # arguments, from the Task
    assert not dropin.ReliabilityEvaluator(["lookup_city", "other"], exact_match=True).run(
        [task, task], print_results=False).passed
    graph = make_graph(srv)
    await graph.run_async(verbose=False, show_progress=False)
    assert dropin.ReliabilityEvaluator(["lookup_city"]).run(graph, print_results=False).passed
    assert [c.args for c in tool_calls_from(graph)] == [{"city": "Tokyo"}]


# -- assay's own API, sync, many times on one agent (one long-lived loop) ------------------------
def test_assay_evaluators_run_many_times_on_one_agent(agent: Agent, judge: Agent) -> None:
    accuracy = assay_evals.AccuracyEvaluator(judge, agent, "How many people live in Sydney?",
                                             "Sydney has 5312163 people")
    for _ in range(4):
        result = accuracy.run()
        assert result.average_score == 9.0, result.iterations
    performance = assay_evals.PerformanceEvaluator(agent, "How many people live in Osaka?",
                                                   num_iterations=1, warmup_runs=0)
    for _ in range(3):
        assert len(performance.run().all_runs) == 1
    reliability = assay_evals.ReliabilityEvaluator([{"name": "lookup_city",
                                                     "args": {"city": "Osaka"}}])
    adapter = require_adapter(agent)
    for _ in range(3):
        task = Task("How many people live in Osaka? Use lookup_city")
        agent.do(task)  # Upsonic's own sync entry point (its loop), between assay's
        assert reliability.run(task).passed
    assert adapter.framework == "upsonic" and adapter.name == "atlas"


def test_unknown_upsonic_object_is_refused_by_name() -> None:
    task = Task("not an agent")
    assert adapter_for(task) is None
    with pytest.raises(InvalidInputError, match=r"upsonic\.tasks\.tasks\.Task.*Upsonic Agent"):
        require_adapter(task)


# -- evaluate(target=agent): the trace ------------------------------------------------------------
def test_evaluate_agent_stores_llm_and_tool_runs(agent: Agent, db: Client) -> None:
    results = evaluate(agent, data=_dataset(db, ["Paris", "Berlin"]), client=db,
                       evaluators=[assay_evals.ReliabilityEvaluator(None).as_evaluator(
                           client=db)])
    rows = list(results)
    assert len(rows) == 2
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        assert row["run"].outputs == {
            "output": f'Answer: {{"func":"{city} has {CITIES[city]} people"}}'}
        runs = _tree(db, row)
        (agent_run,) = [r for r in runs if r.parent_run_id == row["run"].id]
        assert agent_run.name == "atlas" and agent_run.run_type == "chain"
        llms = [r for r in runs if r.run_type == "llm"]
        tools = [r for r in runs if r.run_type == "tool"]
        assert len(llms) == 2 and len(tools) == 1
        for llm in llms:
            meta = llm.extra["metadata"]
            assert meta["ls_provider"] == "openai" and meta["ls_model_name"] == "gpt-4o-mini"
            assert llm.prompt_tokens > 0 and llm.completion_tokens > 0
            assert llm.total_cost and llm.total_cost > 0  # priced by genai-prices
            assert llm.parent_run_id == agent_run.id
        assert tools[0].name == "lookup_city" and tools[0].inputs == {"city": city}
        assert f"{city} has {CITIES[city]} people" in str(tools[0].outputs["output"])
        assert tools[0].parent_run_id == agent_run.id
        order = [r.run_type for r in sorted(runs, key=lambda r: r.dotted_order)][2:]
        assert order == ["llm", "tool", "llm"]  # as the agent did it
        scores = {r.key: r.score for r in row["evaluation_results"]["results"]}
        assert scores == {"reliability": 1.0}


class CityFigure(BaseModel):
    city: str
    population: int


def test_run_args_give_each_task_a_response_format(agent: Agent, db: Client) -> None:
    """``with_run_args(agent, response_format=..., retry=...)``: each Task made from an example
    gets the Task fields, ``do_async`` the rest; the answer is stored as its JSON text and its
    fields (``structured_output``), and the tool call is still judged."""
    bound = with_run_args(agent, response_format=CityFigure, retry=2)
    rows = list(evaluate(bound, data=_dataset(db, ["Paris", "Lima"]), client=db,
                         evaluators=[assay_evals.ReliabilityEvaluator(None).as_evaluator(
                             client=db)]))
    assert len(rows) == 2
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        figure = {"city": city, "population": int(CITIES[city])}
        assert row["run"].outputs["structured_output"] == figure
        assert json.loads(row["run"].outputs["output"]) == figure
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    plain = list(evaluate(agent, data=_dataset(db, ["Paris"]), client=db))
    assert "structured_output" not in plain[0]["run"].outputs  # the agent itself unchanged


def test_run_args_that_upsonic_does_not_take_are_refused_by_name(srv: ScriptedModelServer,
                                                                 agent: Agent) -> None:
    with pytest.raises(InvalidInputError, match=r"Upsonic agent \(a Task's fields, do_async "
                                                 r"model/retry/timeout or stream\): deps, "
                                                 r"max_turns \(it takes model, retry, timeout, "
                                                 r"stream, attachments, "):
        with_run_args(agent, deps=1, max_turns=2, response_format=CityFigure)
    team = Team(entities=[agent], model=_model(srv))
    with pytest.raises(InvalidInputError, match=r"Upsonic team \(a Task's fields\): retry "
                                                 r"\(it takes attachments, "):
        with_run_args(team, retry=2)  # a Team's do_async takes the Task only
    with_run_args(team, response_format=CityFigure)
    graph = Graph(default_agent=agent)
    with pytest.raises(InvalidInputError, match="Graph takes no run arguments"):
        with_run_args(graph, response_format=CityFigure)


def test_concurrency_8_keeps_examples_apart(agent: Agent, db: Client) -> None:
    cities = list(CITIES) * 2
    results = evaluate(agent, data=_dataset(db, cities), client=db, max_concurrency=8,
                       evaluators=[assay_evals.ReliabilityEvaluator(None)])
    rows = list(results)
    assert len(rows) == 16
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        runs = _tree(db, row)
        assert [t.inputs for t in runs if t.run_type == "tool"] == [{"city": city}]
        assert {r.trace_id for r in runs} == {row["run"].id}
        assert sum(r.run_type == "llm" for r in runs) == 2
        scores = {r.key: r.score for r in row["evaluation_results"]["results"]}
        assert scores["reliability"] == 1.0


def test_team_and_graph_in_evaluate_nest_their_agents(srv: ScriptedModelServer,
                                                      db: Client) -> None:
    results = evaluate(make_team(srv), data=_dataset(db, ["Lima"]), client=db,
                       evaluators=[assay_evals.ReliabilityEvaluator(None)])
    (row,) = list(results)
    runs = _tree(db, row)
    tool_run = next(r for r in runs if r.run_type == "tool")
    assert tool_run.inputs == {"city": "Lima"}
    by_id = {r.id: r for r in runs}
    assert by_id[tool_run.parent_run_id].name == "researcher"  # the member agent's run
    assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {"reliability": 1.0}

    # a Graph runs its own tasks (the query is not injected, as in Upsonic's evaluators), one run
    # at a time even at max_concurrency=2 (it keeps its state on itself)
    results = evaluate(make_graph(srv), data=_dataset(db, ["Tokyo", "Osaka"]), client=db,
                       max_concurrency=2,
                       evaluators=[assay_evals.ReliabilityEvaluator(["lookup_city"])])
    rows = list(results)
    assert len(rows) == 2
    for row in rows:
        runs = _tree(db, row)
        agents = [r for r in runs if r.parent_run_id == row["run"].id]
        assert [r.name for r in agents] == ["grapher", "writer"]  # one agent run per task
        assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": "Tokyo"}]
        assert row["run"].outputs == {"output": "Tokyo has 13960236 people"}
        scores = {r.key: r.score for r in row["evaluation_results"]["results"]}
        assert scores == {"reliability": 1.0}


def test_failures_stay_on_their_run_and_the_experiment_goes_on(
        srv: ScriptedModelServer, agent: Agent, db: Client) -> None:
    # a tool that raises: Upsonic hands the exception's text to the model as the tool's result
    # and marks its own tool span OK; the tool run still has the error (read from the shape of
    # Upsonic's tool result), the example's root carries it, and the agent goes on
    results = evaluate(agent, data=_dataset(db, ["Atlantis", "Lima"]), client=db,
                       evaluators=[assay_evals.ReliabilityEvaluator(None)])
    rows = {r["example"].inputs["question"].split()[-1].rstrip("?"): r for r in results}
    bad = _tree(db, rows["Atlantis"])
    tool_run = next(r for r in bad if r.run_type == "tool")
    assert tool_run.name == "lookup_city" and tool_run.inputs == {"city": "Atlantis"}
    assert "no city named 'Atlantis'" in (tool_run.error or "")
    assert "no city named 'Atlantis'" in str(tool_run.outputs)  # what the model was handed
    assert "lookup_city" in (bad[0].error or "")  # the example's root
    assert "Atlantis" in rows["Atlantis"]["run"].outputs["output"]  # the agent went on
    good = _tree(db, rows["Lima"])
    assert good[0].error is None
    assert [r.error for r in good if r.run_type == "tool"] == [None]  # a tool that returned

    # a tool the agent does not have: Upsonic's tool span fails, so the tool run has the error,
    # the example's root carries it, the agent answers anyway and the next example runs
    srv.reset()
    srv.script(ScriptedReply(tool_calls=[{"name": "teleport", "arguments": {"to": "Mars"}}]))
    results = evaluate(agent, data=_dataset(db, ["Paris", "Madrid"]), client=db,
                       evaluators=[assay_evals.ReliabilityEvaluator(None)])
    rows = {r["example"].inputs["question"].split()[-1].rstrip("?"): r for r in results}
    bad = _tree(db, rows["Paris"])
    tool_run = next(r for r in bad if r.run_type == "tool")
    assert tool_run.name == "teleport" and tool_run.inputs == {"to": "Mars"}
    assert "Tool 'teleport' not found" in (tool_run.error or "")
    assert "teleport" in (bad[0].error or "")  # the example's root
    assert "not found" in rows["Paris"]["run"].outputs["output"]  # the agent went on
    assert _tree(db, rows["Madrid"])[0].error is None
    scores = {r.key: r.score for r in rows["Madrid"]["evaluation_results"]["results"]}
    assert scores == {"reliability": 1.0}

    # a model call that fails: the llm run has the error, the example's root carries it, the
    # next example runs
    srv.reset()
    srv.fail_next(500, times=1, message="scripted outage")
    results = evaluate(agent, data=_dataset(db, ["Cairo", "Osaka"]), client=db,
                       max_concurrency=0)
    rows = {r["example"].inputs["question"].split()[-1].rstrip("?"): r for r in results}
    failed = [name for name, row in rows.items() if row["run"].error]
    assert len(failed) == 1, {k: r["run"].error for k, r in rows.items()}
    runs = _tree(db, rows[failed[0]])
    assert "500" in (runs[0].error or "") or "outage" in (runs[0].error or "")
    assert any(r.run_type == "llm" and r.error for r in runs)
    ok = next(name for name in rows if name not in failed)
    assert f"{ok} has {CITIES[ok]} people" in rows[ok]["run"].outputs["output"]


def test_switch_off_records_no_framework_runs(agent: Agent, db: Client) -> None:
    set_framework_tracing(False)
    try:
        results = evaluate(agent, data=_dataset(db, ["Sydney"]), client=db)
        (row,) = list(results)
        assert "Sydney has 5312163 people" in row["run"].outputs["output"]
        assert len(_tree(db, row)) == 1  # the example's root alone
    finally:
        set_framework_tracing(None)


def _traced(db: Client, agent: Agent, question: str) -> list[Any]:
    """Every run of one ``do_async`` of ``agent`` inside a ``trace()``, as stored."""
    from assay.tracing import trace

    async def one() -> Any:
        async with trace("one", client=db, enabled=True) as root:
            await agent.do_async(Task(question))
        return root

    root = asyncio.run(one())
    db.flush()
    return flat_runs(db.read_run(root.id, load_child_runs=True))


def _span_path_agent(srv: ScriptedModelServer, name: str = "atlas", **options: Any) -> Agent:
    """An agent built after ``instrument()`` and never handed to assay: Upsonic's global
    instrumentation (assay's span path) is what traces it."""
    from assay.integrations import _upsonic
    from assay.integrations._upsonic_native import is_captured

    _upsonic.instrument()
    built = make_agent(srv, name, **options)
    assert built._instrument_settings is _upsonic._instrumentation() and not is_captured(built)
    return built


def test_adapter_moves_agents_off_upsonics_instrumentation(srv: ScriptedModelServer,
                                                           db: Client) -> None:
    """An agent handed to assay is traced from its own objects, with Upsonic's OpenTelemetry
    off (it costs Upsonic's agents a quarter of their CPU); its runs are those the span path
    gives: agent -> llm, tool, llm, with model, tokens, cost, arguments and result."""
    from upsonic.models.instrumented import InstrumentedModel

    from assay.integrations._upsonic_native import is_captured

    agents = {"spans": _span_path_agent(srv), "native": _span_path_agent(srv)}
    require_adapter(agents["native"])
    assert is_captured(agents["native"]) and agents["native"]._instrument_settings is None
    assert not isinstance(agents["native"].model, InstrumentedModel)
    shapes = {}
    for path, agent in agents.items():
        runs = _traced(db, agent, "How many people live in Lima? Use lookup_city")
        assert [r.run_type for r in runs] == ["chain", "chain", "llm", "tool", "llm"], path
        assert runs[1].name == "atlas" and runs[1].inputs == {
            "input": "How many people live in Lima? Use lookup_city"}
        assert f"Lima has {CITIES['Lima']} people" in str(runs[1].outputs["output"])
        for llm in runs[2], runs[4]:
            meta = llm.extra["metadata"]
            assert meta["ls_provider"] == "openai" and meta["ls_model_name"] == "gpt-4o-mini"
            assert llm.prompt_tokens > 0 and llm.completion_tokens > 0
            assert llm.total_cost and llm.total_cost > 0
            assert llm.inputs["messages"][-1]["role"] == "user"
            assert llm.outputs["messages"][0]["role"] == "assistant"
        assert runs[3].name == "lookup_city" and runs[3].inputs == {"city": "Lima"}
        assert runs[3].extra["metadata"]["tool_call_id"]
        assert all(r.parent_run_id == runs[1].id for r in runs[2:])
        shapes[path] = [(r.name, r.run_type, r.inputs, r.outputs, r.prompt_tokens,
                         r.completion_tokens, r.total_cost) for r in runs[1:]]
    # the same runs field for field (but the model's tool call ids, fresh each call)
    same = {path: re.sub(r"call_[0-9a-f]+", "call_", repr(shape)) for path, shape in shapes.items()}
    assert same["native"] == same["spans"]


def test_no_assay_run_no_runs_recorded(srv: ScriptedModelServer, agent: Agent,
                                       db: Client) -> None:
    from assay.integrations import _upsonic
    from assay.integrations._upsonic_spans import _KEPT

    spans = _span_path_agent(srv)
    require_adapter(agent)  # traced from its own objects
    processor = _upsonic._processor
    recorded = len(processor._recent)
    for a in (agent, spans):  # instrumented, but outside evaluate()/trace(): nothing recorded
        task = Task("How many people live in Berlin? Use lookup_city")
        a.do(task)
        assert task.tool_calls and task.tool_calls[0]["params"] == {"city": "Berlin"}
        assert _KEPT.get() is None
    assert len(processor._recent) == recorded and not processor._open and not processor._outer
    # and a traced run holds its own runs only (a fresh agent: do() ran on another loop)
    fresh = make_agent(srv)
    require_adapter(fresh)
    runs = _traced(db, fresh, "How many people live in Cairo? Use lookup_city")
    assert [r.run_type for r in runs] == ["chain", "chain", "llm", "tool", "llm"]


def test_an_agent_run_outside_any_assay_run_is_a_trace_of_its_own_where_tracing_is_on(
        srv: ScriptedModelServer, db: Client) -> None:
    """A service running its agents with no assay run around them: where tracing is on, each
    agent run is a root run with its model and tool calls under it, on both capture paths
    (an agent built after ``instrument()``: Upsonic's spans; one handed to assay: its own
    objects); where tracing is off nothing is stored."""
    import uuid

    from assay._sync import run_sync
    from assay.tracing import tracing_context

    agents = {path: _span_path_agent(srv, session_id=f"chat-{path}")  # (its thread)
              for path in ("spans", "native")}
    require_adapter(agents["native"])
    project = f"upsonic-prod-{uuid.uuid4().hex[:8]}"

    async def ask(agent: Agent, city: str) -> None:
        await agent.do_async(Task(f"How many people live in {city}? Use lookup_city"))

    for agent in agents.values():  # (one loop for both calls: the agent's client is bound)
        run_sync(ask(agent, "Lima"))  # tracing off: not recorded
        with tracing_context(enabled=True, client=db, project_name=project):
            run_sync(ask(agent, "Cairo"))
    db.flush()
    roots = list(db.list_runs(project_name=project, is_root=True))
    assert len(roots) == 2
    for root in roots:
        runs = flat_runs(db.read_run(root.id, load_child_runs=True))
        assert [r.run_type for r in runs] == ["chain", "llm", "tool", "llm"]
        assert runs[0].name == "atlas" and "Cairo" in runs[0].inputs["input"]
        assert runs[2].inputs == {"city": "Cairo"} and runs[1].total_tokens
    threads = db.list_threads(project_name=project)
    assert sorted(t["thread_id"] for t in threads) == ["chat-native", "chat-spans"]


def test_a_traced_helper_in_a_tool_nests_under_the_tool_run_on_both_paths(
        srv: ScriptedModelServer, db: Client) -> None:
    """A tool's code that calls a ``@traceable`` function: its run is the tool run's child,
    on both capture paths (an agent handed to assay; one traced through Upsonic's spans)."""
    from assay.tracing import traceable

    @traceable(name="atlas_lookup")
    def atlas_lookup(city: str) -> str:
        return population(city)

    @tool(max_retries=0)  # async: Upsonic runs a sync tool in an executor thread, which starts
    async def traced_lookup(city: str) -> str:  # with an empty context (no run to nest under)
        """The population of a city."""
        return atlas_lookup(city)

    native = make_agent(srv, tools=[traced_lookup])
    require_adapter(native)
    spans = _span_path_agent(srv, tools=[traced_lookup])
    for agent in (native, spans):
        runs = _traced(db, agent, "How many people live in Osaka? Use traced_lookup")
        by_id = {r.id: r for r in runs}
        assert [r.run_type for r in runs] == ["chain", "chain", "llm", "tool", "chain", "llm"]
        (helper,) = [r for r in runs if r.name == "atlas_lookup"]
        assert by_id[helper.parent_run_id].name == "traced_lookup"
        assert helper.inputs == {"city": "Osaka"}


def _sync_tool_tracing_a_helper() -> Any:
    """A sync Upsonic tool (``sync_lookup``) whose code calls a ``@traceable`` helper
    (``atlas_lookup``): what the tool traces must nest under the tool's run."""
    from assay.tracing import traceable

    @traceable(name="atlas_lookup")
    def atlas_lookup(city: str) -> str:
        return population(city)

    @tool(max_retries=0)
    def sync_lookup(city: str) -> str:
        """The population of a city."""
        return atlas_lookup(city)

    return sync_lookup


def test_a_sync_tools_traced_helper_nests_under_it_in_evaluate(srv: ScriptedModelServer,
                                                               db: Client) -> None:
    """Upsonic runs a sync tool with ``run_in_executor(None, ...)``: on Upsonic's loop, where
    ``evaluate()`` runs its agents, that executor now runs it in the task's context, so what
    the tool traces is the tool run's child (on a loop of the user's too: the next test)."""
    sync_lookup = _sync_tool_tracing_a_helper()
    data = city_dataset(db, ["Lima"], "sync-tool", question="How many people live in {city}? "
                        "Use sync_lookup")
    (row,) = evaluate(make_agent(srv, tools=[sync_lookup]), data=data, client=db)
    runs = _tree(db, row)
    by_id = {r.id: r for r in runs}
    (helper,) = [r for r in runs if r.name == "atlas_lookup"]
    assert by_id[helper.parent_run_id].name == "sync_lookup"
    assert helper.inputs == {"city": "Lima"}


def test_a_sync_tools_traced_helper_nests_under_it_on_the_users_own_loop(
        srv: ScriptedModelServer, db: Client) -> None:
    """A service's own loop (``asyncio.run(agent.do_async(...))``), tracing on, no assay run:
    the first tool run makes that loop's default executor (asyncio's, made before by an
    earlier call) one that keeps the caller's context, so what a sync tool traces is the tool
    run's child, not a trace of its own, on both capture paths."""
    import uuid

    from assay.tracing import tracing_context

    sync_lookup = _sync_tool_tracing_a_helper()
    native = make_agent(srv, tools=[sync_lookup])
    require_adapter(native)
    spans = _span_path_agent(srv, tools=[sync_lookup])
    project = f"upsonic-own-loop-{uuid.uuid4().hex[:8]}"

    async def ask(agent: Agent) -> None:
        await asyncio.get_running_loop().run_in_executor(None, lambda: None)  # asyncio's own
        await agent.do_async(Task("How many people live in Lima? Use sync_lookup"))

    with tracing_context(enabled=True, client=db, project_name=project):
        for agent in (native, spans):
            asyncio.run(ask(agent))
    db.flush()
    roots = list(db.list_runs(project_name=project, is_root=True))
    assert sorted(r.name for r in roots) == ["atlas", "atlas"]  # (no helper a trace of its own)
    for root in roots:
        runs = flat_runs(db.read_run(root.id, load_child_runs=True))
        by_id = {r.id: r for r in runs}
        (helper,) = [r for r in runs if r.name == "atlas_lookup"]
        assert by_id[helper.parent_run_id].name == "sync_lookup"
        assert helper.inputs == {"city": "Lima"}
        # the same runs on both paths: llm runs named by their model, a tool's output its dict
        # (Upsonic's spans carry "chat <model>" and the dict's Python repr)
        assert [r.name for r in runs if r.run_type == "llm"] == ["gpt-4o-mini"] * 2
        (tool_run,) = [r for r in runs if r.run_type == "tool"]
        assert tool_run.outputs == {"output": {"func": population("Lima")}}


def test_model_set_after_capture_is_traced(srv: ScriptedModelServer, agent: Agent,
                                           db: Client) -> None:
    """A model given per call (``do_async(task, model=...)``) or set on the agent later is
    wrapped at the next agent run: its requests are llm runs too."""
    require_adapter(agent)
    from assay.tracing import trace

    async def per_call() -> Any:
        async with trace("per-call", client=db, enabled=True) as root:
            await agent.do_async(Task("How many people live in Osaka? Use lookup_city"),
                                 model=_model(srv))
        return root

    root = asyncio.run(per_call())
    db.flush()
    runs = flat_runs(db.read_run(root.id, load_child_runs=True))
    assert [r.run_type for r in runs] == ["chain", "chain", "llm", "tool", "llm"]
    agent.model = _model(srv)
    runs = _traced(db, agent, "How many people live in Sydney? Use lookup_city")
    assert [r.run_type for r in runs] == ["chain", "chain", "llm", "tool", "llm"]


@pytest.mark.parametrize("built", ["before instrument()", "after instrument()",
                                   "inside the target"])
def test_plain_function_calling_an_agent_is_traced(srv: ScriptedModelServer, db: Client,
                                                   built: str) -> None:
    """Built before assay came in: found among the live objects, traced from its own objects;
    built after (a second experiment's agent, a test fixture's): noted at construction and
    moved onto its own objects when the experiment starts; built inside the target: traced
    through Upsonic's instrumentation for that experiment, moved at the next one."""
    from assay.integrations import _upsonic
    from assay.integrations._upsonic_native import is_captured

    made: list[Agent] = []
    if built == "before instrument()":
        # built with no instrumentation, as an agent made before assay came in is; found
        # among the live objects and traced from its own objects
        made.append(Agent(_model(srv), name="prebuilt", tools=[lookup_city], instrument=False))
        assert made[0]._instrument_settings is None
    _upsonic.instrument()  # what evaluate() does once for every framework already imported
    if built == "after instrument()":
        made.append(Agent(_model(srv), name="prebuilt", tools=[lookup_city]))
        assert not is_captured(made[0])  # Upsonic's instrumentation, until evaluate() starts

    async def target(inputs: dict[str, Any]) -> dict[str, Any]:
        if not made:  # built after instrument(): Upsonic's instrumentation (the span path)
            made.append(Agent(_model(srv), name="prebuilt", tools=[lookup_city]))
        task = Task(inputs["question"])
        await made[0].do_async(task)
        return {"answer": task.response}

    for city in ("Madrid", "Quito"):  # the second experiment: the same agent, moved if not yet
        results = evaluate(target, data=_dataset(db, [city]), client=db,
                           evaluators=[assay_evals.ReliabilityEvaluator(None)])
        assert is_captured(made[0]) is (built != "inside the target" or city == "Quito")
        (row,) = list(results)
        runs = _tree(db, row)
        assert [r.name for r in runs if r.run_type == "chain"][1:] == ["prebuilt"]
        assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": city}]
        assert sum(r.run_type == "llm" and r.prompt_tokens > 0 for r in runs) == 2
        assert all(r.parent_run_id == runs[1].id for r in runs[2:])
        assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {
            "reliability": 1.0}


def test_an_agent_moved_mid_run_ends_that_run_through_its_spans(srv: ScriptedModelServer,
                                                                 db: Client) -> None:
    """``adopt`` while an agent built on the span path is inside a run (another thread's
    experiment): that run keeps its agent run's output and its tool run; the next run is
    traced from the agent's own objects, with the same runs."""
    import threading

    from assay.integrations import _upsonic
    from assay.integrations._upsonic_native import is_captured

    entered, release = threading.Event(), threading.Event()

    @tool(max_retries=0)
    def slow_lookup(city: str) -> str:
        """The population of a city."""
        entered.set()
        assert release.wait(30)
        return population(city)

    _upsonic.instrument()
    agent = Agent(_model(srv), name="mover", tools=[slow_lookup])
    assert not is_captured(agent)
    from assay.tracing import trace

    roots: list[Any] = []

    async def twice() -> None:  # one loop: the agent's HTTP client belongs to it
        for _ in range(2):
            async with trace("one", client=db, enabled=True) as root:
                await agent.do_async(Task("How many people live in Lima? Use slow_lookup"))
            roots.append(root)

    worker = threading.Thread(target=asyncio.run, args=(twice(),))
    worker.start()
    assert entered.wait(30)  # the first run is inside its tool call
    _upsonic.adopt()
    assert is_captured(agent)
    release.set()
    worker.join(30)
    assert len(roots) == 2
    db.flush()
    for root in roots:
        runs = flat_runs(db.read_run(root.id, load_child_runs=True))
        assert [r.run_type for r in runs] == ["chain", "chain", "llm", "tool", "llm"]
        assert f"Lima has {CITIES['Lima']} people" in str(runs[1].outputs["output"])
        assert runs[3].name == "slow_lookup" and runs[3].inputs == {"city": "Lima"}
        assert all(r.parent_run_id == runs[1].id for r in runs[2:])


@pytest.mark.parametrize("built", ["after instrument()", "inside the target"])
def test_an_agent_built_after_assay_came_in_keeps_its_model_settings(
        srv: ScriptedModelServer, db: Client, built: str) -> None:
    """Built after ``instrument()``, an agent's model is wrapped in Upsonic's
    ``InstrumentedModel`` before its ``settings=`` are set, so they sit on that wrapper, whose
    ``settings`` reads the model under it: its requests went out without temperature or max
    tokens, on the span path (an agent built inside the target) and once moved onto its own
    objects (the wrapper was dropped with them). Both send them now."""
    from upsonic.models.settings import ModelSettings

    from assay.integrations import _upsonic
    from assay.integrations._upsonic_native import is_captured

    _upsonic.instrument()

    def tuned() -> Agent:
        return Agent(_model(srv), name="tuned", tools=[lookup_city],
                     settings=ModelSettings(temperature=0.25, max_tokens=77))

    made: list[Agent] = []

    async def target(inputs: dict[str, Any]) -> dict[str, Any]:
        made.append(tuned())
        assert not is_captured(made[-1])  # (the span path, for this experiment)
        task = Task(inputs["question"])
        await made[-1].do_async(task)
        return {"answer": task.response}

    subject: Any = target
    if built == "after instrument()":
        subject = tuned()
        assert not is_captured(subject)  # (moved when the experiment starts)
    first = len(srv.requests)
    (row,) = list(evaluate(subject, data=_dataset(db, ["Osaka"]), client=db))
    assert row["run"].error is None and str(CITIES["Osaka"]) in str(row["run"].outputs)
    assert is_captured(subject) is (built == "after instrument()")  # (the target: a function)
    sent = srv.requests[first:]
    assert len(sent) == 2
    assert all((b.get("temperature"), b.get("max_tokens") or b.get("max_completion_tokens"))
               == (0.25, 77) for b in sent), [(b.get("temperature"), b.get("max_tokens"))
                                              for b in sent]
    runs = _tree(db, row)  # (the span path's runs as before)
    assert sum(r.run_type == "llm" and r.prompt_tokens > 0 for r in runs) == 2
    assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": "Osaka"}]


def test_upsonic_judge_inside_evaluate(agent: Agent, judge: Agent, db: Client) -> None:
    # the judge agent is called from evaluate()'s evaluator threads and loops, example after
    # example: its HTTP client must stay on one loop (Upsonic's) throughout
    accuracy = assay_evals.AccuracyEvaluator(judge).as_evaluator(reference_key="answer")
    for concurrency in (0, 4):
        results = evaluate(agent, data=_dataset(db, ["Paris", "Lima", "Cairo"]), client=db,
                           max_concurrency=concurrency, evaluators=[accuracy])
        for row in results:
            scores = {r.key: (r.score, r.comment) for r in row["evaluation_results"]["results"]}
            assert scores["accuracy"][0] == 9.0, scores
            assert scores["accuracy_is_met"][0] == 1.0


@pytest.mark.parametrize("path", ["native", "spans"])
def test_first_token_of_a_streamed_run_none_without_streaming(srv: ScriptedModelServer,
                                                              db: Client, path: str) -> None:
    """Upsonic streams with ``astream``: the first token is on the llm call that streamed the
    text (the tool-calling call streams none): marked at its first text chunk for an agent
    traced from its own objects, from the agent span's time to first token (ms) on the span
    path. ``do_async`` calls the model without streaming: no first token, none recorded."""
    from assay.tracing import trace

    agent = _span_path_agent(srv)
    if path == "native":
        require_adapter(agent)

    async def streamed() -> tuple[Any, str]:
        async with trace("streamed", client=db, enabled=True) as root:
            chunks = [c async for c in agent.astream("How many people live in Paris? "
                                                     "Use lookup_city")]
        return root, "".join(chunks)

    async def plain() -> Any:
        async with trace("plain", client=db, enabled=True) as root:
            await agent.do_async(Task("How many people live in Lima? Use lookup_city"))
        return root

    async def both() -> tuple[Any, str, Any]:
        root, text = await streamed()
        return root, text, await plain()

    root, text, plain_root = asyncio.run(both())
    assert "Paris has 2102650 people" in text
    db.flush()
    llms = [r for r in flat_runs(db.read_run(root.id, load_child_runs=True))
            if r.run_type == "llm"]
    assert len(llms) == 2
    tool_call, answer = sorted(llms, key=lambda r: r.start_time)
    assert tool_call.first_token_time is None and not tool_call.events
    assert answer.first_token_time is not None
    assert answer.start_time <= answer.first_token_time <= answer.end_time
    assert [e["name"] for e in answer.events] == ["new_token"]
    assert answer.prompt_tokens > 0  # stored with the rest of the run, not instead of it
    plain_llms = [r for r in flat_runs(db.read_run(plain_root.id, load_child_runs=True))
                  if r.run_type == "llm"]
    assert len(plain_llms) == 2
    assert all(r.first_token_time is None and not r.events for r in plain_llms)


def test_tracer_makes_only_the_spans_that_can_become_runs(db: Client) -> None:
    """Upsonic's tracer (assay's provider) hands a pipeline step, and any span outside an assay
    run, a non-recording span carrying its parent's context (children then hang from the
    nearest real span); an agent, chat or tool span inside an assay run is a real, recording
    span, as the SDK makes it."""
    from opentelemetry import trace as otel

    from assay.integrations._upsonic_spans import tracer_provider
    from assay.tracing import trace

    tracer = tracer_provider().get_tracer("upsonic")
    outside = tracer.start_span("agent.run")
    assert not outside.is_recording()
    with trace("root", client=db, enabled=True):
        with tracer.start_as_current_span("agent.run") as agent_span:
            assert agent_span.is_recording()
            with tracer.start_as_current_span("pipeline.step.model_execution") as step:
                assert not step.is_recording()
                assert step.get_span_context() == agent_span.get_span_context()
                with tracer.start_as_current_span(
                        "chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat"}) as chat:
                    assert chat.is_recording()
                    assert chat.parent is not None
                    assert chat.parent.span_id == agent_span.get_span_context().span_id
            assert otel.get_current_span() is agent_span


def test_parallel_tool_calls_keep_the_models_order(db: Client) -> None:
    """Both tools called in one model reply (the first slower): the trace and the reliability
    verdict keep the model's order (``check_parallel_calls``)."""
    with ScriptedModelServer(parallel_tool_calls=True) as par:
        agent = Agent(_model(par), name="clock", tools=[tool(max_retries=0)(get_time),
                                                        tool(max_retries=0)(get_weather)])
        check_parallel_calls(db, par, agent)


def test_stream_true_runs_astream_and_the_answer_gets_its_first_token(agent: Agent,
                                                                      db: Client) -> None:
    """``with_run_args(agent, stream=True)``: assay runs the agent with ``astream`` (its text
    chunks drained), so the answer's llm run gets its first token (the tool-calling call
    streams no text: none); the Task's response and tool calls are read as after
    ``do_async``. ``astream`` has no timeout: refused with ``stream=True``."""
    bound = with_run_args(agent, stream=True, retry=1)
    rows = list(evaluate(bound, data=_dataset(db, ["Tokyo", "Lima"]), client=db,
                         max_concurrency=2, evaluators=[
                             assay_evals.ReliabilityEvaluator(None).as_evaluator(client=db)]))
    assert len(rows) == 2
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        assert f"{city} has {CITIES[city]} people" in row["run"].outputs["output"]
        llms = sorted((r for r in _tree(db, row) if r.run_type == "llm"),
                      key=lambda r: r.start_time)
        assert len(llms) == 2 and llms[0].first_token_time is None
        assert llms[1].first_token_time is not None
        assert llms[1].start_time <= llms[1].first_token_time <= llms[1].end_time
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    with pytest.raises(InvalidInputError, match="stream=True takes no timeout"):
        with_run_args(agent, stream=True, timeout=5)


def test_a_graphs_and_a_task_lists_typed_answer_is_their_structured_output(
        srv: ScriptedModelServer) -> None:
    """A Graph whose last Task has a ``response_format``, and a list of Tasks given to an
    agent: the answer's fields are ``structured_output`` too, as a single Task's are."""
    graph = Graph(default_agent=make_agent(srv, "grapher"), show_progress=False)
    graph.add(Task("How many people live in 'Lima'? Use lookup_city",
                   response_format=CityFigure))
    adapter = require_adapter(graph)
    figure = {"city": "Lima", "population": CITIES["Lima"]}
    run = assay_evals.AgentUnderTest(graph).call("ignored: the graph has its tasks")
    outputs = adapter.outputs(run)
    assert outputs["structured_output"] == figure
    assert json.loads(outputs["output"]) == figure
    agent = make_agent(srv)
    typed = [Task("How many people live in 'Lima'? Use lookup_city",
                  response_format=CityFigure)]
    assert require_adapter(agent).outputs(assay_evals.AgentUnderTest(agent).call(typed))[
        "structured_output"] == figure


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_on_gemini_priced_with_its_implicit_cache(stream: bool, db: Client) -> None:
    """Upsonic's ``GoogleModel`` against the scripted Gemini API (implicit caching played):
    each llm run names Google's API and the model, the second call's cached tokens are priced
    as cache reads; ``stream=True`` gives the answer's call its first token."""
    from google import genai
    from google.genai import types
    from upsonic.models.google import GoogleModel
    from upsonic.providers.google import GoogleProvider

    with ScriptedModelServer(prompt_caching=True) as gemini:
        client = genai.Client(api_key="scripted", http_options=types.HttpOptions(
            base_url=gemini.url))
        agent = Agent(GoogleModel(GEMINI, provider=GoogleProvider(client=client)),
                      name="atlas", tools=[lookup_city])
        target: Any = with_run_args(agent, stream=True) if stream else agent
        (row,) = list(evaluate(target, data=_dataset(db, ["Cairo"]), client=db,
                               evaluators=[assay_evals.ReliabilityEvaluator(None)]))
    assert row["run"].error is None and str(CITIES["Cairo"]) in row["run"].outputs["output"]
    runs = _tree(db, row)
    llms = [r for r in runs if r.run_type == "llm"]
    first, second = (check_priced(r, "google-gla", GEMINI) for r in llms)
    assert "cache_read" not in first and second["cache_read"] > 0
    assert (llms[-1].first_token_time is not None) == stream
    assert [r.inputs for r in runs if r.run_type == "tool"] == [{"city": "Cairo"}]
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
