"""Tracing: record every step of an agent as a tree of runs, and store it.

    @traceable                      a function call (sync, async, generator) as a run
    trace(...)                      a block as a run (``with`` / ``async with``)
    tracing_context(...)            scoped switches: enabled, client, project, metadata, tags
    get_current_run_tree()          the run the caller is in
    wrap_openai / wrap_anthropic    llm runs (usage, model, first token) from the official SDKs
    assay.tracing.otel              OpenTelemetry GenAI spans -> runs (AssaySpanProcessor)
    run_in_thread / ContextThreadPoolExecutor / with_context
                                    carry the current run into worker threads

Tracing is off unless ``ASSAY_TRACING`` is true, a ``tracing_context(enabled=True)`` is open, or
a run was forced on (``trace(..., enabled=True)``, as ``evaluate()`` does). Runs reach the store
through the client's background writer; ``client.flush()`` waits for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._context import (
    ContextThreadPoolExecutor,
    get_current_run_tree,
    get_tracing_context,
    run_in_thread,
    tracing_context,
    tracing_is_enabled,
    with_context,
)
from ._run_tree import RunTree
from ._traceable import trace, traceable

if TYPE_CHECKING:
    from ._wrappers_anthropic import wrap_anthropic
    from ._wrappers_openai import wrap_openai
    from .otel import AssaySpanProcessor

__all__ = [
    "AssaySpanProcessor",
    "ContextThreadPoolExecutor",
    "RunTree",
    "get_current_run_tree",
    "get_tracing_context",
    "run_in_thread",
    "trace",
    "traceable",
    "tracing_context",
    "tracing_is_enabled",
    "with_context",
    "wrap_anthropic",
    "wrap_openai",
]

_LAZY = {"wrap_openai": "._wrappers_openai", "wrap_anthropic": "._wrappers_anthropic",
         "AssaySpanProcessor": ".otel"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'assay.tracing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
