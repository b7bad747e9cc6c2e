"""Upsonic's OpenTelemetry spans -> assay runs, only under a current assay run.

The path for agents assay never ran nor found alive (built after ``instrument()``, called from a
plain function): Upsonic's global instrumentation setting is the only hook it offers at
construction. Agents assay runs are traced from their own objects instead (``_upsonic_native``,
the same runs at a quarter of the cost); both share ``_KEPT``, so either nests in the other.

Upsonic emits, per agent run, an ``agent.run`` span, a ``pipeline.execute`` span with one
``pipeline.step.<name>`` span per pipeline step (two dozen), ``chat <model>`` spans for model
requests and ``tool.execute`` spans for tool calls. Only ``agent.run`` (chain), ``chat`` (llm) and
``tool.execute`` (tool) become runs; the pipeline spans are not even made (``tracer_provider``:
a non-recording span carrying its parent's context stands in; the sampler would drop them at
their start), and a kept span hangs from the nearest kept one (tracked in a context variable,
as OpenTelemetry tracks the current span), so a trace reads agent -> llm, tool, llm as the agent
did it.

With no assay run current no span is made either, unless tracing is on for new roots
(``ASSAY_TRACING=true``, ``tracing_context(enabled=True)``: the agent run is then a root run of
its own); with framework tracing switched off, or outside ``evaluate()``/``trace()`` with
tracing off, an instrumented agent records nothing and does next to no tracing work.
"""

from __future__ import annotations

import ast
import asyncio
import json
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .._sync import keep_context_in_executor
from ..tracing._context import _CFG, add_step_lookup
from ..tracing._otel_map import span_fields
from ..tracing._traceable import _new_run
from ..tracing.otel import AssaySpanProcessor, _view
from ._registry import framework_parent, framework_recording, framework_root

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span

    from ..tracing._run_tree import RunTree

__all__ = ["UpsonicSpanProcessor", "tracer_provider", "upsonic_span_fields"]

_AGENT, _TOOL, _LLM = "agent.run", "tool.execute", "llm"
_PIPELINE = "pipeline.execute"
_LLM_OPS = frozenset({"chat", "text_completion", "generate_content", "completion"})


def _kind_of(name: str, attributes: Mapping[str, Any] | None) -> str | None:
    if name == _AGENT or name == _TOOL:
        return name
    if attributes and attributes.get("gen_ai.operation.name") in _LLM_OPS:
        return _LLM
    return None


def _kind(span: ReadableSpan) -> str | None:
    return _kind_of(span.name, span.attributes)


