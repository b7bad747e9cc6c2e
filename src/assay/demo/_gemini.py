"""The scripted model's Gemini API (``POST /v1beta/models/<model>:generateContent`` and
``:streamGenerateContent?alt=sse``), for agents on Google's models.

Agents built on Gemini (pydantic-ai's ``GoogleModel``, LangChain's ``ChatGoogleGenerativeAI``,
CrewAI's and Upsonic's Google models) talk to the model through Google's ``google-genai``
client, so the scripted model speaks its REST API too: a request's ``systemInstruction`` and
``contents`` (parts ``text``, ``functionCall``, ``functionResponse``) are read as the chat
messages the scripted brain answers, its ``functionDeclarations`` (``parameters`` in Gemini's
upper-case OpenAPI types, or ``parametersJsonSchema``) as the tools offered,
``toolConfig.functionCallingConfig`` mode ``ANY`` with one allowed function as a named tool
choice, and ``generationConfig``'s response schema as a requested schema. The reply is a
``GenerateContentResponse`` (a candidate's parts, ``finishReason``, ``usageMetadata``), or
streamed, one such chunk a word (the first after ``first_token_delay``) with the usage in the
last. Usage as Gemini counts it: ``promptTokenCount`` holds every input token,
``cachedContentTokenCount`` the ones its implicit cache served (with ``prompt_caching=True``:
the longest run of leading contents an earlier request began with, as OpenAI's caching is
played), and with a ``thinkingConfig`` budget ``thoughtsTokenCount`` thinking tokens, billed
as output beside ``candidatesTokenCount``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["chat_request", "is_gemini", "model_of", "reply", "stream_chunks", "usage_of"]

THOUGHTS = 7  # thinking tokens of a reply to a request that gives a thinking budget


def is_gemini(path: str) -> bool:
    return ":generateContent" in path or ":streamGenerateContent" in path


def model_of(path: str) -> str:
    """``gemini-2.5-flash`` from ``/v1beta/models/gemini-2.5-flash:generateContent``."""
    return path.rsplit("/", 1)[-1].split(":", 1)[0]


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _g(obj: Any, name: str) -> Any:
    """A field of a request object by its JSON name or its proto name (``functionCall`` or
    ``function_call``: Gemini takes both, and google-genai sends some fields the second way)."""
    if not isinstance(obj, Mapping):
        return None
    value = obj.get(name)
    return obj.get(_snake(name)) if value is None else value


def _lower_types(schema: Any) -> Any:
    """Gemini's OpenAPI schema (``"type": "STRING"``) as the JSON schema the brain reads."""
    if isinstance(schema, Mapping):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lower_types(v))
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [_lower_types(v) for v in schema]
    return schema


def _text(parts: Any) -> str:
    return " ".join(str(p.get("text", "")) for p in parts or []
                    if isinstance(p, Mapping) and "text" in p and not p.get("thought"))


