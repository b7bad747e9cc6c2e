"""Structured verdicts: schema out, tolerant parse back, a bounded re-ask on bad output."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .._sync import run_sync
from ..errors import InvalidInputError, JudgeError
from ._parse import describe_validation_error, extract_json_object, snippet, strict_json_schema
from ._types import JudgeModel, Message, OutputSchema

__all__ = ["agenerate_structured", "generate_structured"]

M = TypeVar("M", bound=BaseModel)


def _schema_for(output_type: type[BaseModel]) -> OutputSchema:
    custom = getattr(output_type, "judge_json_schema", None)
    schema = custom() if callable(custom) else strict_json_schema(output_type)
    return OutputSchema(name=output_type.__name__, schema=schema)


async def agenerate_structured(
    judge: JudgeModel,
    messages: Sequence[Message],
    output_type: type[M],
    *,
    max_output_retries: int | None = None,
) -> M:
    """Ask ``judge`` for an ``output_type``; re-ask (bounded) when the reply is unusable.

    Each re-ask shows the model its previous reply and what was wrong with it. After the last
    attempt a ``JudgeError`` names the judge, the number of attempts and the last problem.
    """
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        raise InvalidInputError(f"output_type must be a pydantic model class, got {output_type!r}")
    if max_output_retries is None:
        options = getattr(judge, "options", None)
        max_output_retries = getattr(options, "max_output_retries", 2)
    if max_output_retries < 0:
        raise InvalidInputError("max_output_retries must be >= 0")
    schema = _schema_for(output_type)
    convo = list(messages)
    problem = ""
    attempts = max_output_retries + 1
    for _ in range(attempts):
        completion = await judge.acomplete(convo, output_schema=schema)
        try:
            data: Any = extract_json_object(completion.text)
            return output_type.model_validate(data)
        except ValidationError as exc:
            problem = f"the verdict is invalid: {describe_validation_error(exc)}"
        except ValueError as exc:
            problem = f"the reply is not valid JSON: {exc}"
        convo = convo + [
            {"role": "assistant", "content": completion.text or "(empty reply)"},
            {"role": "user", "content": (
                f"Your reply could not be used because {problem}. Reply again with only a JSON "
                f"object that follows this schema, no other text: {json.dumps(schema.schema)}")},
        ]
    err = JudgeError(
        f"judge {getattr(judge, 'name', judge)!r} gave no usable {output_type.__name__} after "
        f"{attempts} attempt{'s' if attempts != 1 else ''}: {problem}")
    err.attempts = attempts
    err.last_output = snippet(completion.text or "", 500)
    raise err


def generate_structured(judge: JudgeModel, messages: Sequence[Message], output_type: type[M],
                        *, max_output_retries: int | None = None) -> M:
    """Sync wrapper of ``agenerate_structured``."""
    return run_sync(agenerate_structured(judge, messages, output_type,
                                         max_output_retries=max_output_retries))