def _parse(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _tool_output(value: Any) -> Any:
    """A tool span's output as the native path stores it: Upsonic writes its behavioural
    wrapper's dict as Python's repr (``"{'func': ...}"``), read back as that dict where it
    holds literals only (``ast.literal_eval`` evaluates nothing else); other text as it is."""
    value = _parse(value)  # (the attribute may hold that text JSON-encoded)
    if isinstance(value, str) and value.startswith("{'func"):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return value
    return value


def _as_inputs(raw: Any) -> dict[str, Any]:
    value = _parse(raw)
    return dict(value) if isinstance(value, Mapping) else {"input": value}


def _tool_failed(result: Any) -> bool:
    """Whether a ``tool.execute`` span's output is Upsonic's report of a failed tool.

    Upsonic (0.77) catches a raising tool in ``ToolManager.execute_tool`` and returns
    ``ToolResult(content=str(exc), success=False)``; the agent then hands that text to the model
    and marks its span OK, dropping ``success``. The content's shape still tells: every tool runs
    through Upsonic's behavioural wrapper, which returns a dict (``{'func': result}``, with
    ``func_before``/``func_after``/``func_cache`` keys when hooks or the cache answered), so a
    span whose output is not that dict's text is a failure (the exception's text, or Upsonic's
    message for missing arguments)."""
    return isinstance(result, str) and not result.startswith("{'func")  # (a dict once read)


def upsonic_span_fields(span: ReadableSpan, kind: str,
                        attrs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run fields of one finished kept span: assay's GenAI mapping (llm: model, provider,
    messages, tokens; error; events; metadata), with Upsonic's own attributes read for the
    ``tool.execute`` and ``agent.run`` spans, which carry no GenAI operation.

    ``attrs``: the span's attributes as a plain dict (made here if not given). The mapping
    reads them a few dozen times a span: through the SDK's attribute mapping (a ``Mapping``
    ABC behind a read-only proxy) each read was a chain of Python calls, ~a third of the
    span's conversion."""
    if attrs is None:
        attrs = dict(span.attributes or {})
    view = _view(span)
    view.attributes = attrs
    out = span_fields(view)
    if kind == _LLM:
        model = attrs.get("gen_ai.request.model")
        if model:  # named by its model as on the native path (the span: "chat <model>")
            out["name"] = str(model)
        return out
    meta = out.setdefault("metadata", {})
    meta.pop("otel_attributes", None)  # read below; not kept twice
    if kind == _TOOL:
        out["run_type"] = "tool"
        out["name"] = str(attrs.get("upsonic.tool.name") or span.name)
        raw_in = attrs.get("langfuse.observation.input")
        out["inputs"] = _as_inputs(raw_in) if raw_in is not None else {}
        raw_out = attrs.get("langfuse.observation.output")
        result = _tool_output(raw_out)
        out["outputs"] = {"output": result} if raw_out is not None else None
        if not out.get("error") and _tool_failed(result):
            out["error"] = result
        if attrs.get("upsonic.tool.call_id"):
            meta["tool_call_id"] = attrs["upsonic.tool.call_id"]
    else:
        out["run_type"] = "chain"
        out["name"] = str(attrs.get("upsonic.agent.name") or "Agent")
        task = attrs.get("upsonic.input")
        out["inputs"] = {"input": task} if task is not None else {}
        answer = attrs.get("upsonic.output")
        out["outputs"] = {"output": answer} if answer is not None else None
        for key in ("upsonic.agent.model", "upsonic.run_id", "upsonic.tool_call_count"):
            if attrs.get(key) is not None:
                meta[key] = attrs[key]
        meta.pop("usage_metadata", None)  # the llm runs below carry the tokens: no double count
    return out


def _mark_root(run: RunTree) -> None:
    """Upsonic hands a failed tool's error to the model and goes on, so the agent's own runs end
    without error; the trace's root (the example's run under evaluate()) is marked with it, so a
    failed step is never hidden in a successful-looking example. A root with an error of its own
    keeps it."""
    top = run
    while top.parent is not None:
        top = top.parent
    if top is not run and top.error is None:
        first = (run.error or "").strip().splitlines()[0] if run.error else ""
        top.error = f"tool {run.name!r} failed: {first}"


def _first_token(agent: RunTree, span: ReadableSpan, llms: list[RunTree]) -> list[RunTree]:
    """Mark the first streamed token on the llm run that produced it; returns ``llms``.

    Upsonic's model spans carry no first token; when the agent streams (``astream``/``stream``),
    its ``agent.run`` span carries ``upsonic.time_to_first_token``: seconds (to the ms) from
    the start of the run's usage timer (started by the pipeline's first step, just after its
    ``pipeline.execute`` span begins: the sampler notes when, ``_PIPELINE_AT``) to its first
    text chunk. That instant falls in one of the agent's llm calls (a call that answers with a
    tool call streams no text): that run gets the ``new_token`` event. A run that did not
    stream has no such attribute, and no first token."""
    anchor = _PIPELINE_AT.pop(agent._id, None) or agent._start_us
    ttft = (span.attributes or {}).get("upsonic.time_to_first_token")
    if not llms or not isinstance(ttft, (int, float)) or ttft <= 0:
        return llms
    at = anchor + int(ttft * 1_000_000)
    slack = 1_000  # the attribute's millisecond rounding
    candidates = [r for r in llms if r._start_us - slack <= at
                  and (r._end_us is None or at <= r._end_us + slack)]
    if not candidates:  # outside every call (clock skew): the last call begun before it
        candidates = [r for r in llms if r._start_us <= at] or llms[:1]
    target = candidates[-1]
    first = min(max(at, target._start_us), target._end_us or at)
    target._mark_first_token(first)
    return llms


