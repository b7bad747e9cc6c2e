"""LangChain's callbacks -> assay runs: logged on the agent's thread, built off it.

LangChain calls the handler ~30 times for one ReAct answer of three steps (every graph node,
channel write and model call starts and ends), each call inline on the agent's thread. Making
the run there (its ``RunTree``, the metadata and tags kept, the state's containers wrapped, the
end queued to the writer) cost the agent more than LangChain's own callback machinery does
(``bench/frameworks_instructions.py --only langgraph``: the agent thread +6.6% over tracing
off, of it +3.2% over LangChain with a no-op handler; logged, +4.2% and +0.7%). So each
callback appends one tuple to a log (``_log``: the event, the clock, the assay run current
then, the values as they were: a chain's state copied one level, as ``_snapshot`` says), and
the runs are built from the log later, in order, by ``_settle``: on the writer's thread at its
next tick (every 20 ms) or batch, or by whoever reads or stores them first
(``RunTree.to_run``, ``flush()``: see ``tracing/_pending.py``). Built runs are the same as
when they were made inline: the start, end and first-token times are the events'.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from .._json import Deferred
from ..errors import require
from ..tracing._pending import register
from ..tracing._roots import RootSpec
from ..tracing._run_tree import SPEEDUPS, RunTree, fast_child
from ._langchain import (
    _SCALAR_TYPES,
    _is_message,
    _message_json,
    _step_fragments,
    _step_json,
    _text,
)
from ._registry import framework_parent, framework_root

__all__ = ["make_handler"]

log = logging.getLogger("assay.integrations")

_HIDDEN = "langsmith:hidden"
# what a run keeps of LangChain's metadata: the model's identity (priced by the store) and
# LangGraph's node and step
_KEPT_METADATA = ("ls_provider", "ls_model_name", "ls_model_type", "ls_temperature",
                  "ls_max_tokens", "langgraph_node", "langgraph_step")
_OWN_TAGS = ("seq:", "graph:")  # tags LangChain and LangGraph set on their own steps
_MAX_OPEN = 100_000  # open steps remembered; past it the oldest half is dropped
_KICK = 4096  # events logged past which a start makes sure a writer is running to build them
# event kinds (the first item of a logged tuple)
_CHAIN, _CHAT, _LLM, _TOOL, _RETRIEVER, _END, _TOKEN = range(7)
_time_ns = time.time_ns


def _copy_py(value: Any) -> Any:
    """``_speedups.snapshot`` in Python: a dict copied with its list and dict values copied
    too, a list copied, anything else as it is."""
    cls = value.__class__
    if cls is dict:
        out = value.copy()
        for key, item in value.items():
            if item.__class__ is list or item.__class__ is dict:
                out[key] = item.copy()
        return out
    return value.copy() if cls is list else value


# the copy of a step's dict or list, in C where built (a Python loop was over a third of what
# the callbacks cost the agent's thread)
_copy: Callable[[Any], Any] = SPEEDUPS.snapshot if SPEEDUPS is not None else _copy_py


def _snapshot(value: Any) -> Any:
    """A chain step's inputs or outputs as they are now (converted later, on the writer's
    thread: ``_chain_value``): a container copied one level deep (a list the graph appends to
    after the step, or a dict it sets a key in, is recorded as it was; a state dict's list and
    dict values copied too), its items (messages, ``Send``s, models) taken as they are:
    LangChain and LangGraph make new messages rather than change them, the one exception being
    an agent's name set on its answer, which then also shows in the steps that returned that
    answer before. Another kind of mapping is converted now."""
    out = _copy(value)
    if out is not value or value.__class__ in _SCALAR_TYPES or not isinstance(value, Mapping):
        return out
    return _step_json(value)  # a Mapping gives a dict


def _chain_value(value: Any, key: str) -> Any:
    """A chain's inputs or outputs from its ``_snapshot``: a dict as one ``Deferred`` (its keys
    the run's keys), anything else under ``key`` (``input``, ``output``). ``RunTree.to_run``,
    which evaluators read in process, gives the conversion (``_json.settled``)."""
    cls = value.__class__
    if cls is dict:
        return Deferred(value, _step_json, _step_fragments)
    return {key: value if cls in _SCALAR_TYPES else Deferred(value, _step_json)}


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


def _kept_metadata_py(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a run keeps of a step's LangChain metadata (``_KEPT_METADATA``), or None."""
    meta = None
    for key in _KEPT_METADATA:
        value = metadata.get(key)
        if value is not None:
            if meta is None:
                meta = {}
            meta[key] = value
    return meta


