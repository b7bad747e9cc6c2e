"""The shared half of every judge: message checks, retries, and one llm run per call.

A provider subclass only turns messages into one HTTP request (``_send``) and says which of its
exceptions are worth retrying (``_classify``); everything a user relies on — the retry policy,
the ``JudgeError`` wording, the trace with tokens and cost — lives here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import InvalidInputError
from ._retry import Failure, call_with_retries
from ._types import Completion, JudgeOptions, Message, OutputSchema

__all__ = ["BaseJudge", "PerLoop", "check_messages", "llm_run"]

_ROLES = ("system", "user", "assistant")


def check_messages(messages: Sequence[Message]) -> list[Message]:
    """Copy ``messages`` after checking each is ``{"role": ..., "content": str}``."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise InvalidInputError("messages must be a non-empty list of {'role', 'content'} dicts")
    out: list[Message] = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        if role not in _ROLES:
            raise InvalidInputError(f"messages[{i}].role must be one of {_ROLES}, got {role!r}")
        if not isinstance(content, str):
            raise InvalidInputError(f"messages[{i}].content must be a string, got {content!r}")
        out.append({"role": role, "content": content})
    return out


class PerLoop:
    """One SDK client per event loop.

    An async HTTP client's pooled connections belong to the loop that opened them; a judge used
    from several ``asyncio.run`` calls (each sync wrapper starts one) must not reuse them.
    """

    def __init__(self, make: Callable[[bool], Any]) -> None:
        self._make = make
        self._by_loop: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._made = 0
        self._lock = threading.Lock()

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._by_loop.get(loop)
            if client is None:
                client = self._make(self._made == 0)
                self._made += 1
                self._by_loop[loop] = client
        return client


class _NoRun:
    """Stands in for a run when tracing is off or not installed."""

    def set_usage(self, **_: Any) -> None:
        pass

    def end(self, **_: Any) -> None:
        pass


@contextlib.contextmanager
def llm_run(name: str, *, inputs: dict[str, Any], metadata: dict[str, Any],
            enabled: bool = True) -> Iterator[Any]:
    """``assay.tracing.trace(..., run_type="llm")``, or a no-op when tracing is unavailable."""
    trace: Any = None
    if enabled:
        try:
            from ..tracing import trace
        except ImportError:
            trace = None
    if trace is None:
        yield _NoRun()
        return
    with trace(name, run_type="llm", inputs=inputs, metadata=metadata) as run:
        yield run


class BaseJudge:
    """A judge over one provider endpoint. Subclasses implement ``_send`` and ``_classify``."""

    provider: str = "unknown"

    def __init__(self, model: str, *, options: JudgeOptions | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInputError(f"judge model name must be a non-empty string, got {model!r}")
        self.model = model
        self.options = options or JudgeOptions()

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def _send(self, messages: list[Message], output_schema: OutputSchema | None
                    ) -> Completion:
        raise NotImplementedError

    def _classify(self, exc: BaseException) -> Failure | None:
        return None

    def _trace_metadata(self) -> dict[str, Any]:
        return {"ls_provider": self.provider, "ls_model_name": self.model}

    async def acomplete(self, messages: Sequence[Message], *,
                        output_schema: OutputSchema | None = None) -> Completion:
        """One completion, retried on transient failures, recorded as an llm run."""
        msgs = check_messages(messages)
        inputs: dict[str, Any] = {"messages": msgs, "model": self.model}
        if output_schema is not None:
            inputs["output_schema"] = output_schema.name
        with llm_run(self.name, inputs=inputs, metadata=self._trace_metadata(),
                     enabled=self.options.trace) as run:
            completion = await call_with_retries(
                lambda: self._send(msgs, output_schema), classify=self._classify,
                options=self.options, judge_name=self.name)
            if completion.input_tokens is not None or completion.output_tokens is not None:
                run.set_usage(input_tokens=completion.input_tokens or 0,
                              output_tokens=completion.output_tokens or 0)
            run.end(outputs={
                "choices": [{"message": {"role": "assistant", "content": completion.text},
                             "finish_reason": completion.finish_reason}],
                "model": completion.model,
            })
        return completion
