"""Choosing a judge by a short string or by an object, with install hints for extras.

    "openai:gpt-4o-mini"                               OpenAI (OPENAI_API_KEY)
    "anthropic:claude-sonnet-4-5"                      Anthropic (ANTHROPIC_API_KEY,
                                                       extra 'anthropic')
    "openai-compatible:llama3@http://127.0.0.1:8000/v1"  vLLM, llama.cpp, LM Studio, LiteLLM ...
    "ollama:llama3.2"                                  Ollama (OLLAMA_BASE_URL or 127.0.0.1:11434)

Objects: anything implementing ``JudgeModel``; an ``openai``/``anthropic`` client (pass
``model=``); or a plain function (wrapped in ``FunctionJudge``). New prefixes can be added with
``register_judge_provider``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import InvalidInputError
from ._types import JudgeModel, JudgeOptions

__all__ = ["get_judge", "judge_providers", "register_judge_provider"]

Factory = Callable[[str, JudgeOptions | None], JudgeModel]


def _openai(model: str, options: JudgeOptions | None) -> JudgeModel:
    from ._openai import OpenAIJudge

    return OpenAIJudge(model, options=options, base_url=os.environ.get("OPENAI_BASE_URL"))


def _anthropic(model: str, options: JudgeOptions | None) -> JudgeModel:
    from ._anthropic import AnthropicJudge

    return AnthropicJudge(model, options=options)


def _compatible(spec: str, options: JudgeOptions | None) -> JudgeModel:
    from ._openai import OpenAIJudge

    model, sep, url = spec.rpartition("@")
    if not sep or not model or not url.startswith(("http://", "https://")):
        raise InvalidInputError(
            f"openai-compatible judge must look like 'openai-compatible:<model>@http://host/v1', "
            f"got 'openai-compatible:{spec}'")
    return OpenAIJudge(model, base_url=url, options=options, provider="openai-compatible",
                       api_key=os.environ.get("OPENAI_COMPATIBLE_API_KEY"))


def _ollama(model: str, options: JudgeOptions | None) -> JudgeModel:
    from ._openai import OpenAIJudge

    base = os.environ.get("OLLAMA_BASE_URL", "http://127.0.0.1:11434").rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return OpenAIJudge(model, base_url=base, options=options, provider="ollama")


_PROVIDERS: dict[str, Factory] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "openai-compatible": _compatible,
    "ollama": _ollama,
}


def register_judge_provider(prefix: str, factory: Factory) -> None:
    """Make ``"<prefix>:<model>"`` build a judge with ``factory(model, options)``."""
    if not prefix or ":" in prefix:
        raise InvalidInputError(f"judge provider prefix must be a word without ':', got {prefix!r}")
    _PROVIDERS[prefix] = factory


def judge_providers() -> list[str]:
    return sorted(_PROVIDERS)


def _from_client(client: Any, model: str | None, options: JudgeOptions | None) -> JudgeModel | None:
    module = type(client).__module__.split(".")[0]
    if module not in ("openai", "anthropic"):
        return None
    if not model:
        raise InvalidInputError(f"pass model= with a {module} client to use it as a judge")
    if module == "openai":
        from ._openai import OpenAIJudge

        return OpenAIJudge(model, client=client, options=options)
    from ._anthropic import AnthropicJudge

    return AnthropicJudge(model, client=client, options=options)


def get_judge(judge: Any, *, model: str | None = None,
              options: JudgeOptions | None = None) -> JudgeModel:
    """A judge from a spec string, a ``JudgeModel``, an SDK client (with ``model=``) or a
    function."""
    if isinstance(judge, str):
        prefix, sep, rest = judge.partition(":")
        if not sep or not rest:
            raise InvalidInputError(
                f"judge must look like '<provider>:<model>' (providers: "
                f"{', '.join(judge_providers())}), got {judge!r}")
        factory = _PROVIDERS.get(prefix)
        if factory is None:
            raise InvalidInputError(f"unknown judge provider {prefix!r} in {judge!r}; known: "
                                    f"{', '.join(judge_providers())}")
        return factory(rest, options)
    if isinstance(judge, JudgeModel):
        return judge
    built = _from_client(judge, model, options)
    if built is not None:
        return built
    if callable(judge):
        from ._function import FunctionJudge

        return FunctionJudge(judge, options=options)
    raise InvalidInputError(
        "judge must be a '<provider>:<model>' string, a JudgeModel, an openai/anthropic client "
        f"with model=, or a function; got {type(judge).__name__}")
