"""Upsonic: its Agent, Team and Graph evaluated as they are, and their steps traced.

Running: an ``Agent`` or a ``Team`` gets a fresh ``Task`` made from the query (``do_async``); a
``Graph`` runs the tasks it was built with (as Upsonic's own evaluators run it: the query is not
injected), one run at a time per graph because a graph keeps its state on itself, its completed
tasks reset first (``Task.reset_run_state``: Upsonic refuses to re-run a completed task). The
native result is the ``Task`` (for a graph, an ``UpsonicGraphRun`` with the executed tasks): its
``response`` is the output and its ``tool_calls`` the tool-call history.

Tracing: every agent assay runs (an Agent, a Team's members, a Graph's agents, a judge) or finds
alive when it instruments Upsonic is traced from its own objects (``_upsonic_native``): its model
wrapped, its span hooks assay's, Upsonic's OpenTelemetry instrumentation off (it costs Upsonic's
agents ~25% of their CPU once its spans record). Agents built later and never handed to assay
(a plain function's agent) can only be reached at construction, through Upsonic's global
instrumentation setting: assay installs it as ``_NewAgents``, which each such agent reads once in
its constructor, and which answers assay's ``InstrumentationSettings`` (whose span processor,
``_upsonic_spans``, turns their agent, chat and tool spans into the same chain, llm and tool
runs) and notes the agent. The next ``evaluate()`` or evaluator to start moves the agents noted
since onto their own objects (``adopt``): only an agent built and run inside one experiment
stays on the span path. An agent with instrumentation of its own is left alone. With no assay
run current, or the switch off, neither path records anything.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import copy
import functools
import gc
import json
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, require
from ..llm._base import BaseJudge
from ._registry import check_run_args, structured_output
from ._registry import query_text as _query_text

if TYPE_CHECKING:
    from ..evals._models import ToolCall
    from ..llm import JudgeOptions

__all__ = ["UpsonicAdapter", "UpsonicGraphRun", "UpsonicJudge", "adapt", "adopt", "instrument",
           "judge", "query_text", "tool_calls"]

_FEATURE = "Upsonic agents"
_settings: Any = None
_processor: Any = None  # the UpsonicSpanProcessor behind _settings
_settings_lock = threading.Lock()


def _upsonic() -> Any:
    return require("upsonic", "upsonic", _FEATURE)


def _classes() -> tuple[Any, Any, Any, Any]:
    _upsonic()
    from upsonic.agent.agent import Agent
    from upsonic.graph.graph import Graph
    from upsonic.tasks.tasks import Task
    from upsonic.team.team import Team

    return Agent, Team, Graph, Task


# -- tracing -------------------------------------------------------------------------------------
def _instrumentation() -> Any:
    """The one ``InstrumentationSettings`` whose tracer feeds assay (made once)."""
    global _settings, _processor
    if _settings is None:
        with _settings_lock:
            if _settings is None:
                _upsonic()
                require("opentelemetry.sdk.trace", "upsonic", "tracing Upsonic agents")
                from upsonic.models.instrumented import InstrumentationSettings

                from ._upsonic_spans import UpsonicSpanProcessor, tracer_provider

                provider = tracer_provider()
                _processor = UpsonicSpanProcessor()
                provider.add_span_processor(_processor)
                _settings = InstrumentationSettings(tracer_provider=provider)
    return _settings


def instrument() -> None:
    """Make every Agent report to assay: those already built (Upsonic keeps no list of its
    agents) found once among the live objects and traced from their own objects, so a plain
    function that calls a prebuilt agent is traced too; those built from now on through
    Upsonic's global setting (unless the user set a global instrumentation of their own).
    An agent with instrumentation of its own is left as it is."""
    agent_cls = _classes()[0]
    settings = _instrumentation()
    if getattr(agent_cls, "_global_tracing_provider", None) is None:
        # stored as the class attribute every agent built from now on reads (see _NewAgents)
        agent_cls.instrument_all(_NewAgents(settings))
    for obj in gc.get_objects():  # once per process, ~1 µs per live object
        try:
            if isinstance(obj, agent_cls):
                _ensure_traced(obj)
        except Exception:  # noqa: BLE001, S112 - a half-built or odd object: leave it untraced
            continue


# agents built since instrument() on the span path, noted at construction: id -> weak reference
_born: dict[int, weakref.ref[Any]] = {}
_born_lock = threading.Lock()


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    with _born_lock:
        if _born.get(key) is ref:  # not a newer agent that got the same id
            del _born[key]


class _NewAgents:
    """Upsonic's global instrumentation setting as assay installs it (``instrument_all``
    stores any object as the ``Agent`` class attribute ``_global_tracing_provider``). Only an
    agent built without instrumentation of its own reads it, once, in its constructor: that
    agent gets assay's settings (the span path) and is noted, so ``adopt`` can move it onto
    its own objects before its next run that assay starts. Read on the class, the settings."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def __get__(self, agent: Any, owner: Any = None) -> Any:
        if agent is not None:
            try:
                key = id(agent)
                _born[key] = weakref.ref(agent, functools.partial(_forget, key))
            except TypeError:  # pragma: no cover - an Agent subclass without weak references
                pass
            from ._upsonic_native import bridge_settings

            # (its settings= are set after this, on Upsonic's wrapper; inside the user's
            # constructor: an agent of a shape this cannot bridge is built as it would be)
            with contextlib.suppress(Exception):
                bridge_settings(agent)
        return self.settings