def _user_tags(tags: list[str]) -> list[str] | None:
    """A step's tags without LangChain's and LangGraph's own (``seq:...``, ``graph:...``)."""
    kept = None
    for tag in tags:
        if not tag.startswith(_OWN_TAGS):
            if kept is None:
                kept = []
            kept.append(tag)
    return kept


# what a run keeps of a plain dict of metadata, in C where built (LangChain's metadata of a
# graph's step has a dozen keys: looking for the seven in Python was a sixth of what building a
# chain's run cost the writer)
_PICK: Callable[[dict[str, Any], tuple[str, ...]], dict[str, Any] | None] | None = getattr(
    SPEEDUPS, "pick", None)


def _forget_oldest(runs: dict[Any, Any]) -> None:
    for key in list(runs)[: len(runs) // 2]:
        runs.pop(key, None)


_child_config: Any = None  # LangChain's context variable of the config a step's code runs with


def make_handler() -> Any:
    """The process's handler (a ``BaseCallbackHandler``: its class made on first use)."""
    require("langchain_core.callbacks", "langgraph", "LangChain tracing")
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables.config import var_child_runnable_config

    global _child_config
    _child_config = var_child_runnable_config

    class AssayCallbackHandler(_Capture, BaseCallbackHandler):
        """LangChain steps -> assay runs under the current assay run (see the module
        docstrings of ``_langchain`` and ``_lc_capture``)."""

        run_inline = True  # called in the step's own context, in order (no executor hop)
        raise_error = False

        def __init__(self) -> None:
            BaseCallbackHandler.__init__(self)
            _Capture.__init__(self)

    return AssayCallbackHandler()


class _Capture:
    """The callbacks (agent's thread: one tuple logged each) and the runs built from them."""

    def __init__(self) -> None:
        self._log: collections.deque[tuple[Any, ...]] = collections.deque()
        # built side, under _lock: LangChain run id (its int) -> (assay run, whether it is
        # ours to end); hidden steps map to the run their children should join
        self._runs: dict[int, tuple[RunTree, bool]] = {}
        self._lock = threading.Lock()
        self._last_token: Any = None  # the run of the last first-token event logged
        register(self._settle)
        os.register_at_fork(after_in_child=self._log.clear)

    # -- the agent's thread: one tuple per callback ---------------------------------------------
    def _begin(self, kind: int, run_id: UUID, parent_run_id: UUID | None,
               tags: list[str] | None, metadata: dict[str, Any] | None, extra: Any,
               serialized: Any, value: Any) -> None:
        """A step's start, logged with the assay run current now and the clock; a call's
        outermost step outside any assay run, with what its root run is made with where
        tracing is on (``framework_root``), or None."""
        # (an outermost step may run inside another framework's step: its run is the parent)
        parent = framework_parent(parent_run_id is None)
        if parent is None and parent_run_id is None:
            parent = framework_root()
            if parent is not None:
                parent.wake()
        log = self._log
        log.append((kind, run_id, parent_run_id, parent, _time_ns(), tags, metadata, extra,
                    serialized, value))
        if len(log) > _KICK:
            self._kick(parent)

    @staticmethod
    def _kick(parent: RunTree | RootSpec | None) -> None:
        """A long log: make sure a writer runs to build it (nothing may have woken one)."""
        if isinstance(parent, RootSpec):
            parent.wake()
        elif parent is not None:
            try:
                parent._get_writer()._ensure_running()
            except Exception:  # (a run without an assay client: built by its reader)
                pass

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, tags: list[str] | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        value = _copy(inputs)  # (``_snapshot``, its usual case without a Python call)
        if value is inputs and value.__class__ not in _SCALAR_TYPES:
            value = _snapshot(inputs)
        self._begin(_CHAIN, run_id, parent_run_id, tags, metadata, kwargs.get("name"),
                    serialized, value)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        value = _copy(outputs)  # (as in on_chain_start)
        if value is outputs and value.__class__ not in _SCALAR_TYPES:
            value = _snapshot(outputs)
        self._log.append((_END, run_id, _time_ns(), _CHAIN, value, None))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._log.append((_END, run_id, _time_ns(), _CHAIN, None, error))

    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[Any]],
                            *, run_id: UUID, parent_run_id: UUID | None = None,
                            tags: list[str] | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._begin(_CHAT, run_id, parent_run_id, tags, metadata, kwargs, serialized,
                    [list(ms) for ms in messages])

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *,
                     run_id: UUID, parent_run_id: UUID | None = None,
                     tags: list[str] | None = None, metadata: dict[str, Any] | None = None,
                     **kwargs: Any) -> None:
        self._begin(_LLM, run_id, parent_run_id, tags, metadata, kwargs, serialized,
                    list(prompts))

    def on_llm_new_token(self, token: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if self._last_token is not run_id:  # the first of a run's tokens in a row
            self._last_token = run_id
            self._log.append((_TOKEN, run_id, _time_ns()))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._log.append((_END, run_id, _time_ns(), _LLM, response, None))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._log.append((_END, run_id, _time_ns(), _LLM, None, error))

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *,
                      run_id: UUID, parent_run_id: UUID | None = None,
                      tags: list[str] | None = None, metadata: dict[str, Any] | None = None,
                      inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        args = _snapshot(inputs) if isinstance(inputs, Mapping) else None
        self._begin(_TOOL, run_id, parent_run_id, tags, metadata, kwargs, serialized,
                    (input_str, args))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._log.append((_END, run_id, _time_ns(), _TOOL, output, None))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._log.append((_END, run_id, _time_ns(), _TOOL, None, error))

    def on_retriever_start(self, serialized: dict[str, Any] | None, query: str, *,
                           run_id: UUID, parent_run_id: UUID | None = None,
                           tags: list[str] | None = None,
                           metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._begin(_RETRIEVER, run_id, parent_run_id, tags, metadata, kwargs, serialized,
                    query)

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._log.append((_END, run_id, _time_ns(), _RETRIEVER, _step_json(documents), None))

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._log.append((_END, run_id, _time_ns(), _RETRIEVER, None, error))

    # -- building the runs (whichever thread settles) -------------------------------------------
    def _settle(self, wait: bool = True) -> None:
        """Build the runs of every event logged so far, in order (see ``tracing/_pending``).

        A chain's start and end, most of a graph's events, are built in this loop itself (a
        call or two less for each: this loop is about half of what the writer spends on a
        LangGraph answer)."""
        events = self._log
        if wait:  # also what another thread's settle took from the log and is building now
            self._lock.acquire()
        elif not events or not self._lock.acquire(False):
            return
        try:
            runs, pop, start = self._runs, events.popleft, self._start
            while events:
                try:
                    event = pop()
                except IndexError:  # (taken by a forked child's clear)
                    break
                try:
                    kind = event[0]
                    if kind == _END:
                        entry = runs.pop(event[1].int, None)
                        if entry is None or not entry[1]:
                            continue
                        run = entry[0]
                        run._end_us = event[2] // 1000
                        if event[3] == _CHAIN and event[5] is None:
                            run.outputs = _chain_value(event[4], "output")
                            run.patch()
                        else:
                            self._end_event(run, *event[3:])
                    elif kind == _CHAIN:
                        start(event[1], event[2], event[3], event[4],
                              event[7] or _serialized_name(event[8]) or "chain", "chain",
                              _chain_value(event[9], "input"), event[5], event[6])
                    elif kind == _TOKEN:
                        streamed = self._own(event[1])
                        if streamed is not None and not streamed._events:
                            streamed._mark_first_token(event[2] // 1000)
                    else:
                        self._start_event(*event)
                except Exception:  # one bad step must not lose the others (nor the writer)
                    log.warning("assay: a LangChain step could not be recorded", exc_info=True)
        finally:
            self._lock.release()

    def step_run(self) -> RunTree | None:
        """The run of the LangChain step running in this context (a tool's, a graph node's),
        or None: what a run started by code inside the step nests under
        (``tracing._context.STEP_RUNS``). LangChain hands the step's code a config whose
        callbacks name the step's run id; the run is built now if its start is still in the
        log (as a reader builds it: ``_settle``)."""
        config = _child_config.get()
        if not config:
            return None
        step = getattr(config.get("callbacks"), "parent_run_id", None)
        if step is None:
            return None
        entry = self._runs.get(step.int)
        if entry is None:  # still in the log, or being built by another thread's settle
            self._settle()
            entry = self._runs.get(step.int)
        return entry[0] if entry is not None else None

    def _own(self, run_id: UUID) -> RunTree | None:
        entry = self._runs.get(run_id.int)
        return entry[0] if entry is not None and entry[1] else None

    def _start(self, run_id: UUID, parent_run_id: UUID | None,
               current: RunTree | RootSpec | None, start_ns: int, name: str, run_type: str,
               inputs: Any, tags: list[str] | None,
               metadata: dict[str, Any] | None) -> RunTree | None:
        """The step's run, under its LangChain parent's (or the assay run current when it
        started, or a root of its own: ``RootSpec``); None for a hidden step (its children
        join its parent) or one with none of these. ``_runs`` is keyed by the ids' ints: a
        UUID's hash is a Python call."""
        runs = self._runs
        entry = runs.get(parent_run_id.int) if parent_run_id is not None else None
        parent = entry[0] if entry is not None else current
        if parent is None:
            return None
        if isinstance(parent, RootSpec):
            return self._root(parent, run_id, start_ns, name, run_type, inputs, tags, metadata)
        if tags and _HIDDEN in tags:
            runs[run_id.int] = (parent, False)
            return None
        run = fast_child(parent, name, run_type, inputs)
        run._start_us = start_ns // 1000
        if len(runs) >= _MAX_OPEN:  # steps whose end never came (cancelled tasks)
            _forget_oldest(runs)
        if metadata:
            meta = _PICK(metadata, _KEPT_METADATA) if (
                _PICK is not None and metadata.__class__ is dict) else _kept_metadata_py(metadata)
            if meta:
                run._meta = meta  # a new run: no metadata of its own yet
        if tags:
            user_tags = _user_tags(tags)
            if user_tags:
                run.tags = user_tags
        runs[run_id.int] = (run, True)
        return run

    def _root(self, spec: RootSpec, run_id: UUID, start_ns: int, name: str, run_type: str,
              inputs: Any, tags: list[str] | None,
              metadata: dict[str, Any] | None) -> RunTree:
        """A call's outermost step outside any assay run: a root run, keeping the call's
        metadata whole (the user's, and LangGraph's ``configurable`` values such as its
        ``thread_id``, which make the calls of one conversation a thread) and its own tags."""
        run = spec.new_run(name, run_type, inputs, metadata=metadata or None,
                           tags=_user_tags(tags) if tags else None)
        run._start_us = start_ns // 1000
        self._runs[run_id.int] = (run, True)
        return run

    def _start_event(self, kind: int, run_id: UUID, parent_run_id: UUID | None,
                     current: RunTree | RootSpec | None, start_ns: int, tags: list[str] | None,
                     metadata: dict[str, Any] | None, extra: Any, serialized: Any,
                     value: Any) -> None:
        """A start other than a chain's (those are built in ``_settle``)."""
        name = extra.get("name") or _serialized_name(serialized)
        if kind == _TOOL:
            input_str, args = value
            run = self._start(run_id, parent_run_id, current, start_ns, name or "tool", "tool",
                              _step_json(args) if args is not None else {"input": input_str},
                              tags, metadata)
            if run is not None and extra.get("tool_call_id"):
                run.metadata["tool_call_id"] = extra["tool_call_id"]
        elif kind == _RETRIEVER:
            self._start(run_id, parent_run_id, current, start_ns, name or "retriever",
                        "retriever", {"query": value}, tags, metadata)
        else:
            self._llm_start(kind, run_id, parent_run_id, current, start_ns, name, tags,
                            metadata, extra, value)

    def _llm_start(self, kind: int, run_id: UUID, parent_run_id: UUID | None,
                   current: RunTree | RootSpec | None, start_ns: int, name: str | None,
                   tags: list[str] | None, metadata: dict[str, Any] | None,
                   kwargs: dict[str, Any], value: Any) -> None:
        inputs: dict[str, Any]
        if kind == _CHAT:
            batch = _step_json(value)  # (its messages from the memo, as the steps' are)
            inputs = {"messages": batch[0] if len(batch) == 1 else batch}
        else:
            inputs = {"prompts": value}
        params = kwargs.get("invocation_params") or {}
        if params.get("tools"):
            inputs["tools"] = _tools_json(params["tools"])
        run = self._start(run_id, parent_run_id, current, start_ns, name or "llm", "llm",
                          inputs, tags, metadata)
        if run is not None:
            model = (metadata or {}).get("ls_model_name") or params.get("model") \
                or params.get("model_name")
            if model:
                run.metadata["ls_model_name"] = model
            invocation = {k: v for k, v in params.items()
                          if k in ("temperature", "max_tokens", "stream", "top_p")}
            if invocation:
                run.metadata["invocation_params"] = invocation

    def _end_event(self, run: RunTree, kind: int, value: Any,
                   error: BaseException | None) -> None:
        """A run's end, but for a chain's that succeeded (built in ``_settle``)."""
        if error is not None:
            run.end(error=error)
        elif kind == _LLM:
            _record_llm_result(run, value)
        elif kind == _TOOL:
            if _is_message(value):  # a ToolMessage: its content is the result
                if getattr(value, "status", None) == "error":
                    run.error = f"ToolError: {_text(value.content)}"
                run.outputs = {"output": _step_json(value.content)}
            else:
                run.outputs = {"output": _step_json(value)}
        else:
            run.outputs = {"documents": value}
        run.patch()
