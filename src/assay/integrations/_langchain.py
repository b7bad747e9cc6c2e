"""LangGraph and LangChain: graphs and runnables as agents, their steps as assay runs.

Adapter: a compiled graph (LangChain 1.x's ``create_agent``, ``create_react_agent``, a
hand-built ``StateGraph``) or any LangChain ``Runnable``. A plain-string query becomes
``{"messages": [("user", query)]}`` for a graph whose state has a ``messages`` channel; an
evaluate() inputs dict whose keys are state channels is passed as is (else its question text
becomes the user message). Results are read back as
JSON-safe dicts (message objects serialized), so runs and evaluators never see LangChain classes.

Capture: one ``BaseCallbackHandler`` registered with LangChain's ``register_configure_hook``. The
hook's "context variable" answers with the handler only while an assay run is current and
framework tracing is on, so LangChain adds it to exactly those calls; everywhere else it costs
one contextvar read per LangChain call. LangChain gives every step a run id and its parent's, so
the tree is rebuilt as LangChain nested it: chains (graph, nodes), llm runs (model and provider
from LangChain's ``ls_*`` metadata, messages, ``usage_metadata`` tokens, the first streamed token)
and tool runs (arguments, result, error). Steps LangChain marks hidden (``langsmith:hidden``,
e.g. LangGraph's channel writes) are skipped, their children going to the nearest shown step.
The handler (``_lc_capture.py``) only logs each callback on the agent's thread; the runs are
built from the log off it, or by whoever reads or stores them first.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import orjson

from .._json import jsonable
from ..errors import InvalidInputError, require
from ..evals._models import ToolCall
from ..evals._toolcalls import extract_tool_calls
from ..tracing._run_tree import SPEEDUPS
from ._registry import (
    QUERY_KEYS,
    content_text,
    framework_parent,
    framework_root,
    once,
    query_text,
    structured_output,
)

__all__ = [
    "LangChainAdapter",
    "adapt",
    "handler",
    "instrument",
    "message_dict",
    "to_json",
    "tool_calls",
]

_ROLES = {"human": "user", "ai": "assistant", "AIMessageChunk": "assistant", "system": "system",
          "tool": "tool", "function": "function", "chat": "user"}


# -- JSON-safe values ------------------------------------------------------------------------------
# class -> whether its instances are LangChain messages: asked once per class, not three
# ``hasattr`` per value (a graph's state is converted at every step it passes through)
_MESSAGE_CLASSES: dict[type, bool] = {}


def _is_message(value: Any) -> bool:
    cls = value.__class__
    known = _MESSAGE_CLASSES.get(cls)
    if known is None:
        known = _MESSAGE_CLASSES[cls] = hasattr(value, "content") and isinstance(
            getattr(value, "type", None), str) and hasattr(value, "additional_kwargs")
    return known


def message_dict(m: Any) -> dict[str, Any]:
    """A LangChain message as a chat-message dict (``role``, ``content``, tool calls...).

    Fields are read from the model's ``__dict__`` (pydantic keeps them there): ``getattr`` of a
    field a message class does not have (``tool_call_id`` of an ``AIMessage``) goes through
    pydantic's ``__getattr__`` and an AttributeError, ~10 us each, several per message."""
    fields = getattr(m, "__dict__", None)
    get = fields.get if isinstance(fields, dict) else (lambda k, d=None: getattr(m, k, d))
    kind = get("type") or m.type
    out: dict[str, Any] = {"role": _ROLES.get(kind, kind), "content": to_json(get("content"))}
    calls = get("tool_calls")
    if calls:
        out["tool_calls"] = [{"id": c.get("id"), "name": c.get("name"),
                              "args": to_json(c.get("args"))}
                             for c in calls]
    invalid = get("invalid_tool_calls")
    if invalid:  # calls the model made that LangChain could not parse: kept as they came
        out["invalid_tool_calls"] = [{"id": c.get("id"), "name": c.get("name"),
                                      "args": c.get("args"), "error": c.get("error")}
                                     for c in invalid]
    for key in ("tool_call_id", "name", "status"):
        value = get(key)
        if value is not None and not (key == "status" and value == "success"):
            out[key] = value
    return out


