"""pydantic-ai: an ``Agent`` evaluated as it is, its model and tool calls traced.

Runs assay makes (the adapter) are traced with pydantic-ai's instrumentation off for them: the
agent's model and tools wrapped, no capability (``_pydantic_ai_direct``); an agent that path
cannot reproduce exactly, through a run-level capability (``_pydantic_ai_native``). Everything
else (a plain function calling an agent) goes through pydantic-ai's own OpenTelemetry
instrumentation, as follows.

pydantic-ai already emits GenAI semantic-convention spans (``chat`` with tokens and model,
``execute_tool`` with arguments and result, the agent run around them). ``instrument()`` points
that instrumentation at an in-process ``TracerProvider`` whose only processor is assay's
``AssaySpanProcessor``, so nothing is exported anywhere and no global OTel state is touched.
The global default it installs (``UnderAssayRuns``) gives a run those settings only while an
assay run is current, or where tracing is on for new roots (``ASSAY_TRACING=true``,
``tracing_context(enabled=True)``: the agent run is then a trace of its own), and framework
tracing is on; any other run has no instrumentation at all
(even with nothing recording, pydantic-ai's instrumentation costs an agent ~10% of its CPU),
and the provider's sampler still drops a span started outside one.

If the user already instrumented pydantic-ai (``instrument_all(True)``, or settings of their own
such as Logfire's), those stay: assay adds its processor to the global SDK provider (which
Logfire's is), never replaces theirs; a provider with a processor of the user's own whose spans
never reach the global one is theirs to route (add ``AssaySpanProcessor`` to it).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..errors import require
from ._registry import (
    chat_messages,
    check_run_args,
    content_text,
    framework_recording,
    keyword_names,
    query_text,
    structured_output,
)

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span

    from ..evals._models import ToolCall

__all__ = ["PydanticAIAdapter", "UnderAssayRuns", "adapt", "installed_default", "instrument",
           "running", "tool_calls"]

FRAMEWORK = "pydantic-ai"
_FEATURE = "evaluating pydantic-ai agents"

_lock = threading.Lock()
_settings: Any = None  # our InstrumentationSettings, once made
_hooked: set[int] = set()  # ids of providers that already carry our processor
# the agent whose run assay's adapter traces itself in this context (_pydantic_ai_direct): the
# global default gives that agent's run no instrumentation (any other agent's, as usual)
running: ContextVar[Any] = ContextVar("assay_pydantic_ai_running", default=None)


def _pydantic_ai() -> Any:
    return require("pydantic_ai", "pydantic-ai", _FEATURE)


def _make_processor() -> Any:
    from ..tracing.otel import AssaySpanProcessor

    class UnderAssayRun(AssaySpanProcessor):
        """AssaySpanProcessor that keeps only spans started while an assay run is current,
        or where tracing is on for new roots (``framework_root``: an agent run outside any
        assay run is then a trace of its own); on a provider shared with the user's other
        spans, the rest are theirs."""

        def on_start(self, span: Span, parent_context: Context | None = None) -> None:
            if framework_recording():
                super().on_start(span, parent_context)

        def on_end(self, span: ReadableSpan) -> None:
            ctx = span.get_span_context()
            if ctx is not None and (ctx.trace_id, ctx.span_id) in self._open:
                super().on_end(span)

    return UnderAssayRun()


def _make_settings() -> Any:
    require("opentelemetry.sdk.trace", "otel", _FEATURE)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    instrumented = require("pydantic_ai.models.instrumented", "pydantic-ai", _FEATURE)

    class UnderAssayRunSampler(Sampler):
        """Record a span only under a current assay run, or as a root where tracing is on,
        with framework tracing on: elsewhere pydantic-ai's spans cost a non-recording span
        each."""

        def should_sample(self, parent_context: Any, trace_id: int, name: str, kind: Any = None,
                          attributes: Any = None, links: Any = None,
                          trace_state: Any = None) -> SamplingResult:
            if not framework_recording():
                return SamplingResult(Decision.DROP)
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

        def get_description(self) -> str:
            return "assay: spans under a current assay run"

    provider = TracerProvider(sampler=UnderAssayRunSampler())
    provider.add_span_processor(_make_processor())
    return instrumented.InstrumentationSettings(tracer_provider=provider)


class UnderAssayRuns:
    """pydantic-ai's global instrumentation default as assay installs it: ``instrument_all``
    stores any object as the ``Agent`` class attribute every run reads (and pydantic-ai's
    direct model requests read it on the class). Read while an assay run is current and
    framework tracing is on, assay's settings; otherwise, or by the agent assay's adapter traces
    itself (``running``), False: no instrumentation at all."""

    __slots__ = ("settings",)

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if (obj is not None and obj is running.get()) or not framework_recording():
            return False
        return self.settings


def installed_default(agent_cls: Any) -> Any:
    """The global default as stored (``UnderAssayRuns`` is not asked for its value)."""
    return inspect.getattr_static(agent_cls, "_instrument_default", None)


def instrument() -> None:
    """Turn pydantic-ai's instrumentation on for every agent run under an assay run, into
    assay's runs (idempotent).

    Re-checked whenever an agent is adapted: if something switched the default off since
    (``Agent.instrument_all(False)``), assay's default is put back."""
    global _settings
    agent_cls = _pydantic_ai().Agent
    with _lock:
        current = installed_default(agent_cls)
        if isinstance(current, UnderAssayRuns):
            return
        if not current:  # nobody's: ours
            if _settings is None:
                _settings = _make_settings()
            agent_cls.instrument_all(UnderAssayRuns(_settings))
            return
        # the user's instrumentation (``instrument_all(True)``: the global provider; settings
        # of their own, as ``logfire.instrument_pydantic_ai()`` makes, with Logfire's provider,
        # which it makes the global one): add our processor to the global provider, once. It
        # records the spans started under an assay run; an AssaySpanProcessor the user added
        # there too records them instead (the first to see a span does), never both.
        from opentelemetry.trace import get_tracer_provider

        provider = get_tracer_provider()
        if hasattr(provider, "add_span_processor") and id(provider) not in _hooked:
            provider.add_span_processor(_make_processor())
            _hooked.add(id(provider))


