"""One mapping from OpenTelemetry spans to runs, for spans made in-process and spans sent over OTLP.

``AssaySpanProcessor`` (in-process SDK spans) and the server's ``/otel/v1/traces`` (decoded OTLP)
both describe a span as a ``SpanView`` and call ``span_fields``, so a span maps to the same run
whichever way it arrives. The conventions understood, tried in this order for the run type:

- LangSmith's own OTel mode: ``langsmith.span.kind``, ``langsmith.trace.name``,
  ``langsmith.metadata.*``, ``langsmith.span.tags``, ``langsmith.trace.session_name``;
- OpenInference (Arize Phoenix): ``openinference.span.kind`` (LLM, TOOL, CHAIN, AGENT,
  RETRIEVER, EMBEDDING, ...), ``llm.token_count.*``, ``llm.model_name``, ``llm.provider``,
  ``llm.input_messages.<i>.message.*``, ``input.value``/``output.value``, ``tool.name``;
- OpenLLMetry (Traceloop): ``traceloop.span.kind`` (workflow, task, agent, tool),
  ``llm.request.type``, ``gen_ai.prompt.<i>.*``/``gen_ai.completion.<i>.*``,
  ``llm.usage.total_tokens``, ``traceloop.entity.input``/``output``,
  ``traceloop.association.properties.*``;
- the Vercel AI SDK's own (versions 4-6): ``ai.operationId``, ``ai.usage.*``, ``ai.model.*``,
  ``ai.prompt.messages``, ``ai.response.*``, ``ai.toolCall.*`` (``_otel_aisdk``);
- the OTel GenAI semantic conventions: ``gen_ai.operation.name`` (chat, text_completion,
  generate_content, embeddings, execute_tool, invoke_agent), ``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.system``/``gen_ai.provider.name``,
  messages in ``gen_ai.input.messages``/``gen_ai.output.messages`` or in events,
  ``gen_ai.tool.name`` with ``gen_ai.tool.call.arguments``/``result``.

Tokens, model and provider go where the store reads them (``usage_metadata``, ``ls_model_name``,
``ls_provider``: genai-prices then prices the run); a first-token event (``gen_ai.content.
first_token`` or ``first_token``; OpenInference's ``First Token Stream Event``, OpenLLMetry's first
``gen_ai.content.completion.chunk``), or ``gen_ai.client.operation.time_to_first_chunk``, becomes
a ``new_token`` event; status ERROR becomes the run's error (from its ``exception`` event). What no
convention consumes is kept under ``metadata["otel_attributes"]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._thread_keys import THREAD_KEYS
from .._time import from_micros
from . import _otel_aisdk as _aisdk
from ._otel_values import as_dict as _as_dict
from ._otel_values import parse_json, parse_result
from ._otel_values import to_int as _int

__all__ = ["ADK_SCOPE", "SpanEvent", "SpanView", "span_fields"]


@dataclass
class SpanEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class SpanView:
    """A span as both sources can describe it (ids as lowercase hex)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int | None
    attributes: Mapping[str, Any]
    events: Sequence[SpanEvent] = ()
    error: bool = False
    status_message: str | None = None
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None


_LLM_OPS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_LS_TYPES = frozenset({"llm", "chain", "tool", "retriever", "embedding", "prompt", "parser"})
_OI_TYPES = {"LLM": "llm", "TOOL": "tool", "CHAIN": "chain", "AGENT": "chain",
             "RETRIEVER": "retriever", "EMBEDDING": "embedding", "RERANKER": "retriever",
             "GUARDRAIL": "chain", "EVALUATOR": "chain", "PROMPT": "prompt"}
_TL_TYPES = {"workflow": "chain", "task": "chain", "agent": "chain", "tool": "tool"}
_TL_REQUEST = {"chat": "llm", "completion": "llm", "embedding": "embedding",
               "rerank": "retriever"}
# a streamed call's first chunk: OpenInference's instrumentors mark it with an event of its
# own; OpenLLMetry's mark every chunk (``gen_ai.content.completion.chunk``), so its first is
# the first token (as the GenAI conventions' ``time_to_first_chunk`` counts it)
_FIRST_TOKEN_EVENTS = frozenset({"gen_ai.content.first_token", "first_token",
                                 "llm.first_token", "new_token", "First Token Stream Event",
                                 "gen_ai.content.completion.chunk", _aisdk.FIRST_CHUNK_EVENT})
_MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                   "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
_INDEXED = re.compile(r"^(llm\.input_messages|llm\.output_messages|gen_ai\.prompt|"
                      r"gen_ai\.completion)\.(\d+)\.(.+)$")

# consumed by the mapping: not copied into metadata["otel_attributes"]
_CONSUMED = frozenset({
    "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.system_instructions", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens", "gen_ai.usage.total_tokens",
    "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.request.model", "gen_ai.response.model", "gen_ai.provider.name", "gen_ai.system",
    "gen_ai.tool.name", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "tool_arguments", "tool_response", "gen_ai.client.operation.time_to_first_chunk",
    "gen_ai.server.time_to_first_token", "ai.response.msToFirstChunk",
    "operation.cost", "final_result", "logfire.json_schema", "logfire.msg",
    "model_request_parameters", "pydantic_ai.all_messages", "gen_ai.prompt", "gen_ai.completion",
    "input.value", "output.value", "input.mime_type", "output.mime_type",
    "openinference.span.kind", "llm.token_count.prompt", "llm.token_count.completion",
    "llm.token_count.total", "llm.token_count.prompt_details.cache_read",
    "llm.token_count.prompt_details.cache_write", "llm.model_name", "llm.provider",
    "llm.system", "tool.name", "tool.parameters", "tool.description", "metadata", "tag.tags",
    "traceloop.span.kind", "traceloop.entity.name", "traceloop.entity.input",
    "traceloop.entity.output", "llm.request.type", "llm.usage.total_tokens",
    "langsmith.span.kind", "langsmith.trace.name", "langsmith.span.tags",
    "langsmith.trace.session_name", "langsmith.trace.session_id",
    "gen_ai.conversation.id", "session.id",
}) | _aisdk.CONSUMED
# a conversation's id as the conventions carry it, and the metadata key it becomes (a thread:
# store/_threads.py), unless the span's metadata names a thread already
_CONVERSATION = (("gen_ai.conversation.id", "thread_id"), ("session.id", "session_id"))



def _iso(ns: int) -> str:
    at = from_micros(ns // 1000)
    assert at is not None  # an int in: a datetime out
    return at.isoformat()


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``<prefix>.<i>.<rest>`` attributes as a list of dicts (OpenInference / OpenLLMetry
    messages), ``message.`` and ``tool_call.`` prefixes folded into nested keys."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = _INDEXED.match(key)
        if m is None or m.group(1) != prefix:
            continue
        rest = m.group(3).removeprefix("message.")
        slot = items.setdefault(int(m.group(2)), {})
        if rest.startswith("tool_calls."):
            parts = rest.split(".")  # tool_calls.<j>.tool_call.function.name
            if len(parts) >= 3 and parts[1].isdigit():
                calls = slot.setdefault("tool_calls", {})
                call = calls.setdefault(int(parts[1]), {})
                leaf = ".".join(p for p in parts[2:] if p != "tool_call")
                call[leaf] = parse_json(value)
            continue
        slot[rest] = parse_json(value)
    out = []
    for i in sorted(items):
        msg = items[i]
        if isinstance(msg.get("tool_calls"), dict):
            msg["tool_calls"] = [
                {"id": c.get("id"), "type": "function",
                 "function": {"name": c.get("function.name") or c.get("name"),
                              "arguments": c.get("function.arguments") or c.get("arguments")}}
                for _, c in sorted(msg["tool_calls"].items())]
        out.append(msg)
    return out


_LS_META, _TL_META = "langsmith.metadata.", "traceloop.association.properties."
_AI_META = "ai.telemetry.metadata."  # the Vercel AI SDK's
_INDEXED_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.",
                     "gen_ai.completion.")
_SPECIAL = (_LS_META, _TL_META, _AI_META, *_INDEXED_PREFIXES)


