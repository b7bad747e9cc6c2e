"""OpenTelemetry -> runs: trace any framework that emits GenAI semantic-convention spans.

    from opentelemetry.sdk.trace import TracerProvider
    from assay.tracing.otel import AssaySpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(AssaySpanProcessor(client, project_name="agent"))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))  # e.g. pydantic-ai

Each span becomes one run, parent/child kept, in start order (the dotted order is built from the
span start times). A span started while an assay run is current (inside ``trace(...)`` or a
``@traceable`` function, e.g. under ``evaluate()``) becomes that run's child, so framework spans
and assay runs form one tree.

The mapping is ``_otel_map.span_fields``, shared with the server's ``/otel/v1/traces`` (so a
span maps to the same run in-process and over OTLP): the OTel GenAI conventions, OpenInference,
OpenLLMetry and LangSmith's OTel mode; llm spans carry messages, tokens, model, provider, first
token and cost, tool spans their name, arguments and result, an ERROR status the error from its
``exception`` event; attributes no convention reads are kept under
``metadata["otel_attributes"]``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._thread_keys import THREAD_KEYS
from ..errors import require
from ._context import _CFG, add_step_lookup, current_run
from ._otel_map import SpanEvent, SpanView, span_fields
from ._run_tree import RunTree
from ._traceable import _new_run

require("opentelemetry.sdk.trace", "otel", "assay.tracing.otel")

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor  # noqa: E402
from opentelemetry.trace import (  # noqa: E402
    INVALID_SPAN,
    SpanContext,
    StatusCode,
    get_current_span,
)

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from ..client import Client

__all__ = ["AssaySpanProcessor", "leave_scope_to_hook", "leave_span_to_hook", "nothing_to_undo",
           "span_to_run_fields"]

_RECENT = 10_000  # ended spans remembered so late children still find their parent
# (trace id, span id) -> the processor that records the span, for the spans started lately.
# Two AssaySpanProcessors may listen to one provider (one the user added, and the one assay
# adds to the global provider for pydantic-ai runs under an assay run, as Logfire's is): the
# first to see a span start records it, the other leaves it, so no span is stored twice.
# (``setdefault`` and ``popitem`` are single C calls of the OrderedDict: atomic under the GIL,
# so no lock: ~0.25 us a span, against ~30 us for the span's run.)
_OWNERS: OrderedDict[tuple[int, int], AssaySpanProcessor | None] = OrderedDict()
# instrumentation scope -> "does an integration of assay record this step itself?": a framework
# whose own hooks assay uses while it runs (Google ADK's plugin) and that also emits spans; its
# spans started while its hook records the current run are left to the hook (None owns them),
# so a user with an AssaySpanProcessor of their own does not get each step twice
_RECORDED_BY_HOOKS: dict[str, Callable[[RunTree | None], bool]] = {}


def _current_span_reader() -> tuple[Callable[[], Any], contextvars.ContextVar[Any] | None]:
    """(``get_current_span``, None), or where OpenTelemetry keeps its context in a context
    variable (its default runtime context), the same read without its four Python calls
    (~0.3 us) and that variable (empty outside any span: the gate of ``_span_run``)."""
    try:
        from opentelemetry import context as otel_context
        from opentelemetry.trace.propagation import _SPAN_KEY

        var = otel_context._RUNTIME_CONTEXT._current_context  # type: ignore[attr-defined]
        if not isinstance(var, contextvars.ContextVar) or not isinstance(_SPAN_KEY, str):
            return get_current_span, None
    except (ImportError, AttributeError):  # another OpenTelemetry layout: the public call
        return get_current_span, None
    get = var.get

    def current() -> Any:
        return get().get(_SPAN_KEY, INVALID_SPAN)

    return current, var


_current_span, _CONTEXT_VAR = _current_span_reader()
# (a SpanContext is a tuple that opens with the two ids: its properties cost ~100 ns each)
_CONTEXT_IS_TUPLE = isinstance(SpanContext(1, 2, False), tuple) and tuple(
    SpanContext(1, 2, False))[:2] == (1, 2)


def _span_run() -> RunTree | None:
    """The run of the OpenTelemetry span current here while a processor of assay holds it
    open (a framework's tool span, say): what a run started by the span's code nests under
    (``_context.STEP_RUNS``)."""
    span = _current_span()
    if span is INVALID_SPAN:  # (no span current: the usual case outside a framework's call)
        return None
    ctx = span.get_span_context()
    key = ctx[:2] if _CONTEXT_IS_TUPLE else (ctx.trace_id, ctx.span_id)
    owner = _OWNERS.get(key)
    return owner._open.get(key) if owner is not None else None


def leave_scope_to_hook(scope: str, recording: Callable[[RunTree | None], bool]) -> None:
    """Spans of ``scope`` started while ``recording(current assay run)`` holds are not stored
    (the integration that says so records the same steps)."""
    _RECORDED_BY_HOOKS[scope] = recording


def leave_span_to_hook(span: Any) -> Callable[[], None]:
    """The (open) span ``span`` is not stored: a hook that learns only inside a framework's
    first span that it records the steps (ADK's plugin, called inside its invocation's span).
    Returns what undoes it (the hook found, after all, that it records nothing)."""
    ctx = span.get_span_context()
    if ctx is None or not ctx.is_valid:
        return nothing_to_undo
    key = (ctx.trace_id, ctx.span_id)
    owner = _OWNERS.get(key)
    _OWNERS[key] = None

    def undo() -> None:
        if owner is not None and key in _OWNERS and _OWNERS[key] is None:
            _OWNERS[key] = owner

    return undo


def nothing_to_undo() -> None:
    """What ``leave_span_to_hook`` returns for a span it could not leave."""


def _view(span: ReadableSpan) -> SpanView:
    ctx = span.get_span_context()
    parent = span.parent
    status = span.status
    return SpanView(
        trace_id=format(ctx.trace_id, "032x") if ctx is not None else "",
        span_id=format(ctx.span_id, "016x") if ctx is not None else "",
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name, start_ns=span.start_time or 0, end_ns=span.end_time,
        attributes=span.attributes or {},
        events=[SpanEvent(e.name, e.timestamp, e.attributes or {}) for e in span.events],
        error=status is not None and status.status_code is StatusCode.ERROR,
        status_message=status.description if status is not None else None,
        resource=dict(span.resource.attributes) if span.resource is not None else {},
        scope=span.instrumentation_scope.name if span.instrumentation_scope else None)


def span_to_run_fields(span: ReadableSpan) -> dict[str, Any]:
    """The run fields one finished span maps to (name, run_type, inputs, outputs, metadata...);
    the mapping is ``_otel_map.span_fields``, shared with the server's OTLP endpoint."""
    return span_fields(_view(span))


class AssaySpanProcessor(SpanProcessor):
    """Stores every finished span as a run through the client's background writer.

    ``client``/``project_name`` default to the enclosing assay run's, then the current
    ``tracing_context``, then the default client and ``ASSAY_PROJECT``. Spans are recorded
    whether or not ``ASSAY_TRACING`` is set: installing the processor is the switch.
    """

    def __init__(self, client: Client | None = None, *, project_name: str | None = None,
                 metadata: Mapping[str, Any] | None = None,
                 tags: Sequence[str] | None = None) -> None:
        self.client = client
        self.project_name = project_name
        self.metadata = dict(metadata) if metadata else None
        self.tags = list(tags) if tags else None
        self._open: dict[tuple[int, int], RunTree] = {}
        self._recent: OrderedDict[tuple[int, int], RunTree] = OrderedDict()
        self._lock = threading.Lock()
        self._clients: set[int] = set()
        self._writers: list[Any] = []
        add_step_lookup(_span_run, _CONTEXT_VAR)

    def _span_parent(self, span: ReadableSpan) -> RunTree | None:
        """The run of the span's parent span, if this processor has seen it."""
        parent = span.parent
        if parent is None:
            return None
        key = (parent.trace_id, parent.span_id)
        return self._open.get(key) or self._recent.get(key)

    def _parent_of(self, span: ReadableSpan) -> RunTree | None:
        run = self._span_parent(span)
        # else an assay run current where the span started (or None: a root)
        return run if run is not None else current_run()

    def _start(self, span: ReadableSpan) -> RunTree:
        parent = self._parent_of(span)
        run = _new_run(span.name or "span", "chain", None, parent, _CFG.get(),
                       client=self.client,
                       project_name=self.project_name if parent is None else None,
                       metadata=self.metadata, tags=self.tags)
        if span.start_time is not None:
            run._start_us = span.start_time // 1000
        return run

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        ctx = span.get_span_context()
        key = (ctx.trace_id, ctx.span_id)
        owner = _OWNERS.setdefault(key, self)
        if owner is self and len(_OWNERS) > _RECENT:
            with contextlib.suppress(KeyError):  # (another thread emptied it meanwhile)
                _OWNERS.popitem(last=False)
        if owner is self:
            if _RECORDED_BY_HOOKS:
                scope = span.instrumentation_scope
                hook = _RECORDED_BY_HOOKS.get(scope.name) if scope is not None else None
                if hook is not None and hook(current_run()):
                    _OWNERS[key] = None
                    return
            self._open[key] = self._start(span)

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        assert ctx is not None  # the SDK's spans always carry theirs
        key = (ctx.trace_id, ctx.span_id)
        run = self._open.pop(key, None)
        owner = _OWNERS.get(key, self)
        if owner is not self:  # another processor records it, or a hook the same steps
            return
        if run is None:
            run = self._start(span)  # started before this processor was added
        fields = span_to_run_fields(span)
        run.name = fields["name"] or run.name
        run.run_type = fields["run_type"]
        run.inputs = fields["inputs"]
        run.outputs = fields["outputs"]
        meta = fields["metadata"]
        if run._meta and any(k in run._meta for k in THREAD_KEYS):
            # the conversation the user named (tracing_context, the processor's metadata)
            # over the one the span carries (pydantic-ai gives each agent run an id of its own)
            meta = {k: v for k, v in meta.items() if k not in THREAD_KEYS}
        run.metadata.update(meta)
        run.events.extend(fields["events"])
        if fields["tags"]:
            have = run.tags or []
            run.tags = [*have, *(t for t in fields["tags"] if t not in have)]
        run.error = fields["error"]
        run._end_us = span.end_time // 1000 if span.end_time is not None else None
        run.patch()  # never posted at start: the writer stores it as one complete post
        with self._lock:
            self._recent[key] = run
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
            writer = run._writer
            if writer is not None and id(writer) not in self._clients:
                self._clients.add(id(writer))
                self._writers.append(writer)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        ok = True
        for writer in list(self._writers):
            ok = writer.flush(timeout_millis / 1000) and ok
        return ok

    def shutdown(self) -> None:
        self.force_flush()
