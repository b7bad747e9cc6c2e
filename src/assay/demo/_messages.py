"""The scripted model's ``POST /v1/messages``: Anthropic's Messages API, for agents on Claude.

Agents built on Claude (pydantic-ai's ``AnthropicModel``, LangChain's ``ChatAnthropic`` and
``create_agent("anthropic:...")``, Upsonic's ``anthropic/...`` models, CrewAI's native Anthropic
LLM) talk to the model through Anthropic's SDK, so the scripted model speaks its API too: a
request's ``system`` and ``messages`` (content blocks ``text``, ``tool_use``, ``tool_result``) are
read as the chat messages the scripted brain already answers, its ``tools`` (``input_schema``)
as the tools offered, ``tool_choice`` ``{"type": "tool"}`` as OpenAI's named tool choice, and
``output_format`` json_schema as a requested schema. The reply is a ``message`` (``text`` and
``tool_use`` blocks, ``stop_reason``, usage as Anthropic counts it: a ``cache_control``
breakpoint's prefix written to the cache on first sight, read from it after, for five
minutes or ``ttl: "1h"``, and the input tokens without them), or with
``stream`` the SSE events Anthropic sends (``message_start``, ``content_block_start``,
``content_block_delta`` per word or argument half, ``content_block_stop``, ``message_delta``
with the output tokens, ``message_stop``), the first delta after ``first_token_delay``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._responses import content_text

__all__ = ["chat_request", "message_body", "stream_events", "usage_of"]


def _turns(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One Anthropic message as chat messages: its tool results each a ``tool`` message."""
    role = str(message.get("role") or "user")
    content = message.get("content")
    if not isinstance(content, list):
        return [{"role": role, "content": content_text(content)}]
    text = " ".join(str(b.get("text", "")) for b in content
                    if isinstance(b, Mapping) and b.get("type") == "text")
    calls = [{"id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
             for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    out = [{"role": "tool", "tool_call_id": b.get("tool_use_id"),
            "content": content_text(b.get("content"))}
           for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"]
    if role == "assistant":
        turn: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            turn["tool_calls"] = calls
        return [turn]
    if text or not out:
        out.append({"role": role, "content": text})
    return out


def chat_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages API request as the chat-completions request the scripted brain reads."""
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": content_text(body["system"])})
    for message in body.get("messages") or []:
        if isinstance(message, Mapping):
            messages.extend(_turns(message))
    tools = [{"type": "function", "function": {
        "name": t.get("name"), "description": t.get("description") or "",
        "parameters": t.get("input_schema") or {}}}
        for t in body.get("tools") or [] if isinstance(t, Mapping) and "input_schema" in t]
    out: dict[str, Any] = {"model": body.get("model"), "messages": messages, "tools": tools}
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "tool":  # as OpenAI names one
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif isinstance(choice, Mapping) and choice.get("type") == "none":
        out["tools"] = []
    fmt = body.get("output_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        out["response_format"] = {"type": "json_schema",
                                  "json_schema": {"name": "output", "schema": fmt.get("schema")}}
    return out


def _cached_prefix(body: Mapping[str, Any]) -> tuple[str, str, int] | None:
    """The prompt up to its last ``cache_control`` breakpoint (system blocks, then the
    messages' blocks, Anthropic's order): (its identity, its ``ttl``, its words), or None."""
    blocks: list[Any] = []
    system = body.get("system")
    if isinstance(system, list):
        blocks.extend(system)
    elif system:
        blocks.append({"type": "text", "text": system})
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        blocks.extend(content if isinstance(content, list) else [{"text": content}])
    marks = [i for i, b in enumerate(blocks) if isinstance(b, Mapping) and b.get("cache_control")]
    if not marks:
        return None
    prefix = blocks[:marks[-1] + 1]
    words = sum(len(content_text(b.get("text") or b.get("content")).split())
                for b in prefix if isinstance(b, Mapping))
    ttl = str(blocks[marks[-1]]["cache_control"].get("ttl") or "5m")
    return json.dumps(prefix, sort_keys=True, default=str), ttl, words


def usage_of(body: Mapping[str, Any], usage: Mapping[str, int], seen: set[str]
             ) -> dict[str, Any]:
    """Anthropic's usage for a reply: with a ``cache_control`` breakpoint in the prompt, its
    prefix's tokens are written to the cache the first time (``seen`` keeps the prefixes this
    server has cached) and read from it after; ``input_tokens`` is the rest, as Anthropic
    counts it (cached tokens excluded)."""
    prompt = usage["prompt_tokens"]
    read = write = hour = 0
    cached = _cached_prefix(body)
    if cached is not None:
        key, ttl, words = cached
        tokens = min(words, prompt)
        if key in seen:
            read = tokens
        else:
            seen.add(key)
            write = tokens
            hour = tokens if ttl == "1h" else 0
    return {"input_tokens": prompt - read - write, "output_tokens": usage["completion_tokens"],
            "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write - hour,
                               "ephemeral_1h_input_tokens": hour}}


def _blocks(content: str | None, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if content:
        blocks.append({"type": "text", "text": content})
    for call in calls:
        args = call.get("arguments")
        blocks.append({"type": "tool_use", "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:20]}",
                       "name": call["name"],
                       "input": json.loads(args) if isinstance(args, str) else dict(args or {})})
    return blocks


def message_body(model: str, content: str | None, calls: list[dict[str, Any]],
                 usage: Mapping[str, Any] | None, *, mid: str | None = None,
                 blocks: list[dict[str, Any]] | None = None,
                 stop: str | None = "end_turn") -> dict[str, Any]:
    """The ``message`` object of a reply (``blocks``/``stop`` given: a streamed one's start)."""
    return {"id": mid or f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
            "model": model, "content": _blocks(content, calls) if blocks is None else blocks,
            "stop_reason": ("tool_use" if calls else stop) if blocks is None else stop,
            "stop_sequence": None,
            "usage": dict(usage) if usage is not None else
            {"input_tokens": 0, "output_tokens": 0}}


def stream_events(model: str, content: str | None, calls: list[dict[str, Any]],
                  usage: Mapping[str, Any], wait_first: Callable[[], None]
                  ) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed reply, as (event type, data); ``wait_first`` is called
    before the first text or argument delta. ``message_start`` has the input tokens and one
    output token, ``message_delta`` the whole usage, as Anthropic sends them now (LangChain's
    ``ChatAnthropic`` reads the tokens from ``message_delta`` alone)."""
    start = message_body(model, None, [], {**usage, "output_tokens": 1}, blocks=[], stop=None)
    yield "message_start", {"type": "message_start", "message": start}
    waited = False
    for index, block in enumerate(_blocks(content, calls)):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            for i, word in enumerate(block["text"].split(" ")):
                if not waited:
                    wait_first()
                    waited = True
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta",
                                                        "text": word if i == 0 else " " + word}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {**block, "input": {}}}
            args = json.dumps(block["input"])
            if not waited:
                wait_first()
                waited = True
            half = len(args) // 2
            for piece in (args[:half], args[half:]):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": "tool_use" if calls else "end_turn",
                                      "stop_sequence": None},
                            "usage": dict(usage)}
    yield "message_stop", {"type": "message_stop"}