def _split(attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """One pass over the attributes: the metadata they carry (``langsmith.metadata.*`` and
    ``ai.telemetry.metadata.*``, then ``traceloop.association.properties.*``), what no
    convention consumes (kept as ``otel_attributes``), and which indexed message prefixes
    occur."""
    meta: dict[str, Any] = {}
    later: dict[str, Any] | None = None
    rest: dict[str, Any] = {}
    indexed: set[str] = set()
    for k, v in attrs.items():
        if k in _CONSUMED:
            continue
        if not k.startswith(_SPECIAL):
            rest[k] = list(v) if v.__class__ is tuple else v
        elif k.startswith(_LS_META):
            meta[k[len(_LS_META):]] = parse_json(v)
        elif k.startswith(_TL_META):
            if later is None:
                later = {}
            later[k[len(_TL_META):]] = parse_json(v)
        elif k.startswith(_AI_META):
            meta[k[len(_AI_META):]] = parse_json(v)
        else:
            indexed.add(k[:k.index(".", k.index(".") + 1)])
    if later:
        meta.update(later)
    return meta, rest, indexed


_USAGE_KEYS = frozenset({"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                         "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"})


def _run_type(attrs: Mapping[str, Any]) -> str:
    kind = attrs.get("langsmith.span.kind")
    if isinstance(kind, str) and kind.lower() in _LS_TYPES:
        return kind.lower()
    kind = attrs.get("openinference.span.kind")
    if isinstance(kind, str) and kind.upper() in _OI_TYPES:
        return _OI_TYPES[kind.upper()]
    request = attrs.get("llm.request.type")
    if isinstance(request, str) and request.lower() in _TL_REQUEST:
        return _TL_REQUEST[request.lower()]
    kind = attrs.get("traceloop.span.kind")
    if isinstance(kind, str) and kind.lower() in _TL_TYPES:
        return _TL_TYPES[kind.lower()]
    if _aisdk.OPERATION in attrs:
        return _aisdk.run_type(attrs)
    op = attrs.get("gen_ai.operation.name")
    if op in _LLM_OPS:
        return "llm"
    if op == "execute_tool":
        return "tool"
    if op == "embeddings":
        return "embedding"
    if "gen_ai.tool.name" in attrs:
        return "tool"
    if op is None and "gen_ai.request.model" in attrs and not _USAGE_KEYS.isdisjoint(attrs):
        return "llm"  # a model call that names no operation (Google ADK's legacy call_llm)
    return "chain"  # (invoke_agent too: its usage is its model calls', stored on them)


def _usage(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    inp = _int(attrs.get("gen_ai.usage.input_tokens"))
    if inp is None:
        inp = _int(attrs.get("gen_ai.usage.prompt_tokens"))
    if inp is None:
        inp = _int(attrs.get("llm.token_count.prompt"))
    out = _int(attrs.get("gen_ai.usage.output_tokens"))
    if out is None:
        out = _int(attrs.get("gen_ai.usage.completion_tokens"))
    if out is None:
        out = _int(attrs.get("llm.token_count.completion"))
    total = (_int(attrs.get("gen_ai.usage.total_tokens"))
             or _int(attrs.get("llm.usage.total_tokens"))
             or _int(attrs.get("llm.token_count.total")))
    if inp is None and out is None and total is None:
        return None
    if total is None:
        total = (inp or 0) + (out or 0)
    usage: dict[str, Any] = {"input_tokens": inp or 0, "output_tokens": out or 0,
                             "total_tokens": total}
    details = {k: _int(attrs[a]) for k, a in (
        ("cache_read", "gen_ai.usage.cache_read.input_tokens"),
        ("cache_read", "llm.token_count.prompt_details.cache_read"),  # (OpenInference)
        ("cache_creation", "gen_ai.usage.cache_creation.input_tokens"),
        ("cache_creation", "llm.token_count.prompt_details.cache_write")) if attrs.get(a)}
    if details:
        usage["input_token_details"] = details
    if attrs.get("operation.cost") is not None:
        try:
            usage["total_cost"] = float(attrs["operation.cost"])
        except (TypeError, ValueError):
            pass
    return usage


def _error(span: SpanView) -> str | None:
    if not span.error:
        return None
    for event in span.events:
        if event.name == "exception":
            a = event.attributes or {}
            head = f"{a.get('exception.type', 'Exception')}: {a.get('exception.message', '')}"
            trace_text = a.get("exception.stacktrace")
            return f"{head}\n\n{trace_text}" if trace_text else head
    return span.status_message or "error"


def _event_messages(span: SpanView) -> tuple[list[dict[str, Any]], list[Any]]:
    """GenAI messages sent as span events (the older semantic conventions)."""
    inputs: list[dict[str, Any]] = []
    choices: list[Any] = []
    for event in span.events:
        a = event.attributes or {}
        role = _MESSAGE_EVENTS.get(event.name)
        if role is not None:
            msg = {"role": a.get("role", role), "content": parse_json(a.get("content"))}
            if a.get("tool_calls") is not None:
                msg["tool_calls"] = parse_json(a.get("tool_calls"))
            inputs.append(msg)
        elif event.name == "gen_ai.choice":
            choices.append({k: parse_json(v) for k, v in a.items()})
    return inputs, choices


def _tool_events(span: SpanView) -> tuple[Any, Any]:
    """A tool call's arguments and result sent as events (the older GenAI conventions, as
    Strands Agents sends them): ``gen_ai.tool.message``'s content, ``gen_ai.choice``'s
    message."""
    args = result = None
    for event in span.events:
        a = event.attributes or {}
        if event.name == "gen_ai.tool.message" and args is None:
            args = a.get("content")
        elif event.name == "gen_ai.choice" and result is None:
            result = a.get("message")
    return args, result


def _plain_text(value: Any) -> Any:
    """Content made of text parts only (``[{"text": ...}]``, Bedrock's shape) as its text."""
    if (isinstance(value, list) and value
            and all(isinstance(p, dict) and set(p) == {"text"} for p in value)):
        return "".join(str(p["text"]) for p in value)
    return value


# a streamed call's first chunk as a time after the span's start, by the attribute and the
# units it may be in: GenAI's client figure in seconds, the AI SDK's in milliseconds, GenAI's
# server figure in seconds or (Strands Agents') milliseconds, whichever fits inside the span
_FIRST_AFTER = (("gen_ai.client.operation.time_to_first_chunk", (1e9,)),
                ("ai.response.msToFirstChunk", (1e6,)),
                ("gen_ai.server.time_to_first_token", (1e9, 1e6)))


def _first_after(span: SpanView, attrs: Mapping[str, Any]) -> int | None:
    """An llm span's first token from the first of ``_FIRST_AFTER`` it carries (ns)."""
    for key, scales in _FIRST_AFTER:
        if key not in attrs:
            continue
        try:
            after = float(attrs[key])
        except (TypeError, ValueError):
            return None
        length = (span.end_ns or span.start_ns) - span.start_ns
        for scale in scales:
            if after >= 0 and (len(scales) == 1 or after * scale <= length):
                return span.start_ns + int(after * scale)
        return None
    return None


ADK_SCOPE = "gcp.vertex.agent"  # the instrumentation scope of Google ADK's spans


def _joined_chunks(messages: Any) -> Any:
    """A streamed response written as one output message per chunk (Google ADK: each with an
    empty finish reason but the last) as the one message it is; several finished choices (each
    with its finish reason) stay as they are."""
    if not isinstance(messages, list) or len(messages) < 2 or not all(
            isinstance(m, Mapping) and isinstance(m.get("parts"), list) for m in messages):
        return messages
    *chunks, last = messages
    role = last.get("role")
    if not last.get("finish_reason") or any(
            m.get("finish_reason") or m.get("role") != role for m in chunks):
        return messages
    parts: list[Any] = []
    for message in messages:
        for part in message["parts"]:
            if (parts and isinstance(part, Mapping) and part.get("type") == "text"
                    and isinstance(parts[-1], Mapping) and parts[-1].get("type") == "text"):
                parts[-1] = {**parts[-1], "content": f"{parts[-1].get('content') or ''}"
                                                    f"{part.get('content') or ''}"}
            else:
                parts.append(part)
    return [{**last, "parts": parts}]


def _llm_io(attrs: Mapping[str, Any], span: SpanView, out: dict[str, Any],
            indexed: set[str]) -> None:
    inputs: dict[str, Any] = {}
    if "gen_ai.system_instructions" in attrs:
        inputs["system"] = parse_json(attrs["gen_ai.system_instructions"])
    event_in, event_choices = _event_messages(span)
    if "gen_ai.input.messages" in attrs:
        inputs["messages"] = parse_json(attrs["gen_ai.input.messages"])
    elif "llm.input_messages" in indexed:
        inputs["messages"] = _indexed(attrs, "llm.input_messages")
    elif "gen_ai.prompt" in indexed:
        inputs["messages"] = _indexed(attrs, "gen_ai.prompt")
    elif "gen_ai.prompt" in attrs:
        inputs.update(_as_dict(attrs["gen_ai.prompt"], "prompt"))
    elif event_in:
        inputs["messages"] = event_in
    elif "input.value" in attrs:
        inputs.update(_as_dict(attrs["input.value"], "input"))
    out["inputs"] = inputs
    if "gen_ai.output.messages" in attrs:
        out["outputs"] = {"messages": _joined_chunks(parse_json(attrs["gen_ai.output.messages"]))}
    elif "llm.output_messages" in indexed:
        out["outputs"] = {"messages": _indexed(attrs, "llm.output_messages")}
    elif "gen_ai.completion" in indexed:
        out["outputs"] = {"messages": _indexed(attrs, "gen_ai.completion")}
    elif "gen_ai.completion" in attrs:
        out["outputs"] = _as_dict(attrs["gen_ai.completion"], "output")
    elif event_choices:
        out["outputs"] = {"choices": event_choices}
    elif "output.value" in attrs:
        out["outputs"] = _as_dict(attrs["output.value"], "output")


_TOOL_INPUTS = ("tool.parameters", "input.value", "traceloop.entity.input", "gen_ai.prompt")
_TOOL_OUTPUTS = ("output.value", "traceloop.entity.output", "gen_ai.completion")


def _generic_io(attrs: Mapping[str, Any], out: dict[str, Any]) -> None:
    for key in ("traceloop.entity.input", "input.value", "gen_ai.prompt"):
        if key in attrs and not out["inputs"]:
            out["inputs"] = _as_dict(attrs[key], "input")
    if "gen_ai.input.messages" in attrs and not out["inputs"]:
        out["inputs"] = {"messages": parse_json(attrs["gen_ai.input.messages"])}
    if "pydantic_ai.all_messages" in attrs and not out["inputs"]:
        prompt = _agent_prompt(parse_json(attrs["pydantic_ai.all_messages"]))
        if prompt is not None:  # pydantic-ai's agent run: the prompt, as assay's capture has it
            out["inputs"] = {"input": prompt}
    for key in ("final_result", "traceloop.entity.output", "output.value", "gen_ai.completion"):
        if key in attrs and out["outputs"] is None:
            # OpenLLMetry JSON-encodes every result: a string comes as a JSON string literal
            value = (parse_result if key == "traceloop.entity.output" else parse_json)(
                attrs[key])
            out["outputs"] = value if isinstance(value, dict) and key != "final_result" else {
                "output": value}
    if "gen_ai.output.messages" in attrs and out["outputs"] is None:
        out["outputs"] = {"messages": parse_json(attrs["gen_ai.output.messages"])}


def _agent_prompt(messages: Any) -> Any:
    """The prompt of a pydantic-ai agent run from its conversation (GenAI messages): the first
    user turn's text (its parts, when not one text part); None without one."""
    if not isinstance(messages, list):
        return None
    for msg in messages:
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            parts = msg.get("parts")
            if not isinstance(parts, list):
                return None
            texts = [p.get("content") for p in parts
                     if isinstance(p, Mapping) and p.get("type") == "text"]
            return texts[0] if len(texts) == 1 == len(parts) else parts
    return None


def _logfire_message(span: SpanView, attrs: Mapping[str, Any]) -> Any:
    """Logfire names its spans by their message template (``"answer {q}"``, ``"Chat Completion
    with {request_data[model]!r}"``) and sends the message made from it as ``logfire.msg``,
    which its UI shows: that is the run's name. A span named otherwise (pydantic-ai's ``chat
    gpt-4o``, which sends a ``logfire.msg`` too) keeps its name."""
    template = attrs.get("logfire.msg_template")
    if template is not None and template == span.name:
        return attrs.get("logfire.msg")
    return None


def span_fields(span: SpanView) -> dict[str, Any]:
    """The run fields a finished span maps to: name, run_type, inputs, outputs, error, events,
    tags, metadata, and ``project`` when the span names one."""
    attrs = span.attributes or {}
    run_type = _run_type(attrs)
    prefixed, rest, indexed = _split(attrs)
    name = (attrs.get("langsmith.trace.name") or attrs.get("traceloop.entity.name")
            or _logfire_message(span, attrs) or span.name or "span")
    out: dict[str, Any] = {"name": str(name), "run_type": run_type, "inputs": {},
                           "outputs": None, "metadata": {}, "events": [], "tags": [],
                           "error": _error(span), "project": None}
    meta: dict[str, Any] = out["metadata"]
    if _aisdk.OPERATION in attrs:
        _aisdk.fields(attrs, out)
    elif run_type == "llm":
        _llm_io(attrs, span, out, indexed)
        model = (attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
                 or attrs.get("llm.model_name"))
        provider = (attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
                    or attrs.get("llm.provider") or attrs.get("llm.system"))
        if model:
            meta["ls_model_name"] = str(model)
        if provider:
            meta["ls_provider"] = str(provider).lower()
        usage = _usage(attrs)
        if usage is not None:
            meta["usage_metadata"] = usage
    elif run_type == "tool":
        out["name"] = str(attrs.get("gen_ai.tool.name") or attrs.get("tool.name") or out["name"])
        args = attrs.get("gen_ai.tool.call.arguments", attrs.get("tool_arguments"))
        if args is None:  # ...; LangSmith's OpenTelemetry mode sends gen_ai.prompt/completion
            args = next((attrs[k] for k in _TOOL_INPUTS if k in attrs), None)
        out["inputs"] = _as_dict(args, "input") if args is not None else {}
        result = attrs.get("gen_ai.tool.call.result", attrs.get("tool_response"))
        if result is None:
            result = next((attrs[k] for k in _TOOL_OUTPUTS if k in attrs), None)
        if result is not None and "gen_ai.completion" in attrs and result is attrs[
                "gen_ai.completion"]:
            value = parse_json(result)  # LangSmith's outputs object, as its tracer sent it
            if isinstance(value, dict):
                out["outputs"], result = value, None
        if (args is None or result is None) and span.events:  # the older GenAI events
            event_args, event_result = _tool_events(span)
            if args is None and event_args is not None:
                out["inputs"] = _as_dict(event_args, "input")
            result = result if result is not None else event_result
        if result is not None:
            value = parse_result(result)
            if span.scope == ADK_SCOPE and isinstance(value, dict) and set(value) == {"result"}:
                value = value["result"]  # ADK's wrapping of a tool's plain return value
            out["outputs"] = {"output": _plain_text(value)}
        if attrs.get("gen_ai.tool.call.id"):
            meta["tool_call_id"] = attrs["gen_ai.tool.call.id"]
    else:
        _generic_io(attrs, out)
        if span.events and (not out["inputs"] or out["outputs"] is None):
            event_in, event_choices = _event_messages(span)  # an agent's, as Strands sends
            if not out["inputs"] and event_in:
                out["inputs"] = {"messages": event_in}
            if out["outputs"] is None and event_choices:
                out["outputs"] = {"choices": event_choices}
    first = next((e.time_ns for e in span.events if e.name in _FIRST_TOKEN_EVENTS),
                 None) if span.events else None
    if first is None and run_type == "llm":
        first = _first_after(span, attrs)
    if first is not None:
        out["events"].append({"name": "new_token", "time": _iso(first)})
    op = attrs.get("gen_ai.operation.name")
    if op:
        meta["gen_ai.operation.name"] = op
    if prefixed:
        meta.update(prefixed)
    if "metadata" in attrs:  # OpenInference
        extra = parse_json(attrs["metadata"])
        if isinstance(extra, dict):
            meta.update(extra)
    for attr, key in _CONVERSATION:  # the conversation the span is a turn of: its thread
        value = attrs.get(attr)
        if value is not None and value != "" and not any(k in meta for k in THREAD_KEYS):
            meta[key] = str(value)
    tags = parse_json(attrs.get("langsmith.span.tags", attrs.get("tag.tags")))
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    if isinstance(tags, (list, tuple)):
        out["tags"] = [str(t) for t in tags]
    project = attrs.get("langsmith.trace.session_name")
    if isinstance(project, str) and project:
        out["project"] = project
    meta["otel_trace_id"] = span.trace_id
    meta["otel_span_id"] = span.span_id
    if span.scope:
        meta["otel_scope"] = span.scope
    if rest:
        meta["otel_attributes"] = rest
    return out
