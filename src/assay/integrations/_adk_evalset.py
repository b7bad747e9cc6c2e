"""Google ADK eval sets as assay datasets: the ``.evalset.json`` files ``adk eval`` and ADK's web
UI write (and the older ``.test.json`` lists), read with ADK's own models.

Each eval case becomes one example: the user's message as ``inputs["question"]`` (a case of
several turns: the conversation as ``inputs["messages"]``, the earlier answers in it), the last
turn's final response as ``outputs["answer"]`` and its tool calls as
``outputs["expected_tool_calls"]`` (what ``ReliabilityEvaluator(None)`` judges), its initial
session state as ``inputs["session_state"]`` (where assay's ADK adapter starts the session
with it), the case's id and rubrics in the example's metadata. A case with no fixed conversation
(a user-simulator scenario) cannot be an example and is refused, naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._json import jsonable
from ..errors import ExampleValidationError, InvalidInputError, require
from ._google_adk import _content_text as _text  # (an ADK Content's text)

__all__ = ["read_eval_set"]


def _calls(calls: Any) -> list[dict[str, Any]]:
    return [{"name": c.name, "args": jsonable(c.args or {})} for c in calls]


def _case(case: Any, index: int, path: Path) -> dict[str, Any]:
    from google.adk.evaluation.eval_case import get_all_tool_calls

    turns = case.conversation
    if not turns:
        raise ExampleValidationError(index, f"{path}: eval case {case.eval_id!r} has no fixed "
                                     "conversation (a conversation scenario is played by a "
                                     "simulated user): it cannot be a dataset example")
    last = turns[-1]
    if len(turns) == 1:
        inputs: dict[str, Any] = {"question": _text(last.user_content)}
    else:
        messages: list[dict[str, str]] = []
        for turn in turns[:-1]:
            messages.append({"role": "user", "content": _text(turn.user_content)})
            if turn.final_response is not None:
                messages.append({"role": "assistant", "content": _text(turn.final_response)})
        messages.append({"role": "user", "content": _text(last.user_content)})
        inputs = {"messages": messages}
    outputs: dict[str, Any] = {
        "expected_tool_calls": _calls(get_all_tool_calls(last.intermediate_data))}
    if last.final_response is not None:
        outputs["answer"] = _text(last.final_response)
    metadata: dict[str, Any] = {"adk_eval_id": case.eval_id}
    session = case.session_input
    if session is not None and session.state:  # (the ADK adapter starts its session with it)
        inputs["session_state"] = jsonable(session.state)
    rubrics = case.rubrics or last.rubrics
    if rubrics:
        metadata["adk_rubrics"] = [r.model_dump(mode="json", exclude_none=True)
                                   for r in rubrics]
    return {"inputs": inputs, "outputs": outputs, "metadata": metadata}


def _legacy(items: list[Any], path: Path) -> list[dict[str, Any]]:
    """The older format: a list of ``{"query", "expected_tool_use", "reference"}``."""
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            raise ExampleValidationError(i, f"{path}: item {i} has no 'query' string")
        calls = item.get("expected_tool_use") or []
        if not isinstance(calls, list) or not all(
                isinstance(c, dict) and isinstance(c.get("tool_name"), str) for c in calls):
            raise ExampleValidationError(
                i, f"{path}: item {i}'s 'expected_tool_use' must be a list of "
                "{'tool_name', 'tool_input'}")
        outputs: dict[str, Any] = {"expected_tool_calls": [
            {"name": c["tool_name"], "args": c.get("tool_input") or {}} for c in calls]}
        if item.get("reference") is not None:
            outputs["answer"] = item["reference"]
        out.append({"inputs": {"question": item["query"]}, "outputs": outputs})
    return out


def read_eval_set(path: str | Path) -> list[dict[str, Any]]:
    """The examples of an ADK eval set file (see the module docstring); a file that is not one
    is refused, naming it and what is wrong."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"dataset file {path} does not exist") from None
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not JSON: {exc}") from None
    if isinstance(raw, list):
        return _legacy(raw, path)
    require("google.adk", "google-adk", "reading ADK eval sets")
    from google.adk.evaluation.eval_set import EvalSet
    from pydantic import ValidationError

    try:
        eval_set = EvalSet.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInputError(f"{path}: not an ADK eval set: {exc}") from None
    return [_case(case, i, path) for i, case in enumerate(eval_set.eval_cases)]