# A message's chat-message dict, kept while the message is alive in a recent step: a graph's
# state (every message so far) is the input and output of each node, chain and model call
# under it, so one ReAct answer converts its four messages ~45 times (the hit test below is
# also _cstep.c's memo_hit: the two change together). Keyed by id() with the
# message itself held (an id is not reused while its object lives) and checked by the
# identity of the fields the dict is made of (a field set anew, as LangGraph does, is
# converted again; a content list edited in place would not be seen, but LangChain and
# LangGraph make new messages or set fields anew). The dicts are shared by the runs that carry
# them: nothing changes a run's inputs or outputs once recorded (the writer only reads them).
# The last slot: the dict's JSON text (an orjson.Fragment) once the writer's ``_step_fragments``
# made it, else None.
_CONVERTED: dict[int, tuple[Any, Any, Any, Any, Any, Any, dict[str, Any], Any]] = {}
_MAX_CONVERTED = 512  # past it the memo starts over (bounds what it keeps alive)


def _message_json(m: Any) -> dict[str, Any]:
    fields = getattr(m, "__dict__", None)
    if fields.__class__ is not dict:
        return message_dict(m)
    get = fields.get
    content, calls, name = get("content"), get("tool_calls"), get("name")
    hit = _CONVERTED.get(id(m))
    if hit is not None and hit[0] is m and hit[1] is content and hit[2] is calls \
            and hit[4] is name and hit[3] is get("tool_call_id") and hit[5] is get("status"):
        return hit[6]
    call_id, status = get("tool_call_id"), get("status")
    out = message_dict(m)
    if len(_CONVERTED) >= _MAX_CONVERTED:
        _CONVERTED.clear()
    _CONVERTED[id(m)] = (m, content, calls, call_id, name, status, out, None)
    return out


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def to_json(value: Any, _depth: int = 0) -> Any:
    """``value`` with LangChain messages and pydantic models turned into plain data (new
    dicts and lists throughout: the caller may change them)."""
    return _convert(value, _depth, False)


def _step_json_py(value: Any) -> Any:
    """``to_json`` for a step's run: messages' dicts from the memo (``_message_json``)."""
    return _convert(value, 0, True)


def _convert(value: Any, depth: int, memo: bool) -> Any:
    cls = value.__class__
    if cls in _SCALAR_TYPES:
        return value
    if depth > 24:
        return repr(value)
    depth += 1
    if cls is dict:  # the usual container first: no ABC check
        return {k if k.__class__ is str else str(k): _convert(v, depth, memo)
                for k, v in value.items()}
    if cls is list or cls is tuple:
        return [_convert(v, depth, memo) for v in value]
    return _other(value, depth, memo)


_COMMAND_FIELDS = ("graph", "update", "resume", "goto")  # langgraph.types.Command's, in order


def _other(value: Any, depth: int, memo: bool) -> Any:
    """``_convert`` of a value that is neither a plain scalar nor a plain dict, list or tuple
    (``depth`` already counts it)."""
    if _is_message(value):
        return _message_json(value) if memo else message_dict(value)
    cls = value.__class__
    if cls.__name__ == "Send" and cls.__module__.startswith("langgraph"):
        # LangGraph's routing to a node (a ReAct agent's tool calls): as data; left to
        # ``jsonable`` it would be its repr, the state's messages' reprs inside (~1 ms)
        return {"send": str(value.node), "arg": _walk(value.arg, depth, memo)}
    if cls.__name__ == "Command" and cls.__module__.startswith("langgraph"):
        # a node's update and routing (LangChain 1.x's create_agent returns them): its fields,
        # walked as a step's values are (messages as chat messages, from the memo; Sends as
        # data). Left to ``jsonable``, pydantic-core dumped every message model whole (~125k
        # instructions a Command) and each Send as its repr
        return {name: _walk(getattr(value, name, None), depth, memo)
                for name in _COMMAND_FIELDS}
    if isinstance(value, (str, int, float, bool)):  # subclasses (enums, ...)
        return value
    if isinstance(value, Mapping):
        return {str(k): _walk(v, depth, memo) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_walk(v, depth, memo) for v in value]
    return jsonable(value)  # models, dataclasses, UUIDs...; anything else as its repr


# ``_step_json_py`` with the walk over dicts and lists in C where built (``_cstep.c``: most of
# what the writer spent converting a graph's state), the rest here (``_other``); bound as
# a partial so that each step's value (a ``Deferred`` the writer resolves) calls straight into C
_STEP: Callable[..., Any] | None = getattr(SPEEDUPS, "step_json", None)
_step_json: Callable[..., Any] = (  # (value[, depth]: the depth where C is built)
    partial(_STEP, _MESSAGE_CLASSES, _message_json, partial(_other, memo=True), _CONVERTED)
    if _STEP is not None else _step_json_py)

