"""``assay demo --framework ...``: a real framework's agent, evaluated and traced, no API key.

The agent is built with the framework's own classes (LangChain's ``create_agent`` on
``ChatOpenAI``, an OpenAI Agents SDK ``Agent`` with a handoff, a pydantic-ai or an Upsonic
``Agent`` with the tool, a Google ADK ``Agent`` on Gemini) and talks over HTTP to the bundled
scripted model (``ScriptedModelServer``, started in-process on 127.0.0.1). ``evaluate()`` is
given the agent object itself: the llm and tool runs in the stored trace come from the
framework's own hooks, as they would for a user's agent.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, require
from ._agent import CITIES
from ._scripted import ScriptedModelServer

if TYPE_CHECKING:
    from ..client import Client
    from ..evaluation import ExperimentResults

__all__ = ["FRAMEWORKS", "FRAMEWORK_DATASET", "build_agent", "framework_demo",
           "framework_examples"]

FRAMEWORKS = ("langgraph", "openai-agents", "pydantic-ai", "upsonic", "google-adk")
FRAMEWORK_DATASET = "assay-demo-framework-cities"
_MODELS = {"google-adk": "google:gemini-2.5-flash"}  # (the others: openai:gpt-4o-mini)
_UNKNOWN = "Atlantis"  # a city the atlas lacks: the tool raises, the trace shows the error


def lookup_city(city: str) -> str:
    """The population and area of a city."""
    if city not in CITIES:
        raise LookupError(f"no city named {city!r} in the atlas")
    population, area = CITIES[city]
    return f"{city}: population {population}, area {area} km2"


def framework_examples() -> list[dict[str, Any]]:
    """One question per city of the atlas, and one about a city it lacks."""
    return [{"inputs": {"question": f"How many people live in {city}? Use lookup_city."},
             "outputs": {"answer": str(CITIES[city][0]) if city in CITIES else None,
                         "expected_tool_calls": [{"name": "lookup_city",
                                                  "args": {"city": city}}]}}
            for city in [*CITIES, _UNKNOWN]]


def _langgraph(base_url: str) -> Any:
    """LangChain 1.x's ``create_agent`` (a LangGraph graph: where LangGraph's deprecation of its
    prebuilt ``create_react_agent`` sends users) on the scripted model, streaming."""
    for module in ("langgraph", "langchain_openai", "langchain"):
        require(module, "langgraph", "assay demo --framework langgraph")
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o-mini", base_url=base_url,  # type: ignore[call-arg]  # its aliases
                       api_key="scripted", streaming=True, stream_usage=True, max_retries=0)
    return create_agent(model, [tool(lookup_city)], name="city_agent")


def _openai_agents(base_url: str) -> Any:
    require("agents", "openai-agents", "assay demo --framework openai-agents")
    from agents import Agent, OpenAIChatCompletionsModel, function_tool
    from openai import AsyncOpenAI

    model = OpenAIChatCompletionsModel(
        model="gpt-4o-mini",
        openai_client=AsyncOpenAI(base_url=base_url, api_key="scripted", max_retries=0))
    geo = Agent(name="geo", instructions="Answer with the figure lookup_city gives.",
                tools=[function_tool(lookup_city)], model=model)
    return Agent(name="triage", instructions="Hand questions about cities to geo.",
                 handoffs=[geo], model=model)


def _pydantic_ai(base_url: str) -> Any:
    require("pydantic_ai", "pydantic-ai", "assay demo --framework pydantic-ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-4o-mini",
                            provider=OpenAIProvider(base_url=base_url, api_key="scripted"))
    return Agent(model, name="city_agent", tools=[lookup_city],
                 instructions="Answer with the figure lookup_city gives.")


def _upsonic(base_url: str) -> Any:
    require("upsonic", "upsonic", "assay demo --framework upsonic")
    # Upsonic logs each pipeline step at INFO on the console (~50 lines before the demo's
    # table); the demo's user did not ask for them (their own runs keep Upsonic's default)
    os.environ.setdefault("UPSONIC_LOG_LEVEL", "WARNING")
    from openai import AsyncOpenAI
    from upsonic import Agent
    from upsonic.models.openai import OpenAIChatModel
    from upsonic.providers.openai import OpenAIProvider
    from upsonic.tools import tool

    client = AsyncOpenAI(base_url=base_url, api_key="scripted", max_retries=0)
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
    # Upsonic retries a raising tool 5 times, 31 s of backoff: the atlas's unknown city fails
    # at once here, as in the other frameworks
    return Agent(model, name="city_agent", tools=[tool(max_retries=0)(lookup_city)])


def _google_adk(base_url: str) -> Any:
    """An ADK ``Agent`` on Gemini: the scripted model speaks Google's API too."""
    require("google.adk", "google-adk", "assay demo --framework google-adk")
    from google.adk.agents import Agent
    from google.adk.models import Gemini

    from ..integrations import with_run_args

    model = Gemini(model="gemini-2.5-flash", base_url=base_url.removesuffix("/v1"),
                   client_kwargs={"api_key": "scripted"})
    agent = Agent(name="city_agent", model=model, tools=[lookup_city],
                  instruction="Answer with the figure lookup_city gives.")
    return with_run_args(agent, stream=True)  # (server-sent events: each call's first token)


