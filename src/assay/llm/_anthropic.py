"""A judge over Anthropic's Messages API, through the official SDK (extra ``anthropic``).

Structured output is requested with ``output_config={"format": {"type": "json_schema", ...}}``;
an endpoint that rejects it (older API versions, proxies) is asked again without it, relying on
the prompt and the tolerant parse.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError, JudgeError, require
from ._openai import schema_instruction
from ._sdk import SDKJudge
from ._types import Completion, Message, OutputSchema

__all__ = ["AnthropicJudge"]

DEFAULT_MAX_TOKENS = 2048


def _anthropic() -> Any:
    return require("anthropic", "anthropic", "The Anthropic judge")


class AnthropicJudge(SDKJudge):
    """``AnthropicJudge("claude-sonnet-4-5")``; key from ``api_key`` or ``ANTHROPIC_API_KEY``."""

    provider = "anthropic"
    _client_class = "Anthropic"
    _key_env = "ANTHROPIC_API_KEY"
    _api_name = "the Anthropic API"

    @staticmethod
    def _sdk() -> Any:
        return _anthropic()

    async def _send(self, messages: list[Message], output_schema: OutputSchema | None
                    ) -> Completion:
        anthropic = _anthropic()
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        chat = [m for m in messages if m["role"] != "system"]
        if not chat:
            raise InvalidInputError("the Anthropic judge needs at least one user message")
        kwargs: dict[str, Any] = {"model": self.model,
                                  "max_tokens": self.options.max_tokens or DEFAULT_MAX_TOKENS}
        if self.options.temperature is not None:
            kwargs["temperature"] = self.options.temperature
        mode = self.options.structured_output
        use_schema = output_schema is not None and mode in ("auto", "json_schema") and not (
            mode == "auto" and self._schema_supported is False)
        if use_schema:
            assert output_schema is not None
            try:
                resp = await self.client.messages.create(
                    messages=chat, system=system or anthropic.omit,
                    output_config={"format": {"type": "json_schema",
                                              "schema": output_schema.schema}}, **kwargs)
                self._schema_supported = True
                return self._completion(resp)
            except (anthropic.BadRequestError, anthropic.UnprocessableEntityError):
                if mode != "auto" or self._schema_supported:
                    raise
                self._schema_supported = False
        if output_schema is not None:
            system = (system + "\n\n" if system else "") + schema_instruction(output_schema)
        resp = await self.client.messages.create(messages=chat, system=system or anthropic.omit,
                                                 **kwargs)
        return self._completion(resp)

    def _completion(self, resp: Any) -> Completion:
        if getattr(resp, "stop_reason", None) == "refusal":
            raise JudgeError(f"judge {self.name} refused to answer")
        text = "".join(getattr(b, "text", "") for b in (resp.content or [])
                       if getattr(b, "type", None) == "text")
        usage = getattr(resp, "usage", None)
        return Completion(
            text=text,
            model=getattr(resp, "model", None) or self.model,
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
            finish_reason=getattr(resp, "stop_reason", None),
            raw=resp,
        )