# an agent run's id -> when its pipeline began (µs), read by _first_token at the agent's end
_PIPELINE_AT: dict[Any, int] = {}


def _note_pipeline_start() -> None:
    """At the start of an agent's ``pipeline.execute`` span (dropped, but seen by the sampler):
    remember when, for the agent run it belongs to (the innermost kept run)."""
    agent = _KEPT.get()
    if agent is None or agent._id in _PIPELINE_AT:
        return
    if len(_PIPELINE_AT) > 10_000:  # agents whose end never came
        _PIPELINE_AT.clear()
    _PIPELINE_AT[agent._id] = time.time_ns() // 1000


def assay_run_sampler() -> Any:
    """Sample only the spans that become runs (agent, chat, tool), and only while an assay run is
    current and framework tracing is on. Every other span (two dozen pipeline steps per agent
    run) and every span outside assay is dropped at its start: it records nothing, and Upsonic
    skips its attribute work (message JSON, usage) for it."""
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    drop = SamplingResult(Decision.DROP)  # one for every dropped span (the SDK only reads it)

    class KeptWhileAssayRun(Sampler):
        def should_sample(self, parent_context: Any, trace_id: int, name: str, kind: Any = None,
                          attributes: Any = None, links: Any = None,
                          trace_state: Any = None) -> SamplingResult:
            if _kind_of(name, attributes) is None or not framework_recording():
                if name == _PIPELINE:
                    _note_pipeline_start()
                return drop
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

        def get_description(self) -> str:
            return "KeptWhileAssayRun"

    return KeptWhileAssayRun()


