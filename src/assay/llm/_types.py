"""The judge protocol and the plain values that cross it.

A judge model is anything with a ``name`` and an async ``acomplete(messages, output_schema=...)``
returning a ``Completion``. Keeping the protocol this small is what lets an OpenAI-compatible
server, Anthropic, a local model or a plain function all judge through the same code path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Completion", "JudgeModel", "JudgeOptions", "Message", "OutputSchema"]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@dataclass(frozen=True)
class OutputSchema:
    """The JSON schema a structured reply must follow (sent where the endpoint supports it)."""

    name: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Completion:
    """A model's reply with the token counts needed for the llm run's usage and cost."""

    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    raw: Any = field(default=None, repr=False, compare=False)


class JudgeOptions(BaseModel):
    """How a judge talks to its endpoint: one options object instead of a dozen keywords.

    ``structured_output``: ``"auto"`` sends a JSON schema and falls back to prompt-only when the
    endpoint rejects it (HTTP 400/422); ``"json_schema"`` always sends it; ``"json_object"``
    asks for any JSON object (OpenAI JSON mode); ``"prompt"`` relies on the prompt alone.
    Malformed or invalid replies are re-asked up to ``max_output_retries`` times either way.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(60.0, gt=0, description="seconds per HTTP request")
    max_retries: int = Field(3, ge=0,
                             description="retries after 429/5xx/timeouts/connection errors")
    backoff_initial: float = Field(0.5, ge=0, description="first backoff delay in seconds")
    backoff_multiplier: float = Field(2.0, ge=1)
    backoff_max: float = Field(30.0, ge=0, description="cap of one backoff delay")
    max_retry_after: float = Field(120.0, ge=0, description="cap of a server's Retry-After")
    jitter: float = Field(0.1, ge=0, le=1, description="random fraction added to a backoff delay")
    max_output_retries: int = Field(2, ge=0, description="re-asks after malformed/invalid output")
    temperature: float | None = None
    max_tokens: int | None = Field(None, gt=0)
    structured_output: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    trace: bool = Field(True, description="record every judge call as an llm run")

    @model_validator(mode="after")
    def _check(self) -> JudgeOptions:
        if self.backoff_max < self.backoff_initial:
            raise ValueError("backoff_max must be >= backoff_initial")
        return self


@runtime_checkable
class JudgeModel(Protocol):
    """What an accuracy judge needs from a model."""

    @property
    def name(self) -> str: ...  # read-only: the judges derive it from provider and model

    async def acomplete(
        self, messages: Sequence[Message], *, output_schema: OutputSchema | None = None
    ) -> Completion: ...
