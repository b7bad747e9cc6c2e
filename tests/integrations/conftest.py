"""Framework tests: each framework's REAL package against the scripted model on 127.0.0.1.

One scripted server per test module (``model_server``); ``model`` resets its queue and request
log before each test. ``pydantic_agent`` builds a real pydantic-ai Agent with one tool, talking
to that server through pydantic-ai's own OpenAI provider (its own AsyncOpenAI + httpx client).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pricing_checks import check_priced  # noqa: F401 - the framework tests' price check

from assay.client import Client
from assay.demo import ScriptedModelServer

# the populations the framework tests' lookup_city tools answer with
CITIES = {"Paris": 2102650, "Berlin": 3644826, "Madrid": 3305408, "Tokyo": 13960236,
          "Osaka": 2753862, "Cairo": 10025657, "Lima": 9943800, "Sydney": 5312163}


def population(city: str) -> str:
    """What each framework's lookup_city tool answers (an unknown city raises)."""
    if city not in CITIES:
        raise LookupError(f"no city named {city!r} in the atlas")
    return f"{city} has {CITIES[city]} people"


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedModelServer]:
    """The scripted model of a framework's test module, streaming with a first-token delay."""
    with ScriptedModelServer(first_token_delay=0.002) as server:
        yield server


@pytest.fixture
def db(sqlite_url: str) -> Iterator[Client]:
    """A client of a fresh SQLite store (the experiments of one test)."""
    client = Client(database_url=sqlite_url)
    yield client
    client.close()


def flat_runs(run: Any) -> list[Any]:
    """A run and its descendants, depth first, children in start order."""
    out = [run]
    for child in sorted(run.child_runs or [], key=lambda r: r.dotted_order or ""):
        out.extend(flat_runs(child))
    return out


def run_tree(client: Client, row: Any) -> list[Any]:
    """Every run of an evaluate() row's trace, as stored."""
    client.flush()
    return flat_runs(client.read_run(row["run"].id, load_child_runs=True))


def city_dataset(client: Client, cities: list[str], name: str = "cities", *,
                 question: str = "How many people live in {city}?", city_input: bool = False,
                 answer: Callable[[str], str] | None = None) -> str:
    """A dataset of one population question per city, each expecting one ``lookup_city`` call
    with that city (``city_input``: the city as an input of its own too, for a Crew's task
    templates; ``answer``: a reference answer made from the city); returns its (new) name."""
    ds = client.create_dataset(f"{name}-{'-'.join(cities[:3])}-{uuid.uuid4().hex[:8]}")
    examples = []
    for city in cities:
        inputs = {"question": question.format(city=city), **({"city": city} if city_input else {})}
        outputs: dict[str, Any] = {
            "expected_tool_calls": [{"name": "lookup_city", "args": {"city": city}}]}
        if answer is not None:
            outputs["answer"] = answer(city)
        examples.append({"inputs": inputs, "outputs": outputs})
    client.create_examples(dataset_id=ds.id, examples=examples)
    return ds.name


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def model(model_server: ScriptedModelServer) -> ScriptedModelServer:
    model_server.reset()
    return model_server


