"""LangChain agents on Claude and on Gemini: ``create_agent("anthropic:...")`` and
``ChatAnthropic`` (the real ``langchain-anthropic``) against the scripted model's Messages API
on 127.0.0.1, with LangChain's own prompt-caching middleware; ``ChatGoogleGenerativeAI`` (the
real ``langchain-google-genai``) against its Gemini API, thinking and implicitly cached: llm runs
that name the provider, their tokens (the cached ones itemised, the thinking ones in the
output) and costs at each rate, first tokens when streamed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_anthropic", reason="needs langchain-anthropic (assay[dev])")
pytest.importorskip("langchain_google_genai", reason="needs langchain-google-genai (assay[dev])")

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.tools import tool
from langchain_google_genai import ChatGoogleGenerativeAI

from assay.client import Client
from assay.demo import ScriptedModelServer
from assay.evals import ReliabilityEvaluator
from assay.evaluation import evaluate
from assay.integrations import with_run_args

from .conftest import CLAUDE, GEMINI, check_priced, city_dataset, population
from .conftest import run_tree as _tree

SYSTEM = "You answer questions about cities with the lookup_city tool and nothing else."


@tool
def lookup_city(city: str) -> str:
    """The population of a city."""
    return population(city)


@pytest.fixture(scope="module")
def claude() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(first_token_delay=0.002) as srv:
        yield srv


def _check(db: Client, rows: list[Any], *, streamed: bool, name: str = "ChatAnthropic",
           provider: str = "anthropic", model: str = CLAUDE) -> list[dict[str, int]]:
    """Each row answered with its tool's result, two priced llm runs and one tool run;
    returns the llm runs' cache counts in order."""
    counts = []
    for row in rows:
        city = row["example"].inputs["question"].split()[-1].rstrip("?")
        assert row["run"].outputs["output"] == f"Answer: {population(city)}"
        runs = _tree(db, row)
        llms = [r for r in runs if r.run_type == "llm"]
        assert [r.name for r in llms] == [name, name]
        counts += [check_priced(r, provider, model) for r in llms]
        assert all((r.first_token_time is not None) == streamed for r in llms)
        assert [r.inputs.get("city") for r in runs if r.run_type == "tool"] == [city]
        assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
    return counts


def test_create_agent_with_a_model_string_and_prompt_caching(
        claude: ScriptedModelServer, db: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """``create_agent("anthropic:<model>", ...)`` (LangChain's own example), its system prompt
    cached for an hour by ``AnthropicPromptCachingMiddleware``: the first call of the run
    writes the cache, every later one reads it (LangChain reports hour-long writes by their
    lifetime, which are priced at twice the input rate)."""
    claude.reset()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted")
    agent = create_agent(f"anthropic:{CLAUDE}", tools=[lookup_city], system_prompt=SYSTEM,
                         middleware=[AnthropicPromptCachingMiddleware(ttl="1h")])
    rows = list(evaluate(agent, data=city_dataset(db, ["Paris", "Lima"]), client=db,
                         evaluators=[ReliabilityEvaluator(None)]))
    counts = _check(db, rows, streamed=False)
    assert counts[0].get("ephemeral_1h_input_tokens", 0) > 0
    assert all(c.get("cache_read", 0) > 0 for c in counts[1:])


@pytest.mark.parametrize("how", ["streaming model", "stream=True"])
def test_a_streamed_chat_anthropic_has_first_tokens_and_all_its_tokens(
        claude: ScriptedModelServer, db: Client, how: str) -> None:
    """Streamed two ways (the model's own ``streaming=True``, or ``with_run_args(graph,
    stream=True)``): each llm run gets its first token, and its input tokens too (Anthropic
    sends the whole usage in its last event, where LangChain reads it), two examples at once."""
    claude.reset()
    # (streaming=False given would keep LangChain from streaming it under a graph's stream)
    streaming: dict[str, Any] = {"streaming": True} if how == "streaming model" else {}
    model = ChatAnthropic(model=CLAUDE, base_url=claude.url, api_key="scripted",
                          max_retries=0, **streaming)
    agent = create_agent(model, tools=[lookup_city], system_prompt=SYSTEM)
    target = with_run_args(agent, stream=True) if how == "stream=True" else agent
    rows = list(evaluate(target, data=city_dataset(db, ["Cairo", "Tokyo"]), client=db,
                         max_concurrency=2, evaluators=[ReliabilityEvaluator(None)]))
    assert len(rows) == 2 and all(body.get("stream") for body in claude.requests)
    counts = _check(db, rows, streamed=True)
    assert counts == [{}] * 4  # (nothing marked for caching)


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_with_thinking_and_implicit_caching(db: Client, stream: bool) -> None:
    """``ChatGoogleGenerativeAI`` with a thinking budget: its output tokens hold the thinking
    tokens (billed as output), and each call after the first of an example reads the one
    before it from Gemini's implicit cache (played), priced as cache reads."""
    from assay.demo._gemini import THOUGHTS

    with ScriptedModelServer(prompt_caching=True, first_token_delay=0.002) as gemini:
        model = ChatGoogleGenerativeAI(model=GEMINI, base_url=gemini.url, api_key="scripted",
                                       thinking_budget=64, max_retries=0)
        agent = create_agent(model, tools=[lookup_city], system_prompt=SYSTEM)
        target = with_run_args(agent, stream=True) if stream else agent
        rows = list(evaluate(target, data=city_dataset(db, ["Osaka"]), client=db,
                             evaluators=[ReliabilityEvaluator(None)]))
    counts = _check(db, rows, streamed=stream, name="ChatGoogleGenerativeAI",
                    provider="google_genai", model=GEMINI)
    assert "cache_read" not in counts[0] and counts[1]["cache_read"] > 0
    llms = [r for r in _tree(db, rows[0]) if r.run_type == "llm"]
    assert all(r.completion_tokens > THOUGHTS for r in llms)
