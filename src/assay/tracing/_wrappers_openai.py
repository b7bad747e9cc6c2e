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
from ._wrappers_common import LLMCallSpec, dump, wrap_create

__all__ = ["openai_usage", "wrap_openai"]

C = TypeVar("C")


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def openai_usage(usage: Any) -> dict[str, Any] | None:
    """OpenAI usage (chat ``prompt_tokens``, responses ``input_tokens``) -> usage_metadata."""
    if usage is None:
        return None
    inp = _get(usage, "prompt_tokens")
    if inp is None:
        inp = _get(usage, "input_tokens")
    out = _get(usage, "completion_tokens")
    if out is None:
        out = _get(usage, "output_tokens")
    total = _get(usage, "total_tokens")
    if total is None:
        total = (inp or 0) + (out or 0)
    result: dict[str, Any] = {"input_tokens": inp or 0, "output_tokens": out or 0,
                              "total_tokens": total}
    in_details = _get(usage, "prompt_tokens_details") or _get(usage, "input_tokens_details")
    out_details = _get(usage, "completion_tokens_details") or _get(usage, "output_tokens_details")
    ind = {k: v for k, v in (("cache_read", _get(in_details, "cached_tokens")),
                             ("audio", _get(in_details, "audio_tokens"))) if v}
    outd = {k: v for k, v in (("reasoning", _get(out_details, "reasoning_tokens")),
                              ("audio", _get(out_details, "audio_tokens"))) if v}
    if ind:
        result["input_token_details"] = ind
    if outd:
        result["output_token_details"] = outd
    return result


def _apply_usage(run: RunTree, usage: Any, model: str | None) -> None:
    meta = openai_usage(usage)
    if meta is not None:
        run.metadata["usage_metadata"] = meta
    if model and "ls_model_name" not in run.metadata:
        run.metadata["ls_model_name"] = model


# -- chat completions -----------------------------------------------------------------------------
def _chat_response(run: RunTree, resp: Any) -> None:
    run.outputs = dump(resp) if not isinstance(resp, dict) else resp
    _apply_usage(run, _get(resp, "usage"), _get(resp, "model"))


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
        self.id = _get(chunk, "id") or self.id
        self.model = _get(chunk, "model") or self.model
        self.created = _get(chunk, "created") or self.created
        if _get(chunk, "usage") is not None:
            self.usage = _get(chunk, "usage")
        for ch in _get(chunk, "choices") or ():
            idx = _get(ch, "index") or 0
            slot = self.choices.setdefault(idx, {"index": idx, "message": {
                "role": "assistant", "content": None}, "finish_reason": None})
            delta = _get(ch, "delta")
            msg = slot["message"]
            if _get(delta, "role"):
                msg["role"] = _get(delta, "role")
            if _get(delta, "content"):
                msg["content"] = (msg["content"] or "") + _get(delta, "content")
            if _get(delta, "refusal"):
                msg["refusal"] = (msg.get("refusal") or "") + _get(delta, "refusal")
            for tc in _get(delta, "tool_calls") or ():
                calls = self.tool_calls.setdefault(idx, {})
                t = calls.setdefault(_get(tc, "index") or 0, {
                    "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if _get(tc, "id"):
                    t["id"] = _get(tc, "id")
                fn = _get(tc, "function")
                if _get(fn, "name"):
                    t["function"]["name"] += _get(fn, "name")
                if _get(fn, "arguments"):
                    t["function"]["arguments"] += _get(fn, "arguments")
            if _get(ch, "finish_reason"):
                slot["finish_reason"] = _get(ch, "finish_reason")

    def finish(self, run: RunTree) -> None:
        for idx, calls in self.tool_calls.items():
            self.choices[idx]["message"]["tool_calls"] = [calls[i] for i in sorted(calls)]
        out: dict[str, Any] = {"id": self.id, "object": "chat.completion", "model": self.model,
                               "created": self.created,
                               "choices": [self.choices[i] for i in sorted(self.choices)]}
        if self.usage is not None:
            out["usage"] = dump(self.usage)
        run.outputs = out
        _apply_usage(run, self.usage, self.model)


# -- responses API ------------------------------------------------------------------------------
def _responses_response(run: RunTree, resp: Any) -> None:
    run.outputs = dump(resp) if not isinstance(resp, dict) else resp
    _apply_usage(run, _get(resp, "usage"), _get(resp, "model"))


class _ResponsesAccumulator:
    """Keeps the final ``response.completed`` event's response (text deltas if it never came)."""

    def __init__(self) -> None:
        self.response: Any = None
        self.text: list[str] = []

    def add(self, event: Any) -> None:
        kind = _get(event, "type")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.response = _get(event, "response")
        elif kind == "response.output_text.delta":
            self.text.append(_get(event, "delta") or "")

    def finish(self, run: RunTree) -> None:
        if self.response is not None:
            _responses_response(run, self.response)
        else:
            run.outputs = {"output_text": "".join(self.text)}


_CHAT = LLMCallSpec("ChatOpenAI", "openai", model_type="chat", on_response=_chat_response,
                    new_accumulator=_ChatAccumulator)
_RESPONSES = LLMCallSpec("OpenAI Responses", "openai", model_type="chat",
                         on_response=_responses_response, new_accumulator=_ResponsesAccumulator)


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
