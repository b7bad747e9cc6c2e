"""pydantic-ai agents that assay runs, traced through a capability instead of OpenTelemetry.

pydantic-ai's instrumentation (its ``Instrumentation`` capability, which ``instrument_all``
injects into every run) costs its agents ~13% of their CPU with nothing recording and ~23% once
its spans record (messages and parameters serialized as span attributes, the cache-health
bookkeeping), before assay's span processor sees a span (bench/README.md). A run assay makes
itself (the adapter: ``evaluate(agent)``, the evaluators) passes ``AssayCapture`` as a run-level
capability instead: pydantic-ai's public hooks (``wrap_run``, ``wrap_model_request``,
``wrap_tool_execute``) make the agent, llm and tool runs directly, with the fields the span path
gives them (names, Upsonic-style GenAI message parts converted by pydantic-ai's own converter,
tokens, model, provider, the tool's arguments, result and error).

``AssayCapture`` is an ``Instrumentation`` subclass because pydantic-ai lets an explicit
``Instrumentation`` given for a run replace the injected one: the run has no OpenTelemetry work
at all. It is only given when the injected one would be assay's own (``instrument_all`` with
assay's settings, the agent with no instrumentation of its own), so a user's own tracing is
never replaced. A plain function that calls the agent is traced through the span path, as
before.

This is now the fallback of the adapter's runs: ``_pydantic_ai_direct`` traces them with no
capability at all (pydantic-ai's handling of a run-level capability costs the agent ~5%), and
hands an agent back here only when it cannot reproduce its run exactly.
"""

from __future__ import annotations

from contextlib import nullcontext
from contextvars import ContextVar
from typing import Any

from .._json import jsonable
from ..tracing._run_tree import RunTree, fast_child
from ._native_runs import (
    agent_inputs,
    ended_on_error,
    finish_agent,
    finish_llm,
    llm_inputs,
    parent_in,
)
from ._pydantic_ai import UnderAssayRuns, installed_default
from ._registry import once

__all__ = ["capture_for", "end_llm_run", "end_tool_run", "llm_run", "tool_run"]

# the innermost agent run this path opened in this context (a delegate agent nests under it)
_OPEN: ContextVar[RunTree | None] = ContextVar("assay_pydantic_ai_open", default=None)


def _make_converters() -> tuple[Any, Any, Any]:
    """(settings with no tracer, pydantic-ai's message converter, its instructions reader or
    None): what both no-OpenTelemetry paths build an llm run's messages with."""
    from opentelemetry.trace import NoOpTracerProvider
    from pydantic_ai.models.instrumented import InstrumentationSettings

    settings = InstrumentationSettings(tracer_provider=NoOpTracerProvider())
    # a private helper of pydantic-ai's own instrumentation, optional: the request's
    # instructions as its spans show them (without it, no "system" in an llm run's inputs)
    instructions: Any = None
    try:
        from pydantic_ai._instrumentation import get_instructions as instructions
    except ImportError:  # pragma: no cover - a pydantic-ai without it
        pass
    return settings, settings.messages_to_otel_messages, instructions


_converters = once(_make_converters)


def llm_run(parent: RunTree, model: Any, messages: Any, params: Any) -> RunTree:
    """The llm run of a request to ``model`` (both paths of the adapter's runs make it so):
    the request's messages and instructions as pydantic-ai's own spans show them."""
    _, convert, instructions = _converters()
    system = instructions(messages, params) if instructions is not None else None
    return fast_child(parent, f"chat {model.model_name}", "llm",
                      llm_inputs(convert, system, messages))


def end_llm_run(run: RunTree, model: Any, response: Any) -> None:
    """``llm_run``'s end from the model's response (messages, tokens, model, provider),
    stored."""
    finish_llm(run, _converters()[1], response, str(response.provider_name or model.system),
               response.model_name or model.model_name)
    run.patch()


def tool_run(parent: RunTree, name: str, args: Any, call_id: str | None) -> RunTree:
    """The tool run of one tool call (its id kept, as the model's tool-call part has it)."""
    run = fast_child(parent, name, "tool", args)
    if call_id:
        run.metadata["tool_call_id"] = call_id
    return run


