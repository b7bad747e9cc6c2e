"""Google's Agent Development Kit (ADK): an agent (``Agent``, ``SequentialAgent``, a workflow
node...) or an ``App`` as the agent under test, its steps as assay runs.

Adapter: each query runs in a new session of one ``InMemoryRunner`` per adapter, whose app is
the agent's (an ``App`` keeps its own settings) with assay's plugin added; an evaluate() inputs
dict gives its question text (a chat: its last user message, the turns before it as the new
session's events), and its ``session_state`` the new session's state. The result
(``ADKResult``) holds the run's events: its text is the last final answer (a response's text,
or the output of the node that ends a workflow), its tool calls the events' function calls,
with arguments.

Capture: a plugin (ADK's documented extension point for what cuts across agents, models and
tools). An invocation that starts while an assay run is current (and framework tracing is on)
nests under it: each agent a chain run, each model call an llm run (model, provider, messages as
GenAI parts, tokens from the response's usage, its first token from the first partial response of
a streamed call, cost), each tool call a tool run (arguments, result, error), nested as ADK nests
them (an agent transferred to sits under the agent that handed over). An invocation with no
assay run current is a root run of its own where tracing is on (``ASSAY_TRACING=true``,
``tracing_context(enabled=True)``; ADK's session its thread). assay's runner has the plugin;
a Runner of the user's own takes it as ``App(..., plugins=[adk_plugin()])``. Nothing
global is touched: ADK's OpenTelemetry spans go wherever the user sends them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .._json import jsonable as _jsonable
from .._prices import known_provider
from ..errors import require
from ..evals._models import ToolCall
from ..tracing._otel_map import ADK_SCOPE
from ..tracing._run_tree import RunTree, fast_child
from ._registry import (
    chat_messages,
    check_run_args,
    content_text,
    framework_parent,
    framework_root,
    query_text,
    structured_output,
)

__all__ = ["ADKAdapter", "ADKResult", "adapt", "adk_plugin", "instrument", "tool_calls"]

_RUN_ARGS = ("run_config", "user_id", "state", "stream")


@dataclass
class ADKResult:
    """One run of an ADK agent: its session and the events it yielded (partial ones left
    out), in order; ``text`` is the last final answer's."""

    session_id: str
    events: list[Any] = field(default_factory=list)
    text: str = ""
    structured: Any = None  # the answer of an agent with an ``output_schema``, parsed

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The function calls of its events, with arguments (what reliability judges)."""
        return tool_calls(self) or []


def _content_text(content: Any) -> str:
    parts = getattr(content, "parts", None) or ()
    return "".join(p.text for p in parts if getattr(p, "text", None) and not p.thought)


def _final_text(event: Any) -> str:
    """A final event's answer: its text, or the output a workflow's node gave (a function
    node's value; JSON where it is not a string)."""
    output = getattr(event, "output", None)
    if output is not None:
        return output if isinstance(output, str) else json.dumps(_jsonable(output),
                                                                 ensure_ascii=False)
    return _content_text(event.content) if event.content is not None else ""


class ADKAdapter:
    """An ADK agent run by an ``InMemoryRunner`` in a new session per query."""

    framework = "google-adk"

    def __init__(self, agent: Any, **run_args: Any) -> None:
        check_run_args(run_args, _RUN_ARGS, "an ADK agent's run")
        self.agent = agent
        root = getattr(agent, "root_agent", agent)  # an App: its root agent's name
        self.name = getattr(agent, "name", None) or getattr(root, "name", None) \
            or type(agent).__name__
        self.run_args = run_args
        self._runner: Any = None

    def __repr__(self) -> str:
        return f"ADKAdapter({self.name})"

    def with_run_args(self, **run_args: Any) -> ADKAdapter:
        """This agent, each run given ``run_args`` too: ``run_config`` (a ``RunConfig``),
        ``user_id``, ``state`` (the new session's state), ``stream=True`` (server-sent events,
        so each llm run gets its first token)."""
        return ADKAdapter(self.agent, **{**self.run_args, **run_args})

    def _get_runner(self) -> Any:
        if self._runner is None:
            from google.adk.apps import App
            from google.adk.runners import InMemoryRunner

            agent = self.agent
            if isinstance(agent, App):
                plugins = list(agent.plugins)
                if not any(isinstance(p, _plugin_class()) for p in plugins):
                    plugins.append(adk_plugin())
                app = agent.model_copy(update={"plugins": plugins})
            else:
                name = "".join(c if c.isalnum() or c in "_-" else "_" for c in self.name)
                app = App(name=name if name[:1].isalpha() else f"app_{name}", root_agent=agent,
                          plugins=[adk_plugin()])
            self._runner = InMemoryRunner(app=app)
        return self._runner

    async def arun(self, query: Any) -> ADKResult:
        from google.genai import types

        runner = self._get_runner()
        args = self.run_args
        user_id = str(args.get("user_id") or "assay")
        state = dict(args.get("state") or {})
        if isinstance(query, Mapping) and isinstance(query.get("session_state"), Mapping):
            state.update(query["session_state"])  # an example's own (an ADK eval case's)
        session = await runner.session_service.create_session(
            app_name=runner.app_name, user_id=user_id, state=state)
        if isinstance(query, types.Content):
            message = query
        else:
            message = types.Content(role="user", parts=[types.Part(text=query_text(query))])
            await self._history(runner, session, chat_messages(query) or [])
        run_config = args.get("run_config")
        if args.get("stream"):
            from google.adk.agents.run_config import RunConfig, StreamingMode

            run_config = (run_config or RunConfig()).model_copy(
                update={"streaming_mode": StreamingMode.SSE})
        result = ADKResult(session.id)
        async for event in runner.run_async(user_id=user_id, session_id=session.id,
                                            new_message=message, run_config=run_config):
            if event.partial:
                continue
            result.events.append(event)
            if event.is_final_response():
                text = _final_text(event)
                if text:
                    result.text = text
                    result.structured = self._structured(event, text)
        return result

    def _structured(self, event: Any, text: str) -> Any:
        """The answer as data, when the agent that gave it has an ``output_schema`` (ADK then
        has the model answer in that schema's JSON)."""
        root = getattr(self.agent, "root_agent", self.agent)
        find = getattr(root, "find_agent", None)
        author = find(event.author) if callable(find) and event.author else None
        if getattr(author, "output_schema", None) is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    async def _history(self, runner: Any, session: Any, chat: list[dict[str, Any]]) -> None:
        """A chat's turns before its last user message, as the session's events (the user's
        as the user's, the others as the root agent's answers), so the agent sees the whole
        conversation, as the Agents SDK and a LangGraph graph are given it."""
        from google.adk.events import Event
        from google.genai import types

        last = max((i for i, m in enumerate(chat) if m["role"] in ("user", "human")),
                   default=None)
        if not last:
            return
        author = getattr(getattr(runner, "agent", None), "name", None) or self.name
        for turn in chat[:last]:
            text = content_text(turn.get("content"))
            if not text or turn["role"] == "system":
                continue
            user = turn["role"] in ("user", "human")
            await runner.session_service.append_event(session, Event(
                author="user" if user else author, invocation_id="assay-history",
                content=types.Content(role="user" if user else "model",
                                      parts=[types.Part(text=text)])))

    def output_text(self, result: Any) -> str:
        return result.text if isinstance(result, ADKResult) else str(result)

    def outputs(self, result: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"output": self.output_text(result)}
        structured = structured_output(getattr(result, "structured", None))
        if structured is not None:  # an output_schema's fields, as the other adapters store
            out["structured_output"] = structured
        calls = tool_calls(result)
        if calls:
            out["tool_calls"] = [c.model_dump(exclude_none=True) for c in calls]
        return out

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        return tool_calls(result)


def adapt(obj: Any) -> ADKAdapter | None:
    """An ADK agent or workflow node (``BaseNode``: ``Agent``, ``SequentialAgent``...) or an
    ``App``, else None."""
    if isinstance(obj, ADKAdapter):
        return obj
    require("google.adk", "google-adk", "Google ADK agents")
    from google.adk.apps import App
    from google.adk.workflow import BaseNode

    if isinstance(obj, (BaseNode, App)):
        return ADKAdapter(obj)
    return None


def tool_calls(obj: Any) -> list[ToolCall] | None:
    """The function calls of an ``ADKResult``, an ADK ``Session`` or a list of its ``Event``s,
    in order (partial events left out: ADK runs only the calls of complete ones)."""
    events = getattr(obj, "events", obj)
    if not isinstance(events, list) or not all(hasattr(e, "get_function_calls") for e in events):
        return None
    calls: list[ToolCall] = []
    for event in events:
        if getattr(event, "partial", False):
            continue
        for call in event.get_function_calls():
            calls.append(ToolCall(name=str(call.name), args=_jsonable(call.args or {}),
                                  id=call.id or None))
    return calls


# -- capture ---------------------------------------------------------------------------------------
def _part(part: Any) -> dict[str, Any] | None:
    if getattr(part, "text", None) is not None:
        return {"type": "reasoning" if part.thought else "text", "content": part.text}
    call = getattr(part, "function_call", None)
    if call is not None:
        return {"type": "tool_call", "id": call.id, "name": call.name,
                "arguments": _jsonable(call.args or {})}
    response = getattr(part, "function_response", None)
    if response is not None:
        return {"type": "tool_call_response", "id": response.id,
                "response": _jsonable(response.response)}
    dumped = part.model_dump(exclude_none=True, mode="json") if hasattr(part, "model_dump") \
        else None
    return dumped or None


def _message(content: Any) -> dict[str, Any]:
    """A Gemini ``Content`` as a GenAI-conventions message (``role`` and ``parts``)."""
    parts = [p for p in map(_part, getattr(content, "parts", None) or ()) if p is not None]
    role = getattr(content, "role", None) or "user"
    if role == "model":
        role = "assistant"
    elif parts and all(p.get("type") == "tool_call_response" for p in parts):
        role = "tool"
    return {"role": role, "parts": parts}


def _system(config: Any) -> list[dict[str, Any]] | None:
    instruction = getattr(config, "system_instruction", None)
    if not instruction:
        return None
    if isinstance(instruction, str):
        return [{"type": "text", "content": instruction}]
    return _message(instruction)["parts"] or None


def _provider(model: str) -> tuple[str | None, str]:
    """The provider and model of an ADK model name: Gemini's own, a ``provider/model`` of
    LiteLLM's (``openai/gpt-4o``), Claude through Vertex AI."""
    head, sep, rest = model.partition("/")
    if sep and rest and known_provider(head):
        return head, rest
    lower = model.lower()
    if lower.startswith(("gemini", "gemma", "models/gemini")):
        return "google", model.removeprefix("models/")
    if lower.startswith("claude"):
        return "anthropic", model.split("@")[0]
    return None, model


def _usage(run: RunTree, usage: Any, model: str) -> None:
    provider, name = _provider(model)
    prompt = (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0)
    # thinking tokens are billed as output; cached tokens are part of the prompt's count
    output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    cached = usage.cached_content_token_count
    run.set_usage(prompt, output, usage.total_token_count or None, provider=provider,
                  model=name, input_token_details={"cache_read": cached} if cached else None)


def _close(run: RunTree | None, outputs: Any = None,
           error: BaseException | None = None) -> None:
    """End and send a run a table let go of (None: it was not recorded)."""
    if run is not None:
        run.end(outputs, error=error)
        run.patch()


def _step(ctx: Any) -> tuple[str, str]:
    """The key of the agent run a callback belongs to: its invocation, and its node path
    (ADK 2: ``triage@1/geo@1``, unique to each run of an agent, nested as ADK nests them), else
    its branch (``par.a``, a parallel agent's), else the agent's name (unique in its tree).
    Model and tool callbacks carry their agent's."""
    return ctx.invocation_id, getattr(ctx, "node_path", None) or getattr(
        ctx, "branch", None) or ctx.agent_name


def _outer(step: str, agent: Any) -> Iterator[str]:
    """The keys of the agent runs a step may sit under, nearest first."""
    for sep in ("/", "."):
        while sep in step:
            step = step.rsplit(sep, 1)[0]
            yield step
    parent = getattr(agent, "parent_agent", None)
    while parent is not None:
        yield parent.name
        parent = getattr(parent, "parent_agent", None)


class _Capture:
    """The runs of the invocations under way, keyed by ADK's ids (shared by every plugin
    object). What ADK does not close (an agent handing over by transfer gets no
    ``after_agent`` call; a failed run) is closed when its invocation ends."""

    def __init__(self) -> None:
        self.roots: dict[str, RunTree] = {}  # invocation id -> the assay run it started under
        self.own: dict[str, RunTree] = {}  # invocation id -> the root run it made (outside
        # any assay run, tracing on): ended with the invocation, its answer the last text
        self.agents: dict[tuple[str, str], RunTree] = {}  # _step -> its agent's run
        self.llms: dict[tuple[str, str], RunTree] = {}  # _step -> its agent's open model call
        self.tools: dict[str, tuple[str, RunTree]] = {}  # _call -> (its invocation, its run)

    def agent_parent(self, step: tuple[str, str], agent: Any) -> RunTree | None:
        """The run of the nearest agent above this one that is running, else the invocation's
        root."""
        invocation = step[0]
        for outer in _outer(step[1], agent):
            run = self.agents.get((invocation, outer))
            if run is not None:
                return run
        return self.roots.get(invocation)

    def recording(self, run: RunTree | None) -> bool:
        """Whether ``run`` is the assay run an invocation under way is recorded under."""
        return run is not None and any(root is run for root in list(self.roots.values()))

    def open_call(self, ctx: Any) -> tuple[tuple[str, str], RunTree | None]:
        """A model or tool call starts: its step, its agent's open model call closed (ADK
        sends no end for it), and the run it goes under (None: not recorded)."""
        step = _step(ctx)
        _close(self.llms.pop(step, None))
        return step, self.agents.get(step) or self.roots.get(step[0])

    def end_invocation(self, invocation: str, error: BaseException | None = None) -> None:
        """Close every run of the invocation still open (with ``error``, when it failed)."""
        # (the tables are shared by every thread's invocations: iterated over copies, which
        # list() makes in one step under the GIL)
        own = self.own.get(invocation)
        for table in (self.llms, self.agents):
            for step in [k for k in list(table) if k[0] == invocation]:
                run = table.pop(step, None)
                if run is not own:  # (the root stands for its top agent: closed below)
                    _close(run, error=error)
        for call, (inv, run) in list(self.tools.items()):
            if inv == invocation and self.tools.pop(call, None) is not None:
                _close(run, error=error)
        self.roots.pop(invocation, None)
        _close(self.own.pop(invocation, None), error=error)

    def close_agent(self, step: tuple[str, str], error: BaseException | None = None) -> None:
        """An agent's run ends, but for the root of its own that stands for the invocation's
        top agent (ended with the invocation)."""
        run = self.agents.pop(step, None)
        if run is not None and run is self.own.get(step[0]):
            if error is not None:
                run.end(error=error)
            return
        _close(run, error=error)

    def start_invocation(self, ctx: Any) -> bool:
        """An invocation starts: under the current assay run, or a root run of its own where
        tracing is on (named for its agent, its user's message as input, ADK's session as the
        thread, its user id kept); False when it is not recorded."""
        parent = framework_parent()
        if parent is None:
            spec = framework_root()
            if spec is None:
                return False
            session, user = getattr(ctx, "session", None), getattr(ctx, "user_content", None)
            metadata = {key: value for key, value in (
                ("session_id", getattr(session, "id", None)),
                ("user_id", getattr(session, "user_id", None)),
                ("app_name", getattr(session, "app_name", None))) if value}
            agent = getattr(ctx, "agent", None)
            parent = self.own[ctx.invocation_id] = spec.new_run(
                getattr(agent, "name", None) or "invocation", "chain",
                {"input": _content_text(user)} if user is not None else {},
                metadata=metadata or None)
        self.roots[ctx.invocation_id] = parent
        return True


_CAPTURE = _Capture()


def _call(tool_context: Any) -> str:
    """The key of a tool call's run: ADK's id for the call (it gives every call one), else the
    call's context object, the same in its before and after callbacks."""
    return tool_context.function_call_id or f"context-{id(tool_context)}"
_PLUGIN: list[type] = []
# the run an invocation recorded here is under (its root of its own, or the assay run), and
# the tool run of the call running in this context: set by the plugin's before-run and
# before-tool callbacks, which ADK awaits in the task that then runs the invocation, the tool
_INVOCATION: ContextVar[RunTree | None] = ContextVar("assay_adk_invocation", default=None)
_TOOL: ContextVar[RunTree | None] = ContextVar("assay_adk_tool", default=None)


def _step_run() -> RunTree | None:
    """The open run of the ADK step running here (``tracing._context.STEP_RUNS``): a tool's,
    else the invocation's (so that ADK's own spans of an invocation recorded as a root of its
    own are left to the plugin, as under an assay run: ``recording``)."""
    for var in (_TOOL, _INVOCATION):
        run = var.get()
        if run is not None and not run.ended:
            return run
    return None


def _plugin_class() -> type:
    """assay's ``BasePlugin`` subclass (defined once ADK is imported)."""
    if _PLUGIN:
        return _PLUGIN[0]
    require("google.adk", "google-adk", "Google ADK tracing")
    from google.adk.plugins.base_plugin import BasePlugin

    cap = _CAPTURE

    class AssayPlugin(BasePlugin):
        """ADK agents, model calls and tools -> assay runs (see the module docstring). Each
        callback returns None: the run goes on as ADK would run it."""

        def __init__(self) -> None:
            super().__init__(name="assay")

        async def before_run_callback(self, *, invocation_context: Any) -> None:
            # (ADK's span of the invocation left first: it is no parent of the plugin's runs)
            undo = _leave_invocation_span()
            if not cap.start_invocation(invocation_context):
                undo()  # not recorded here: a processor of the user's keeps ADK's span
            else:
                _INVOCATION.set(cap.roots.get(invocation_context.invocation_id))

        async def after_run_callback(self, *, invocation_context: Any) -> None:
            cap.end_invocation(invocation_context.invocation_id)
            _INVOCATION.set(None)

        async def on_run_error_callback(self, *, invocation_context: Any, error: Exception,
                                        **_: Any) -> None:
            cap.end_invocation(invocation_context.invocation_id, error)
            _INVOCATION.set(None)

        async def before_agent_callback(self, *, agent: Any, callback_context: Any) -> None:
            step = _step(callback_context)
            parent = cap.agent_parent(step, agent)
            if parent is None:
                return
            cap.close_agent(step)  # (a step run again before it was closed)
            if parent is cap.own.get(step[0]) and parent.name == agent.name:
                cap.agents[step] = parent  # a root of its own: it is the top agent's run
                return
            user = getattr(callback_context, "user_content", None)
            run = fast_child(parent, agent.name, "chain",
                             {"input": _content_text(user)} if user is not None else {})
            description = getattr(agent, "description", None)
            if description:
                run.metadata["description"] = description
            cap.agents[step] = run

        async def after_agent_callback(self, *, agent: Any, callback_context: Any) -> None:
            step = _step(callback_context)
            _close(cap.llms.pop(step, None))
            cap.close_agent(step)

        async def on_agent_error_callback(self, *, agent: Any, callback_context: Any,
                                          error: Exception, **_: Any) -> None:
            step = _step(callback_context)
            _close(cap.llms.pop(step, None))
            cap.close_agent(step, error)

        async def before_model_callback(self, *, callback_context: Any,
                                        llm_request: Any) -> None:
            step, parent = cap.open_call(callback_context)
            if parent is None:
                return
            model = str(llm_request.model or "")
            inputs: dict[str, Any] = {}
            system = _system(llm_request.config)
            if system:
                inputs["system"] = system
            inputs["messages"] = [_message(c) for c in llm_request.contents or ()]
            run = fast_child(parent, model or "generate_content", "llm", inputs)
            provider, name = _provider(model)
            if provider:
                run.metadata["ls_provider"] = provider
            run.metadata["ls_model_name"] = name
            cap.llms[step] = run

        async def after_model_callback(self, *, callback_context: Any,
                                       llm_response: Any) -> None:
            step = _step(callback_context)
            run = cap.llms.get(step)
            if run is None:
                return
            if llm_response.partial:  # a chunk of a streamed call (server-sent events)
                run._mark_first_token()
                return
            if llm_response.content is not None:
                messages = (run.outputs or {}).get("messages") or []
                run.outputs = {"messages": [*messages, _message(llm_response.content)]}
                text = _content_text(llm_response.content)
                agent = cap.agents.get(step)
                if text and agent is not None:  # the agent's answer: its last model text
                    agent.outputs = {"output": text}
                root = cap.own.get(step[0]) if cap.own else None
                if text and root is not None:  # (a root of its own: the invocation's answer)
                    root.outputs = {"output": text}
            if llm_response.usage_metadata is not None:
                model = llm_response.model_version or run.metadata.get("ls_model_name") or ""
                _usage(run, llm_response.usage_metadata, model)
            if llm_response.error_code or llm_response.error_message:
                run.error = f"{llm_response.error_code}: {llm_response.error_message}"
            run._end_us = None
            run.end()  # (ended again if ADK sends one more complete response for this call)

        async def on_model_error_callback(self, *, callback_context: Any, llm_request: Any,
                                          error: Exception) -> None:
            _close(cap.llms.pop(_step(callback_context), None), error=error)

        async def before_tool_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                       tool_context: Any) -> None:
            step, parent = cap.open_call(tool_context)
            if parent is None:
                return
            run = fast_child(parent, tool.name, "tool", _jsonable(dict(tool_args)))
            cap.tools[_call(tool_context)] = (step[0], run)
            _TOOL.set(run)

        def _end_tool(self, tool_context: Any, outputs: Any = None,
                      error: BaseException | None = None) -> None:
            found = cap.tools.pop(_call(tool_context), None)
            if found is not None:
                _close(found[1], outputs, error)

        async def after_tool_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                      tool_context: Any, result: Any) -> None:
            if isinstance(result, Mapping) and set(result) == {"result"}:
                result = result["result"]  # ADK's wrapping of a plain return value
            self._end_tool(tool_context, {"output": _jsonable(result)})

        async def on_tool_error_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                         tool_context: Any, error: Exception) -> None:
            self._end_tool(tool_context, error=error)

    # ADK's own OpenTelemetry spans of an invocation the plugin records are not stored again
    # by an AssaySpanProcessor on the user's tracer provider
    from ..tracing.otel import leave_scope_to_hook

    leave_scope_to_hook(ADK_SCOPE, cap.recording)
    from ..tracing._context import add_step_lookup

    add_step_lookup(_step_run, _INVOCATION)
    _PLUGIN.append(AssayPlugin)
    return AssayPlugin


def _leave_invocation_span() -> Callable[[], None]:
    """ADK's span of the invocation (started before any plugin is called) is not stored by an
    AssaySpanProcessor: its steps are the plugin's (the spans under it are left by scope).
    Returns what undoes it."""
    from opentelemetry import trace as otel

    span = otel.get_current_span()
    scope = getattr(span, "instrumentation_scope", None)
    if scope is not None and scope.name == ADK_SCOPE:
        from ..tracing.otel import leave_span_to_hook

        return leave_span_to_hook(span)
    from ..tracing.otel import nothing_to_undo

    return nothing_to_undo


def adk_plugin() -> Any:
    """assay's ADK plugin, for a Runner of your own: ``App(name=..., root_agent=agent,
    plugins=[adk_plugin()])``. Its invocations started under an assay run (``evaluate()``,
    ``trace()``, an evaluator) are recorded there, others as root runs where tracing is on
    (``ASSAY_TRACING=true``, ``tracing_context(enabled=True)``); the rest cost a dict
    look-up a callback."""
    return _plugin_class()()


def instrument() -> None:
    """Nothing to install process-wide: the plugin rides on the runner (checked importable)."""
    require("google.adk", "google-adk", "Google ADK tracing")
