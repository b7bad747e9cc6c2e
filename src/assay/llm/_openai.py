"""A judge over any OpenAI-compatible chat completions endpoint, through the official SDK.

OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio, LiteLLM: all speak
``POST {base_url}/chat/completions``. Structured output is requested with
``response_format={"type": "json_schema", ...}``; servers that reject it are asked again without
it (and remembered), relying on the prompt and the tolerant parse instead.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import InvalidInputError, JudgeError
from ._base import BaseJudge, PerLoop
from ._retry import Failure, parse_retry_after
from ._types import Completion, JudgeOptions, Message, OutputSchema

__all__ = ["OpenAIJudge", "schema_instruction"]


def schema_instruction(schema: OutputSchema) -> str:
    return ("Reply with only a JSON object (no prose, no code fences) that follows this JSON "
            f"schema: {json.dumps(schema.schema)}")


def with_schema_in_prompt(messages: list[Message], schema: OutputSchema) -> list[Message]:
    """Put the schema into the system prompt for endpoints without structured output."""
    note = schema_instruction(schema)
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": messages[0]["content"] + "\n\n" + note},
                *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


class OpenAIJudge(BaseJudge):
    """``OpenAIJudge("gpt-4o-mini")`` or ``OpenAIJudge("llama3", base_url="http://host/v1")``.

    The API key comes from ``api_key``, else ``OPENAI_API_KEY``; a custom ``base_url`` without
    a key gets a placeholder (local servers ignore it). ``client`` reuses an existing
    ``openai.OpenAI``/``AsyncOpenAI`` (its own retries are disabled: ours apply).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        options: JudgeOptions | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(model, options=options)
        self.base_url = base_url
        self.api_key = api_key
        self.provider = provider or ("openai" if base_url is None and client is None
                                     else "openai-compatible")
        self._adopted = self._adopt(client) if client is not None else None
        self._clients = PerLoop(self._make_client)
        self._schema_supported: bool | None = None

    def _adopt(self, client: Any) -> Any:
        import openai

        if not isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)):
            raise InvalidInputError(
                f"client must be an openai.OpenAI or openai.AsyncOpenAI, got {type(client)!r}")
        self.base_url = str(client.base_url)
        self.api_key = self.api_key or client.api_key
        return client

    def _make_client(self, first: bool) -> Any:
        import openai

        adopted = self._adopted
        if first and isinstance(adopted, openai.AsyncOpenAI):
            return adopted.with_options(max_retries=0, timeout=self.options.timeout)
        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if key is None and self.base_url is None:
            raise JudgeError(f"judge {self.name} has no API key: set OPENAI_API_KEY or pass "
                             "api_key= (or base_url= for a local OpenAI-compatible server)")
        organization = getattr(adopted, "organization", None)
        return openai.AsyncOpenAI(api_key=key or "not-needed", base_url=self.base_url,
                                  organization=organization, timeout=self.options.timeout,
                                  max_retries=0)

    @property
    def client(self) -> Any:
        """The SDK client of the running event loop (one per loop: connections are loop-bound)."""
        return self._clients.get()

    def _response_format(self, schema: OutputSchema | None) -> dict[str, Any] | None:
        mode = self.options.structured_output
        if schema is None or mode == "prompt" or (mode == "auto" and self._schema_supported is False):
            return None
        if mode == "json_object":
            return {"type": "json_object"}
        return {"type": "json_schema",
                "json_schema": {"name": schema.name, "schema": schema.schema, "strict": True}}

    async def _send(self, messages: list[Message], output_schema: OutputSchema | None
                    ) -> Completion:
        import openai

        kwargs: dict[str, Any] = {"model": self.model}
        if self.options.temperature is not None:
            kwargs["temperature"] = self.options.temperature
        if self.options.max_tokens is not None:
            kwargs["max_tokens"] = self.options.max_tokens
        rf = self._response_format(output_schema)
        if rf is not None:
            try:
                resp = await self.client.chat.completions.create(
                    messages=messages, response_format=rf, **kwargs)
                self._schema_supported = True
            except (openai.BadRequestError, openai.UnprocessableEntityError):
                if self.options.structured_output != "auto" or self._schema_supported:
                    raise
                self._schema_supported = False  # this endpoint has no structured output
                rf = None
        if rf is None:
            msgs = with_schema_in_prompt(messages, output_schema) if output_schema else messages
            resp = await self.client.chat.completions.create(messages=msgs, **kwargs)
        return self._completion(resp)

    def _completion(self, resp: Any) -> Completion:
        choices = getattr(resp, "choices", None) or []
        if not choices:
            raise JudgeError(f"judge {self.name} returned no choices")
        message = choices[0].message
        refusal = getattr(message, "refusal", None)
        if refusal:
            raise JudgeError(f"judge {self.name} refused to answer: {refusal}")
        usage = getattr(resp, "usage", None)
        return Completion(
            text=message.content or "",
            model=getattr(resp, "model", None) or self.model,
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            finish_reason=choices[0].finish_reason,
            raw=resp,
        )

    def _classify(self, exc: BaseException) -> Failure | None:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return Failure(True, "request timed out", timed_out=True)
        if isinstance(exc, openai.APIConnectionError):
            where = self.base_url or "the OpenAI API"
            return Failure(True, f"could not connect to {where}: {exc.__cause__ or exc}")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retryable = status in (408, 409, 429) or status >= 500
            after = parse_retry_after(exc.response.headers) if retryable else None
            return Failure(retryable, f"HTTP {status}: {exc.message}", status, after)
        return None