# ``_step_json`` for the writer's JSON columns (``Deferred.encode``): each message's dict as an
# ``orjson.Fragment`` of its text, made once per dict and kept in its ``_CONVERTED`` entry
# (``_cstep.c``'s ``fragment_of``), where a ReAct answer's states put their messages' dicts
# through orjson ~45 times; the text a column gets is the same. None where C is not built.
def _fragment(d: dict[str, Any]) -> Any:
    """A message dict's JSON text as the writer's columns write it, as an orjson.Fragment."""
    return orjson.Fragment(orjson.dumps(d, default=jsonable))


_STEP_FRAGMENTS: Callable[..., Any] | None = getattr(SPEEDUPS, "step_fragments", None)
_step_fragments: Callable[[Any], Any] | None = (
    partial(_STEP_FRAGMENTS, _MESSAGE_CLASSES, _message_json, partial(_other, memo=True),
            _CONVERTED, _fragment)
    if _STEP_FRAGMENTS is not None else None)


def _walk(value: Any, depth: int, memo: bool) -> Any:
    """``_convert`` of a value ``_other`` found inside another (a Send's state, a mapping's
    values): back in C where built, at the depth reached (a ReAct agent's Send of its state
    walked in Python was ~40% of what converting an answer's steps cost the writer)."""
    if memo and _STEP is not None:
        return _step_json(value, depth)  # (step_json's depth after the value the partial adds)
    return _convert(value, depth, memo)


def _text(value: Any) -> str:
    """The text of a message's content (a string, or a list of content blocks:
    ``_registry.content_text``), else the value as text."""
    text = content_text(value)
    if text is not None:
        return text
    return "" if value is None else str(value)


# -- the adapter -----------------------------------------------------------------------------------
class LangChainAdapter:
    """A LangGraph graph or LangChain runnable, called as assay calls agents."""

    framework = "langchain"

    def __init__(self, runnable: Any, config: Mapping[str, Any] | None = None,
                 stream: bool = False) -> None:
        self.runnable = runnable
        self.config = dict(config or {})  # ainvoke's config (with_run_args)
        self.stream = stream  # with_run_args(stream=True): a graph run with astream
        self.name = getattr(runnable, "name", None) or type(runnable).__name__
        channels = getattr(runnable, "channels", None)
        self.channels: frozenset[str] = frozenset(channels) if isinstance(channels, Mapping) \
            else frozenset()
        # a graph compiled with a checkpointer (memory, persistence) refuses a call without a
        # thread_id; each call assay makes is a conversation of its own, on a new thread, so
        # that no example's answer depends on the ones run before it
        saver = getattr(runnable, "checkpointer", None)
        self.checkpointed = saver is not None and saver is not False

    def __repr__(self) -> str:
        return f"LangChainAdapter({self.name})"

    def prepare(self, query: Any) -> Any:
        """What the runnable is invoked with (see the module docstring)."""
        if "messages" not in self.channels:
            # a graph of its own state: a string goes to its question-like channel, if any
            key = next((k for k in QUERY_KEYS if k in self.channels), None) \
                if isinstance(query, str) else None
            return query if key is None else {key: query}
        if isinstance(query, str):
            return {"messages": [("user", query)]}
        if isinstance(query, Mapping):
            if any(k in self.channels for k in query):
                return dict(query)
            return {"messages": [("user", query_text(query))]}
        if isinstance(query, (list, tuple)):
            return {"messages": list(query)}
        return query

    def with_run_args(self, *, config: Mapping[str, Any] | None = None,
                      stream: bool | None = None, **other: Any) -> LangChainAdapter:
        """This runnable, ``ainvoke`` given ``config`` too (``integrations.with_run_args``);
        ``stream=True``: a LangGraph graph run with ``astream(stream_mode=["messages",
        "values"])``, which makes its chat models stream (each llm run gets its first token,
        the model needing no ``streaming=True``), the last values being the answer."""
        if other:
            raise InvalidInputError(f"not a run argument of a LangChain runnable: "
                                    f"{', '.join(sorted(other))} (it takes config, stream)")
        if stream and not self.channels:
            raise InvalidInputError(f"stream=True runs a LangGraph graph streamed; "
                                    f"{type(self.runnable).__name__} is none")
        return LangChainAdapter(self.runnable, {**self.config, **(config or {})},
                                self.stream if stream is None else bool(stream))

    async def arun(self, query: Any) -> Any:
        config = self.config
        if self.checkpointed and "thread_id" not in (config.get("configurable") or {}):
            config = {**config, "configurable": {**(config.get("configurable") or {}),
                                                 "thread_id": f"assay-{uuid.uuid4()}"}}
        if self.stream:
            final = None
            async for mode, chunk in self.runnable.astream(
                    self.prepare(query), config or None, stream_mode=["messages", "values"]):
                if mode == "values":
                    final = chunk
            return final
        if config:
            return await self.runnable.ainvoke(self.prepare(query), config)
        return await self.runnable.ainvoke(self.prepare(query))

    def output_text(self, result: Any) -> str:
        if isinstance(result, str):
            return result
        if _is_message(result):
            return _text(result.content)
        if isinstance(result, Mapping):
            messages = result.get("messages")
            if isinstance(messages, (list, tuple)) and messages:
                last = messages[-1]
                return _text(last.content) if _is_message(last) else _text(
                    last.get("content") if isinstance(last, Mapping) else last)
        from ..evals._agent import output_text

        return output_text(to_json(result))

    def outputs(self, result: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"output": self.output_text(result)}
        if isinstance(result, Mapping):
            for key, value in result.items():
                if key != "output":
                    out[str(key)] = to_json(value)
        # a structured answer under the key every adapter uses: create_agent's response_format
        # (its state's structured_response), a runnable's model (with_structured_output)
        answer = result.get("structured_response") if isinstance(result, Mapping) \
            else result if hasattr(result, "model_dump") and not _is_message(result) else None
        structured = structured_output(answer)
        if structured is not None and "structured_output" not in out:
            out["structured_output"] = structured
        return out

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        return tool_calls(result)