def build_agent(framework: str, base_url: str) -> Any:
    """The framework's demo agent, talking to the model at ``base_url``."""
    builders = {"langgraph": _langgraph, "openai-agents": _openai_agents,
                "pydantic-ai": _pydantic_ai, "upsonic": _upsonic, "google-adk": _google_adk}
    if framework not in builders:
        raise InvalidInputError(f"unknown demo framework {framework!r}: choose one of "
                                f"{', '.join(FRAMEWORKS)}")
    return builders[framework](base_url)


def correct(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    answer = reference_outputs.get("answer")
    text = str(outputs.get("output") or "")
    ok = answer is not None and answer in text
    return {"key": "correct", "score": int(ok), "value": "CORRECT" if ok else "INCORRECT"}


def _quiet_agents_sdk_export() -> None:
    """The Agents SDK exports its traces to OpenAI by default; a key-free demo must not try:
    keep assay's processor alone (the SDK's supported ``set_trace_processors``)."""
    from agents import set_trace_processors

    from ..integrations import _openai_agents, instrument

    instrument("openai-agents")
    set_trace_processors([_openai_agents.processor()])


@contextlib.contextmanager
def _quiet_logs(framework: str) -> Iterator[None]:
    """ADK logs each failed run with its traceback (the atlas's unknown city, on purpose here):
    the demo's trace shows the error, so its log stays quiet while the demo runs."""
    logger = logging.getLogger("google_adk") if framework == "google-adk" else None
    level = logger.level if logger is not None else 0
    if logger is not None:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        if logger is not None:
            logger.setLevel(level)


@contextlib.contextmanager
def framework_demo(client: Client, framework: str, *, num_repetitions: int = 1,
                   max_concurrency: int = 4) -> Iterator[ExperimentResults]:
    """Start the scripted model, run the experiment (rows as they finish), stop the model
    when the caller is done with the results."""
    from ..evals import ReliabilityEvaluator
    from ..evaluation import evaluate

    if not client.has_dataset(dataset_name=FRAMEWORK_DATASET):
        ds = client.create_dataset(FRAMEWORK_DATASET, description="assay demo --framework: "
                                   "city questions a tool-using agent answers with lookup_city")
        client.create_examples(dataset_id=ds.id, examples=framework_examples())
    with ScriptedModelServer(first_token_delay=0.005) as server, _quiet_logs(framework):
        agent = build_agent(framework, server.base_url)
        if framework == "openai-agents":
            _quiet_agents_sdk_export()
        tools = ReliabilityEvaluator(None).as_evaluator(key="tools", client=client)
        results = evaluate(agent, data=FRAMEWORK_DATASET, evaluators=[correct, tools],
                           num_repetitions=num_repetitions, max_concurrency=max_concurrency,
                           experiment_prefix=f"demo-{framework}",
                           description=f"assay demo: a {framework} agent on the scripted model",
                           metadata={"framework": framework, "model": _MODELS.get(
                               framework, "openai:gpt-4o-mini")},
                           client=client, blocking=False)
        try:
            yield results
        finally:
            results.wait()
