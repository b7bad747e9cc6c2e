"""The scripted model's ``POST /v1/responses``: OpenAI's Responses API, as the Agents SDK uses it.

The OpenAI Agents SDK talks to a model through the Responses API by default
(``OpenAIResponsesModel``), so the scripted model speaks it too: a request's ``instructions`` and
``input`` items (messages, ``function_call``, ``function_call_output``) are read as the chat
messages the scripted brain already answers, its ``function`` tools as the tools offered, and
``text.format`` json_schema/json_object as a request for a verdict. The reply is a ``response``
object (a ``message`` item with ``output_text``, and/or ``function_call`` items) with usage
(input, output, total tokens), or with ``stream`` the SSE event sequence OpenAI sends
(``response.created``, ``output_item.added``, ``output_text.delta`` per word,
``function_call_arguments.delta``, ``output_item.done``, ``response.completed``), the first
delta after ``first_token_delay``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["chat_request", "content_text", "response_body", "stream_events"]


def content_text(content: Any) -> str:
    """A message's content as text (a string, or the text parts of a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def chat_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses API request as the chat-completions request the scripted brain reads."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": content_text(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type") or "message"
        if kind == "message":
            messages.append({"role": str(item.get("role") or "user"),
                             "content": content_text(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)  # parallel calls: one assistant turn
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": content_text(item.get("output"))})
    out: dict[str, Any] = {
        "model": body.get("model"), "messages": messages,
        "tools": [t for t in body.get("tools") or []
                  if isinstance(t, Mapping) and t.get("type", "function") == "function"]}
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), Mapping) else None
    if isinstance(fmt, Mapping):
        out["response_format"] = fmt
    return out


def _usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens_details": {"reasoning_tokens": 0}}


def _items(content: str | None, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if content is not None:
        items.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:16]}",
                      "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": content, "annotations": []}]})
    for call in calls:
        args = call.get("arguments")
        items.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:16]}",
                      "call_id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                      "name": call["name"], "status": "completed",
                      "arguments": args if isinstance(args, str) else json.dumps(args)})
    return items


def response_body(body: Mapping[str, Any], model: str, content: str | None,
                  calls: list[dict[str, Any]], usage: Mapping[str, Any] | None,
                  *, rid: str | None = None, items: list[dict[str, Any]] | None = None,
                  status: str = "completed") -> dict[str, Any]:
    """The ``response`` object of a finished (or, with ``status``, a starting) reply."""
    return {
        "id": rid or f"resp_{uuid.uuid4().hex[:16]}", "object": "response",
        "created_at": int(time.time()), "status": status, "model": model,
        "output": _items(content, calls) if items is None else items,
        "usage": _usage(usage) if usage is not None else None,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "tool_choice": body.get("tool_choice") or "auto", "tools": list(body.get("tools") or []),
        "instructions": body.get("instructions"), "metadata": {}, "error": None,
        "incomplete_details": None, "text": body.get("text") or {"format": {"type": "text"}},
    }


def stream_events(body: Mapping[str, Any], model: str, content: str | None,
                  calls: list[dict[str, Any]], usage: Mapping[str, Any],
                  wait_first: Callable[[], None]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed reply, as (event type, data); ``wait_first`` is called
    before the first text or argument delta."""
    rid = f"resp_{uuid.uuid4().hex[:16]}"
    seq = iter(range(1_000_000))

    def ev(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(seq), **data}

    yield ev("response.created", response=response_body(body, model, None, [], None, rid=rid,
                                                          items=[], status="in_progress"))
    done = _items(content, calls)
    waited = False
    for index, item in enumerate(done):
        iid = item["id"]
        if item["type"] == "message":
            yield ev("response.output_item.added", output_index=index,
                     item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield ev("response.content_part.added", item_id=iid, output_index=index,
                     content_index=0, part=part)
            text = item["content"][0]["text"]
            for i, word in enumerate(text.split(" ")):
                if not waited:
                    wait_first()
                    waited = True
                yield ev("response.output_text.delta", item_id=iid, output_index=index,
                         content_index=0, delta=word if i == 0 else " " + word, logprobs=[])
            yield ev("response.output_text.done", item_id=iid, output_index=index,
                     content_index=0, text=text, logprobs=[])
            yield ev("response.content_part.done", item_id=iid, output_index=index,
                     content_index=0, part={**part, "text": text})
        else:
            yield ev("response.output_item.added", output_index=index,
                     item={**item, "status": "in_progress", "arguments": ""})
            args = item["arguments"]
            if not waited:
                wait_first()
                waited = True
            half = len(args) // 2
            for piece in (args[:half], args[half:]):
                yield ev("response.function_call_arguments.delta", item_id=iid,
                         output_index=index, delta=piece)
            yield ev("response.function_call_arguments.done", item_id=iid, output_index=index,
                     arguments=args, name=item["name"])
        yield ev("response.output_item.done", output_index=index, item=item)
    yield ev("response.completed", response=response_body(body, model, None, [], usage, rid=rid,
                                                            items=done))
