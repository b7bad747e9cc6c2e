"""Upsonic agents on Claude, as Upsonic's own documentation builds them
(``Agent(model="anthropic/<model>")``), against the scripted model's Messages API.

Upsonic 0.77's Anthropic model predates the ``anthropic`` 1.x client (it hands that client an
``httpx`` client and builds Beta message types 1.x made unions: "Invalid `http_client`
argument", "Cannot instantiate typing.Union"), so it needs ``anthropic<1``, which the dev venv
cannot hold beside pydantic-ai's Anthropic model (``anthropic>=1.15``): ``.ci/upsonic-claude``
runs this module in a venv of its own, and the dev venv skips it.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("anthropic", reason="needs anthropic<1 (.ci/upsonic-claude)")
pytest.importorskip("upsonic", reason="needs assay[upsonic]")

import anthropic
from upsonic import Agent
from upsonic.tools import tool

from assay.client import Client
from assay.demo import ScriptedModelServer
from assay.evals import ReliabilityEvaluator
from assay.evaluation import evaluate
from assay.integrations import with_run_args

from .conftest import CLAUDE, check_priced, population
from .conftest import run_tree as _tree

if int(anthropic.__version__.split(".")[0]) >= 1:
    pytest.skip("Upsonic 0.77's Anthropic model needs anthropic<1: run by .ci/upsonic-claude "
                "in a venv of its own", allow_module_level=True)


@tool(max_retries=0)
def lookup_city(city: str) -> str:
    """The population of a city."""
    return population(city)


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_on_claude_with_cached_instructions(stream: bool, db: Client,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each llm run names Anthropic and the model; with ``anthropic_cache_instructions`` the
    first writes the system prompt to the cache and the second reads it, each priced at its
    own rate; ``stream=True`` gives each the time of its first token."""
    from upsonic.models.anthropic import AnthropicModelSettings

    with ScriptedModelServer() as claude:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted")
        agent = Agent(model=f"anthropic/{CLAUDE}", name="atlas", tools=[lookup_city],
                      system_prompt="You answer questions about cities with lookup_city.",
                      settings=AnthropicModelSettings(anthropic_cache_instructions=True))
        ds = db.create_dataset(f"upsonic-claude-{stream}")
        db.create_examples(dataset_id=ds.id, examples=[
            {"inputs": {"question": "How many people live in 'Paris'?"},
             "outputs": {"expected_tool_calls": [{"name": "lookup_city",
                                                  "args": {"city": "Paris"}}]}}])
        target: Any = with_run_args(agent, stream=True) if stream else agent
        (row,) = list(evaluate(target, data=ds.name, client=db,
                               evaluators=[ReliabilityEvaluator(None)]))
    assert row["run"].error is None and "2102650" in row["run"].outputs["output"]
    runs = _tree(db, row)
    llms = [r for r in runs if r.run_type == "llm"]
    first, second = (check_priced(r, "anthropic", CLAUDE) for r in llms)
    assert first["cache_creation"] > 0 and second["cache_read"] == first["cache_creation"]
    # (the tool-calling answer streams no text: only the last call has a first token)
    assert (llms[-1].first_token_time is not None) == stream
    assert [r.inputs.get("city") for r in runs if r.run_type == "tool"] == ["Paris"]
    assert [r.score for r in row["evaluation_results"]["results"]] == [1.0]
