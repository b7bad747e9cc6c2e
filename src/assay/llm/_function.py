"""A judge backed by a plain Python function: deterministic rubrics, local models, adapters.

The function receives the chat messages (and the output schema, if it accepts a second
argument) and returns the reply: a string, a dict or pydantic model (sent as JSON), or a
``Completion`` with token counts.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidInputError
from ._base import BaseJudge
from ._types import Completion, JudgeOptions, Message, OutputSchema

__all__ = ["FunctionJudge"]


def _takes_two(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


class FunctionJudge(BaseJudge):
    provider = "function"

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 options: JudgeOptions | None = None) -> None:
        if not callable(fn):
            raise InvalidInputError(f"FunctionJudge needs a callable, got {fn!r}")
        super().__init__(name or getattr(fn, "__qualname__", None) or type(fn).__name__,
                         options=options)
        self.fn = fn
        self._two = _takes_two(fn)

    async def _send(self, messages: list[Message], output_schema: OutputSchema | None
                    ) -> Completion:
        reply = self.fn(messages, output_schema) if self._two else self.fn(messages)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, BaseModel):
            reply = reply.model_dump_json()
        elif isinstance(reply, (dict, list)):
            reply = json.dumps(reply)
        elif not isinstance(reply, str):
            raise InvalidInputError(
                f"judge function {self.model} must return str, dict, a pydantic model or a "
                f"Completion, got {type(reply).__name__}")
        return Completion(text=reply, model=self.model)
