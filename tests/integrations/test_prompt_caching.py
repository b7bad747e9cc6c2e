"""OpenAI's automatic prompt caching through each framework of the dev venv (the Agents SDK on
the Responses and the Chat Completions models, LangChain's ``create_agent``, pydantic-ai),
played by the scripted model (``prompt_caching=True``): the cached tokens each call reports are
stored as cache reads and priced at the cache-read rate. (Anthropic's caching: the Claude tests
of each framework; CrewAI's: tests/integrations/test_crewai.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs assay[openai-agents]")
pytest.importorskip("langchain", reason="needs assay[langgraph]")
pytest.importorskip("pydantic_ai", reason="needs assay[pydantic-ai]")

from openai import AsyncOpenAI

from assay.client import Client
from assay.demo import ScriptedModelServer
from assay.evaluation import evaluate

from .conftest import check_priced, population
from .conftest import run_tree as _tree


def lookup_city(city: str) -> str:
    """The population of a city."""
    return population(city)


def agents_sdk(srv: ScriptedModelServer, responses: bool) -> Any:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        function_tool,
        set_trace_processors,
    )

    from assay.integrations import _openai_agents, instrument

    instrument("openai-agents")
    set_trace_processors([_openai_agents.processor()])  # (no export to OpenAI)
    client = AsyncOpenAI(base_url=srv.base_url, api_key="scripted", max_retries=0)
    model = (OpenAIResponsesModel if responses else OpenAIChatCompletionsModel)(
        "gpt-4o-mini", client)
    return Agent(name="geo", instructions="Answer with lookup_city.",
                 tools=[function_tool(lookup_city)], model=model)


def langchain_agent(srv: ScriptedModelServer) -> Any:
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    return create_agent(ChatOpenAI(model="gpt-4o-mini", base_url=srv.base_url,
                                   api_key="scripted", max_retries=0), [lookup_city])


def pydantic_agent(srv: ScriptedModelServer) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
        base_url=srv.base_url, api_key="scripted")), tools=[lookup_city])


AGENTS: dict[str, Callable[[ScriptedModelServer], Any]] = {
    "agents-sdk-responses": lambda srv: agents_sdk(srv, True),
    "agents-sdk-chat": lambda srv: agents_sdk(srv, False),
    "langchain": langchain_agent,
    "pydantic-ai": pydantic_agent,
}


@pytest.fixture(scope="module")
def cached() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(prompt_caching=True) as srv:
        yield srv


@pytest.mark.parametrize("framework", list(AGENTS))
def test_cached_prompt_tokens_are_priced_as_cache_reads(framework: str,
                                                        cached: ScriptedModelServer,
                                                        db: Client) -> None:
    cached.reset()
    ds = db.create_dataset(f"cache-{uuid.uuid4().hex[:8]}")
    db.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"question": "How many people live in 'Lima'?"}}])
    (row,) = list(evaluate(AGENTS[framework](cached), data=ds.name, client=db))
    assert row["run"].error is None and population("Lima") in str(row["run"].outputs)
    llms = [r for r in _tree(db, row) if r.run_type == "llm"]
    first, second = (check_priced(r, "openai", "gpt-4o-mini") for r in llms)
    assert "cache_read" not in first  # (nothing cached yet: the server was reset)
    # the second call repeats the first's messages: they are read from the cache
    assert 0 < second["cache_read"] < llms[1].prompt_tokens
