"""A judge over Anthropic's Messages API, through the official SDK (extra ``anthropic``).

Structured output is requested with ``output_config={"format": {"type": "json_schema", ...}}``;
an endpoint that rejects it (older API versions, proxies) is asked again without it, relying on
the prompt and the tolerant parse.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InvalidInputError, JudgeError, require
from ._base import BaseJudge, PerLoop
from ._openai import schema_instruction
from ._retry import Failure, parse_retry_after
from ._types import Completion, JudgeOptions, Message, OutputSchema

__all__ = ["AnthropicJudge"]

DEFAULT_MAX_TOKENS = 2048


def _anthropic() -> Any:
    return require("anthropic", "anthropic", "The Anthropic judge")


class AnthropicJudge(BaseJudge):
    """``AnthropicJudge("claude-sonnet-4-5")``; key from ``api_key`` or ``ANTHROPIC_API_KEY``."""

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        options: JudgeOptions | None = None,
    ) -> None:
        super().__init__(model, options=options)
        self.base_url = base_url
        self.api_key = api_key
        self._adopted = self._adopt(client) if client is not None else None
        self._clients = PerLoop(self._make_client)
        self._schema_supported: bool | None = None

    def _adopt(self, client: Any) -> Any:
        anthropic = _anthropic()
        if not isinstance(client, (anthropic.Anthropic, anthropic.AsyncAnthropic)):
            raise InvalidInputError(
                f"client must be an anthropic.Anthropic or AsyncAnthropic, got {type(client)!r}")
        self.base_url = str(client.base_url)
        self.api_key = self.api_key or client.api_key
        return client

    def _make_client(self, first: bool) -> Any:
        anthropic = _anthropic()
        adopted = self._adopted
        if first and isinstance(adopted, anthropic.AsyncAnthropic):
            return adopted.with_options(max_retries=0, timeout=self.options.timeout)
        key = self.api_key or os.environ.get("ANTHROPIC_API_KEY")
        if key is None and self.base_url is None:
            raise JudgeError(f"judge {self.name} has no API key: set ANTHROPIC_API_KEY or "
                             "pass api_key=")
        return anthropic.AsyncAnthropic(api_key=key or "not-needed", base_url=self.base_url,
                                        timeout=self.options.timeout, max_retries=0)

    @property
    def client(self) -> Any:
        """The SDK client of the running event loop (one per loop: connections are loop-bound)."""
        return self._clients.get()

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

    def _classify(self, exc: BaseException) -> Failure | None:
        anthropic = _anthropic()
        if isinstance(exc, anthropic.APITimeoutError):
            return Failure(True, "request timed out", timed_out=True)
        if isinstance(exc, anthropic.APIConnectionError):
            where = self.base_url or "the Anthropic API"
            return Failure(True, f"could not connect to {where}: {exc.__cause__ or exc}")
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            retryable = status in (408, 409, 429) or status >= 500
            after = parse_retry_after(exc.response.headers) if retryable else None
            return Failure(retryable, f"HTTP {status}: {exc.message}", status, after)
        return None
