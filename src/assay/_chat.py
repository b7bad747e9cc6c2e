"""An llm run's inputs and outputs as chat turns, whatever SDK or framework wrote them.

People read a model call as a conversation: system, user, assistant and tool turns, the tool
calls the assistant made with their arguments, the images and files it was shown. Runs carry
that conversation in several dialects; each is recognised here and turned into ``Turn``s:

- OpenAI chat messages (``inputs.messages``; ``outputs.choices[].message``), content parts
  (``text``, ``image_url``, ``input_audio``, ``file``), ``tool_calls`` and ``tool`` replies;
- Anthropic messages (content blocks ``text``, ``image``, ``document``, ``tool_use``,
  ``tool_result``; the ``system`` input; an output message with ``content`` blocks);
- LangChain messages (serialized ``{"lc": 1, "kwargs": ...}`` or ``{"type": "human", ...}``,
  ``inputs.messages`` as a list of lists; ``outputs.generations``);
- GenAI semantic-convention messages (``parts``), and plain ``prompt``/``output`` text;
- the Vercel AI SDK's messages (content parts ``tool-call`` and ``tool-result``), and Bedrock
  Converse's (``text``, ``toolUse``, ``toolResult`` blocks: Strands Agents' spans).

Anything not recognised returns None and the page shows the JSON instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCallView", "Turn", "chat_turns"]

_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
          "system": "system", "developer": "system", "tool": "tool", "function": "tool",
          "model": "assistant", "humanmessage": "user", "aimessage": "assistant",
          "systemmessage": "system", "toolmessage": "tool", "aimessagechunk": "assistant"}


@dataclass
class ToolCallView:
    name: str
    arguments: Any
    id: str | None = None


@dataclass
class Turn:
    role: str
    text: str = ""
    tool_calls: list[ToolCallView] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)  # images, audio, files (named)
    tool_call_id: str | None = None
    name: str | None = None


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _unwrap(msg: Any) -> Mapping[str, Any] | None:
    """A LangChain serialized message's kwargs with its role, or the message dict itself."""
    if not isinstance(msg, Mapping):
        return None
    if msg.get("lc") == 1 and isinstance(msg.get("kwargs"), Mapping):
        kind = str((msg.get("id") or ["", "message"])[-1]).lower()
        return {**msg["kwargs"], "role": _ROLES.get(kind, kind.removesuffix("message"))}
    if "data" in msg and isinstance(msg.get("data"), Mapping) and "type" in msg:
        return {**msg["data"], "role": msg["type"]}
    return msg


def _content(turn: Turn, content: Any) -> None:
    if content is None:
        return
    if isinstance(content, str):
        turn.text += content
        return
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        turn.text += json.dumps(content, ensure_ascii=False, default=str)
        return
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind is None:  # Bedrock Converse's blocks, read as Anthropic's alike
            if isinstance(use := part.get("toolUse"), Mapping):
                kind, part = "tool_use", {**use, "id": use.get("toolUseId")}
            elif isinstance(result := part.get("toolResult"), Mapping):
                kind, part = "tool_result", {**result, "tool_use_id": result.get("toolUseId")}
        if kind in ("text", "input_text", "output_text") or (kind is None and "text" in part):
            texts.append(str(part.get("text") or part.get("content") or ""))
        elif kind in ("image_url", "image", "input_image"):
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, Mapping) else url
            src = part.get("source")
            source: Mapping[str, Any] = src if isinstance(src, Mapping) else {}
            label = (source.get("media_type") or (str(url)[:60] if url else None)
                     or part.get("mime_type") or "image")
            if isinstance(url, str) and url.startswith("data:"):
                label = url.split(";")[0].removeprefix("data:")
            turn.attachments.append(f"image ({label})")
        elif kind in ("input_audio", "audio"):
            fmt = (part.get("input_audio") or {}).get("format") if isinstance(
                part.get("input_audio"), Mapping) else None
            turn.attachments.append(f"audio ({fmt or 'clip'})")
        elif kind in ("file", "document", "input_file"):
            name = (part.get("file") or {}).get("filename") if isinstance(
                part.get("file"), Mapping) else part.get("title") or part.get("filename")
            turn.attachments.append(f"file ({name or 'document'})")
        elif kind in ("tool_use", "tool_call", "function_call", "tool-call"):
            turn.tool_calls.append(ToolCallView(
                str(part.get("name") or part.get("toolName")),
                _args(part.get("input", part.get("arguments", part.get("args")))),
                part.get("id") or part.get("toolCallId")))
        elif kind in ("tool_result", "tool_call_response", "tool-result"):
            turn.tool_call_id = (part.get("tool_use_id") or part.get("id")
                                 or part.get("toolCallId"))
            inner = Turn("tool")
            result = part.get("content", part.get("response", part.get("output",
                                                                       part.get("result"))))
            if isinstance(result, Mapping) and "value" in result:  # the AI SDK's {type, value}
                result = result["value"]
            _content(inner, result)
            texts.append(inner.text)
        else:
            texts.append(json.dumps(part, ensure_ascii=False, default=str))
    turn.text += "\n".join(t for t in texts if t)


