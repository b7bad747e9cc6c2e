"""``wrap_openai``: llm runs from the official ``openai`` client (sync and async, streaming or not).

Covers ``chat.completions.create`` and ``responses.create``. Usage comes from the response's
``usage`` (for streamed chat completions OpenAI sends it in the final chunk only when asked with
``stream_options={"include_usage": True}``; without it the run has no token counts). The model
recorded for pricing is the requested one (``ls_model_name``); the response's model is kept in
the outputs.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ..errors import InvalidInputError
from ._run_tree import RunTree
from ._wrappers_common import LLMCallSpec, dump, field, record_response, record_usage, wrap_create

__all__ = ["openai_usage", "wrap_openai"]

C = TypeVar("C")


def openai_usage(usage: Any) -> dict[str, Any] | None:
    """OpenAI usage (chat ``prompt_tokens``, responses ``input_tokens``) -> usage_metadata."""
    if usage is None:
        return None
    inp = field(usage, "prompt_tokens")
    if inp is None:
        inp = field(usage, "input_tokens")
    out = field(usage, "completion_tokens")
    if out is None:
        out = field(usage, "output_tokens")
    total = field(usage, "total_tokens")
    if total is None:
        total = (inp or 0) + (out or 0)
    result: dict[str, Any] = {"input_tokens": inp or 0, "output_tokens": out or 0,
                              "total_tokens": total}
    in_details = field(usage, "prompt_tokens_details") or field(usage, "input_tokens_details")
    out_details = field(usage, "completion_tokens_details") or field(usage, "output_tokens_details")
    ind = {k: v for k, v in (("cache_read", field(in_details, "cached_tokens")),
                             ("audio", field(in_details, "audio_tokens"))) if v}
    outd = {k: v for k, v in (("reasoning", field(out_details, "reasoning_tokens")),
                              ("audio", field(out_details, "audio_tokens"))) if v}
    if ind:
        result["input_token_details"] = ind
    if outd:
        result["output_token_details"] = outd
    return result


# -- chat completions -----------------------------------------------------------------------------
class _ChatAccumulator:
    """Reassembles streamed ``ChatCompletionChunk``s into one completion."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self.usage: Any = None
        self.choices: dict[int, dict[str, Any]] = {}
        self.tool_calls: dict[int, dict[int, dict[str, Any]]] = {}

    def add(self, chunk: Any) -> None:
        self.id = field(chunk, "id") or self.id
        self.model = field(chunk, "model") or self.model
        self.created = field(chunk, "created") or self.created
        if field(chunk, "usage") is not None:
            self.usage = field(chunk, "usage")
        for ch in field(chunk, "choices") or ():
            idx = field(ch, "index") or 0
            slot = self.choices.setdefault(idx, {"index": idx, "message": {
                "role": "assistant", "content": None}, "finish_reason": None})
            delta = field(ch, "delta")
            msg = slot["message"]
            if field(delta, "role"):
                msg["role"] = field(delta, "role")
            if field(delta, "content"):
                msg["content"] = (msg["content"] or "") + field(delta, "content")
            if field(delta, "refusal"):
                msg["refusal"] = (msg.get("refusal") or "") + field(delta, "refusal")
            for tc in field(delta, "tool_calls") or ():
                calls = self.tool_calls.setdefault(idx, {})
                t = calls.setdefault(field(tc, "index") or 0, {
                    "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if field(tc, "id"):
                    t["id"] = field(tc, "id")
                fn = field(tc, "function")
                if field(fn, "name"):
                    t["function"]["name"] += field(fn, "name")
                if field(fn, "arguments"):
                    t["function"]["arguments"] += field(fn, "arguments")
            if field(ch, "finish_reason"):
                slot["finish_reason"] = field(ch, "finish_reason")

    def finish(self, run: RunTree) -> None:
        for idx, calls in self.tool_calls.items():
            self.choices[idx]["message"]["tool_calls"] = [calls[i] for i in sorted(calls)]
        out: dict[str, Any] = {"id": self.id, "object": "chat.completion", "model": self.model,
                               "created": self.created,
                               "choices": [self.choices[i] for i in sorted(self.choices)]}
        if self.usage is not None:
            out["usage"] = dump(self.usage)
        run.outputs = out
        record_usage(run, openai_usage(self.usage), self.model)


# -- responses API ------------------------------------------------------------------------------
class _ResponsesAccumulator:
    """Keeps the final ``response.completed`` event's response (text deltas if it never came)."""

    def __init__(self) -> None:
        self.response: Any = None
        self.text: list[str] = []

    def add(self, event: Any) -> None:
        kind = field(event, "type")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.response = field(event, "response")
        elif kind == "response.output_text.delta":
            self.text.append(field(event, "delta") or "")

    def finish(self, run: RunTree) -> None:
        if self.response is not None:
            record_response(run, self.response, openai_usage)
        else:
            run.outputs = {"output_text": "".join(self.text)}


_CHAT = LLMCallSpec("ChatOpenAI", "openai", model_type="chat", usage_of=openai_usage,
                    new_accumulator=_ChatAccumulator)
_RESPONSES = LLMCallSpec("OpenAI Responses", "openai", model_type="chat",
                         usage_of=openai_usage, new_accumulator=_ResponsesAccumulator)


def wrap_openai(client: C, *, run_name: str | None = None) -> C:
    """Trace ``client``'s chat completions and responses calls as llm runs; returns ``client``.

    Works on ``openai.OpenAI``/``AsyncOpenAI`` (and Azure variants). The instance is changed in
    place (its resource objects get traced methods); the ``openai`` package itself is not.
    """
    chat = getattr(getattr(client, "chat", None), "completions", None)
    if chat is None or not hasattr(chat, "create"):
        raise InvalidInputError(
            "wrap_openai needs an openai.OpenAI or AsyncOpenAI client, "
            f"got {type(client).__name__}")
    import inspect

    is_async = inspect.iscoroutinefunction(inspect.unwrap(chat.create))
    chat.create = wrap_create(chat.create, _CHAT, is_async=is_async, run_name=run_name)
    responses = getattr(client, "responses", None)
    if responses is not None and hasattr(responses, "create"):
        responses.create = wrap_create(responses.create, _RESPONSES, is_async=is_async,
                                       run_name=run_name)
    return client
