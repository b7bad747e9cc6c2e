"""``wrap_anthropic``: llm runs from the official ``anthropic`` client (sync, async, streaming).

Covers ``messages.create`` (with or without ``stream=True``) and the ``messages.stream(...)``
helper. Token counts follow LangSmith: ``input_tokens`` includes cache reads and cache writes,
which are also itemised in ``input_token_details`` (``cache_read``, ``cache_creation``).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from ..errors import InvalidInputError
from ._context import _CFG, _RUN
from ._run_tree import RunTree
from ._traceable import _is_on
from ._wrappers_common import LLMCallSpec, dump, wrap_create

__all__ = ["anthropic_usage", "wrap_anthropic"]

C = TypeVar("C")


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def anthropic_usage(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    base = _get(usage, "input_tokens") or 0
    read = _get(usage, "cache_read_input_tokens") or 0
    write = _get(usage, "cache_creation_input_tokens") or 0
    out = _get(usage, "output_tokens") or 0
    result: dict[str, Any] = {"input_tokens": base + read + write, "output_tokens": out,
                              "total_tokens": base + read + write + out}
    details = {k: v for k, v in (("cache_read", read), ("cache_creation", write)) if v}
    if details:
        result["input_token_details"] = details
    return result


def _apply(run: RunTree, usage: Any, model: str | None) -> None:
    meta = anthropic_usage(usage)
    if meta is not None:
        run.metadata["usage_metadata"] = meta
    if model and "ls_model_name" not in run.metadata:
        run.metadata["ls_model_name"] = model


def _message_response(run: RunTree, resp: Any) -> None:
    run.outputs = dump(resp) if not isinstance(resp, dict) else resp
    _apply(run, _get(resp, "usage"), _get(resp, "model"))


class _MessageAccumulator:
    """Rebuilds a ``Message`` from raw stream events (message_start ... message_stop)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}

    def add(self, event: Any) -> None:
        kind = _get(event, "type")
        if kind == "message_start":
            msg = dump(_get(event, "message"))
            self.message = msg if isinstance(msg, dict) else {}
            self.usage.update(self.message.get("usage") or {})
        elif kind == "content_block_start":
            block = dump(_get(event, "content_block"))
            self.blocks[_get(event, "index") or 0] = dict(block) if isinstance(block, dict) else {}
        elif kind == "content_block_delta":
            idx = _get(event, "index") or 0
            delta = _get(event, "delta")
            block = self.blocks.setdefault(idx, {"type": "text", "text": ""})
            dtype = _get(delta, "type")
            if dtype == "text_delta":
                block["text"] = (block.get("text") or "") + (_get(delta, "text") or "")
            elif dtype == "input_json_delta":
                self.json_parts.setdefault(idx, []).append(_get(delta, "partial_json") or "")
            elif dtype == "thinking_delta":
                block["thinking"] = (block.get("thinking") or "") + (_get(delta, "thinking") or "")
        elif kind == "message_delta":
            delta = _get(event, "delta")
            if self.message is not None:
                for key in ("stop_reason", "stop_sequence"):
                    if _get(delta, key) is not None:
                        self.message[key] = _get(delta, key)
            usage = dump(_get(event, "usage"))
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
        _apply(run, self.usage or None, msg.get("model"))


_MESSAGES = LLMCallSpec("ChatAnthropic", "anthropic", model_type="chat",
                        on_response=_message_response, new_accumulator=_MessageAccumulator)


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
            if "output_format" in kwargs or not _is_on(_RUN.get(), _CFG.get()):
                return original_stream(**kwargs)
            return _StreamManager(lambda: create(stream=True, **kwargs), is_async)

        stream.__assay_wrapped__ = True  # type: ignore[attr-defined]
        stream.__doc__ = original_stream.__doc__
        messages.stream = stream
    return client
