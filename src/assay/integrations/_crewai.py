"""CrewAI: a ``Crew``, a ``Flow`` or a single ``Agent`` as an agent under test, its events as
assay runs.

Adapter: ``crew.copy().akickoff(inputs=...)`` (a copy per call, as ``kickoff_for_each`` makes,
since a kickoff writes its inputs into the crew's tasks); an evaluate() inputs dict goes as is,
and the query's prompt (``_registry.query_text``: a string, the dict's question, a chat's last
user message) fills the task templates' ``{query}``, ``{question}`` and ``{input}`` where the
dict has none. A ``Flow`` keeps its state: each call kicks off a new one (``_fresh_flow``),
given the inputs the same way (its state model's fields only). An ``Agent`` (a copy per
call too) is kicked off with the prompt, or a chat's whole conversation as its messages. The
``CrewOutput`` is read back as text (``raw``), structured output (a task's
``output_pydantic``/``output_json``, an agent's ``response_format``), a JSON-safe dict (each
task's output) and its tool calls (the tasks' message histories).

Capture: listeners on CrewAI's event bus (``crewai_event_bus.on``, its documented extension
point). Crew kickoff, task and agent execution, a user's flow and each of its steps
(state in, result out) -> chain runs; CrewAI's own flows (its agent executor runs as one) add
none; LLM calls -> llm runs (model, provider, messages, usage tokens with cache counts, first
streamed chunk); tool usage -> tool runs (arguments, result, error), nested by the events' own
``parent_event_id`` and timed by their timestamps.
The bus calls listeners on worker threads with the emitter's context, so the assay run current
where the crew started is the parent of the top run, and events arriving out of order wait for
their parent. ``arun`` flushes the bus before returning, so the trace is complete when
evaluate() reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .._json import jsonable as _jsonable
from ..errors import InvalidInputError, require
from ..evals._models import ToolCall
from ..evals._toolcalls import extract_tool_calls
from ..tracing._roots import RootSpec
from ..tracing._run_tree import RunTree, fast_child
from ._registry import (
    chat_messages,
    check_run_args,
    framework_parent,
    framework_root,
    query_text,
    structured_output,
)

__all__ = ["CrewAIAdapter", "adapt", "instrument", "tool_calls"]

_QUERY_NAMES = ("query", "question", "input")

# The process's first CrewAI LLM calls build the openai client's pydantic types, and threads
# doing so at once race: about one cold start in five failed an example ("PydanticUserError:
# Pydantic models should inherit from BaseModel"; none of ten once warm). So the first kickoff
# assay makes runs alone and the others start when it has ended.
_FIRST = threading.Lock()
_WARM = threading.Event()


def _us(ts: Any) -> int | None:
    if isinstance(ts, datetime):
        return int(ts.timestamp() * 1_000_000)
    return None


# -- the adapter -----------------------------------------------------------------------------------
class CrewAIAdapter:
    """A CrewAI ``Crew`` or ``Flow`` (kicked off with inputs) or ``Agent`` (kicked off with the
    query)."""

    framework = "crewai"

    def __init__(self, target: Any, **run_args: Any) -> None:
        self.target = target
        crewai = require("crewai", "crewai", "CrewAI crews")
        self.kind = ("Crew" if isinstance(target, crewai.Crew)
                     else "Flow" if isinstance(target, crewai.Flow) else "Agent")
        self.name = (getattr(target, "name", None) or getattr(target, "role", None)
                     or type(target).__name__)
        self.run_args = self._checked(run_args)

    def __repr__(self) -> str:
        return f"CrewAIAdapter({self.name})"

    def with_run_args(self, **run_args: Any) -> CrewAIAdapter:
        """This crew or agent, each kickoff given ``run_args`` too (``integrations.
        with_run_args``): an Agent's ``response_format``/``input_files``; a Crew's or Flow's
        ``input_files``, and ``inputs`` its task templates (a Flow's state) take from every
        example (an example's own inputs win)."""
        return CrewAIAdapter(self.target, **{**self.run_args, **run_args})

    def _checked(self, run_args: dict[str, Any]) -> dict[str, Any]:
        takes = ("response_format", "input_files") if self.kind == "Agent" \
            else ("inputs", "input_files")
        check_run_args(run_args, takes, f"a CrewAI {self.kind}")
        inputs = run_args.get("inputs")
        if inputs is not None and not isinstance(inputs, Mapping):
            raise InvalidInputError(f"a {self.kind}'s inputs must be a dict, got "
                                    f"{type(inputs).__name__}")
        return run_args

    def prepare(self, query: Any) -> Any:
        """The kickoff's input: an Agent's messages (the prompt, a chat's conversation or a
        message list as is), a Crew's or Flow's inputs (see the module's doc)."""
        if self.kind == "Agent":
            if isinstance(query, (str, list)):
                return query
            return chat_messages(query) or query_text(query)
        inputs = dict(self.run_args.get("inputs") or {})
        if isinstance(query, Mapping):
            inputs.update(query)
        prompt = query_text(query) if isinstance(query, (str, Mapping)) else str(query)
        names = _QUERY_NAMES if self.kind == "Crew" else _state_names(self.target)
        for name in names:
            inputs.setdefault(name, prompt)
        return inputs

    async def arun(self, query: Any) -> Any:
        """One kickoff; the process's first runs alone (see ``_WARM``)."""
        if not _WARM.is_set():
            if _FIRST.acquire(blocking=False):
                try:
                    return await self._kickoff(query)
                finally:
                    _WARM.set()
            while not _WARM.is_set():
                await asyncio.sleep(0.005)
        return await self._kickoff(query)

    async def _kickoff(self, query: Any) -> Any:
        args = self.prepare(query)
        target = self.target
        extra = {k: v for k, v in self.run_args.items() if k != "inputs"}
        try:
            if self.kind == "Crew":
                # a kickoff writes the inputs into the crew's own tasks: concurrent examples
                # each get a copy, as CrewAI's kickoff_for_each does
                crew = target.copy() if callable(getattr(target, "copy", None)) else target
                run = getattr(crew, "akickoff", None) or crew.kickoff_async
                return await _drained(await run(inputs=args, **extra))
            if self.kind == "Flow":  # a flow keeps its state: a new one per call
                return await _drained(await _fresh_flow(target).kickoff_async(inputs=args,
                                                                              **extra))
            # an Agent keeps its executor's state between kickoffs (concurrent examples on one
            # Agent failed, ~half at max_concurrency=6): a copy per call too, as a Crew's
            agent = target.copy() if callable(getattr(target, "copy", None)) else target
            run = getattr(agent, "kickoff_async", None)
            return await run(args, **extra) if run is not None else agent.kickoff(args, **extra)
        finally:
            _flush_bus()  # the listeners run on the bus's threads: wait for the whole trace

    def output_text(self, result: Any) -> str:
        return _text(result, _structured(result))

    def outputs(self, result: Any) -> dict[str, Any]:
        structured = _structured(result)  # (made once: the text of a flow's model is its JSON)
        out: dict[str, Any] = {"output": _text(result, structured)}
        if structured is not None:
            out["structured_output"] = structured
        tasks = getattr(result, "tasks_output", None)
        if tasks:
            out["tasks"] = [{"agent": getattr(t, "agent", None), "output": getattr(t, "raw", None),
                             **({"structured_output": s} if (s := _structured(t)) is not None
                                else {})}
                            for t in tasks]
        usage = getattr(result, "token_usage", None)
        if usage is not None:
            out["token_usage"] = _jsonable(usage)
        return out

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        return tool_calls(result)


def _text(result: Any, structured: Any) -> str:
    """A result's text: its ``raw`` text, a string as is, else its structured answer's JSON (a
    flow's last method's model or dict), else its ``str``."""
    raw = getattr(result, "raw", None)
    if isinstance(raw, str):
        return raw
    if isinstance(result, str):
        return result
    return str(result) if structured is None else json.dumps(structured, ensure_ascii=False)


def _structured(output: Any) -> Any:
    """A crew's, task's or agent's structured answer: its ``pydantic`` model, else its
    ``json_dict`` (``output_json``), as JSON; a flow's answer when a model or dict; None for a
    text answer."""
    if not hasattr(output, "raw"):
        return structured_output(output)
    return structured_output(getattr(output, "pydantic", None)) \
        or structured_output(getattr(output, "json_dict", None))


async def _drained(out: Any) -> Any:
    """A kickoff's result; of a Crew or Flow made with ``stream=True`` (a streaming output,
    which runs nothing until read), the final result once its chunks are read."""
    cls = type(out)  # (a streaming output's ``result`` raises until it is read)
    if not (hasattr(cls, "result") and hasattr(cls, "is_completed")):
        return out
    try:
        chunks = out.__aiter__()
        async for _ in chunks:
            pass
    except RuntimeError as exc:  # only a sync iterator: read on a worker thread
        if "not available" not in str(exc):
            raise
        await asyncio.to_thread(lambda: [None for _ in out])
    return out.result


def _fresh_flow(flow: Any) -> Any:
    """A new Flow of ``flow``'s class, made with the fields it was made with: a kickoff writes
    the inputs into a flow's state, so each call (and concurrent examples) gets its own."""
    return type(flow)(**{name: getattr(flow, name) for name in flow.model_fields_set})


def _state_names(flow: Any) -> tuple[str, ...]:
    """The query names a Flow's state takes (every one for a dict state, a model's fields
    else), so a prompt never adds a key a strict state model refuses."""
    state = getattr(flow, "state", None)
    fields = getattr(type(state), "model_fields", None)
    return _QUERY_NAMES if fields is None else tuple(n for n in _QUERY_NAMES if n in fields)


def adapt(obj: Any) -> CrewAIAdapter | None:
    """A CrewAI ``Crew``, ``Flow`` or ``Agent``, else None."""
    if isinstance(obj, CrewAIAdapter):
        return obj
    crewai = require("crewai", "crewai", "CrewAI crews")
    if isinstance(obj, (crewai.Crew, crewai.Agent, crewai.Flow)):
        return CrewAIAdapter(obj)
    return None


def tool_calls(obj: Any) -> list[ToolCall] | None:
    """Tool calls from a ``CrewOutput`` (all tasks, in order) or a ``TaskOutput``: the
    assistant tool calls in their message histories."""
    tasks = getattr(obj, "tasks_output", None)
    if tasks is None and hasattr(obj, "messages") and hasattr(obj, "raw"):
        tasks = [obj]
    if tasks is None:
        return None
    calls: list[ToolCall] = []
    for task in tasks:
        messages = [m for m in getattr(task, "messages", None) or []
                    if isinstance(m, Mapping) and m.get("role") == "assistant"]
        if messages:
            calls.extend(extract_tool_calls(messages))
    return calls


# -- capture ---------------------------------------------------------------------------------------
def _first(usage: Mapping[str, Any], *keys: str) -> Any:
    """The first of ``keys`` that ``usage`` has a value for."""
    return next((usage[k] for k in keys if usage.get(k) is not None), None)


def _provider(model: str | None, llm_provider: Any) -> tuple[str | None, str | None]:
    """(provider, model) of an llm call: a ``provider/model`` name split, else the provider the
    LLM object names (CrewAI's native Anthropic, Gemini... LLMs give the bare model)."""
    if not model:
        return None, None
    provider, sep, name = model.partition("/")
    if sep:
        return provider, name
    return (llm_provider if isinstance(llm_provider, str) and llm_provider else "openai"), model


class _Listener:
    """CrewAI events -> runs. One per process; every method runs on a bus worker thread."""

    def __init__(self) -> None:
        self.runs: dict[str, RunTree] = {}  # started event id -> its run
        self.waiting: dict[str, list[tuple[Any, RunTree | None]]] = {}  # parent id -> starts
        self.ended: dict[str, Any] = {}  # end events whose start is not in yet
        self.first_chunk: dict[str, int | None] = {}  # llm call id -> its first chunk's time
        self.aliases: set[str] = set()  # started ids that stand for the run above them
        self.providers: dict[str, Any] = {}  # llm call start id -> its LLM's provider
        self.shown: set[str] = set()  # start ids of a user flow's (and its steps') runs
        self.lock = threading.Lock()
        self.created = threading.Condition(self.lock)  # a run made (``_step_run`` waits)

    # -- starts --
    def start(self, event: Any, source: Any = None) -> None:
        parent_id = event.parent_event_id
        # the emitter's context, copied by the bus; CrewAI's own scopes are not asked (its
        # events nest by their parent ids), but another framework's step may hold a kickoff
        assay_parent = framework_parent(event.parent_event_id is None)
        llm = event.type == "llm_call_started"  # (source: the LLM object)
        # a flow of the user's (source: the flow) shows its steps; CrewAI's own (its agent
        # executor runs as one) pass their children to the run above
        shown = event.type in _PASS_THROUGH and _users_flow(source)
        with self.lock:
            if parent_id is not None and parent_id not in self.runs:
                if assay_parent is None and not self.runs:
                    return  # nothing of this crew is traced
                self._note(event, source, llm, shown)
                self.waiting.setdefault(parent_id, []).append((event, assay_parent))
                return
            parent = self.runs.get(parent_id) if parent_id else assay_parent
            if parent is None:
                if parent_id is None:  # a kickoff outside any assay run: a root of its own
                    parent = framework_root()  # where tracing is on (the emitter's context)
                if parent is None:
                    return
            self._note(event, source, llm, shown)
            self._create(event, parent)

    def _note(self, event: Any, source: Any, llm: bool, shown: bool) -> None:
        """What ``_create`` needs of the emitter: an LLM's provider, a user flow's steps."""
        if llm:
            self.providers[event.event_id] = getattr(source, "provider", None)
        elif shown:
            self.shown.add(event.event_id)

    def _create(self, event: Any, parent: RunTree | RootSpec) -> None:
        if event.type in _PASS_THROUGH and event.event_id not in self.shown and not isinstance(
                parent, RootSpec):
            # CrewAI's own flow (its agent executor runs as one): its steps' children go to
            # the run above it (at the top, outside any assay run, it is the root itself)
            self.runs[event.event_id] = parent
            self.aliases.add(event.event_id)
            for child, _ in self.waiting.pop(event.event_id, ()):
                self._create(child, parent)
            self.ended.pop(event.event_id, None)
            return
        self.shown.discard(event.event_id)
        name, run_type, inputs = _describe(event)
        if isinstance(parent, RootSpec):
            run = parent.new_run(name, run_type, inputs)
        else:
            run = fast_child(parent, name, run_type, inputs)
        us = _us(getattr(event, "timestamp", None))
        if us is not None:
            run._start_us = us
        if run_type == "llm":
            provider, model = _provider(getattr(event, "model", None),
                                        self.providers.pop(event.event_id, None))
            if provider:
                run.metadata["ls_provider"] = provider
            if model:
                run.metadata["ls_model_name"] = model
        self.runs[event.event_id] = run
        self.created.notify_all()  # (the lock is held: start and settle take it)
        for child, _ in self.waiting.pop(event.event_id, ()):
            self._create(child, run)
        end = self.ended.pop(event.event_id, None)
        if end is not None:
            self._finish(run, end)

    # -- ends --
    def end(self, event: Any) -> None:
        started = event.started_event_id
        if started is None:
            return
        with self.lock:
            if started in self.aliases:
                self.aliases.discard(started)
                self.runs.pop(started, None)
                return
            run = self.runs.get(started)
            if run is None:
                if self.runs or self.waiting:
                    self.ended[started] = event
                return
            self._finish(run, event)

    def _finish(self, run: RunTree, event: Any) -> None:
        self.runs.pop(event.started_event_id, None)
        call_id = getattr(event, "call_id", None)
        if call_id and call_id in self.first_chunk:
            run._mark_first_token(self.first_chunk.pop(call_id))
        _record_end(run, event)
        us = _us(getattr(event, "timestamp", None))
        run.end()
        if us is not None:
            run._end_us = max(us, run._start_us)
        run.patch()

    def chunk(self, event: Any) -> None:
        # called synchronously by the bus (stream chunks keep their order), perhaps before the
        # call's start reached its listener: the first chunk's time waits here for its run
        call_id = getattr(event, "call_id", None)
        if call_id and call_id not in self.first_chunk and (self.runs or self.waiting
                                                              or framework_parent(False)):
            self.first_chunk[call_id] = _us(getattr(event, "timestamp", None))

    def settle(self) -> None:
        """Starts still waiting for a parent that never came (an event type not listened to):
        put under the assay run current where they were emitted."""
        with self.lock:
            waiting, self.waiting = self.waiting, {}
            for items in waiting.values():
                for event, assay_parent in items:
                    if assay_parent is not None:
                        self._create(event, assay_parent)


def _users_flow(source: Any) -> bool:
    """Whether an event's emitter is a flow of the user's, not one of CrewAI's own."""
    module = type(source).__module__ or ""
    return module != "crewai" and not module.startswith("crewai.")


def _describe(event: Any) -> tuple[str, str, dict[str, Any]]:
    kind = event.type
    inputs: dict[str, Any]
    if kind == "flow_started":
        return event.flow_name or "Flow", "chain", {"inputs": _jsonable(event.inputs)}
    if kind == "method_execution_started":
        inputs = {"state": _jsonable(event.state)}
        if event.params:
            inputs["params"] = _jsonable(event.params)
        return event.method_name, "chain", inputs
    if kind == "crew_kickoff_started":
        return event.crew_name or "Crew", "chain", {"inputs": _jsonable(event.inputs)}
    if kind == "task_started":
        task = getattr(event, "task", None)
        name = (getattr(task, "name", None) or event.task_name or "Task")[:80]
        return name, "chain", {"description": getattr(task, "description", None),
                               "context": event.context}
    if kind == "agent_execution_started":
        return (getattr(event.agent, "role", None) or "Agent", "chain",
                {"task_prompt": event.task_prompt})
    if kind == "llm_call_started":
        inputs = {"messages": _jsonable(event.messages)}
        if event.tools:
            inputs["tools"] = _jsonable(event.tools)
        return event.model or "llm", "llm", inputs
    if kind == "tool_usage_started":
        args = event.tool_args
        if isinstance(args, str):
            try:
                args = json.loads(args) if args else {}
            except ValueError:
                args = {"input": args}
        return event.tool_name, "tool", _jsonable(args) if isinstance(args, Mapping) else {
            "input": _jsonable(args)}
    return kind, "chain", {}


def _record_end(run: RunTree, event: Any) -> None:
    kind = event.type
    error = getattr(event, "error", None)
    if error is not None and kind.endswith(("failed", "error")):
        run.error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return
    if kind == "llm_call_completed":
        run.outputs = {"output": _jsonable(event.response)}
        usage = event.usage or {}
        # each native provider names them its way (Gemini: prompt_token_count, and
        # completion_tokens with its thinking tokens)
        inp = _first(usage, "prompt_tokens", "input_tokens", "prompt_token_count")
        out = _first(usage, "completion_tokens", "output_tokens", "candidates_token_count")
        if inp is not None or out is not None:
            # CrewAI flattens every provider's cache counts to these two (its input tokens
            # count them too): itemised, so they are priced at their own rates
            details = {key: int(n) for key, n in (
                ("cache_read", usage.get("cached_prompt_tokens")),
                ("cache_creation", usage.get("cache_creation_tokens"))) if n}
            run.set_usage(int(inp or 0), int(out or 0), usage.get("total_tokens"),
                          input_token_details=details or None)
    elif kind == "tool_usage_finished":
        run.outputs = {"output": _jsonable(event.output)}
        if getattr(event, "failure", None) is not None:
            run.error = str(_jsonable(event.failure))
    elif kind == "task_completed":
        run.outputs = {"output": getattr(event.output, "raw", None)}
    elif kind in ("method_execution_finished", "flow_finished"):
        run.outputs = {"output": _jsonable(event.result)}
    elif kind in ("agent_execution_completed", "crew_kickoff_completed"):
        out = event.output
        run.outputs = {"output": getattr(out, "raw", out) if not isinstance(out, str) else out}


_LISTENER: _Listener | None = None
_installed = False
_lock = threading.Lock()

_PASS_THROUGH = frozenset({"flow_started", "method_execution_started"})
_STARTS = ("FlowStartedEvent", "MethodExecutionStartedEvent", "CrewKickoffStartedEvent",
           "TaskStartedEvent", "AgentExecutionStartedEvent",
           "LLMCallStartedEvent", "ToolUsageStartedEvent")
_ENDS = ("FlowFinishedEvent", "FlowFailedEvent", "MethodExecutionFinishedEvent",
         "MethodExecutionFailedEvent", "CrewKickoffCompletedEvent", "CrewKickoffFailedEvent",
         "TaskCompletedEvent",
         "TaskFailedEvent", "AgentExecutionCompletedEvent", "AgentExecutionErrorEvent",
         "LLMCallCompletedEvent", "LLMCallFailedEvent", "ToolUsageFinishedEvent",
         "ToolUsageErrorEvent")


def _step_run() -> RunTree | None:
    """The run of the CrewAI step running here (a tool's, an agent's): what a run started by
    a tool's code nests under (``tracing._context.STEP_RUNS``). CrewAI keeps the started events
    of the scopes open here in a context variable; their runs are made on the bus's worker
    threads, so a tool's is waited for (up to a second) when a scope around it has a run (it
    will have one too); any other scope's code nests under the innermost one made by now."""
    listener, stack = _LISTENER, _scopes.get() if _scopes is not None else ()
    if listener is None or not stack:
        return None
    runs = listener.runs
    top, kind = stack[-1]
    if kind == _TOOL_SCOPE and top not in runs and any(
            event_id in runs for event_id, _ in stack[:-1]):
        with listener.created:
            listener.created.wait_for(lambda: top in runs, timeout=_STEP_WAIT)
    for event_id, _ in reversed(stack):  # the innermost scope with a run
        run = runs.get(event_id)
        if run is not None:
            return run
    return None


_STEP_WAIT = 1.0  # seconds a tool's code waits for its run from the bus's workers
_TOOL_SCOPE = "tool_usage_started"
_scopes: Any = None  # CrewAI's context variable of the open scopes' started events


def _flush_bus() -> None:
    if _LISTENER is None:
        return
    from crewai.events import crewai_event_bus  # type: ignore[import-not-found]  # own venv

    try:
        crewai_event_bus.flush()
    finally:
        _LISTENER.settle()


def instrument() -> None:
    """Listen on CrewAI's event bus (once per process)."""
    global _installed, _LISTENER
    if _installed:
        return
    with _lock:
        if _installed:
            return
        events = require("crewai.events", "crewai", "CrewAI tracing")
        bus = events.crewai_event_bus
        # openai (2.5x, which crewai pins) imports httpx2 on a client's first use and checks
        # ``isinstance(value, sys.modules["httpx2"].Client)`` elsewhere: two examples starting
        # at once can see the module half-imported ("partially initialized module 'httpx2'").
        # Import it whole here, before any example runs.
        with contextlib.suppress(ImportError):
            importlib.import_module("httpx2")
        listener = _Listener()

        def on_start(source: Any, event: Any) -> None:
            listener.start(event, source)

        def on_end(source: Any, event: Any) -> None:
            listener.end(event)

        def on_chunk(source: Any, event: Any) -> None:
            listener.chunk(event)

        for name in _STARTS:
            bus.on(getattr(events, name))(on_start)
        for name in _ENDS:
            bus.on(getattr(events, name))(on_end)
        bus.on(events.LLMStreamChunkEvent)(on_chunk)
        _LISTENER = listener
        _install_step_lookup()
        _installed = True


def _install_step_lookup() -> None:
    """What a tool's code traces nests under the tool's run (``_step_run``), where CrewAI keeps
    its scopes in the context variable this version of it has (a private name: without it,
    such runs hang from the assay run, as before)."""
    global _scopes
    import contextvars

    try:
        from crewai.events import event_context  # (own venv)
    except ImportError:  # pragma: no cover - another layout
        return
    var = getattr(event_context, "_event_id_stack", None)
    if isinstance(var, contextvars.ContextVar):
        from ..tracing._context import add_step_lookup

        _scopes = var
        add_step_lookup(_step_run, var)
