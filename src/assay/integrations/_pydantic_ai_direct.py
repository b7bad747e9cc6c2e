"""pydantic-ai agents that assay runs, traced with no capability at all.

Any run-level capability costs a pydantic-ai agent ~5% of its CPU before it does anything (each
run composes and sorts its capability tree again; every hook of every step copies the
``RunContext`` for each capability, whether it overrides the hook or not): callgrind, the bench's
agent, 10 answers, agent thread: 467.9M instructions without one, 490.7M with one that overrides
no hook. ``AssayCapture`` (``_pydantic_ai_native``) paid that before its own work. Here the
adapter makes the agent run itself and hands the run what pydantic-ai lets a caller swap without
a capability: the model (``run(model=...)``, a ``WrapperModel`` whose requests are the llm runs:
466.7M with the tools below, the explicit model saving a little) and the tools
(``override(tools=...)``: copies of the agent's own tools whose function call is the tool run,
so the run still has one function toolset; its other toolsets, if any, each in a
``WrapperToolset``, in their order). Wrapping the function toolset instead would make two
toolsets of one, and pydantic-ai gathers over two in a task group at each step (+5%).

pydantic-ai's instrumentation stays off for that agent's run: assay's global default answers
False to it (``UnderAssayRuns``, through ``running``). The runs have the capability path's names,
nesting and fields; a tool run is the current assay run while its tool runs, so what the tool
traces (a delegate agent, a ``@traceable`` function) nests under it.

An agent this cannot reproduce exactly (an override in force, a model given as a name or
supplied by a capability, a function toolset of its own making, a subclass of ``Agent``) keeps
the capability path.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from copy import copy
from typing import Any

from ..tracing._context import _RUN
from ..tracing._run_tree import _now_us, fast_child
from ._native_runs import agent_inputs, ended_on_error, finish_agent, parent_in
from ._pydantic_ai import running
from ._pydantic_ai_native import _OPEN, end_llm_run, end_tool_run, llm_run, tool_run
from ._registry import once

__all__ = ["Direct", "direct_for"]


def _make() -> tuple[Any, ...] | None:
    """(AssayModel, AssayToolset, wrap_tool, pydantic-ai's Agent); None for a pydantic-ai
    without them."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse
        from pydantic_ai.models.wrapper import WrapperModel
        from pydantic_ai.toolsets.wrapper import WrapperToolset
    except ImportError:  # pragma: no cover - a pydantic-ai without them
        return None
    class AssayModel(WrapperModel):
        """The agent's model: each request it serves under assay's agent run is an llm run."""

        async def request(self, messages: Any, model_settings: Any,
                          model_request_parameters: Any) -> Any:
            wrapped = self.wrapped
            parent = parent_in(_OPEN)
            if parent is None:
                return await wrapped.request(messages, model_settings, model_request_parameters)
            run = llm_run(parent, wrapped, messages, model_request_parameters)
            with ended_on_error(run):
                response = await wrapped.request(messages, model_settings,
                                                 model_request_parameters)
            end_llm_run(run, wrapped, response)
            return response

        @asynccontextmanager
        async def request_stream(self, messages: Any, model_settings: Any,
                                 model_request_parameters: Any,
                                 run_context: Any = None) -> AsyncIterator[Any]:
            wrapped = self.wrapped
            parent = parent_in(_OPEN)
            if parent is None:
                async with wrapped.request_stream(messages, model_settings,
                                                  model_request_parameters, run_context) as s:
                    yield s
                return
            run = llm_run(parent, wrapped, messages, model_request_parameters)
            start = time.perf_counter()
            with ended_on_error(run):
                async with wrapped.request_stream(messages, model_settings,
                                                  model_request_parameters, run_context) as s:
                    yield s
            first = s.time_to_first_chunk(start) if hasattr(s, "time_to_first_chunk") else None
            if first is not None:  # (pydantic-ai's own stamp of the first chunk pulled)
                run._mark_first_token(_now_us() - int((time.perf_counter() - start - first)
                                                      * 1_000_000))
            end_llm_run(run, wrapped, s.get())

    def call_args(ctx: Any, tool_args: Any) -> Any:
        """The call's arguments as the model sent them (the capability path's), not as
        validated: from the tool call part in the run's last response."""
        call_id = ctx.tool_call_id
        if call_id:
            for message in reversed(ctx.messages):
                if isinstance(message, ModelResponse):
                    for part in message.parts:
                        if part.part_kind == "tool-call" and part.tool_call_id == call_id:
                            return part.args_as_dict()
                    break
        return dict(tool_args)

    async def traced(name: str, tool_args: Any, ctx: Any, call: Any) -> Any:
        """``call()``, a tool's execution, as a tool run under assay's agent run: the current
        assay run while the tool runs (what it traces nests under it)."""
        parent = parent_in(_OPEN)
        if parent is None:
            return await call()
        run = tool_run(parent, name, call_args(ctx, tool_args), ctx.tool_call_id)
        token = _RUN.set(run)
        try:
            with ended_on_error(run):
                result = await call()
        finally:
            _RUN.reset(token)
        end_tool_run(run, result)
        return result

    def wrap_tool(tool: Any) -> Any:
        """A copy of one of the agent's function tools whose calls are tool runs (its function
        schema's ``call``, what the function toolset awaits, wrapped)."""
        schema = copy(tool.function_schema)
        inner = schema.call

        async def call(args: dict[str, Any], ctx: Any) -> Any:
            return await traced(ctx.tool_name, args, ctx, lambda: inner(args, ctx))

        schema.call = call
        wrapped = copy(tool)
        wrapped.function_schema = schema
        return wrapped

    class AssayToolset(WrapperToolset):
        """One of the agent's other toolsets (MCP servers, dynamic ones): each call a tool
        run."""

        async def call_tool(self, name: str, tool_args: Any, ctx: Any, tool: Any) -> Any:
            return await traced(name, tool_args, ctx,
                                lambda: self.wrapped.call_tool(name, tool_args, ctx, tool))

    return AssayModel, AssayToolset, wrap_tool, Agent


_made = once(_make)


class Direct:
    """How the adapter runs one agent with no capability: its model, tools and other toolsets
    wrapped once, made again when the agent's own change. Each cache is one (what was wrapped,
    its wrappers) pair, replaced whole: runs in other threads read one or the other."""

    __slots__ = ("_model", "_tools", "_toolsets", "agent", "classes")

    def __init__(self, agent: Any, classes: tuple[Any, ...]) -> None:
        self.agent, self.classes = agent, classes
        self._model: tuple[Any, Any] = (None, None)  # (the agent's model, its wrapper)
        self._tools: tuple[list[Any], list[Any]] = ([], [])  # its function tools, wrapped
        self._toolsets: tuple[list[Any], list[Any]] = ([], [])  # its other toolsets, wrapped

    def _wrappers(self) -> tuple[Any, list[Any], list[Any]] | None:
        """(the model, the tools, the other toolsets to run with; no toolsets: none to
        override), or None when the agent is not one this path reproduces exactly."""
        agent = self.agent
        model_cls, toolset_cls, wrap_tool, _ = self.classes
        if (agent._override_model.get() is not None or agent._override_tools.get() is not None
                or agent._override_toolsets.get() is not None
                or agent._override_root_capability.get() is not None):
            return None  # the user's override would win over (or drop) what the run is given
        model, models = agent.model, self._model
        if model is not models[0]:
            from pydantic_ai.models import Model
            from pydantic_ai.models.instrumented import InstrumentedModel

            if not isinstance(model, Model) or isinstance(model, InstrumentedModel) \
                    or agent._root_capability._can_supply_model:
                return None
            self._model = models = (model, model_cls(model))
        function_toolset = agent._function_toolset
        tools, wrapped = list(function_toolset.tools.values()), self._tools
        if not _same(tools, wrapped[0]):
            # override(tools=...) builds the run's function toolset afresh: only when that
            # one is the agent's own but for its tools (no instructions, approval, metadata)
            fresh = type(function_toolset)([], max_retries=None, timeout=agent._tool_timeout,
                                           output_schema=agent._output_schema)
            mine = {k: v for k, v in vars(function_toolset).items() if k != "tools"}
            if mine != {k: v for k, v in vars(fresh).items() if k != "tools"}:
                return None
            self._tools = wrapped = (tools, [wrap_tool(t) for t in tools])
        # the agent's other toolsets, in the order its run lists them (_build_toolset_list)
        sources = [*agent._user_toolsets, *agent._dynamic_toolsets, *agent._cap_toolsets]
        toolsets = self._toolsets
        if not _same(sources, toolsets[0]):
            from pydantic_ai.toolsets import AbstractToolset

            if not all(isinstance(s, AbstractToolset) for s in sources):
                return None
            self._toolsets = toolsets = (sources, [toolset_cls(s) for s in sources])
        return models[1], wrapped[1], toolsets[1]

    async def run(self, prompt: Any, parent: Any, fallback: Any,
                  run_args: Mapping[str, Any] | None = None) -> Any:
        """The agent run as an assay run under ``parent``; ``fallback()`` (the capability path)
        for an agent this path does not reproduce. ``run_args``: ``agent.run``'s own (deps,
        model_settings...), neither ``model`` nor ``toolsets``, which this path sets."""
        wrappers = self._wrappers()
        if wrappers is None:
            return await fallback()
        model, tools, toolsets = wrappers
        # (no local bound to the agent here: pydantic-ai names an unnamed agent after the
        # caller's variable holding it, and the capability path's caller has none)
        run = fast_child(parent, f"invoke_agent {self.agent.name or 'agent'}", "chain",
                         agent_inputs(prompt))
        opened, ours = _OPEN.set(run), running.set(self.agent)
        try:
            with ended_on_error(run), (
                    self.agent.override(tools=tools, toolsets=toolsets) if toolsets
                    else self.agent.override(tools=tools)):
                result = await self.agent.run(prompt, **(run_args or {}), model=model)
        finally:
            running.reset(ours)
            _OPEN.reset(opened)
        finish_agent(run, result)
        return result


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def direct_for(agent: Any) -> Direct | None:
    """The no-capability runner for ``agent`` (exactly pydantic-ai's ``Agent``, where the
    private attributes this path reads are known), else None."""
    made = _made()
    if made is None or type(agent) is not made[3]:
        return None
    needed = ("_override_model", "_override_tools", "_override_toolsets",
              "_override_root_capability", "_function_toolset", "_user_toolsets",
              "_dynamic_toolsets", "_cap_toolsets", "_tool_timeout", "_output_schema",
              "_root_capability")
    if not all(hasattr(agent, name) for name in needed):
        return None
    return Direct(agent, made)