def tracer_provider() -> Any:
    """The TracerProvider Upsonic's instrumentation gets: the SDK's, with ``assay_run_sampler``,
    whose tracers do not even make the spans that would be dropped.

    Upsonic opens ~26 spans an agent run that never become runs (``pipeline.execute`` and a
    span per pipeline step), and every span outside an assay run. The SDK makes each of them
    anyway (the sampler's verdict, fresh ids, a span object), ~6 us a span against ~1 us for
    a non-recording span that carries its parent's context: what these tracers hand out
    instead. Children of such a span see its parent as theirs, the nearest span the SDK made
    (a kept span's run found through it, as through the dropped span before). Spans that may
    become runs go the SDK's way, the sampler deciding as before."""
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import Tracer, TracerProvider

    non_recording = trace_api.NonRecordingSpan
    current = trace_api.get_current_span

    class DroppingTracer(Tracer):
        def start_span(self, name: str, context: Any = None,
                       kind: Any = trace_api.SpanKind.INTERNAL, attributes: Any = None,
                       links: Any = (), start_time: int | None = None,
                       record_exception: bool = True,
                       set_status_on_exception: bool = True) -> Any:
            if _kind_of(name, attributes) is None or not framework_recording():
                if name == _PIPELINE:
                    _note_pipeline_start()
                return non_recording(current(context).get_span_context())
            return super().start_span(name, context, kind, attributes, links, start_time,
                                      record_exception, set_status_on_exception)

    class DroppingTracerProvider(TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            tracer = super().get_tracer(*args, **kwargs)
            if tracer.__class__ is Tracer:  # (not the no-op one of a disabled SDK)
                tracer.__class__ = DroppingTracer
            return tracer

    return DroppingTracerProvider(sampler=assay_run_sampler())


# the innermost kept span's run in this context: the parent of a kept span whose OTel parent is
# a dropped pipeline span (set at a kept span's start, restored at its end, as the span itself
# is made current and restored by Upsonic's ``with`` blocks)
_KEPT: ContextVar[RunTree | None] = ContextVar("assay_upsonic_kept", default=None)


def _kept_run() -> RunTree | None:
    """The innermost open Upsonic run here (a tool call's, an agent's): what a run started by
    a tool's code nests under (``tracing._context.STEP_RUNS``)."""
    run = _KEPT.get()
    return run if run is not None and not run.ended else None


add_step_lookup(_kept_run, _KEPT)


def keep_tool_context() -> None:
    """Where a tool run opens: Upsonic runs a sync tool with ``run_in_executor(None, ...)``,
    whose default executor starts it with an empty context, so what the tool's code traced
    belonged to no run (a trace of its own where tracing is on). The running loop's default
    executor is made one that keeps the caller's context, as ``asyncio.to_thread`` does (once
    per loop; one the user set is left: ``keep_context_in_executor``)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # (a tool span opened off any loop: nothing to keep)
        return
    keep_context_in_executor(loop, "assay-upsonic-tools")


class UpsonicSpanProcessor(AssaySpanProcessor):
    """Records Upsonic's agent, chat and tool spans as runs under the current assay run."""

    def __init__(self) -> None:
        super().__init__()
        self._outer: dict[tuple[int, int], RunTree | None] = {}  # span -> _KEPT before it
        # an open agent run's id -> its ended llm runs, stored when the agent ends (see
        # _first_token: the agent span tells which of them streamed the first token)
        self._held: dict[Any, list[RunTree]] = {}

    def _resolve(self, span: ReadableSpan) -> RunTree | None:
        run = self._span_parent(span)
        if run is not None:
            return run
        kept = _KEPT.get()
        if kept is not None and not kept.ended:
            return kept
        return framework_parent()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        ctx = span.get_span_context()
        if ctx is None or _kind(span) is None:
            return
        parent = self._resolve(span)
        if parent is not None:
            run = _new_run(span.name or "span", "chain", None, parent, _CFG.get())
        else:  # an agent run outside any assay run: a root of its own where tracing is on
            spec = framework_root() if span.name == _AGENT else None
            if spec is None:
                return
            run = spec.new_run(span.name or "span", "chain", None)
        key = (ctx.trace_id, ctx.span_id)
        if span.start_time is not None:
            run._start_us = span.start_time // 1000
        self._open[key] = run
        self._outer[key] = _KEPT.get()
        _KEPT.set(run)
        if span.name == _AGENT:
            self._held[run._id] = []
        elif span.name == _TOOL:
            keep_tool_context()

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        if ctx is None:
            return
        key = (ctx.trace_id, ctx.span_id)
        run = self._open.pop(key, None)
        if run is None:
            return
        attrs = dict(span.attributes or {})  # read as a plain dict (see upsonic_span_fields)
        kind = _kind_of(span.name, attrs)
        if kind is None:
            return
        _KEPT.set(self._outer.pop(key, None))
        fields = upsonic_span_fields(span, kind, attrs)
        run.name = fields["name"] or run.name
        run.run_type = fields["run_type"]
        run.inputs = fields["inputs"]
        run.outputs = fields["outputs"]
        run.metadata.update(fields.get("metadata") or {})
        run.events.extend(fields.get("events") or [])
        run.error = fields.get("error")
        if run.error and kind == _TOOL:
            _mark_root(run)
        run._end_us = span.end_time // 1000 if span.end_time is not None else None
        parent = run.parent
        held = self._held.get(parent._id) if kind == _LLM and parent is not None else None
        if held is not None:
            held.append(run)  # stored with its agent, which may name its first token
        else:
            if kind == _AGENT:
                for llm in _first_token(run, span, self._held.pop(run._id, [])):
                    llm.patch()
            run.patch()
        with self._lock:
            self._recent[key] = run
            while len(self._recent) > 10_000:
                self._recent.popitem(last=False)