def _history(query: Any) -> list[Any] | None:
    """The turns of a chat-format inputs dict (``chat_messages``) before its last user
    message, as pydantic-ai's message history (system and user turns as requests, assistant
    turns as responses), or None."""
    chat = chat_messages(query)
    if not chat:
        return None
    last = max((i for i, m in enumerate(chat) if m["role"] in ("user", "human")), default=None)
    if not last:
        return None
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )

    out: list[Any] = []
    for m in chat[:last]:
        text = content_text(m["content"]) or ""
        if m["role"] == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(content=text)]))
        elif m["role"] in ("assistant", "ai"):
            out.append(ModelResponse(parts=[TextPart(content=text)]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(content=text)]))
    return out


class PydanticAIAdapter:
    """A pydantic-ai agent called with the query text; its result read for assay."""

    framework = FRAMEWORK

    def __init__(self, agent: Any, **run_args: Any) -> None:
        self.agent = agent
        self.name = getattr(agent, "name", None) or type(agent).__name__
        takes = keyword_names(agent.run, skip=("user_prompt",))
        check_run_args(run_args, None if takes is None else (*takes, "stream"),
                       "a pydantic-ai agent's run")
        # stream=True: each model request streamed (a first token each), as with an
        # event_stream_handler of the user's; settled here, once, not on every run
        self.stream = bool(run_args.pop("stream", False))
        self.run_args = run_args  # agent.run's own arguments (deps, model_settings...)
        self._call_args = ({**run_args, "event_stream_handler": _drain}
                           if self.stream and "event_stream_handler" not in run_args
                           else run_args)
        self._direct: Any = None  # _pydantic_ai_direct.Direct, once asked for (False: none)

    def __repr__(self) -> str:
        return f"PydanticAIAdapter({self.name!r})"

    def with_run_args(self, **run_args: Any) -> PydanticAIAdapter:
        """This agent, each run given ``run_args`` too (``integrations.with_run_args``)."""
        kept = {**self.run_args, **({"stream": True} if self.stream else {})}
        return PydanticAIAdapter(self.agent, **{**kept, **run_args})

    async def arun(self, query: Any) -> Any:
        # a list is pydantic-ai's own prompt form (text and binary parts): passed as is
        prompt = query if isinstance(query, (list, tuple)) else query_text(query)
        from ._native_runs import parent_in
        from ._pydantic_ai_native import _OPEN, capture_for

        args = self._call_args
        history = _history(query) if "message_history" not in args else None
        if history:  # a chat's earlier turns, before the last user message (the prompt)
            args = {**args, "message_history": history}
        capture = capture_for(self.agent, _settings)  # no OpenTelemetry work for this run
        if capture is None:
            return await self.agent.run(prompt, **args)
        parent = parent_in(_OPEN)
        if parent is None:  # nothing to record (and assay's default instruments nothing)
            return await self.agent.run(prompt, **args)
        captured = [*args.get("capabilities", ()), capture]
        if self._direct is None:
            from ._pydantic_ai_direct import direct_for

            # the direct path sets the run's model and tools itself: not with the caller's
            self._direct = (not {"model", "capabilities", "toolsets"} & set(args)
                            and direct_for(self.agent)) or False
        if self._direct is False:
            return await self.agent.run(prompt, **{**args, "capabilities": captured})
        return await self._direct.run(prompt, parent, lambda: self.agent.run(
            prompt, **{**args, "capabilities": captured}), args)

    def output_text(self, result: Any) -> str:
        return _text(getattr(result, "output", result))

    def outputs(self, result: Any) -> dict[str, Any]:
        output = getattr(result, "output", result)
        out: dict[str, Any] = {"output": _text(output)}
        structured = structured_output(output)
        if structured is not None:
            out["structured_output"] = structured
        return out

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        return tool_calls(result)


async def _drain(ctx: Any, events: Any) -> None:
    """The event stream handler of ``stream=True``: pydantic-ai streams each model request to
    a run given one; the events themselves are not needed here."""
    async for _ in events:
        pass


def _text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if hasattr(output, "model_dump_json"):
        return str(output.model_dump_json())
    if isinstance(output, (Mapping, list, tuple)):
        return json.dumps(output, default=str, ensure_ascii=False)
    return str(output)


def adapt(obj: Any) -> PydanticAIAdapter | None:
    """An adapter for a pydantic-ai agent (``Agent`` or any ``AbstractAgent``), else None."""
    pai = _pydantic_ai()
    agent_types = tuple({pai.Agent, getattr(getattr(pai, "agent", None), "AbstractAgent",
                                            pai.Agent)})
    if not isinstance(obj, agent_types):
        return None
    instrument()  # put back if switched off since the first time
    return PydanticAIAdapter(obj)


def tool_calls(obj: Any) -> list[ToolCall] | None:
    """Tool calls from a run result (``all_messages()``) or a message; None for anything else."""
    from ..evals._toolcalls import _from_items

    all_messages = getattr(obj, "all_messages", None)
    if callable(all_messages):
        return _from_items(list(all_messages()))
    if isinstance(getattr(obj, "parts", None), (list, tuple)):  # one ModelResponse
        return _from_items([obj])
    return None
