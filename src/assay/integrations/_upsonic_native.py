"""Upsonic agents traced from their own objects, with Upsonic's OpenTelemetry left off.

Upsonic's instrumentation costs its agents 25-30% of their CPU once its spans record (it dumps
the request parameters, tool schemas, messages and run summary to JSON attributes and prices
every response itself), ~10% even when nothing records, before any backend sees a span
(bench/README.md, "Real frameworks' capture"). An agent assay runs or finds is therefore
traced without it: its model is wrapped in ``AssayModel`` (Upsonic's own ``WrapperModel``
extension point, as its ``InstrumentedModel`` is) and its span manager (``agent._otel``, which
Upsonic calls at every agent run, tool call and pipeline step) is an ``AssaySpans`` that makes
assay runs for the agent run and its tool calls and nothing for the two dozen pipeline steps.
The runs have the fields the span path gives them (``_upsonic_spans``): the same names, run
types, inputs and outputs (Upsonic's own message conversion, without the JSON round trip),
tokens and model, a tool's error, and a first token marked when the streamed text begins.

With no assay run current, or framework tracing off, each hook is a context-variable read.
Agents built after ``instrument()`` and never handed to assay are traced through the span path
(Upsonic offers no other hook at construction) until the next ``evaluate()`` or evaluator
starts (``_upsonic.adopt``); the adapter moves every agent it runs to this one.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, nullcontext
from typing import Any

from .._json import jsonable
from ..tracing._run_tree import RunTree, fast_child, format_error
from ._native_runs import ended_on_error, finish_llm, llm_inputs, parent_in
from ._registry import framework_root, once
from ._upsonic_spans import _KEPT, _mark_root, _tool_failed, keep_tool_context

__all__ = ["capture", "is_captured"]

_NONE = nullcontext(None)
_lock = threading.Lock()


def _make_converter() -> Any:
    from upsonic.models.instrumented import InstrumentationSettings

    return InstrumentationSettings()


# Upsonic's GenAI message conversion (an InstrumentationSettings' method; its tracer unused)
_converter = once(_make_converter)


def _finish_llm(run: RunTree, model: Any, response: Any) -> None:
    finish_llm(run, _converter().messages_to_otel_messages, response, str(model.system),
               response.model_name or model.model_name)


def _is_text(event: Any) -> bool:
    """Whether a model stream event carries text (the first such is the first token)."""
    part = getattr(event, "part", None)
    if part is not None:
        return getattr(part, "part_kind", None) == "text" and bool(getattr(part, "content", ""))
    delta = getattr(event, "delta", None)
    return getattr(delta, "part_delta_kind", None) == "text" and bool(
        getattr(delta, "content_delta", ""))


class _Open:
    """A run for a ``with`` block of Upsonic's (an agent run, a tool call), current while the
    block runs (an agent's model and tool calls, and what a tool's code traces, nest under
    it): ended and stored at the block's end, with its error. A failed tool's error is carried
    to the trace's root (see ``_mark_root``)."""

    __slots__ = ("_run", "_outer")

    def __init__(self, run: RunTree) -> None:
        self._run = run
        self._outer: RunTree | None = None

    def __enter__(self) -> RunTree:
        self._outer = _KEPT.get()
        _KEPT.set(self._run)
        return self._run

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        run = self._run
        _KEPT.set(self._outer)
        if exc is not None and run.error is None:
            run.end(error=exc)
        if run.error and run.run_type == "tool":
            _mark_root(run)
        run.patch()


class _TimedStream:
    """A model's stream, passed through, that marks the llm run's first token at the first
    text event (a call that only calls tools streams no text, and gets no first token)."""

    __slots__ = ("_stream", "_run")

    def __init__(self, stream: Any, run: RunTree) -> None:
        self._stream = stream
        self._run = run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aiter__(self) -> AsyncIterator[Any]:
        marked = False
        async for event in self._stream:
            if not marked and _is_text(event):
                self._run._mark_first_token()
                marked = True
            yield event