def end_tool_run(run: RunTree, result: Any) -> None:
    """``tool_run``'s end: the tool's result as its output, stored."""
    run.outputs = {"output": jsonable(result)}
    run.patch()


def _make() -> tuple[Any, Any] | None:
    """(the AssayCapture instance every run shares, pydantic-ai's Instrumentation class); None
    for a pydantic-ai without capabilities (before 2.x): its runs keep the span path."""
    try:
        from pydantic_ai.capabilities import AbstractCapability
        from pydantic_ai.capabilities.instrumentation import Instrumentation
    except ImportError:
        return None

    settings = _converters()[0]
    model_response_span_capture: Any
    try:  # pydantic-ai's hand-over of a streamed request's time to first chunk (2.x)
        from pydantic_ai._instrumentation import model_response_span_capture
    except ImportError:
        model_response_span_capture = None

    class AssayCapture(Instrumentation):
        """pydantic-ai's hooks -> assay runs (see the module docstring); stateless, so one
        instance serves every run."""

        # the rest of Instrumentation's hooks (output-function and tool-validation spans) as
        # every capability has them: pass-throughs
        on_tool_validate_error = AbstractCapability.on_tool_validate_error
        wrap_output_process = AbstractCapability.wrap_output_process

        async def for_run(self, ctx: Any) -> Any:
            return self

        async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
            parent = parent_in(_OPEN)
            if parent is None:
                return await handler()
            name = getattr(getattr(ctx, "agent", None), "name", None) or "agent"
            run = fast_child(parent, f"invoke_agent {name}", "chain",
                             agent_inputs(getattr(ctx, "prompt", None)))
            outer = _OPEN.get()
            _OPEN.set(run)
            try:
                with ended_on_error(run):
                    result = await handler()
            finally:
                _OPEN.set(outer)
            finish_agent(run, result)
            return result

        async def wrap_model_request(self, ctx: Any, *, request_context: Any,
                                     handler: Any) -> Any:
            parent = parent_in(_OPEN)
            if parent is None:
                return await handler(request_context)
            model = request_context.model
            run = llm_run(parent, model, request_context.messages,
                          request_context.model_request_parameters)
            # a streamed request's first chunk, after the request started, as pydantic-ai
            # hands it to its own Instrumentation (the handler returns the whole response)
            first: list[float | None] = []
            with ended_on_error(run), (
                    model_response_span_capture(request_context,
                                                lambda _, after: first.append(after))
                    if model_response_span_capture is not None else nullcontext()):
                response = await handler(request_context)
            if first and first[-1] is not None and run._start_us is not None:
                run._mark_first_token(run._start_us + int(first[-1] * 1_000_000))
            end_llm_run(run, model, response)
            return response

        async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                    handler: Any) -> Any:
            parent = parent_in(_OPEN)
            if parent is None:
                return await handler(args)
            run = tool_run(parent, call.tool_name, call.args_as_dict(), call.tool_call_id)
            with ended_on_error(run):
                result = await handler(args)
            end_tool_run(run, result)
            return result

    return AssayCapture(settings=settings), Instrumentation


_made = once(_make)


def capture_for(agent: Any, ours: Any) -> Any | None:
    """The run-level capability that traces ``agent``'s run, or None when its runs would not be
    instrumented by assay's own settings (``ours``): the agent's own ``instrument`` setting, an
    ``Instrumentation`` capability of its own, or a global default that is not assay's."""
    if ours is None or getattr(agent, "instrument", None) is not None:
        return None
    default = installed_default(type(agent))
    if not (isinstance(default, UnderAssayRuns) and default.settings is ours):
        return None
    made = _made()
    if made is None:
        return None
    capture, instrumentation_cls = made
    root = getattr(agent, "_root_capability", None)
    if root is not None:
        found: list[Any] = []
        root.apply(lambda cap: found.append(cap) if isinstance(cap, instrumentation_cls)
                   else None)
        if found:
            return None
    return capture