def adopt() -> None:
    """Move the agents built since ``instrument()`` (``_NewAgents``) onto their own objects.

    Called when ``evaluate()`` or an evaluator starts, where no agent is expected mid-run; one
    that is (another thread's experiment) finishes its run as it began, through its spans
    (``_upsonic_native`` hands that run's spans back to the manager it replaced)."""
    if not _born:
        return
    with _born_lock:
        refs = list(_born.values())
        _born.clear()
    for ref in refs:
        agent = ref()
        if agent is not None:
            try:
                _ensure_traced(agent)
            except Exception:  # noqa: BLE001 - a half-built or odd object: left on the spans
                continue


def _ensure_traced(agent: Any) -> None:
    """Trace an agent through its own objects (``_upsonic_native``), unless it has
    instrumentation of its own; one built since ``instrument()`` (with assay's settings) is
    moved over from the span path."""
    from ._upsonic_native import capture

    capture(agent, _instrumentation())


def _agents_in(obj: Any, seen: set[int] | None = None) -> list[Any]:
    """Every Upsonic Agent inside an Agent, Team (members, leader, router) or Graph."""
    agent_cls, team_cls, graph_cls, _ = _classes()
    seen = set() if seen is None else seen
    if obj is None or id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, agent_cls):
        return [obj]
    found: list[Any] = []
    if isinstance(obj, team_cls):
        for member in [*(getattr(obj, "entities", None) or []), getattr(obj, "leader", None),
                       getattr(obj, "router", None)]:
            found += _agents_in(member, seen)
    elif isinstance(obj, graph_cls):
        found += _agents_in(obj.default_agent, seen)
        for node in obj.nodes:
            task = getattr(node, "task", None)
            found += _agents_in(getattr(task, "agent", None), seen)
    return found


# -- results -------------------------------------------------------------------------------------
@dataclass
class UpsonicGraphRun:
    """One run of a Graph: its final state, the tasks it executed (in order) and their tool
    calls, copied when the run ended (the graph's state and tasks are reset by its next run)."""

    state: Any
    tasks: list[Any] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def output(self) -> Any:
        return self.state.get_latest_output()


def _executed_tasks(graph: Any) -> list[Any]:
    from upsonic.graph.graph import TaskNode

    done = graph.state.task_outputs
    return [node.task for node in graph.nodes if isinstance(node, TaskNode) and node.id in done]


def _task_calls(task: Any) -> list[ToolCall]:
    from ..evals._models import ToolCall

    calls = []
    for record in getattr(task, "tool_calls", None) or []:
        name = record.get("tool_name") if isinstance(record, Mapping) else None
        if not name:
            continue
        args = record.get("params")
        if isinstance(args, str):  # a model's malformed or unparsed arguments, kept as sent
            try:
                args = json.loads(args) if args else {}
            except ValueError:
                pass
        calls.append(ToolCall(name=str(name), args=args, id=record.get("tool_call_id")))
    return calls


