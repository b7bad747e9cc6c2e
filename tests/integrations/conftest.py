"""Framework tests: each framework's REAL package against the scripted model on 127.0.0.1.

One scripted server per test module (``model_server``); ``model`` resets its queue and request
log before each test. ``pydantic_agent`` builds a real pydantic-ai Agent with one tool, talking
to that server through pydantic-ai's own OpenAI provider (its own AsyncOpenAI + httpx client).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from assay.demo import ScriptedModelServer


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        # small replies written in two sends: without TCP_NODELAY each waits ~40 ms for the
        # client's delayed ACK
        srv._httpd.RequestHandlerClass.disable_nagle_algorithm = True
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
