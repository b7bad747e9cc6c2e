"""Agent frameworks as they are: pydantic-ai, Upsonic, LangGraph/LangChain, OpenAI Agents SDK,
CrewAI, Google ADK.

The evaluators and ``evaluate()`` take a framework's agent object directly (``adapter_for``),
and each framework's own hooks turn its LLM and tool calls into assay runs under the current
run, with nothing for the user to decorate; outside any assay run, where tracing is on
(``ASSAY_TRACING=true``, ``tracing_context(enabled=True)``), each framework call is a trace of
its own (``instrument_frameworks()`` installs the hooks in a service that never starts an
assay run). ``set_framework_tracing(False)`` (or ``ASSAY_FRAMEWORK_TRACING=false``) switches
the recording off.
"""

from typing import Any

from ._registry import (
    INTEGRATIONS,
    AgentAdapter,
    Integration,
    adapter_for,
    chat_messages,
    framework_of,
    framework_parent,
    framework_recording,
    framework_root,
    framework_tracing_enabled,
    instrument,
    instrument_frameworks,
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


def adk_plugin() -> Any:
    """assay's Google ADK plugin, for a Runner of your own (``App(..., plugins=[adk_plugin()])``);
    the agent given to ``evaluate()`` or an evaluator has it already."""
    from ._google_adk import adk_plugin as make

    return make()


__all__ = [
    "INTEGRATIONS",
    "AgentAdapter",
    "Integration",
    "adapter_for",
    "adk_plugin",
    "chat_messages",
    "framework_of",
    "framework_parent",
    "framework_recording",
    "framework_root",
    "framework_tracing_enabled",
    "instrument",
    "instrument_frameworks",
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