def _turn(raw: Any) -> Turn | None:
    msg = _unwrap(raw)
    if msg is None:
        return None
    role = msg.get("role") or msg.get("type")
    if not isinstance(role, str):
        return None
    turn = Turn(_ROLES.get(role.lower(), role.lower()), name=msg.get("name"),
                tool_call_id=msg.get("tool_call_id"))
    _content(turn, msg.get("content"))
    if "parts" in msg:  # GenAI semantic conventions
        for part in msg.get("parts") or []:
            if isinstance(part, Mapping) and part.get("type") == "tool_call":
                turn.tool_calls.append(ToolCallView(str(part.get("name")),
                                                    _args(part.get("arguments")), part.get("id")))
            elif isinstance(part, Mapping) and part.get("type") == "tool_call_response":
                # a tool's answer (pydantic-ai's and Upsonic's spans send it in a user turn,
                # under "result"; the conventions' examples under "response")
                turn.tool_call_id = part.get("id")
                if turn.role == "user":
                    turn.role = "tool"
                value = part["response"] if "response" in part else part.get("result")
                if value is None or isinstance(value, (str, list)):
                    _content(turn, value)
                else:
                    turn.text += json.dumps(value, ensure_ascii=False, default=str)
            else:
                _content(turn, [part])
    for call in msg.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        inner = call.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
        turn.tool_calls.append(ToolCallView(str(fn.get("name")),
                                            _args(fn.get("arguments", fn.get("args"))),
                                            call.get("id")))
    if isinstance(msg.get("function_call"), Mapping):
        fc = msg["function_call"]
        turn.tool_calls.append(ToolCallView(str(fc.get("name")), _args(fc.get("arguments"))))
    return turn


def _turns(items: Any) -> list[Turn] | None:
    if isinstance(items, list) and len(items) == 1 and isinstance(items[0], list):
        items = items[0]  # LangChain chat models: one list of messages per prompt
    if not isinstance(items, list) or not items:
        return None
    found = [_turn(m) for m in items]
    out = [t for t in found if t is not None]
    return out if len(out) == len(found) else None  # one unknown message: show the JSON


def _input_turns(inputs: Mapping[str, Any]) -> list[Turn] | None:
    turns: list[Turn] = []
    system = inputs.get("system")
    if isinstance(system, (str, list)):
        t = Turn("system")
        _content(t, system)
        turns.append(t)
    found = _turns(inputs.get("messages"))
    if found is not None:
        return turns + found
    prompt = inputs.get("prompt", inputs.get("prompts"))
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if isinstance(prompt, str):
        return turns + [Turn("user", prompt)]
    return None


def _output_turns(outputs: Mapping[str, Any]) -> list[Turn] | None:
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices:
        out = []
        for c in choices:
            msg = c.get("message") if isinstance(c, Mapping) else None
            t = _turn({"role": "assistant", **msg}) if isinstance(msg, Mapping) else None
            if t is None and isinstance(c, Mapping) and isinstance(c.get("text"), str):
                t = Turn("assistant", c["text"])
            if t is not None:
                out.append(t)
        return out or None
    gens = outputs.get("generations")
    if isinstance(gens, list) and gens:
        flat = gens[0] if isinstance(gens[0], list) else gens
        out = []
        for g in flat:
            if not isinstance(g, Mapping):
                continue
            t = _turn(g.get("message")) if g.get("message") is not None else None
            out.append(t or Turn("assistant", str(g.get("text", ""))))
        return out or None
    if outputs.get("role") == "assistant" or outputs.get("type") in ("ai", "message"):
        t = _turn({"role": "assistant", **outputs})
        return [t] if t is not None else None
    found = _turns(outputs.get("messages"))
    if found is not None:
        return found
    for key in ("output", "message", "content", "text", "completion"):
        value = outputs.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = "".join(value)  # a streamed reply, stored as its pieces
        if isinstance(value, str):
            return [Turn("assistant", value)]
        if isinstance(value, Mapping):
            t = _turn({"role": "assistant", **value})
            if t is not None:
                return [t]
    return None


def chat_turns(inputs: Any, outputs: Any) -> tuple[list[Turn], list[Turn]] | None:
    """The conversation of an llm run (input turns, output turns), or None if its inputs are
    in no dialect known here."""
    if not isinstance(inputs, Mapping):
        return None
    before = _input_turns(inputs)
    if before is None:
        return None
    after = _output_turns(outputs) if isinstance(outputs, Mapping) else None
    return before, after or []
