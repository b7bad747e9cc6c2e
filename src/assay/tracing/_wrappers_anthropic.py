"""``wrap_anthropic``: llm runs from the official ``anthropic`` client (sync, async, streaming).

Covers ``messages.create`` (with or without ``stream=True``) and the ``messages.stream(...)``
helper. Token counts follow LangSmith: ``input_tokens`` includes cache reads and cache writes,
which are also itemised in ``input_token_details`` (``cache_read``, ``cache_creation``).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from ..errors import InvalidInputError
from ._context import _CFG, current_run
from ._run_tree import RunTree
from ._traceable import _is_on
from ._wrappers_common import LLMCallSpec, dump, field, record_usage, wrap_create

__all__ = ["anthropic_usage", "wrap_anthropic"]

C = TypeVar("C")


def anthropic_usage(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    base = field(usage, "input_tokens") or 0
    read = field(usage, "cache_read_input_tokens") or 0
    write = field(usage, "cache_creation_input_tokens") or 0
    # the writes by lifetime (hour-long ones cost more), where the API splits them
    hour = field(field(usage, "cache_creation"), "ephemeral_1h_input_tokens") or 0
    out = field(usage, "output_tokens") or 0
    result: dict[str, Any] = {"input_tokens": base + read + write, "output_tokens": out,
                              "total_tokens": base + read + write + out}
    details = {k: v for k, v in (("cache_read", read), ("cache_creation", write),
                                 ("ephemeral_1h_input_tokens", hour)) if v}
    if details:
        result["input_token_details"] = details
    return result


class _MessageAccumulator:
    """Rebuilds a ``Message`` from raw stream events (message_start ... message_stop)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}

    def add(self, event: Any) -> None:
        kind = field(event, "type")
        if kind == "message_start":
            msg = dump(field(event, "message"))
            self.message = msg if isinstance(msg, dict) else {}
            self.usage.update(self.message.get("usage") or {})
        elif kind == "content_block_start":
            block = dump(field(event, "content_block"))
            self.blocks[field(event, "index") or 0] = dict(block) if isinstance(block, dict) else {}
        elif kind == "content_block_delta":
            idx = field(event, "index") or 0
            delta = field(event, "delta")
            block = self.blocks.setdefault(idx, {"type": "text", "text": ""})
            dtype = field(delta, "type")
            if dtype == "text_delta":
                block["text"] = (block.get("text") or "") + (field(delta, "text") or "")
            elif dtype == "input_json_delta":
                self.json_parts.setdefault(idx, []).append(field(delta, "partial_json") or "")
            elif dtype == "thinking_delta":
                block["thinking"] = (block.get("thinking") or "") + (field(delta, "thinking") or "")
        elif kind == "message_delta":
            delta = field(event, "delta")
            if self.message is not None:
                for key in ("stop_reason", "stop_sequence"):
                    if field(delta, key) is not None:
                        self.message[key] = field(delta, key)
            usage = dump(field(event, "usage"))
            if isinstance(usage, dict):
                self.usage.update({k: v for k, v in usage.items() if v is not None})

    def finish(self, run: RunTree) -> None:
        for idx, parts in self.json_parts.items():
            text = "".join(parts)
            try:
                self.blocks[idx]["input"] = json.loads(text) if text else {}
            except ValueError:
                self.blocks[idx]["input"] = text
        msg = dict(self.message or {})
        msg["content"] = [self.blocks[i] for i in sorted(self.blocks)]
        msg["usage"] = dict(self.usage)
        run.outputs = msg
        record_usage(run, anthropic_usage(self.usage or None), msg.get("model"))


_MESSAGES = LLMCallSpec("ChatAnthropic", "anthropic", model_type="chat",
                        usage_of=anthropic_usage, new_accumulator=_MessageAccumulator)


class _StreamManager:
    """``messages.stream(...)``: the SDK's MessageStream over a traced raw stream."""

    def __init__(self, make: Any, is_async: bool) -> None:
        self._make = make
        self._async = is_async
        self._stream: Any = None

    def __enter__(self) -> Any:
        from anthropic import NOT_GIVEN
        from anthropic.lib.streaming import MessageStream

        self._stream = MessageStream(self._make(), output_format=NOT_GIVEN)
        return self._stream

    def __exit__(self, *exc: Any) -> None:
        if self._stream is not None:
            self._stream.close()

    async def __aenter__(self) -> Any:
        from anthropic import NOT_GIVEN
        from anthropic.lib.streaming import AsyncMessageStream

        self._stream = AsyncMessageStream(await self._make(), output_format=NOT_GIVEN)
        return self._stream

    async def __aexit__(self, *exc: Any) -> None:
        if self._stream is not None:
            await self._stream.close()


def wrap_anthropic(client: C, *, run_name: str | None = None) -> C:
    """Trace ``client.messages.create`` and ``client.messages.stream`` as llm runs; returns it.

    Works on ``anthropic.Anthropic``/``AsyncAnthropic``; the instance is changed in place, the
    ``anthropic`` package is not.
    """
    messages = getattr(client, "messages", None)
    if messages is None or not hasattr(messages, "create"):
        raise InvalidInputError(
            f"wrap_anthropic needs an anthropic.Anthropic or AsyncAnthropic client, "
            f"got {type(client).__name__}")
    import inspect

    is_async = inspect.iscoroutinefunction(inspect.unwrap(messages.create))
    create = messages.create = wrap_create(messages.create, _MESSAGES, is_async=is_async,
                                           run_name=run_name)
    original_stream = getattr(messages, "stream", None)
    if original_stream is not None and not getattr(original_stream, "__assay_wrapped__", False):
        def stream(**kwargs: Any) -> Any:
            # output_format parsing is the SDK helper's own business: leave it untraced-by-us
            if "output_format" in kwargs or not _is_on(current_run(), _CFG.get()):
                return original_stream(**kwargs)
            return _StreamManager(lambda: create(stream=True, **kwargs), is_async)

        stream.__assay_wrapped__ = True  # type: ignore[attr-defined]  # a marker on the function
        stream.__doc__ = original_stream.__doc__
        messages.stream = stream
    return client
