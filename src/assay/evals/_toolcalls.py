"""Tool calls, in execution order, from whatever an agent run left behind.

Accepted sources:

- an assay run tree (``assay.schemas.Run`` with ``child_runs``), a LangSmith ``Run``/``RunTree``
  or a wire dict with ``run_type``: every run with ``run_type == "tool"``, ordered by dotted
  order (start order), nested tools included;
- a list of runs (e.g. ``client.list_runs(trace_id=...)``), in any order;
- chat message lists: OpenAI assistant ``tool_calls`` (``function.name`` + JSON ``arguments``)
  and legacy ``function_call``, Anthropic ``tool_use`` blocks, LangChain ``AIMessage.tool_calls``,
  pydantic-ai ``ToolCallPart``s (or a pydantic-ai result: its ``all_messages()``);
- a list of tool names;
- a framework's own result object (``assay.integrations``: an Agents SDK ``RunResult``, a
  CrewAI output, ...), read by that framework's module;
- any object or dict with a ``tool_calls`` list (e.g. an Upsonic ``Task``: ``tool_name`` +
  ``params``) or a ``messages`` list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError
from ..integrations._registry import tool_calls_from
from ._models import ToolCall

__all__ = ["extract_tool_calls"]

_NON_CALL_ROLES = ("user", "system", "developer", "tool", "function", "human")


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _parse_args(raw: Any) -> Any:
    if isinstance(raw, (str, bytes)):
        try:
            return json.loads(raw) if raw else {}
        except (json.JSONDecodeError, UnicodeDecodeError):
            return raw  # kept as sent: argument matching will report the mismatch
    if hasattr(raw, "model_dump"):
        return raw.model_dump()
    return raw


def _is_run(obj: Any) -> bool:
    return not isinstance(obj, str) and _get(obj, "run_type") is not None \
        and _get(obj, "name") is not None


# --- runs -------------------------------------------------------------------------------------

def _flatten(run: Any, out: list[Any], seen: set[str]) -> None:
    key = str(_get(run, "id") or id(run))
    if key in seen:
        return
    seen.add(key)
    out.append(run)
    children = _get(run, "child_runs") or []
    for child in sorted(children, key=_start_key):
        _flatten(child, out, seen)


def _start_key(run: Any) -> tuple[int, str, float]:
    dotted = _get(run, "dotted_order")
    if dotted:
        return (0, str(dotted), 0.0)
    start = _get(run, "start_time")
    if isinstance(start, datetime):
        return (1, "", start.timestamp())
    return (2, "", 0.0)


def _tool_args(inputs: Any) -> Any:
    if isinstance(inputs, Mapping) and set(inputs) == {"input"}:
        inner = inputs["input"]
        parsed = _parse_args(inner) if isinstance(inner, str) else inner
        return parsed if isinstance(parsed, Mapping) else dict(inputs)
    return dict(inputs) if isinstance(inputs, Mapping) else inputs


def _ordered(runs: list[Any]) -> list[Any]:
    """``runs`` in execution order: by dotted order, else by start time, else as given."""
    if all(_get(r, "dotted_order") for r in runs):
        return sorted(runs, key=lambda r: str(_get(r, "dotted_order")))
    if all(isinstance(_get(r, "start_time"), datetime) for r in runs):
        return sorted(runs, key=lambda r: _get(r, "start_time"))
    return runs


def _from_runs(runs: Iterable[Any]) -> list[ToolCall]:
    flat: list[Any] = []
    seen: set[str] = set()
    for run in runs:
        _flatten(run, flat, seen)
    tools = _in_model_order(_ordered(flat),
                            _ordered([r for r in flat if _get(r, "run_type") == "tool"]))
    if not tools:  # no tool runs traced (framework tracing off, a run read without its
        # children): the calls the framework's own result records, kept in the run's outputs
        return [call for run in runs for call in _asked(run)]
    return [ToolCall(name=str(_get(r, "name")), args=_tool_args(_get(r, "inputs")),
                     id=str(_get(r, "id")) if _get(r, "id") is not None else None) for r in tools]


def _asked(run: Any) -> list[ToolCall]:
    """The tool calls an llm run's answer asked for, in the model's order ([]: none read)."""
    outputs = _get(run, "outputs")
    if not isinstance(outputs, Mapping):
        return []
    for value in outputs.values():
        if value is None or isinstance(value, (str, bytes)):
            continue
        try:
            calls = extract_tool_calls(value)
        except Exception:  # noqa: BLE001 - an output of another shape: no order to take from it
            continue
        if calls:
            return calls
    return []


def _match(run: Any, asked: list[ToolCall], used: set[int]) -> int | None:
    """The index in ``asked`` of the call a tool run made (same name and arguments, else the
    same name), one run to a call."""
    name, args = str(_get(run, "name")), _tool_args(_get(run, "inputs"))
    free = [i for i in range(len(asked)) if i not in used]
    return next((i for i in free if asked[i].name == name and asked[i].args == args),
                next((i for i in free if asked[i].name == name), None))


def _in_model_order(flat: list[Any], tools: list[Any]) -> list[Any]:
    """``tools`` (in start order) with each batch of sibling tool runs that one llm answer asked
    for at once put in the order the answer listed them: parallel calls start in whatever order
    the framework's threads or tasks reach them (CrewAI's swap about one time in four)."""
    asked: list[ToolCall] = []
    used: set[int] = set()
    answer = 0
    unread: Any = None  # the last llm run, its answer read once a tool run follows it
    batch: dict[int, tuple[int, str]] = {}
    rank: dict[int, int] = {}
    for run in flat:
        kind = _get(run, "run_type")
        if kind == "llm":
            asked, used, answer, unread = [], set(), answer + 1, run
        elif kind == "tool":
            if unread is not None:
                asked, unread = _asked(unread), None
            if not asked:
                continue
            i = _match(run, asked, used)
            if i is not None:
                used.add(i)
                batch[id(run)] = (answer, str(_get(run, "parent_run_id")))
                rank[id(run)] = i
    groups: dict[tuple[int, str], list[int]] = {}
    for pos, run in enumerate(tools):
        key = batch.get(id(run))
        if key is not None:
            groups.setdefault(key, []).append(pos)
    out = list(tools)
    for positions in groups.values():
        if len(positions) > 1:
            members = sorted((tools[p] for p in positions), key=lambda r: rank[id(r)])
            for pos, run in zip(positions, members, strict=True):
                out[pos] = run
    return out


# --- messages and call records ----------------------------------------------------------------

def _one_call(item: Any) -> ToolCall | None:
    """A single tool-call record in any of the common shapes, or None."""
    if isinstance(item, ToolCall):
        return item
    fn = _get(item, "function")
    if fn is not None and _get(fn, "name"):  # OpenAI {"type": "function", "function": {...}}
        return ToolCall(name=str(_get(fn, "name")), args=_parse_args(_get(fn, "arguments")),
                        id=_get(item, "id"))
    name = _get(item, "tool_name") or _get(item, "name")
    if not isinstance(name, str) or not name:
        return None
    for key in ("args", "arguments", "input", "params", "parameters", "kwargs"):
        value = _get(item, key)
        if value is not None:
            break
    call_id = _get(item, "tool_call_id") or _get(item, "id")
    return ToolCall(name=name, args=_parse_args(value),
                    id=str(call_id) if call_id is not None else None)


_MESSAGE_TYPES = ("ai", "human", "system", "tool", "function", "chat", "AIMessageChunk")


def _is_message(item: Any) -> bool:
    if any(_get(item, k) is not None for k in ("role", "parts", "tool_calls", "function_call")):
        return True
    return _get(item, "type") in _MESSAGE_TYPES and _get(item, "content") is not None


def _from_message(item: Any) -> list[ToolCall]:
    role = _get(item, "role") or _get(item, "type")
    if isinstance(role, str) and role in _NON_CALL_ROLES:
        return []
    parts = _get(item, "parts")
    if isinstance(parts, (list, tuple)):  # pydantic-ai ModelRequest/ModelResponse, and the
        # OpenTelemetry GenAI conventions' message parts ({"type": "tool_call", ...})
        return [call for part in parts
                if (_get(part, "part_kind") in ("tool-call", "builtin-tool-call")
                    or _get(part, "type") == "tool_call")
                and (call := _one_call(part)) is not None]
    calls: list[ToolCall] = []
    for tc in _get(item, "tool_calls") or []:
        call = _one_call(tc)
        if call is None:
            raise InvalidInputError(f"cannot read a tool call from {tc!r}")
        calls.append(call)
    legacy = _get(item, "function_call")
    if legacy is not None and not calls:
        calls.append(ToolCall(name=str(_get(legacy, "name")),
                              args=_parse_args(_get(legacy, "arguments"))))
    content = _get(item, "content")
    if isinstance(content, list):  # Anthropic content blocks
        for block in content:
            if _get(block, "type") == "tool_use" and not any(c.id == _get(block, "id")
                                                             for c in calls):
                calls.append(ToolCall(name=str(_get(block, "name")),
                                      args=_parse_args(_get(block, "input")),
                                      id=_get(block, "id")))
    return calls


def _from_items(items: list[Any]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise InvalidInputError(f"tool name at index {i} is empty")
            calls.append(ToolCall(name=item))
        elif _is_run(item):
            calls.extend(_from_runs([item]))
        elif _is_message(item):
            calls.extend(_from_message(item))
        else:
            call = _one_call(item)
            if call is None:
                raise InvalidInputError(
                    f"cannot read tool calls from item {i} ({type(item).__name__}): expected a "
                    "tool name, a run, a chat message or a tool-call record")
            calls.append(call)
    return calls


def extract_tool_calls(source: Any) -> list[ToolCall]:
    """The tool calls recorded in ``source``, in the order they were made."""
    if source is None:
        return []
    if isinstance(source, (str, bytes)):
        raise InvalidInputError(
            "a tool-call history must be a list of tool names, runs or messages, not a string")
    if isinstance(source, ToolCall):
        return [source]
    framework_calls = tool_calls_from(source)  # a result object of a framework assay knows
    if framework_calls is not None:
        return framework_calls
    if _is_run(source):
        return _from_runs([source])
    if isinstance(source, (list, tuple)):
        items = list(source)
        if items and all(_is_run(r) for r in items):
            return _from_runs(items)
        return _from_items(items)
    if callable(getattr(source, "all_messages", None)):  # pydantic-ai run result
        return _from_items(list(source.all_messages()))
    tool_calls = _get(source, "tool_calls")
    if isinstance(tool_calls, (list, tuple)):
        return _from_items(list(tool_calls))
    messages = _get(source, "messages")
    if isinstance(messages, (list, tuple)):
        return _from_items(list(messages))
    if isinstance(source, Iterable) and not isinstance(source, Mapping):
        return extract_tool_calls(list(source))
    raise InvalidInputError(
        f"cannot read tool calls from a {type(source).__name__}: pass a run tree, a list of runs, "
        "chat messages, tool names, or an object with a 'tool_calls' list")