def tool_calls(obj: Any) -> list[ToolCall] | None:
    """Tool calls (name + arguments) from a Task, a list of Tasks, a Graph after its run, or an
    ``UpsonicGraphRun``; None for anything else."""
    _, _, graph_cls, task_cls = _classes()
    if isinstance(obj, task_cls):
        return _task_calls(obj)
    if isinstance(obj, UpsonicGraphRun):
        return _task_calls(obj)
    if isinstance(obj, graph_cls):
        return [c for task in _executed_tasks(obj) for c in _task_calls(task)]
    if isinstance(obj, (list, tuple)) and obj and all(isinstance(t, task_cls) for t in obj):
        return [c for task in obj for c in _task_calls(task)]
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return str(value)


def query_text(query: Any) -> str:
    """The task description for a query: a string, or an inputs dict's prompt (the rule every
    adapter follows: ``_registry.query_text``)."""
    if isinstance(query, (str, Mapping)):
        return _query_text(query)
    raise InvalidInputError(f"an Upsonic agent takes a string, an inputs dict or a Task as "
                            f"query, got {type(query).__name__}")


# -- the adapter ---------------------------------------------------------------------------------
# graph id -> (loop, lock); a Graph is a pydantic model (unhashable), so keyed by id and dropped
# when the graph is collected
_graph_locks: dict[int, tuple[Any, asyncio.Lock]] = {}
_DO_ARGS = ("model", "retry", "timeout")  # an Agent's do_async arguments besides the Task
_graph_locks_guard = threading.Lock()


def _graph_lock(graph: Any) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    key = id(graph)
    with _graph_locks_guard:
        held = _graph_locks.get(key)
        if held is None:
            weakref.finalize(graph, _graph_locks.pop, key, None)
        if held is None or held[0] is not loop:
            held = (loop, asyncio.Lock())
            _graph_locks[key] = held
        return held[1]


