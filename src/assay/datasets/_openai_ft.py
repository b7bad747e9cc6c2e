"""A dataset as OpenAI fine-tuning lines, as LangSmith's ``read_dataset_openai_finetuning``
downloads it (``GET /datasets/{id}/openai_ft``): one ``{"messages": [...]}`` a line, each
example's conversation (its inputs' messages or prompt, then its outputs' reply) in OpenAI's chat
format, with the example's ``tools``/``functions`` when it has them.

The conversation is read with the same dialects the web UI reads llm runs in (``.._chat``):
OpenAI, Anthropic, LangChain (serialized or ``{"type": "human", "data": ...}``, a chat dataset's
``inputs.input``) and GenAI messages. An example that holds no such conversation, or an image
or file (which these text lines would silently drop), is refused naming it: a training file that
lost part of its data without a word is worse than none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .._chat import Turn, chat_turns
from ..errors import InvalidInputError
from ..schemas import Example

__all__ = ["from_openai_line", "openai_line", "openai_lines"]

_TOOL_KEYS = ("tools", "functions")


def _only_text(values: Mapping[str, Any]) -> str | None:
    """The one string value of a kv example's inputs or outputs (``{"question": "..."}``)."""
    texts = [v for k, v in values.items() if isinstance(v, str) and k not in _TOOL_KEYS]
    return texts[0] if len(texts) == 1 else None


def _message(turn: Turn, where: str) -> dict[str, Any]:
    if turn.attachments:
        raise InvalidInputError(f"{where} holds {', '.join(turn.attachments)}: OpenAI "
                                "fine-tuning lines carry text and tool calls only")
    role = turn.role if turn.role in ("system", "user", "assistant", "tool") else None
    if role is None:
        raise InvalidInputError(f"{where} has role {turn.role!r}, which OpenAI's chat format "
                                "does not have")
    out: dict[str, Any] = {"role": role, "content": turn.text}
    if turn.name and role != "tool":
        out["name"] = turn.name
    if turn.tool_calls:
        out["content"] = turn.text or None
        out["tool_calls"] = [
            {"id": call.id or f"call_{i}", "type": "function",
             "function": {"name": call.name,
                          "arguments": call.arguments if isinstance(call.arguments, str)
                          else json.dumps(call.arguments, ensure_ascii=False)}}
            for i, call in enumerate(turn.tool_calls)]
    if role == "tool":
        out["tool_call_id"] = turn.tool_call_id or ""
    return out


def openai_line(example: Example) -> dict[str, Any]:
    """One example's conversation as an OpenAI fine-tuning line."""
    what = f"example {example.id}"
    inputs = dict(example.inputs)
    if "messages" not in inputs and "prompt" not in inputs:
        listed = inputs.get("input")
        if isinstance(listed, list):  # a LangSmith chat dataset: inputs.input is the messages
            inputs["messages"] = listed
        elif (text := _only_text(inputs)) is not None:  # {"question": "..."}: the user's turn
            inputs["prompt"] = text
    outputs = example.outputs or {}
    found = chat_turns(inputs, outputs)
    if found is not None and not found[1] and (text := _only_text(outputs)):
        found = chat_turns(inputs, {"output": text})  # {"answer": "..."}: the reply
    if found is None:
        raise InvalidInputError(f"{what}: its inputs hold no conversation (messages, a chat "
                                "dataset's input list, a prompt, or one string value)")
    turns = [*found[0], *found[1]]
    messages = [_message(t, f"{what}, message {i}") for i, t in enumerate(turns)]
    if not any(m["role"] == "assistant" for m in messages):
        raise InvalidInputError(f"{what}: no assistant reply to learn from (its outputs hold "
                                "no message, output, content or one string value)")
    line: dict[str, Any] = {"messages": messages}
    for key in _TOOL_KEYS:
        if isinstance(example.inputs.get(key), list) and example.inputs[key]:
            line[key] = example.inputs[key]
    return line


def openai_lines(examples: Iterable[Example]) -> list[dict[str, Any]]:
    """Every example's line, or an error naming the first that cannot be one (nothing else)."""
    return [openai_line(ex) for ex in examples]


def from_openai_line(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    """An OpenAI fine-tuning line as an example: the messages before the last (the assistant's
    reply) as ``inputs.messages``, with the line's ``tools``, and that reply as
    ``outputs.message``; ``openai_line`` gives the line back."""
    messages = item.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise InvalidInputError(f"{where}: an OpenAI fine-tuning line needs a 'messages' list")
    if not messages or messages[-1].get("role") != "assistant":
        raise InvalidInputError(f"{where}: the last message must be the assistant's reply")
    inputs: dict[str, Any] = {"messages": messages[:-1]}
    inputs.update({k: item[k] for k in _TOOL_KEYS if k in item})
    return {"inputs": inputs, "outputs": {"message": messages[-1]}}
