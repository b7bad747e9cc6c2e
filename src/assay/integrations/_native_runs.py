"""What the capture paths that read a framework's own objects share (Upsonic's and pydantic-ai's:
Upsonic's model layer is pydantic-ai's, so their messages, responses and usage have one shape).

The llm runs they make carry what the span path stores from the same frameworks' GenAI spans:
inputs ``{"system": [...], "messages": [...]}`` and outputs ``{"messages": [...]}`` in the
OpenTelemetry GenAI message-part form (the framework's own ``messages_to_otel_messages``, without
the JSON round trip of a span attribute), tokens, provider and model (priced by the store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .._json import jsonable
from ..tracing._run_tree import RunTree
from ._registry import framework_parent

__all__ = ["agent_inputs", "ended_on_error", "finish_agent", "finish_llm", "llm_inputs",
           "parent_in"]


def parent_in(innermost: ContextVar[RunTree | None]) -> RunTree | None:
    """The run a new run hangs from: ``innermost`` (the framework's agent run open in this
    context), else the current assay run (None outside assay, or with the switch off)."""
    run = innermost.get()
    if run is not None and not run.ended:
        return run
    return framework_parent()


def llm_inputs(convert: Callable[[list[Any]], Any], system: str | None,
               messages: list[Any]) -> dict[str, Any]:
    """An llm run's inputs: the request's instructions and its messages as message parts."""
    inputs: dict[str, Any] = {}
    if system:
        inputs["system"] = [{"type": "text", "content": system}]
    inputs["messages"] = jsonable(convert(messages))
    return inputs


def finish_llm(run: RunTree, convert: Callable[[list[Any]], Any], response: Any,
               provider: str, model: str) -> None:
    """Record a model response on its llm run: the answer as message parts, the tokens (cache
    reads and writes itemised, as the store prices them: pydantic-ai's and Upsonic's input
    tokens count them too), the provider and model the store prices it by."""
    (out,) = convert([response])
    run.outputs = {"messages": [jsonable(out)]}
    usage = response.usage
    details = {key: n for key, n in (
        ("cache_read", getattr(usage, "cache_read_tokens", 0)),
        ("cache_creation", getattr(usage, "cache_write_tokens", 0)),
        ("ephemeral_1h_input_tokens", getattr(usage, "cache_write_1h_tokens", 0))) if n}
    run.set_usage(int(usage.input_tokens or 0), int(usage.output_tokens or 0),
                  provider=provider.lower(), model=model, input_token_details=details or None)


@contextmanager
def ended_on_error(run: RunTree) -> Iterator[RunTree]:
    """Where a framework's step runs: an exception ends ``run`` with it, stored (``patch``),
    and goes on to the framework."""
    try:
        yield run
    except BaseException as exc:
        run.end(error=exc)
        run.patch()
        raise


def agent_inputs(prompt: Any) -> dict[str, Any]:
    """An agent run's inputs: the prompt it was run with (none: the run continues a
    conversation given as its message history)."""
    return {} if prompt is None else {"input": jsonable(prompt)}


def finish_agent(run: RunTree, result: Any) -> None:
    """An agent run's end: its result's ``output`` as its outputs (none without one), stored."""
    output = getattr(result, "output", None)
    run.outputs = {"output": jsonable(output)} if output is not None else None
    run.patch()