def adapt(obj: Any) -> LangChainAdapter | None:
    """A LangGraph graph or LangChain runnable (anything with ``ainvoke``), else None."""
    if isinstance(obj, LangChainAdapter):
        return obj
    if callable(getattr(obj, "ainvoke", None)):
        return LangChainAdapter(obj)
    return None


def tool_calls(obj: Any) -> list[ToolCall] | None:
    """Tool calls from a graph's state (``{"messages": [...]}``), a message list or a message."""
    if isinstance(obj, Mapping) and isinstance(obj.get("messages"), (list, tuple)):
        return extract_tool_calls(list(obj["messages"]))
    if isinstance(obj, (list, tuple)) and obj and all(_is_message(m) for m in obj):
        return extract_tool_calls(list(obj))
    if _is_message(obj):
        return extract_tool_calls([obj])
    return None


# -- capture (the handler: _lc_capture.py) ------------------------------------------------------
class _HandlerWhileTraced:
    """What ``register_configure_hook`` reads like a context variable: the handler while an
    assay run is current, or where a call would be a root run of its own (``framework_root``),
    and framework tracing is on; else None (LangChain then adds nothing)."""

    __slots__ = ("handler",)

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def get(self, default: Any = None) -> Any:
        if framework_parent(False) is not None or framework_root() is not None:
            return self.handler
        return default


# the process's one ``AssayCallbackHandler`` (made on first use)
def _make_handler() -> Any:
    from ._lc_capture import make_handler

    return make_handler()


handler: Callable[[], Any] = once(_make_handler)


def instrument() -> None:
    """Register the handler with LangChain's configure hooks (once per process)."""
    global _installed
    if _installed:
        return
    require("langchain_core.tracers.context", "langgraph", "LangChain tracing")
    from langchain_core.runnables.config import var_child_runnable_config
    from langchain_core.tracers.context import register_configure_hook

    from ..tracing._context import add_step_lookup

    capture = handler()
    register_configure_hook(_HandlerWhileTraced(capture), True)  # type: ignore[arg-type]  # a proxy
    # runs started in a tool's or a node's code nest under it (LangChain sets that variable
    # while a step's code runs)
    add_step_lookup(capture.step_run, var_child_runnable_config)
    _installed = True


_installed = False


def __getattr__(name: str) -> Any:
    if name == "AssayCallbackHandler":
        return type(handler())
    raise AttributeError(name)
