"""OpenAI Agents SDK: an ``Agent`` as an agent under test, its trace spans as assay runs.

Adapter: ``Runner.run(agent, query)``; an evaluate() inputs dict gives its question text, a list
is passed as the SDK's input items. The ``RunResult`` is read back as text (``final_output``),
a JSON-safe outputs dict and its tool calls (``new_items``' function calls, with arguments).

Capture: one ``TracingProcessor`` added with the SDK's ``add_trace_processor`` (its documented
extension point; the SDK's own exporter is left as the user configured it). A trace that starts
while an assay run is current (and framework tracing is on) becomes a chain run under it, and its
spans become runs nested by the SDK's parent ids: generation/response spans -> llm runs (model,
provider, messages, tokens), function spans -> tool runs (arguments, result, error),
agent/handoff/guardrail/custom spans -> chain runs. A trace started with no assay run current
is a root run of its own where tracing is on (``ASSAY_TRACING=true``, ``tracing_context(
enabled=True)``: its name, metadata and ``group_id`` as the thread, its first model call's
input and its last one's answer), and ignored elsewhere: each span costs a dict lookup.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._json import jsonable as _jsonable
from .._prices import known_provider
from .._thread_keys import THREAD_KEYS
from ..errors import require
from ..evals._models import ToolCall
from ..tracing._otel_values import as_dict, parse_json
from ..tracing._run_tree import RunTree, fast_child
from ._registry import (
    chat_messages,
    check_run_args,
    framework_parent,
    framework_root,
    keyword_names,
    once,
    query_text,
    structured_output,
)

__all__ = ["AgentsSDKAdapter", "adapt", "instrument", "processor", "tool_calls"]

# -- the adapter -----------------------------------------------------------------------------------
class AgentsSDKAdapter:
    """An Agents SDK ``Agent`` run with ``Runner.run`` (``run_config``/``max_turns`` passed on)."""

    framework = "openai-agents"

    def __init__(self, agent: Any, **run_kwargs: Any) -> None:
        self.agent = agent
        self.name = getattr(agent, "name", None) or type(agent).__name__
        if run_kwargs:
            from agents import Runner

            takes = keyword_names(Runner.run, skip=("starting_agent", "input"))
            check_run_args(run_kwargs, None if takes is None else (*takes, "stream"),
                           "the Agents SDK's Runner.run")
        self.stream = bool(run_kwargs.pop("stream", False))  # Runner.run_streamed (arun)
        self.run_kwargs = run_kwargs

    def __repr__(self) -> str:
        return f"AgentsSDKAdapter({self.name})"

    def with_run_args(self, **run_args: Any) -> AgentsSDKAdapter:
        """This agent, ``Runner.run`` given ``run_args`` too (``context``, ``max_turns``...)."""
        kept = {**self.run_kwargs, **({"stream": True} if self.stream else {})}
        return AgentsSDKAdapter(self.agent, **{**kept, **run_args})

    @staticmethod
    def prepare(query: Any) -> Any:
        """``Runner.run``'s input: a string or a list of input items as they are; of an inputs
        dict, its chat (``messages``) as input items, the whole conversation, else its prompt
        text (``query_text``)."""
        if isinstance(query, Mapping):
            return chat_messages(query) or query_text(query)
        if isinstance(query, (str, list)):
            return query
        return str(query)

    async def arun(self, query: Any) -> Any:
        """``Runner.run``; with the run argument ``stream=True``, ``Runner.run_streamed`` with its
        events read here, so that each llm run gets its first token (the SDK's spans carry
        none, and no hook of its sees the chunks)."""
        from agents import Runner

        kwargs = self.run_kwargs
        if not self.stream:
            return await Runner.run(self.agent, self.prepare(query), **kwargs)
        result = Runner.run_streamed(self.agent, self.prepare(query), **kwargs)
        trace_id = getattr(getattr(result, "trace", None), "trace_id", None)
        tracker = processor()
        async for event in result.stream_events():
            if trace_id and event.type == "raw_response_event" \
                    and str(getattr(event.data, "type", "")).endswith(".delta"):
                tracker.first_token(trace_id)  # the first text or tool-call chunk of a call
        return result

    def output_text(self, result: Any) -> str:
        final = getattr(result, "final_output", result)
        if final is None:
            return ""
        if isinstance(final, str):
            return final
        return json.dumps(_jsonable(final), ensure_ascii=False)

    def outputs(self, result: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"output": self.output_text(result)}
        final = getattr(result, "final_output", result)
        structured = structured_output(final)  # an agent's output_type
        if structured is not None:
            out["structured_output"] = structured
        last = getattr(result, "last_agent", None)
        if last is not None:
            out["last_agent"] = getattr(last, "name", None)
        calls = tool_calls(result)
        if calls:
            out["tool_calls"] = [c.model_dump(exclude_none=True) for c in calls]
        return out

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        return tool_calls(result)


def adapt(obj: Any) -> AgentsSDKAdapter | None:
    """An Agents SDK ``Agent`` (anything with ``instructions`` and ``tools`` that the SDK's
    ``Runner`` takes), else None."""
    if isinstance(obj, AgentsSDKAdapter):
        return obj
    agents = require("agents", "openai-agents", "OpenAI Agents SDK agents")
    if isinstance(obj, agents.Agent):
        return AgentsSDKAdapter(obj)
    return None


def tool_calls(obj: Any) -> list[ToolCall] | None:
    """The function-tool calls of a ``RunResult`` (or ``RunResultStreaming``), in order."""
    items = getattr(obj, "new_items", None)
    if not isinstance(items, list):
        return None
    calls: list[ToolCall] = []
    for item in items:
        if getattr(item, "type", None) != "tool_call_item":
            continue
        raw = item.raw_item
        get = raw.get if isinstance(raw, Mapping) else lambda k, d=None, r=raw: getattr(r, k, d)
        name = get("name")
        if not name:
            continue
        call_id = get("call_id") or get("id")
        calls.append(ToolCall(name=str(name), args=parse_json(get("arguments")) or {},
                              id=str(call_id) if call_id else None))
    return calls


# -- capture ---------------------------------------------------------------------------------------
def _provider(model: str | None) -> tuple[str, str | None]:
    """("openai", model) unless the model names a provider genai-prices knows:
    ``anthropic/claude-...`` (a ``LitellmModel``'s spans carry that name, as do a gateway's
    such as OpenRouter's; the string ``litellm/anthropic/...`` the same, prefix dropped).
    A served model's organisation (``meta-llama/...`` on vLLM) stays the model's name."""
    if not model:
        return "openai", None
    parts = model.split("/")
    if len(parts) >= 2 and parts[0] in ("litellm", "any-llm"):
        parts = parts[1:]
    if len(parts) >= 2 and parts[1] and known_provider(parts[0]):
        return parts[0], "/".join(parts[1:])
    return "openai", "/".join(parts)


def _usage(run: RunTree, usage: Any, model: str | None) -> None:
    """The call's model and tokens. A provider that reported no usage (a Chat Completions
    stream without ``include_usage``) leaves the SDK's ``Usage(requests=1)``, all zeros:
    that is unknown, not zero tokens (stored as such, the statistics would count 0)."""
    if isinstance(usage, Mapping):
        get = usage.get
    elif usage is not None:
        def get(key: str, default: Any = None) -> Any:
            return getattr(usage, key, default)
    if usage is None or not (get("input_tokens") or get("output_tokens")
                             or get("total_tokens")):
        if model:
            provider, name = _provider(model)
            run.metadata["ls_provider"], run.metadata["ls_model_name"] = provider, name
        return
    provider, name = _provider(model)
    inp, out = get("input_tokens"), get("output_tokens")
    details = _jsonable(get("input_tokens_details")) or {}
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    run.set_usage(int(inp or 0), int(out or 0), get("total_tokens") or None, provider=provider,
                  model=name, input_token_details={"cache_read": cached} if cached else None)


def _fill(run: RunTree, data: Any, span: Any) -> None:
    """The run fields of one finished span, by its span data type."""
    kind = getattr(data, "type", None)
    if kind == "generation":
        run.inputs = {"messages": _jsonable(data.input)} if data.input is not None else {}
        if data.output is not None:
            run.outputs = {"messages": _jsonable(data.output)}
        if data.model_config:
            run.metadata["invocation_params"] = _jsonable(data.model_config)
        _usage(run, data.usage, data.model)
    elif kind == "response":
        response = data.response
        if data.input is not None:
            run.inputs = {"input": _jsonable(data.input)}
        model = getattr(response, "model", None)
        if response is not None:
            run.outputs = {"output": _jsonable(getattr(response, "output", None))}
        if model:
            run.name = str(model)
        _usage(run, getattr(response, "usage", None) or getattr(data, "usage", None), model)
    elif kind == "function":
        run.name = data.name or run.name
        run.inputs = as_dict(data.input, "input") if data.input is not None else {}
        run.outputs = {"output": _jsonable(parse_json(data.output))} \
            if data.output is not None else None
    elif kind == "handoff":
        run.name = f"handoff -> {data.to_agent}"
        run.inputs = {"from_agent": data.from_agent}
        run.outputs = {"to_agent": data.to_agent}
    elif kind == "agent":
        run.metadata.update({k: v for k, v in (("tools", data.tools), ("handoffs", data.handoffs),
                                                ("output_type", data.output_type)) if v})
    elif kind == "guardrail":
        run.outputs = {"triggered": data.triggered}
    elif kind == "custom":
        run.inputs = {"data": _jsonable(data.data)}
    error = getattr(span, "error", None)
    if error:
        message = error.get("message") if isinstance(error, Mapping) else str(error)
        detail = error.get("data") if isinstance(error, Mapping) else None
        run.error = f"{message}: {json.dumps(_jsonable(detail))}" if detail else str(message)


_RUN_TYPES = {"generation": "llm", "response": "llm", "function": "tool"}
_MAX_OPEN = 100_000  # open spans remembered; past it the oldest half is dropped


def _span_name(data: Any) -> str:
    kind = getattr(data, "type", "span")
    if kind == "handoff":
        return f"handoff -> {data.to_agent}"
    if kind in ("generation", "response"):
        return str(getattr(data, "model", None) or kind)
    return str(getattr(data, "name", None) or kind)


def _trace_metadata(trace: Any) -> dict[str, Any] | None:
    """A root run's metadata from the SDK trace's: its ``metadata``, and its ``group_id`` (the
    SDK's "conversation or thread" id) as ``thread_id`` unless the metadata names a thread."""
    metadata = dict(getattr(trace, "metadata", None) or {})
    group = getattr(trace, "group_id", None)
    if group and not any(key in metadata for key in THREAD_KEYS):
        metadata["thread_id"] = str(group)
    return metadata or None


def _make_processor() -> Any:
    require("agents.tracing", "openai-agents", "OpenAI Agents SDK tracing")
    from agents.tracing import TracingProcessor

    class AssayTracingProcessor(TracingProcessor):
        """Agents SDK traces and spans -> assay runs (see the module docstring)."""

        def __init__(self) -> None:
            self._runs: dict[str, RunTree] = {}  # span id -> its run
            self._traces: dict[str, RunTree] = {}  # trace id -> the assay run it started under
            self._unstreamed: dict[str, RunTree] = {}  # trace id -> its open llm run, until a
            # streamed run's first chunk (first_token)
            self._roots: dict[str, RunTree] = {}  # trace id -> the root run it made (outside
            # any assay run, tracing on)
            self._lock = threading.Lock()

        def on_trace_start(self, trace: Any) -> None:
            # under an assay run, no run of its own: the SDK opens a task span ("Agent
            # workflow") for the whole run, which becomes the top run; the trace only remembers
            # where it belongs. Outside any, where tracing is on, the trace is a root run
            parent = framework_parent()
            if parent is None:
                spec = framework_root()
                if spec is None:
                    return
                parent = self._roots[trace.trace_id] = spec.new_run(
                    trace.name or "Agent workflow", "chain", {}, metadata=_trace_metadata(trace))
            self._traces[trace.trace_id] = parent

        def on_trace_end(self, trace: Any) -> None:
            self._traces.pop(trace.trace_id, None)
            self._unstreamed.pop(trace.trace_id, None)
            root = self._roots.pop(trace.trace_id, None)
            if root is not None:
                root.end()
                root.patch()

        def on_span_start(self, span: Any) -> None:
            runs = self._runs
            parent = runs.get(span.parent_id) if span.parent_id else None
            if parent is None:
                parent = self._traces.get(span.trace_id) or framework_parent()
                if parent is None:
                    return
            data = span.span_data
            if not span.parent_id and data.type == "task" and self._roots.get(
                    span.trace_id) is parent and parent.name == _span_name(data):
                # the SDK's run of a trace of its own making ("Agent workflow" in "Agent
                # workflow"): the root stands for it (ended with the trace, not here)
                runs[span.span_id] = parent
                return
            kind = _RUN_TYPES.get(data.type, "chain")
            run = fast_child(parent, _span_name(data), kind, {})
            if kind == "llm":
                self._unstreamed[span.trace_id] = run
            if len(runs) >= _MAX_OPEN:  # spans whose end never came (cancelled runs)
                for key in list(runs)[: len(runs) // 2]:
                    runs.pop(key, None)
            runs[span.span_id] = run

        def on_span_end(self, span: Any) -> None:
            run = self._runs.pop(span.span_id, None)
            roots = self._roots
            root = roots.get(span.trace_id) if roots else None  # (a trace of its own's)
            if run is None or run is root:
                return
            if self._unstreamed.get(span.trace_id) is run:
                self._unstreamed.pop(span.trace_id, None)
            try:
                _fill(run, span.span_data, span)
            except Exception as exc:  # noqa: BLE001 - an SDK version we misread: keep the run
                run.metadata["assay_capture_error"] = repr(exc)
            run.end()
            run.patch()
            if root is not None and run.run_type == "llm":  # the trace's conversation: its
                if not root.inputs:  # first model call's input, its last one's answer
                    root.inputs = run.inputs
                root.outputs = run.outputs

        def step_run(self) -> RunTree | None:
            """The run of the SDK span current in this context (a function tool's, an
            agent's), or None: what a run started by a tool's code nests under
            (``tracing._context.STEP_RUNS``)."""
            runs = self._runs
            if not runs:  # (no span open anywhere: the usual case, no SDK call)
                return None
            span = _current_span()
            return runs.get(span.span_id) if span is not None else None

        def first_token(self, trace_id: str) -> None:
            """A chunk of a streamed run of ``trace_id``: its open llm run's first token, if
            it has none yet."""
            run = self._unstreamed.pop(trace_id, None)
            if run is not None:
                run._mark_first_token()

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    return AssayTracingProcessor()


# the process's one assay tracing processor (made on first use)
processor: Callable[[], Any] = once(_make_processor)


_installed = False


def instrument() -> None:
    """Add assay's processor to the SDK's trace provider (once per process)."""
    global _installed
    if _installed:
        return
    require("agents", "openai-agents", "OpenAI Agents SDK tracing")
    from agents import add_trace_processor
    from agents.tracing import get_current_span

    from ..tracing._context import add_step_lookup

    global _current_span
    var = _span_variable()  # (the lookup's gate, and what get_current_span reads in the end)
    _current_span = var.get if var is not None else get_current_span
    capture = processor()
    add_trace_processor(capture)
    add_step_lookup(capture.step_run, var)  # a tool's code's runs nest under it
    _installed = True


_current_span: Callable[[], Any] = lambda: None  # noqa: E731 - the SDK's, once installed


def _span_variable() -> Any:
    """The context variable the SDK keeps its current span in (a private name: None, and the
    lookup is asked at every run started, if a version has it elsewhere)."""
    import contextvars

    try:
        from agents.tracing import scope
    except ImportError:  # pragma: no cover - another layout
        return None
    var = getattr(scope, "_current_span", None)
    return var if isinstance(var, contextvars.ContextVar) else None