def make_pydantic_agent(base_url: str, *, name: str = "weather", failing_tool: bool = False
                        ) -> Any:
    """A pydantic-ai Agent with a ``get_weather`` tool (raising for "Atlantis" when asked)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-4o-mini",
                            provider=OpenAIProvider(base_url=base_url, api_key="scripted"))
    agent = Agent(model, name=name, instructions="Answer with the tool's result.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        if failing_tool and city == "Atlantis":
            raise RuntimeError(f"no weather station in {city}")
        return f"sunny in {city}"

    return agent


@pytest.fixture
def pydantic_agent(model: ScriptedModelServer) -> Any:
    return make_pydantic_agent(model.base_url)


# -- parallel tool calls ---------------------------------------------------------------------------
# The model calls both tools in one reply (ScriptedModelServer(parallel_tool_calls=True), as
# OpenAI's models do); the first sleeps, so where the framework runs them at once the second
# ends first: the order judged must still be the model's.
PARALLEL_QUESTION = "Use get_time and then get_weather for 'Paris'"


def get_time(city: str) -> str:
    """The local time of a city."""
    time.sleep(0.2)
    return f"noon in {city}"


def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def check_parallel_calls(db: Client, srv: ScriptedModelServer, target: Any,
                         examples: int = 4, one_parent: bool = True) -> None:
    """``target`` (an agent whose tools are ``get_time`` and ``get_weather``) under evaluate()
    at ``max_concurrency=examples``: one model reply with both calls, then the answer; each
    example's two tool runs (in the order they ran, which threads may swap) read back in the
    order the model gave them and judged so, under one parent (``one_parent``) or under runs
    of their own that share one."""
    from assay.evals import ReliabilityEvaluator
    from assay.evaluation import evaluate

    ds = db.create_dataset(f"parallel-{uuid.uuid4().hex[:8]}")
    db.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"question": f"{PARALLEL_QUESTION} ({i})"}} for i in range(examples)])
    first = len(srv.requests)
    judge = ReliabilityEvaluator(["get_time", "get_weather"], order_matters=True,
                                 exact_match=True)
    rows = list(evaluate(target, data=ds.name, client=db, max_concurrency=examples,
                         evaluators=[judge]))
    assert len(rows) == examples
    replies = [b for b in srv.requests[first:] if any(
        len(m.get("tool_calls") or ()) == 2 for m in b.get("messages") or ())]
    assert len(replies) == examples  # each answer asked after one reply of two calls
    from assay.evals import extract_tool_calls

    for row in rows:
        assert row["run"].error is None, row["run"].error
        runs = run_tree(db, row)  # (read once: the tree, its tool runs, their parents)
        tools = [r for r in runs if r.run_type == "tool"]
        assert sorted(t.name for t in tools) == ["get_time", "get_weather"]  # (as they ran)
        assert any("noon in Paris" in str(t.outputs) for t in tools)
        assert [c.name for c in extract_tool_calls(runs)] == ["get_time", "get_weather"]
        parents = {t.parent_run_id for t in tools}
        if not one_parent:
            by_id = {r.id: r for r in runs}
            parents = {by_id[p].parent_run_id for p in parents}
        assert len(parents) == 1
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]


# -- concurrency ----------------------------------------------------------------------------------
def check_examples_apart(db: Client, agent: Any, dataset: str, city: Callable[[Any], str],
                         examples: int = 16) -> None:
    """``agent`` (one tool call, two llm calls an answer) under evaluate() at
    ``max_concurrency=8``: each example's runs are its own (one trace, its own city's tool run),
    and reliability reads them (1.0)."""
    from assay.evals import ReliabilityEvaluator
    from assay.evaluation import evaluate

    rows = list(evaluate(agent, data=dataset, client=db, max_concurrency=8,
                         evaluators=[ReliabilityEvaluator(None)]))
    assert len(rows) == examples
    for row in rows:
        runs = run_tree(db, row)
        assert [t.inputs for t in runs if t.run_type == "tool"] == [{"city": city(row)}]
        assert sum(r.run_type == "llm" for r in runs) == 2
        assert {r.trace_id for r in runs} == {row["run"].id}
        assert {r.key: r.score for r in row["evaluation_results"]["results"]} == {
            "reliability": 1.0}


# -- the evaluators, again and again on one agent --------------------------------------------------
def run_accuracy_and_performance(srv: ScriptedModelServer, agent: Any, city: str,
                                 other: str, *, runs: int = 3) -> None:
    """Accuracy (a judge on the scripted model) and performance take ``agent`` as it is and run
    ``runs`` times each on it: the objects a framework binds to the loop they first ran on (its
    HTTP clients) must survive every sync ``run()``. ``city``/``other``: what the two ask about,
    as the agent's questions need them (``'Paris'`` where the scripted model needs quotes)."""
    from assay.evals import AccuracyEvaluator, PerformanceEvaluator
    from assay.llm import JudgeOptions, OpenAIJudge

    judge = OpenAIJudge("gpt-4o-mini", base_url=srv.base_url, api_key="scripted",
                        options=JudgeOptions(timeout=5))
    name = city.strip("'")
    accuracy = AccuracyEvaluator(judge, agent, f"How many people live in {city}?",
                                 f"{name} has {CITIES[name]} people")
    for _ in range(runs):
        result = accuracy.run()
        assert result.average_score == 9.0, result
    performance = PerformanceEvaluator(agent, f"How many people live in {other}?",
                                       num_iterations=1, warmup_runs=0)
    for _ in range(runs):
        perf = performance.run()
        assert len(perf.all_runs) == 1 and perf.latency_stats["average"] > 0


# -- prices ---------------------------------------------------------------------------------------
CLAUDE = "claude-sonnet-4-6"  # (an Anthropic model genai-prices knows, cache writes included)
GEMINI = "gemini-2.5-flash"  # (a Google model genai-prices knows, cache reads included)