class UpsonicAdapter:
    """An Upsonic Agent, Team or Graph, called the way assay calls agents."""

    framework = "upsonic"

    def __init__(self, obj: Any, **run_args: Any) -> None:
        agent_cls, team_cls, graph_cls, task_cls = _classes()
        self.obj = obj
        self._task_cls = task_cls
        if isinstance(obj, agent_cls):
            self.kind = "agent"
        elif isinstance(obj, team_cls):
            self.kind = "team"
        elif isinstance(obj, graph_cls):
            self.kind = "graph"
        else:
            raise InvalidInputError(f"not an Upsonic Agent, Team or Graph: "
                                    f"{type(obj).__name__}")
        self.name = (getattr(obj, "name", None) if self.kind != "graph" else None) \
            or type(obj).__name__
        self.task_args, self.do_args = self._split(run_args)
        self.stream = bool(self.do_args.pop("stream", False))
        for agent in _agents_in(obj):
            _ensure_traced(agent)

    def __repr__(self) -> str:
        return f"UpsonicAdapter({self.kind} {self.name!r})"

    def with_run_args(self, **run_args: Any) -> UpsonicAdapter:
        """This agent, each run given ``run_args`` too (``integrations.with_run_args``): a
        ``Task``'s own fields (``response_format``, ``context``, ``tools``...) for the Task made
        from each query (a Task passed as the query keeps its own), and an Agent's
        ``do_async`` arguments (``model``, ``retry``, ``timeout``), and ``stream=True``: run
        with ``astream``, so the answer's llm run gets its first token."""
        kept = {**self.task_args, **self.do_args, **({"stream": True} if self.stream else {})}
        return UpsonicAdapter(self.obj, **{**kept, **run_args})

    def _split(self, run_args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        if run_args and self.kind == "graph":
            raise InvalidInputError(f"an Upsonic Graph takes no run arguments (got "
                                    f"{', '.join(sorted(run_args))}): its nodes' Tasks hold them")
        fields = tuple(f for f in self._task_cls.model_fields if f != "description")
        calls = (*_DO_ARGS, "stream") if self.kind == "agent" else ()
        check_run_args(run_args, (*calls, *fields), f"an Upsonic {self.kind} (a Task's fields"
                       f"{', do_async ' + '/'.join(_DO_ARGS) + ' or stream' if calls else ''})")
        if run_args.get("stream") and "timeout" in run_args:
            raise InvalidInputError("an Upsonic agent run with stream=True takes no timeout "
                                    "(Upsonic's astream has none)")
        return ({k: v for k, v in run_args.items() if k in fields},
                {k: v for k, v in run_args.items() if k not in fields})

    def _task(self, query: Any) -> Any:
        if isinstance(query, self._task_cls):
            return copy.deepcopy(query)  # a Task keeps its response: one copy per run, as
            # Upsonic's PerformanceEvaluator does
        return self._task_cls(description=query_text(query), **self.task_args)

    async def arun(self, query: Any) -> Any:
        """``_arun`` on Upsonic's own loop when called from assay's sync entry points (see
        ``_on_upsonic_loop``), else on the caller's loop, as Upsonic's async API runs."""
        return await _on_upsonic_loop(lambda: self._arun(query))

    async def _arun(self, query: Any) -> Any:
        """Run on ``query`` (a string, an inputs dict, a Task or a list of Tasks); returns the
        Task (Agent, Team), the list of Tasks (a Team given several), or an UpsonicGraphRun."""
        obj = self.obj
        if self.kind == "graph":
            async with _graph_lock(obj):
                for node in obj.nodes:  # a completed Task refuses to run again: Upsonic's own
                    task = getattr(node, "task", None)  # reset makes the graph re-runnable
                    if task is not None and task.is_completed:
                        task.reset_run_state()
                state = await obj.run_async(verbose=False, show_progress=False)
                tasks = _executed_tasks(obj)
                return UpsonicGraphRun(state=state, tasks=tasks, tool_calls=[
                    dict(call) for task in tasks for call in (task.tool_calls or [])])
        if isinstance(query, list) and query and all(isinstance(t, self._task_cls)
                                                     for t in query):
            tasks = [copy.deepcopy(t) for t in query]
            if self.kind == "agent":
                await obj.do_async(tasks[0], **self.do_args)  # as Upsonic's
                return tasks[0]  # PerformanceEvaluator does
            await obj.multi_agent_async(obj.entities, tasks)
            return tasks
        task = self._task(query)
        if self.stream:  # astream: the answer's llm call gets its first token
            async for _ in obj.astream(task, **self.do_args):
                pass
            return task  # (the Task holds the response and tool calls, as after do_async)
        await obj.do_async(task, **self.do_args)  # a Team sets the task's response to its
        return task  # combined answer

    def _answer(self, result: Any) -> Any:
        """The answer of a run's result: a graph's latest output, the last Task's response."""
        if isinstance(result, UpsonicGraphRun):
            return result.output
        if isinstance(result, list):
            return result[-1].response if result else None
        if isinstance(result, self._task_cls):
            return result.response
        return result

    def output_text(self, result: Any) -> str:
        return _text(self._answer(result))

    def outputs(self, result: Any) -> dict[str, Any]:
        answer = self._answer(result)
        out: dict[str, Any] = {"output": _text(answer)}
        structured = structured_output(answer)  # a Task's response_format
        if structured is not None:
            out["structured_output"] = structured
        return out

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        return tool_calls(result)


async def _on_upsonic_loop(make: Any) -> Any:
    """Await ``make()`` where the agent's HTTP clients live.

    An agent's async clients belong to the loop they first ran on. Upsonic's sync entry points
    (``agent.do``) all run on one persistent loop of Upsonic's; assay's sync entry points run on
    assay's (or, called from that loop's own thread, on a short-lived stand-in loop). So that a
    user may mix them on one agent (``agent.do(task)``, then an evaluator's ``run()``, a judge
    inside ``evaluate()``), a coroutine started from an assay-owned loop is run on Upsonic's,
    with the caller's context variables (the current assay run) carried along. Called from any
    other loop (the user's ``asyncio.run``), it runs right there, as ``await agent.do_async()``
    would.
    """
    from .. import _sync

    running = asyncio.get_running_loop()
    get_loop = getattr(_agent_module(), "_get_bg_loop", None)
    assay_owned = running is _sync._loop or (  # or run_sync's stand-in loop for a sync call
        threading.current_thread().name.startswith("assay-sync"))  # made on the loop's thread
    if not assay_owned or get_loop is None:
        return await make()
    target = get_loop()
    _sync.keep_context_in_executor(target, "assay-upsonic-tools")  # its sync tools
    ctx = contextvars.copy_context()
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()
    box: list[asyncio.Task[Any]] = []

    def settle(task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            done.cancel()
        elif task.exception() is not None:
            done.set_exception(task.exception())
        else:
            done.set_result(task.result())

    def start() -> None:
        try:
            task = target.create_task(make(), context=ctx)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting caller
            done.set_exception(exc)
            return
        box.append(task)
        task.add_done_callback(settle)

    target.call_soon_threadsafe(start)
    try:
        return await asyncio.wrap_future(done)
    except asyncio.CancelledError:
        target.call_soon_threadsafe(lambda: box and box[0].cancel())
        raise


def _agent_module() -> Any:
    _upsonic()
    import upsonic.agent.agent as module

    return module


def adapt(obj: Any) -> UpsonicAdapter | None:
    """An adapter for an Upsonic Agent, Team or Graph; None for any other Upsonic object."""
    agent_cls, team_cls, graph_cls, _ = _classes()
    if isinstance(obj, (agent_cls, team_cls, graph_cls)):
        return UpsonicAdapter(obj)
    return None


# -- an Upsonic Agent as the judge ----------------------------------------------------------------
class UpsonicJudge(BaseJudge):
    """An Upsonic Agent answering assay's judge prompt, the verdict asked for through Upsonic's
    structured output (``Task(response_format=EvaluationScore)``, as Upsonic's own evaluator
    does) and then checked and re-asked for by assay, as for every judge. Its model call is
    traced as its agent is (its model wrapped), so this judge records no llm run of its own (no
    double count)."""

    provider = "upsonic"

    def __init__(self, agent: Any, *, options: JudgeOptions | None = None) -> None:
        from ..llm import JudgeOptions

        agent_cls = _classes()[0]
        if not isinstance(agent, agent_cls):
            raise InvalidInputError(f"UpsonicJudge needs an upsonic Agent, got "
                                    f"{type(agent).__name__}")
        model = getattr(getattr(agent, "model", None), "model_name", None)
        super().__init__(str(model or agent.name or "agent"),
                         options=options or JudgeOptions.model_validate({"trace": False}))
        self.agent = agent
        _ensure_traced(agent)

    async def _send(self, messages: list[Any], output_schema: Any) -> Any:
        from ..llm._types import Completion

        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] != "system"]
        if len(turns) == 1:
            prompt = turns[0]["content"]
        else:
            prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in turns)
        if system:
            prompt = f"{system}\n\n{prompt}"
        fmt = _response_format(output_schema)
        task = (self._task_cls(description=prompt, not_main_task=True) if fmt is None else
                self._task_cls(description=prompt, not_main_task=True, response_format=fmt))
        await _on_upsonic_loop(lambda: self.agent.do_async(task))
        usage = getattr(task, "_usage", None)
        return Completion(text=_text(task.response), model=self.model,
                          input_tokens=getattr(usage, "input_tokens", None),
                          output_tokens=getattr(usage, "output_tokens", None))

    @property
    def _task_cls(self) -> type:
        return _classes()[3]


def _response_format(output_schema: Any) -> type | None:
    """The verdict model for Upsonic's own structured output (its output tool, as Upsonic's
    evaluator asks its judge); other schemas go by the prompt alone."""
    if getattr(output_schema, "name", None) == "EvaluationScore":
        from ..evals._models import EvaluationScore

        return EvaluationScore
    return None


def judge(obj: Any, options: JudgeOptions | None = None) -> UpsonicJudge | None:
    """A judge backed by an Upsonic Agent; None when ``obj`` is not one."""
    if not isinstance(obj, _classes()[0]):
        return None
    return UpsonicJudge(obj, options=options)
