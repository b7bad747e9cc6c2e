"""Agent frameworks as they are: pydantic-ai, Upsonic, LangGraph/LangChain, OpenAI Agents SDK,
CrewAI.

The evaluators and ``evaluate()`` take a framework's agent object directly (``adapter_for``),
and each framework's own hooks turn its LLM and tool calls into assay runs under the current
run, with nothing for the user to decorate. ``set_framework_tracing(False)`` (or
``ASSAY_FRAMEWORK_TRACING=false``) switches the recording off.
"""

from ._registry import (
    INTEGRATIONS,
    AgentAdapter,
    Integration,
    adapter_for,
    chat_messages,
    framework_of,
    framework_parent,
    framework_tracing_enabled,
    instrument,
    instrument_loaded,
    is_adapter,
    query_text,
    register,
    require_adapter,
    set_framework_tracing,
    supported_kinds,
    tool_calls_from,
    with_run_args,
)

__all__ = [
    "INTEGRATIONS",
    "AgentAdapter",
    "Integration",
    "adapter_for",
    "chat_messages",
    "framework_of",
    "framework_parent",
    "framework_tracing_enabled",
    "instrument",
    "instrument_loaded",
    "is_adapter",
    "query_text",
    "register",
    "require_adapter",
    "set_framework_tracing",
    "supported_kinds",
    "tool_calls_from",
    "with_run_args",
]
