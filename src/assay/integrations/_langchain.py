"""LangGraph and LangChain: graphs and runnables as agents, their steps as assay runs.

Adapter: a compiled graph (``create_react_agent``, a hand-built ``StateGraph``) or any LangChain
``Runnable``. A plain-string query becomes ``{"messages": [("user", query)]}`` for a graph whose
state has a ``messages`` channel; an evaluate() inputs dict whose keys are state channels is
passed as is (else its question text becomes the user message). Results are read back as
JSON-safe dicts (message objects serialized), so runs and evaluators never see LangChain classes.

Capture: one ``BaseCallbackHandler`` registered with LangChain's ``register_configure_hook``. The
hook's "context variable" answers with the handler only while an assay run is current and
framework tracing is on, so LangChain adds it to exactly those calls; everywhere else it costs
one contextvar read per LangChain call. LangChain gives every step a run id and its parent's, so
the tree is rebuilt as LangChain nested it: chains (graph, nodes), llm runs (model and provider
from LangChain's ``ls_*`` metadata, messages, ``usage_metadata`` tokens, the first streamed token)
and tool runs (arguments, result, error). Steps LangChain marks hidden (``langsmith:hidden``,
e.g. LangGraph's channel writes) are skipped, their children going to the nearest shown step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from .._json import Deferred, jsonable
from ..errors import require
from ..evals._models import ToolCall
from ..evals._toolcalls import extract_tool_calls
from ..tracing._run_tree import RunTree, fast_child
from ._registry import framework_parent, once

__all__ = [
    "LangChainAdapter",
    "adapt",
    "handler",
    "instrument",
    "message_dict",
    "to_json",
    "tool_calls",
]

_HIDDEN = "langsmith:hidden"
# what a run keeps of LangChain's metadata: the model's identity (priced by the store) and
# LangGraph's node and step
_KEPT_METADATA = ("ls_provider", "ls_model_name", "ls_model_type", "ls_temperature",
                  "ls_max_tokens", "langgraph_node", "langgraph_step")
_ROLES = {"human": "user", "ai": "assistant", "AIMessageChunk": "assistant", "system": "system",
          "tool": "tool", "function": "function", "chat": "user"}
_QUERY_KEYS = ("query", "question", "input", "prompt", "text", "message")


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
    for key in ("tool_call_id", "name", "status"):
        value = get(key)
        if value is not None and not (key == "status" and value == "success"):
            out[key] = value
    return out


# A message's chat-message dict, kept while the message is alive in a recent step: a graph's
# state (every message so far) is the input and output of each node, chain and model call
# under it, so one ReAct answer converts its four messages ~45 times. Keyed by id() with the
# message itself held (an id is not reused while its object lives) and checked by the
# identity of the fields the dict is made of (a field set anew, as LangGraph does, is
# converted again; a content list edited in place would not be seen, but LangChain and
# LangGraph make new messages or set fields anew). The dicts are shared by the runs that carry
# them: nothing changes a run's inputs or outputs once recorded (the writer only reads them).
_CONVERTED: dict[int, tuple[Any, Any, Any, Any, Any, Any, dict[str, Any]]] = {}
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
    _CONVERTED[id(m)] = (m, content, calls, call_id, name, status, out)
    return out


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def to_json(value: Any, _depth: int = 0) -> Any:
    """``value`` with LangChain messages and pydantic models turned into plain data (new
    dicts and lists throughout: the caller may change them)."""
    return _convert(value, _depth, False)


def _step_json(value: Any) -> Any:
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
    if _is_message(value):
        return _message_json(value) if memo else message_dict(value)
    if isinstance(value, (str, int, float, bool)):  # subclasses (enums, ...)
        return value
    if isinstance(value, Mapping):
        return {str(k): _convert(v, depth, memo) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_convert(v, depth, memo) for v in value]
    if cls.__name__ == "Send" and cls.__module__.startswith("langgraph"):
        # LangGraph's routing to a node (a ReAct agent's tool calls): as data; left to
        # ``jsonable`` it would be its repr, the state's messages' reprs inside (~1 ms)
        return {"send": str(value.node), "arg": _convert(value.arg, depth, memo)}
    return jsonable(value)  # models, dataclasses, UUIDs...; anything else as its repr


def _text(value: Any) -> str:
    """The text of a message's content (a string, or a list of content blocks)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(b if isinstance(b, str) else str(b.get("text", "")) if isinstance(b, Mapping)
                       else "" for b in value)
    return "" if value is None else str(value)


