"""One adapter for every kind of agent under test.

Agents of a framework assay knows (pydantic-ai, Upsonic, LangGraph, OpenAI Agents SDK, CrewAI:
``assay.integrations``) are run through that framework's adapter, which also instruments the
framework so its LLM and tool calls are traced. Otherwise: plain sync or async callables taking
the query, and objects with ``ainvoke``/``invoke`` (LangChain runnables), ``do_async``/``do``
or ``run`` (many others). Async entry points are preferred when an object has
both, so the evaluators' async core never blocks on a sync one it could avoid.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from .._sync import run_sync
from ..errors import InvalidInputError
from ..integrations._registry import AgentAdapter, adapter_for, instrument_loaded, supported_kinds

__all__ = ["AgentUnderTest", "output_text"]

_ASYNC_METHODS = ("ainvoke", "do_async", "arun")
_SYNC_METHODS = ("invoke", "do", "run_sync")


def _is_async_callable(fn: Any) -> bool:
    # an instance whose class defines ``async def __call__`` is an async callable too
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(type(fn), "__call__", None))  # noqa: B004 - not a callable() check


def _takes_input(fn: Any) -> bool:
    """False for a zero-argument callable (``lambda: work()``), which is called without the
    query; True when it accepts one positional argument or its signature cannot be read."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
               for p in params)


class AgentUnderTest:
    """Wraps ``target`` once so callers just ``call(query)`` or ``await acall(query)``.

    ``input_mapper`` turns the query into what the target takes (e.g. an Upsonic ``Task`` or
    LangGraph's ``{"messages": [...]}``); ``output_mapper`` turns its return value into the
    text to judge (by default ``output_text``).
    """

    target: Any
    input_mapper: Callable[[Any], Any] | None
    output_mapper: Callable[[Any], str] | None

    def __init__(self, target: Any, *, input_mapper: Callable[[Any], Any] | None = None,
                 output_mapper: Callable[[Any], str] | None = None) -> None:
        if isinstance(target, AgentUnderTest):
            input_mapper = input_mapper or target.input_mapper
            output_mapper = output_mapper or target.output_mapper
            target = target.target
        self.target = target
        self.input_mapper = input_mapper
        self.output_mapper = output_mapper
        instrument_loaded(adopt=True)  # and agents built since their framework was instrumented
        self.adapter: AgentAdapter | None = adapter_for(target)
        if self.adapter is not None:
            self.fn, self.is_async = self.adapter.arun, True
            self.description = f"{self.adapter.framework}:{self.adapter.name}"
            self.takes_input = True
        else:
            self.fn, self.is_async, self.description = self._resolve(target)
            self.takes_input = _takes_input(self.fn)

    @staticmethod
    def _resolve(target: Any) -> tuple[Callable[..., Any], bool, str]:
        kind = type(target).__name__
        plain = inspect.isfunction(target) or inspect.ismethod(target) or inspect.isbuiltin(
            target) or isinstance(target, functools.partial)
        if not plain:
            for name in (*_ASYNC_METHODS, "run"):
                method = getattr(target, name, None)
                if callable(method) and _is_async_callable(method):
                    return method, True, f"{kind}.{name}"
            for name in (*_SYNC_METHODS, "run"):
                method = getattr(target, name, None)
                if callable(method):
                    return method, False, f"{kind}.{name}"
        if callable(target):
            label = getattr(target, "__qualname__", None) or kind
            return target, _is_async_callable(target), label
        cls = type(target)
        raise InvalidInputError(
            "agent_under_test must be a callable taking the query, an object with "
            f"invoke/ainvoke/run/do/do_async, or {supported_kinds()}; got a "
            f"{cls.__module__}.{cls.__qualname__}")

    def __repr__(self) -> str:
        return f"AgentUnderTest({self.description}, async={self.is_async})"

    def prepare(self, query: Any) -> tuple[Any, ...]:
        """The positional arguments of one call: ``(mapped query,)``, or ``()`` for a
        zero-argument agent."""
        if not self.takes_input:
            return ()
        return (self.input_mapper(query) if self.input_mapper is not None else query,)

    def text(self, result: Any) -> str:
        if self.output_mapper is not None:
            return self.output_mapper(result)
        if self.adapter is not None:
            return self.adapter.output_text(result)
        return output_text(result)

    def tool_calls(self, result: Any) -> Any:
        """The tool calls from the framework's own result (None: not a framework agent)."""
        return None if self.adapter is None else self.adapter.tool_calls(result)

    async def acall(self, query: Any, *, offload_sync: bool = False) -> Any:
        """Run the agent on ``query``; a sync agent runs in a worker thread if ``offload_sync``
        (so it does not block other coroutines), otherwise inline."""
        instrument_loaded()  # a framework imported since construction is traced too
        args = self.prepare(query)
        if self.is_async or not offload_sync:
            result = self.fn(*args)
        else:
            result = await asyncio.to_thread(self.fn, *args)
        while inspect.isawaitable(result):
            result = await result
        return result

    def call(self, query: Any) -> Any:
        """Run the agent on ``query`` from sync code."""
        instrument_loaded()
        if self.is_async:
            return run_sync(self.acall(query))
        result = self.fn(*self.prepare(query))
        if inspect.isawaitable(result):
            async def _await() -> Any:
                return await result

            return run_sync(_await())
        return result


_TEXT_KEYS = ("output", "answer", "result", "response", "content", "text", "final_output")


def output_text(result: Any) -> str:
    """The text an agent produced: strings as is, ``.output``/``.content`` of result objects,
    the last message of a ``{"messages": [...]}`` state, common keys of a dict, else JSON."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, bytes):
        return result.decode("utf-8", errors="replace")
    for attr in ("output", "content", "final_output"):
        if not isinstance(result, (Mapping, BaseModel)) or attr in getattr(
                type(result), "model_fields", {}):
            value = getattr(result, attr, None)
            if isinstance(value, (str, BaseModel, Mapping)) and value is not result:
                return output_text(value)
    if isinstance(result, Mapping):
        messages = result.get("messages")
        if isinstance(messages, list) and messages:
            return output_text(messages[-1])
        for key in _TEXT_KEYS:
            if key in result and result[key] is not None:
                return output_text(result[key])
        return json.dumps(result, default=str, ensure_ascii=False)
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    if isinstance(result, (list, tuple)):
        return json.dumps(result, default=str, ensure_ascii=False)
    return str(result)
