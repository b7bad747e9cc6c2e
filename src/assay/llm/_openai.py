"""A judge over any OpenAI-compatible chat completions endpoint, through the official SDK.

OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio, LiteLLM: all speak
``POST {base_url}/chat/completions``. Structured output is requested with
``response_format={"type": "json_schema", ...}``; servers that reject it are asked again without
it (and remembered), relying on the prompt and the tolerant parse instead.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import JudgeError
from ._retry import MalformedReply
from ._sdk import SDKJudge
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


class OpenAIJudge(SDKJudge):
    """``OpenAIJudge("gpt-4o-mini")`` or ``OpenAIJudge("llama3", base_url="http://host/v1")``.

    The API key comes from ``api_key``, else ``OPENAI_API_KEY``; a custom ``base_url`` without
    a key gets a placeholder (local servers ignore it). ``client`` reuses an existing
    ``openai.OpenAI``/``AsyncOpenAI`` (its own retries are disabled: ours apply).
    """

    _client_class = "OpenAI"
    _key_env = "OPENAI_API_KEY"
    _no_key_hint = " (or base_url= for a local OpenAI-compatible server)"
    _api_name = "the OpenAI API"

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
        super().__init__(model, base_url=base_url, api_key=api_key, client=client,
                         options=options)
        self.provider = provider or ("openai" if base_url is None and client is None
                                     else "openai-compatible")

    @staticmethod
    def _sdk() -> Any:
        import openai

        return openai

    def _client_options(self) -> dict[str, Any]:
        return {"organization": getattr(self._adopted, "organization", None)}

    def _response_format(self, schema: OutputSchema | None) -> dict[str, Any] | None:
        mode = self.options.structured_output
        if schema is None or mode == "prompt" or (mode == "auto"
                                                  and self._schema_supported is False):
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
        choices = getattr(resp, "choices", None) if not isinstance(resp, (str, bytes)) else None
        if not isinstance(choices, list) or not choices:
            raise MalformedReply(f"judge {self.name} returned no choices")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise MalformedReply(f"judge {self.name} returned a choice without a message")
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