# -- the adapter -----------------------------------------------------------------------------------
class LangChainAdapter:
    """A LangGraph graph or LangChain runnable, called as assay calls agents."""

    framework = "langchain"

    def __init__(self, runnable: Any) -> None:
        self.runnable = runnable
        self.name = getattr(runnable, "name", None) or type(runnable).__name__
        channels = getattr(runnable, "channels", None)
        self.channels: frozenset[str] = frozenset(channels) if isinstance(channels, Mapping) \
            else frozenset()

    def __repr__(self) -> str:
        return f"LangChainAdapter({self.name})"

    def prepare(self, query: Any) -> Any:
        """What the runnable is invoked with (see the module docstring)."""
        if "messages" not in self.channels:
            return query
        if isinstance(query, str):
            return {"messages": [("user", query)]}
        if isinstance(query, Mapping):
            if any(k in self.channels for k in query):
                return dict(query)
            return {"messages": [("user", _query_text(query))]}
        if isinstance(query, (list, tuple)):
            return {"messages": list(query)}
        return query

    async def arun(self, query: Any) -> Any:
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
        return out

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        return tool_calls(result)


def _query_text(query: Mapping[str, Any]) -> str:
    for key in _QUERY_KEYS:
        if isinstance(query.get(key), str):
            return str(query[key])
    strings = [v for v in query.values() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    import json

    return json.dumps(to_json(query), ensure_ascii=False)


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


# -- capture ---------------------------------------------------------------------------------------
def _handler_base() -> type:
    require("langchain_core.callbacks", "langgraph", "LangChain tracing")
    from langchain_core.callbacks import BaseCallbackHandler

    return BaseCallbackHandler


def _make_handler_class() -> type:
    base = _handler_base()

    class AssayCallbackHandler(base):  # type: ignore[misc, valid-type]  # imported lazily
        """LangChain steps -> assay runs under the current assay run (see module docstring)."""

        run_inline = True  # called in the step's own context, in order (no executor hop)
        raise_error = False

        def __init__(self) -> None:
            super().__init__()
            # LangChain run id -> (assay run, whether it is ours to end); hidden steps map to
            # the run their children should join
            self._runs: dict[UUID, tuple[RunTree, bool]] = {}
            self._lock = threading.Lock()

        # -- bookkeeping --
        def _parent(self, parent_run_id: UUID | None) -> RunTree | None:
            if parent_run_id is not None:
                entry = self._runs.get(parent_run_id)
                if entry is not None:
                    return entry[0]
            return framework_parent()

        def _start(self, run_id: UUID, parent_run_id: UUID | None, name: str, run_type: str,
                   inputs: dict[str, Any], tags: list[str] | None,
                   metadata: dict[str, Any] | None) -> RunTree | None:
            parent = self._parent(parent_run_id)
            if parent is None:
                return None
            if tags and _HIDDEN in tags:
                self._runs[run_id] = (parent, False)
                return None
            run = fast_child(parent, name, run_type, inputs)
            if len(self._runs) >= _MAX_OPEN:  # steps whose end never came (cancelled tasks)
                _forget_oldest(self._runs)
            if metadata:
                meta = {k: v for k in _KEPT_METADATA if (v := metadata.get(k)) is not None}
                if meta:
                    run._meta = meta  # a new run: no metadata of its own yet
            if tags:
                user_tags = [t for t in tags if not t.startswith(("seq:", "graph:"))]
                if user_tags:
                    run.tags = user_tags
            self._runs[run_id] = (run, True)
            return run

        def _end(self, run_id: UUID, outputs: Any = None,
                 error: BaseException | None = None) -> RunTree | None:
            entry = self._runs.pop(run_id, None)
            if entry is None or not entry[1]:
                return None
            run = entry[0]
            run.end(error=error)
            if outputs is not None:  # a dict, or a chain's Deferred state (kept as it is)
                run.outputs = outputs
            run.patch()
            return run

        def _own(self, run_id: UUID) -> RunTree | None:
            entry = self._runs.get(run_id)
            return entry[0] if entry is not None and entry[1] else None

        # -- chains --
        def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *,
                           run_id: UUID, parent_run_id: UUID | None = None,
                           tags: list[str] | None = None, metadata: dict[str, Any] | None = None,
                           **kwargs: Any) -> None:
            name = kwargs.get("name") or _serialized_name(serialized) or "chain"
            self._start(run_id, parent_run_id, name, "chain", _chain_io(inputs, "input"), tags,
                        metadata)

        def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
            self._end(run_id, _chain_io(outputs, "output"))

        def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
            self._end(run_id, error=error)

        # -- models --
        def on_chat_model_start(self, serialized: dict[str, Any] | None,
                                messages: list[list[Any]], *, run_id: UUID,
                                parent_run_id: UUID | None = None, tags: list[str] | None = None,
                                metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
            batch = [[_message_json(m) if _is_message(m) else _step_json(m) for m in ms]
                     for ms in messages]
            inputs: dict[str, Any] = {"messages": batch[0] if len(batch) == 1 else batch}
            self._llm_start(run_id, parent_run_id, serialized, inputs, tags, metadata, kwargs)

        def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *,
                         run_id: UUID, parent_run_id: UUID | None = None,
                         tags: list[str] | None = None, metadata: dict[str, Any] | None = None,
                         **kwargs: Any) -> None:
            inputs = {"prompts": list(prompts)}
            self._llm_start(run_id, parent_run_id, serialized, inputs, tags, metadata, kwargs)

        def _llm_start(self, run_id: UUID, parent_run_id: UUID | None,
                       serialized: dict[str, Any] | None, inputs: dict[str, Any],
                       tags: list[str] | None, metadata: dict[str, Any] | None,
                       kwargs: dict[str, Any]) -> None:
            params = kwargs.get("invocation_params") or {}
            if params.get("tools"):
                inputs["tools"] = _tools_json(params["tools"])
            name = kwargs.get("name") or _serialized_name(serialized) or "llm"
            run = self._start(run_id, parent_run_id, name, "llm", inputs, tags, metadata)
            if run is not None:
                model = (metadata or {}).get("ls_model_name") or params.get("model") \
                    or params.get("model_name")
                if model:
                    run.metadata["ls_model_name"] = model
                invocation = {k: v for k, v in params.items()
                              if k in ("temperature", "max_tokens", "stream", "top_p")}
                if invocation:
                    run.metadata["invocation_params"] = invocation

        def on_llm_new_token(self, token: Any, *, run_id: UUID, **kwargs: Any) -> None:
            run = self._own(run_id)
            if run is not None and not run._events:
                run._mark_first_token()

        def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
            run = self._own(run_id)
            if run is None:
                self._runs.pop(run_id, None)
                return
            _record_llm_result(run, response)
            self._end(run_id)

        def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
            self._end(run_id, error=error)

        # -- tools --
        def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *,
                          run_id: UUID, parent_run_id: UUID | None = None,
                          tags: list[str] | None = None, metadata: dict[str, Any] | None = None,
                          inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
            name = kwargs.get("name") or _serialized_name(serialized) or "tool"
            args = _step_json(inputs) if isinstance(inputs, Mapping) else {"input": input_str}
            run = self._start(run_id, parent_run_id, name, "tool", args, tags, metadata)
            if run is not None and kwargs.get("tool_call_id"):
                run.metadata["tool_call_id"] = kwargs["tool_call_id"]

        def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
            if _is_message(output):  # a ToolMessage: its content is the result
                value: Any = _step_json(output.content)
                error = getattr(output, "status", None) == "error"
                entry = self._runs.get(run_id)
                if error and entry is not None and entry[1]:
                    entry[0].error = f"ToolError: {_text(output.content)}"
            else:
                value = _step_json(output)
            self._end(run_id, {"output": value})

        def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
            self._end(run_id, error=error)

        # -- retrievers --
        def on_retriever_start(self, serialized: dict[str, Any] | None, query: str, *,
                               run_id: UUID, parent_run_id: UUID | None = None,
                               tags: list[str] | None = None,
                               metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
            name = kwargs.get("name") or _serialized_name(serialized) or "retriever"
            self._start(run_id, parent_run_id, name, "retriever", {"query": query}, tags, metadata)

        def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
            self._end(run_id, {"documents": _step_json(documents)})

        def on_retriever_error(self, error: BaseException, *, run_id: UUID,
                               **kwargs: Any) -> None:
            self._end(run_id, error=error)

    return AssayCallbackHandler


_last_tools: tuple[Any, Any] = (None, None)  # (a model's bound tools, their plain form)


def _tools_json(tools: Any) -> Any:
    """The tools bound to a model call as plain data: the same list object at every call of a
    bound model (``bind_tools``), so converted once while it stays the one in use."""
    global _last_tools
    held, plain = _last_tools
    if held is not tools:
        plain = _step_json(tools)
        _last_tools = (tools, plain)
    return plain


def _serialized_name(serialized: Mapping[str, Any] | None) -> str | None:
    if not serialized:
        return None
    name = serialized.get("name")
    if name:
        return str(name)
    ident = serialized.get("id")
    return str(ident[-1]) if isinstance(ident, list) and ident else None


def _later(value: Any) -> Any:
    """A chain step's value for its run, stored as ``_step_json`` makes it (messages as
    chat-message dicts, as the llm runs and the example's outputs have them) but converted on
    the writer's thread (``_json.Deferred``), not the agent's: a graph's state passes through
    every node and chain of a step, and converting it there was over a third of the
    instructions the handler added to the agent's thread (bench/README, stop 41). Scalars are
    kept as they are; a container is copied now, one level deep (a list the graph appends to
    after the step, or a dict it sets a key in, is recorded as it was), its items (messages,
    ``Send``s, models) taken as they are: LangChain and LangGraph make new messages rather
    than change them, the one exception being an agent's name set on its answer, which then
    also shows in the steps that returned that answer before."""
    cls = value.__class__
    if cls in _SCALAR_TYPES:
        return value
    if cls is list or cls is dict:
        value = value.copy()
    return Deferred(value, _step_json)


def _chain_io(value: Any, key: str) -> Any:
    """A chain's inputs or outputs (see ``_later``): a state dict as its keys, anything else
    under ``key`` (``input``, ``output``). A state dict is one ``Deferred`` of a copy of it
    whose list and dict values are copied too (one object per step, not one per key: the
    handler's own instructions on the agent's thread, bench/README stop 42)."""
    if value.__class__ is dict:
        return Deferred({k: (v.copy() if v.__class__ is list or v.__class__ is dict else v)
                         for k, v in value.items()}, _step_json)
    if isinstance(value, Mapping):
        plain: dict[str, Any] = _step_json(value)  # a Mapping gives a dict
        return plain
    return {key: _later(value)}


def _record_llm_result(run: RunTree, response: Any) -> None:
    """Outputs, model and token usage of an llm run from LangChain's ``LLMResult``."""
    generations = getattr(response, "generations", None) or []
    flat = [g for gs in generations for g in gs]
    messages, texts, usage, model = [], [], None, None
    for g in flat:
        message = getattr(g, "message", None)
        if message is not None:
            messages.append(_message_json(message))
            fields = getattr(message, "__dict__", None) or {}  # (see message_dict)
            usage = usage or fields.get("usage_metadata")
            meta = fields.get("response_metadata") or {}
            model = model or meta.get("model_name") or meta.get("model")
        else:
            texts.append(getattr(g, "text", ""))
    llm_output = getattr(response, "llm_output", None) or {}
    model = model or llm_output.get("model_name") or llm_output.get("model")
    run.outputs = {"messages": messages} if messages else {"output": texts[0] if len(
        texts) == 1 else texts}
    if usage is None:
        raw = llm_output.get("token_usage") or llm_output.get("usage") or {}
        if raw:
            usage = {"input_tokens": raw.get("prompt_tokens", raw.get("input_tokens")),
                     "output_tokens": raw.get("completion_tokens", raw.get("output_tokens")),
                     "total_tokens": raw.get("total_tokens")}
    if usage:
        details_in = {k: v for k, v in (usage.get("input_token_details") or {}).items() if v}
        details_out = {k: v for k, v in (usage.get("output_token_details") or {}).items() if v}
        run.set_usage(usage.get("input_tokens"), usage.get("output_tokens"),
                      usage.get("total_tokens"), model=model,
                      input_token_details=details_in or None,
                      output_token_details=details_out or None)
    elif model:
        run.metadata["ls_model_name"] = model


_MAX_OPEN = 100_000  # open steps remembered; past it the oldest half is dropped


def _forget_oldest(runs: dict[Any, Any]) -> None:
    for key in list(runs)[: len(runs) // 2]:
        runs.pop(key, None)


class _HandlerWhileTraced:
    """What ``register_configure_hook`` reads like a context variable: the handler while an
    assay run is current and framework tracing is on, else None (LangChain then adds nothing)."""

    __slots__ = ("handler",)

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def get(self, default: Any = None) -> Any:
        return self.handler if framework_parent() is not None else default


# the process's one ``AssayCallbackHandler`` (made on first use)
handler: Callable[[], Any] = once(lambda: _make_handler_class()())


def instrument() -> None:
    """Register the handler with LangChain's configure hooks (once per process)."""
    global _installed
    if _installed:
        return
    require("langchain_core.tracers.context", "langgraph", "LangChain tracing")
    from langchain_core.tracers.context import register_configure_hook

    register_configure_hook(_HandlerWhileTraced(handler()), True)  # type: ignore[arg-type]  # a proxy
    _installed = True


_installed = False


def __getattr__(name: str) -> Any:
    if name == "AssayCallbackHandler":
        return type(handler())
    raise AttributeError(name)