def _make_classes() -> tuple[Any, Any]:
    from upsonic.agent.otel_manager import AgentOTelManager
    from upsonic.models.wrapper import WrapperModel

    class AssayModel(WrapperModel):
        """The agent's model, each request an llm run under the agent's run."""

        @property
        def settings(self) -> Any:
            """Settings set on this wrapper (carried over from the ``InstrumentedModel`` it
            replaces, where an agent built on the span path keeps its ``settings=``), else
            the wrapped model's."""
            own = self._settings
            return own if own is not None else self.wrapped.settings

        def _start(self, messages: Any, settings: Any, parameters: Any) -> RunTree | None:
            parent = parent_in(_KEPT)
            if parent is None:
                return None
            if getattr(parameters, "output_object", None) is not None:
                # instructions for prompted structured output come from the prepared request
                # (the model's own preparation, which its request repeats: only when needed)
                _, parameters = self.wrapped.prepare_request(settings, parameters)
            from upsonic.models import Model

            inputs = llm_inputs(_converter().messages_to_otel_messages,
                                Model._get_instructions(messages, parameters), messages)
            return fast_child(parent, self.model_name, "llm", inputs)

        async def request(self, messages: Any, model_settings: Any,
                          model_request_parameters: Any) -> Any:
            run = self._start(messages, model_settings, model_request_parameters)
            if run is None:
                return await self.wrapped.request(messages, model_settings,
                                                  model_request_parameters)
            with ended_on_error(run):
                response = await self.wrapped.request(messages, model_settings,
                                                      model_request_parameters)
            _finish_llm(run, self.wrapped, response)
            run.patch()
            return response

        @asynccontextmanager
        async def request_stream(self, messages: Any, model_settings: Any,
                                 model_request_parameters: Any,
                                 *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            run = self._start(messages, model_settings, model_request_parameters)
            opened = self.wrapped.request_stream(messages, model_settings,
                                                 model_request_parameters, *args, **kwargs)
            if run is None:
                async with opened as untraced:
                    yield untraced
                return
            stream: Any = None
            with ended_on_error(run):
                async with opened as stream:
                    yield _TimedStream(stream, run)
            try:
                _finish_llm(run, self.wrapped, stream.get())
            except Exception as exc:  # noqa: BLE001 - a stream we misread: keep the run
                run.metadata["assay_capture_error"] = repr(exc)
            run.patch()

    class AssaySpans(AgentOTelManager):
        """Upsonic's span manager with assay runs for the agent run and tool calls; every
        other hook (pipeline, steps, flush) is Upsonic's own no-op for a manager without
        settings."""

        __slots__ = ("_agent", "_before")

        def __init__(self, agent: Any, before: Any = None) -> None:
            super().__init__(None, None)
            self._agent = weakref.ref(agent)
            # the manager this one replaced (the span path's): a run it began before the
            # swap (``_upsonic.adopt`` while another thread's run was under way) ends its
            # spans through it
            self._before = before

        def agent_run_span(self, run_id: str, *, name: str = "", model: str = "",
                           task_description: str = "", user_id: str | None = None,
                           session_id: str | None = None, **_: Any) -> Any:
            agent = self._agent()
            if agent is not None and not isinstance(agent.model, AssayModel):
                agent.model = AssayModel(agent.model)  # a model set or overridden since
            parent = parent_in(_KEPT)
            inputs = {"input": task_description} if task_description else {}
            if parent is not None:
                run = fast_child(parent, name or "Agent", "chain", inputs)
            else:  # outside any assay run: a root of its own where tracing is on
                spec = framework_root()
                if spec is None:
                    return _NONE
                # (the agent's memory session: its runs one conversation, a thread)
                meta = {k: v for k, v in (("session_id", session_id), ("user_id", user_id)) if v}
                run = spec.new_run(name or "Agent", "chain", inputs, metadata=meta or None)
            if model:
                run.metadata["upsonic.agent.model"] = model
            return _Open(run)

        def tool_span(self, tool_name: str, tool_call_id: str,
                      tool_args: dict[str, Any] | None = None) -> Any:
            parent = parent_in(_KEPT)
            if parent is None:
                return _NONE
            run = fast_child(parent, tool_name, "tool",
                             dict(tool_args) if isinstance(tool_args, Mapping) else
                             ({"input": tool_args} if tool_args is not None else {}))
            if tool_call_id:
                run.metadata["tool_call_id"] = tool_call_id
            keep_tool_context()
            return _Open(run)

        def set_tool_result(self, span: Any, execution_time: float, success: bool,
                            error: Exception | None = None, output: Any = None) -> None:
            if not isinstance(span, RunTree):
                if span is not None and self._before is not None:
                    self._before.set_tool_result(span, execution_time, success, error, output)
                return
            if output is not None:
                span.outputs = {"output": jsonable(output)}
            if not success and error is not None:
                span.error = format_error(error)
            elif isinstance(output, str) and _tool_failed(output):
                span.error = output  # Upsonic's text for a tool that raised (see _tool_failed)

        def finalize_agent_run(self, span: Any, output: Any, **kwargs: Any) -> None:
            if not isinstance(span, RunTree):
                if span is not None and self._before is not None:
                    self._before.finalize_agent_run(span, output, **kwargs)
                return
            if output is None:
                return
            answer = getattr(output, "output", None)
            if answer is not None:
                span.outputs = {"output": jsonable(answer)}
            count = getattr(output, "tool_call_count", 0)
            if count:
                span.metadata["upsonic.tool_call_count"] = count
            run_id = getattr(output, "run_id", None)
            if run_id:
                span.metadata["upsonic.run_id"] = run_id

        def record_error(self, span: Any, exc: Exception) -> None:  # type: ignore[override]
            if isinstance(span, RunTree):
                if span.error is None:
                    span.error = format_error(exc)
            elif span is not None:  # an OpenTelemetry span of the manager this one replaced
                AgentOTelManager.record_error(span, exc)

    return AssayModel, AssaySpans


# (AssayModel, AssaySpans), made once: an agent checked against another process-wide pair
# would be wrapped twice, each request recorded twice
_classes = once(_make_classes)


def _make_bridge() -> Any:
    from upsonic.models.wrapper import WrapperModel

    class SettingsBridge(WrapperModel):
        """The model under the ``InstrumentedModel`` of an agent built on the span path.
        Upsonic sets the agent's ``settings=`` on that wrapper, whose ``settings`` reads the
        model it wraps, so they were never sent (Upsonic's own instrumentation drops them the
        same way): this reads them from the wrapper above it. Records nothing."""

        def __init__(self, wrapped: Any, agent: Any) -> None:
            super().__init__(wrapped)
            self._agent = weakref.ref(agent)

        @property
        def settings(self) -> Any:
            agent = self._agent()
            above = getattr(agent, "model", None) if agent is not None else None
            own = getattr(above, "_settings", None) if above is not self else None
            return own if own is not None else self.wrapped.settings

    return SettingsBridge


_bridge = once(_make_bridge)


def bridge_settings(agent: Any) -> None:
    """Put a ``SettingsBridge`` under ``agent``'s model, as the agent is being built onto the
    span path (its model made, not yet wrapped by Upsonic's instrumentation)."""
    from upsonic.models.instrumented import InstrumentedModel

    model = getattr(agent, "model", None)
    if model is None or isinstance(model, (InstrumentedModel, _bridge(), _classes()[0])):
        return
    agent.model = _bridge()(model, agent)


def is_captured(agent: Any) -> bool:
    """Whether ``agent`` is traced this way already."""
    return isinstance(getattr(agent, "_otel", None), _classes()[1])


def capture(agent: Any, ours: Any = None) -> bool:
    """Trace ``agent`` this way; False (and nothing changed) for an agent with instrumentation
    of its own. ``ours``: assay's ``InstrumentationSettings`` of the span path, whose model
    wrapper (``InstrumentedModel``) an agent built since ``instrument()`` carries: taken off."""
    model_cls, spans_cls = _classes()
    with _lock:  # two adapters of one agent made at once: wrapped once
        return _capture(agent, ours, model_cls, spans_cls)


def _capture(agent: Any, ours: Any, model_cls: Any, spans_cls: Any) -> bool:
    if isinstance(getattr(agent, "_otel", None), spans_cls):
        return True
    settings = getattr(agent, "_instrument_settings", None)
    if settings is not None and settings is not ours:
        return False
    if not hasattr(agent, "_otel") or not hasattr(agent, "model"):
        return False
    model = agent.model
    kept = None  # settings=/reasoning settings Upsonic set on the instrumented wrapper
    if settings is not None:
        from upsonic.models.instrumented import InstrumentedModel

        while isinstance(model, InstrumentedModel):
            kept = kept if kept is not None else getattr(model, "_settings", None)
            model = model.wrapped
    if isinstance(model, _bridge()):  # (its settings are kept above)
        model = model.wrapped
    if not isinstance(model, model_cls):
        model = model_cls(model)
        if kept is not None:
            model._settings = kept
    agent.model = model
    agent._tracing_provider = None
    agent._instrument_settings = None
    agent._otel = spans_cls(agent, agent._otel if settings is not None else None)
    return True
