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

Mapping (``gen_ai.operation.name``): ``chat``/``text_completion``/``generate_content`` -> llm
(messages from ``gen_ai.input.messages``/``gen_ai.output.messages``, tokens from
``gen_ai.usage.*``, model from ``gen_ai.response.model``/``gen_ai.request.model``, provider from
``gen_ai.provider.name``/``gen_ai.system``, first token from
``gen_ai.client.operation.time_to_first_chunk``, explicit cost from ``operation.cost``);
``execute_tool`` -> tool (name ``gen_ai.tool.name``, inputs ``gen_ai.tool.call.arguments``,
output ``gen_ai.tool.call.result``); ``embeddings`` -> embedding; anything else -> chain. A span
with status ERROR gets an error from its ``exception`` event. Attributes not mapped are kept under
``metadata["otel_attributes"]``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import require
from ._context import _CFG, _RUN
from ._run_tree import RunTree, _us_to_dt
from ._traceable import _new_run

require("opentelemetry.sdk.trace", "otel", "assay.tracing.otel")

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from ..client import Client

__all__ = ["AssaySpanProcessor", "span_to_run_fields"]

_LLM_OPS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_CONSUMED = frozenset({
    "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.system_instructions", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.request.model", "gen_ai.response.model", "gen_ai.provider.name", "gen_ai.system",
    "gen_ai.tool.name", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "tool_arguments", "tool_response", "gen_ai.client.operation.time_to_first_chunk",
    "operation.cost", "final_result", "logfire.json_schema", "logfire.msg",
    "model_request_parameters", "pydantic_ai.all_messages", "gen_ai.prompt", "gen_ai.completion",
    "input.value", "output.value",
})
_RECENT = 10_000  # ended spans remembered so late children still find their parent


def _parse(value: Any) -> Any:
    """Attribute values that hold JSON (messages, arguments) back to data."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, tuple):
        return [_parse(v) for v in value]
    return value


def _as_dict(value: Any, key: str) -> dict[str, Any]:
    value = _parse(value)
    return value if isinstance(value, dict) else {key: value}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _error_of(span: ReadableSpan) -> str | None:
    if span.status.status_code is not StatusCode.ERROR:
        return None
    for event in span.events:
        if event.name == "exception":
            a = event.attributes or {}
            head = f"{a.get('exception.type', 'Exception')}: {a.get('exception.message', '')}"
            trace_text = a.get("exception.stacktrace")
            return f"{head}\n\n{trace_text}" if trace_text else head
    return span.status.description or "error"


def span_to_run_fields(span: ReadableSpan) -> dict[str, Any]:
    """The run fields one finished span maps to (name, run_type, inputs, outputs, metadata...)."""
    attrs: Mapping[str, Any] = span.attributes or {}
    op = attrs.get("gen_ai.operation.name")
    out: dict[str, Any] = {"name": span.name, "inputs": {}, "outputs": None, "metadata": {},
                           "events": [], "error": _error_of(span)}
    meta = out["metadata"]
    if op in _LLM_OPS:
        out["run_type"] = "llm"
        inputs: dict[str, Any] = {}
        if "gen_ai.system_instructions" in attrs:
            inputs["system"] = _parse(attrs["gen_ai.system_instructions"])
        if "gen_ai.input.messages" in attrs:
            inputs["messages"] = _parse(attrs["gen_ai.input.messages"])
        elif "gen_ai.prompt" in attrs:
            inputs["prompt"] = _parse(attrs["gen_ai.prompt"])
        out["inputs"] = inputs
        if "gen_ai.output.messages" in attrs:
            out["outputs"] = {"messages": _parse(attrs["gen_ai.output.messages"])}
        elif "gen_ai.completion" in attrs:
            out["outputs"] = {"output": _parse(attrs["gen_ai.completion"])}
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
        provider = attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
        if model:
            meta["ls_model_name"] = model
        if provider:
            meta["ls_provider"] = provider
        inp, outp = attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens")
        if inp is not None or outp is not None:
            usage: dict[str, Any] = {"input_tokens": int(inp or 0), "output_tokens": int(outp or 0),
                                     "total_tokens": int(inp or 0) + int(outp or 0)}
            details = {k: int(attrs[a]) for k, a in (
                ("cache_read", "gen_ai.usage.cache_read.input_tokens"),
                ("cache_creation", "gen_ai.usage.cache_creation.input_tokens")) if attrs.get(a)}
            if details:
                usage["input_token_details"] = details
            if attrs.get("operation.cost") is not None:
                usage["total_cost"] = float(attrs["operation.cost"])
            meta["usage_metadata"] = usage
        ttfc = attrs.get("gen_ai.client.operation.time_to_first_chunk")
        if ttfc is not None and span.start_time is not None:
            t = span.start_time // 1000 + int(float(ttfc) * 1_000_000)
            out["events"].append({"name": "new_token", "time": _us_to_dt(t).isoformat()})
    elif op == "execute_tool":
        out["run_type"] = "tool"
        out["name"] = attrs.get("gen_ai.tool.name") or span.name
        args = attrs.get("gen_ai.tool.call.arguments", attrs.get("tool_arguments"))
        out["inputs"] = _as_dict(args, "input") if args is not None else {}
        result = attrs.get("gen_ai.tool.call.result", attrs.get("tool_response"))
        if result is not None:
            out["outputs"] = {"output": _parse(result)}
        if attrs.get("gen_ai.tool.call.id"):
            meta["tool_call_id"] = attrs["gen_ai.tool.call.id"]
    else:
        out["run_type"] = "embedding" if op == "embeddings" else "chain"
        if "gen_ai.input.messages" in attrs:
            out["inputs"] = {"messages": _parse(attrs["gen_ai.input.messages"])}
        elif "input.value" in attrs:
            out["inputs"] = _as_dict(attrs["input.value"], "input")
        if "final_result" in attrs:
            out["outputs"] = {"output": _parse(attrs["final_result"])}
        elif "gen_ai.output.messages" in attrs:
            out["outputs"] = {"messages": _parse(attrs["gen_ai.output.messages"])}
        elif "output.value" in attrs:
            out["outputs"] = _as_dict(attrs["output.value"], "output")
    if op:
        meta["gen_ai.operation.name"] = op
    ctx = span.get_span_context()
    if ctx is not None:
        meta["otel_trace_id"] = format(ctx.trace_id, "032x")
        meta["otel_span_id"] = format(ctx.span_id, "016x")
    rest = {k: _plain(v) for k, v in attrs.items() if k not in _CONSUMED}
    if rest:
        meta["otel_attributes"] = rest
    return out


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

    def _parent_of(self, span: ReadableSpan) -> RunTree | None:
        parent = span.parent
        if parent is not None:
            key = (parent.trace_id, parent.span_id)
            run = self._open.get(key) or self._recent.get(key)
            if run is not None:
                return run
        return _RUN.get()  # an assay run current where the span started (or None: a root)

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
        self._open[(ctx.trace_id, ctx.span_id)] = self._start(span)

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        assert ctx is not None  # the SDK's spans always carry theirs
        key = (ctx.trace_id, ctx.span_id)
        run = self._open.pop(key, None) or self._start(span)
        fields = span_to_run_fields(span)
        run.name = fields["name"] or run.name
        run.run_type = fields["run_type"]
        run.inputs = fields["inputs"]
        run.outputs = fields["outputs"]
        run.metadata.update(fields["metadata"])
        run.events.extend(fields["events"])
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