def _turns(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = [p for p in content.get("parts") or [] if isinstance(p, Mapping)]
    text = _text(parts)
    if content.get("role") == "model":
        calls = [{"id": c.get("id") or c.get("name"), "type": "function",
                  "function": {"name": c.get("name"), "arguments": json.dumps(c.get("args") or {})}}
                 for c in (_g(p, "functionCall") for p in parts) if isinstance(c, Mapping)]
        turn: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            turn["tool_calls"] = calls
        return [turn]
    out: list[dict[str, Any]] = []
    for p in parts:
        result = _g(p, "functionResponse")
        if isinstance(result, Mapping):
            response = result.get("response")
            value: Any = response
            if isinstance(response, Mapping):  # (each framework names the result its way)
                value = next((response[k] for k in ("output", "result", "return_value")
                              if k in response), response)
            out.append({"role": "tool", "tool_call_id": result.get("id") or result.get("name"),
                        "content": value if isinstance(value, str) else json.dumps(value)})
    if text or not out:
        out.append({"role": "user", "content": text})
    return out


def chat_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Gemini request as the chat-completions request the scripted brain reads."""
    messages: list[dict[str, Any]] = []
    system = _g(body, "systemInstruction")
    if isinstance(system, Mapping) and _text(system.get("parts")):
        messages.append({"role": "system", "content": _text(system.get("parts"))})
    for content in body.get("contents") or []:
        if isinstance(content, Mapping):
            messages.extend(_turns(content))
    tools = [{"type": "function", "function": {
        "name": d.get("name"), "description": d.get("description") or "",
        "parameters": _g(d, "parametersJsonSchema") or _lower_types(d.get("parameters") or {})}}
        for t in body.get("tools") or [] if isinstance(t, Mapping)
        for d in _g(t, "functionDeclarations") or [] if isinstance(d, Mapping)]
    out: dict[str, Any] = {"model": body.get("model"), "messages": messages, "tools": tools}
    calling = _g(_g(body, "toolConfig"), "functionCallingConfig") or {}
    allowed = _g(calling, "allowedFunctionNames") or []
    if calling.get("mode") == "ANY" and len(allowed) == 1:
        out["tool_choice"] = {"type": "function", "function": {"name": allowed[0]}}
    elif calling.get("mode") == "NONE":
        out["tools"] = []
    config = _g(body, "generationConfig") or {}
    schema = _g(config, "responseJsonSchema") or _lower_types(_g(config, "responseSchema"))
    if isinstance(schema, Mapping) and schema:
        out["response_format"] = {"type": "json_schema",
                                  "json_schema": {"name": "output", "schema": schema}}
    return out


def usage_of(body: Mapping[str, Any], usage: Mapping[str, Any]) -> dict[str, Any]:
    """Gemini's ``usageMetadata`` for a reply (the brain's counts; its cached tokens from the
    played implicit cache; thinking tokens when the request gives a thinking budget)."""
    thinking = _g(_g(body, "generationConfig"), "thinkingConfig") or {}
    thoughts = THOUGHTS if any(_g(thinking, k) for k in (
        "thinkingBudget", "includeThoughts", "thinkingLevel")) else 0
    prompt, out = usage["prompt_tokens"], usage["completion_tokens"]
    meta: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": out,
                            "totalTokenCount": prompt + out + thoughts}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached:
        meta["cachedContentTokenCount"] = cached
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    return meta


def _parts(content: str | None, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": content}] if content else []
    for call in calls:
        args = call.get("arguments")
        parts.append({"functionCall": {
            "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}", "name": call["name"],
            "args": json.loads(args) if isinstance(args, str) else dict(args or {})}})
    return parts


def response_body(model: str, parts: list[dict[str, Any]], usage: Mapping[str, Any] | None,
                  finish: str | None = "STOP", rid: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0,
                        **({"finishReason": finish} if finish else {})}],
        "modelVersion": model, "responseId": rid or uuid.uuid4().hex[:20]}
    if usage is not None:
        body["usageMetadata"] = dict(usage)
    return body


def reply(model: str, content: str | None, calls: list[dict[str, Any]],
          usage: Mapping[str, Any]) -> dict[str, Any]:
    return response_body(model, _parts(content, calls), usage)


def stream_chunks(model: str, content: str | None, calls: list[dict[str, Any]],
                  usage: Mapping[str, Any], wait_first: Callable[[], None]
                  ) -> Iterator[dict[str, Any]]:
    """A streamed reply's chunks: a word of text each, then the function calls whole (as
    Gemini streams them), the usage and ``finishReason`` on the last."""
    rid = uuid.uuid4().hex[:20]
    pieces: list[list[dict[str, Any]]] = []
    if content:
        words = content.split(" ")
        pieces += [[{"text": w if i == 0 else " " + w}] for i, w in enumerate(words)]
    calls_parts = _parts(None, calls)
    if calls_parts:
        pieces.append(calls_parts)
    pieces = pieces or [[{"text": ""}]]
    wait_first()
    for i, parts in enumerate(pieces):
        last = i == len(pieces) - 1
        yield response_body(model, parts, usage if last else None,
                            "STOP" if last else None, rid)
