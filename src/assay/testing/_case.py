"""What a marked test records while it runs: its inputs, outputs, reference outputs, feedback.

One ``TestCase`` per call of a test marked ``@pytest.mark.assay`` (or ``langsmith``), current in
a context variable for the test's duration, so ``log_*`` calls and the evaluators' results (see
``assay._hooks``) find it from anywhere in the test, threads started with
``assay.tracing.run_in_thread`` and asyncio tasks included. The functions keep LangSmith's
signatures (``langsmith.testing``), so a suite switches by changing its import.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..tracing import RunTree

__all__ = ["TestCase", "current_case", "log_feedback", "log_inputs", "log_outputs",
           "log_reference_outputs", "trace_feedback"]


@dataclass
class TestCase:
    """One run of one marked test (one parameter set, one repetition)."""

    nodeid: str
    suite: str
    example_id: str
    run: RunTree | None
    inputs: dict[str, Any] = field(default_factory=dict)
    reference_outputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    feedback: list[dict[str, Any]] = field(default_factory=list)
    feedback_run: Any = None  # the run of an open trace_feedback() block

    def add_feedback(self, key: str, score: Any = None, value: Any = None,
                     comment: str | None = None, **extra: Any) -> None:
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"feedback needs a non-empty string key, got {key!r}")
        if isinstance(score, bool):
            score = float(score)
        if score is not None and (not isinstance(score, (int, float)) or not math.isfinite(score)):
            raise InvalidInputError(f"feedback {key!r}: score must be a finite number or bool, "
                                    f"got {score!r}")
        item: dict[str, Any] = {"key": key, "score": score, "value": value, "comment": comment}
        if self.feedback_run is not None:
            item["source_run_id"] = str(self.feedback_run.id)
        item.update({k: v for k, v in extra.items() if v is not None})
        self.feedback.append(item)


_CASE: contextvars.ContextVar[TestCase | None] = contextvars.ContextVar("assay_test_case",
                                                                        default=None)


def current_case(what: str) -> TestCase:
    case = _CASE.get()
    if case is None:
        raise InvalidInputError(
            f"{what}() was called outside a test marked @pytest.mark.assay (or "
            "@pytest.mark.langsmith): mark the test, or remove the call")
    return case


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{what}() takes a dict, got {type(value).__name__}")
    return dict(value)


def log_inputs(inputs: dict[str, Any], /) -> None:
    """Record the test's inputs (they become the example's inputs)."""
    case = current_case("log_inputs")
    case.inputs.update(_as_dict(inputs, "log_inputs"))
    if case.run is not None:
        case.run.inputs = dict(case.inputs)


def log_outputs(outputs: dict[str, Any], /) -> None:
    """Record what the system under test produced (the test run's outputs)."""
    case = current_case("log_outputs")
    case.outputs = {**(case.outputs or {}), **_as_dict(outputs, "log_outputs")}


def log_reference_outputs(reference_outputs: dict[str, Any], /) -> None:
    """Record the expected outputs (they become the example's outputs)."""
    case = current_case("log_reference_outputs")
    given = _as_dict(reference_outputs, "log_reference_outputs")
    case.reference_outputs = {**(case.reference_outputs or {}), **given}


def log_feedback(feedback: dict[str, Any] | list[dict[str, Any]] | None = None, /, *,
                 key: str | None = None, score: float | bool | None = None,
                 value: Any = None, **kwargs: Any) -> None:
    """Record feedback on the test's run: ``log_feedback(key="relevance", score=0.8)`` or
    ``log_feedback({"key": ..., "score": ...})`` / a list of such dicts (as in LangSmith)."""
    case = current_case("log_feedback")
    if feedback is not None and (key is not None or score is not None or value is not None):
        raise InvalidInputError("log_feedback: give a feedback dict or key=/score=/value=, "
                                "not both")
    if feedback is None:
        if not key:
            raise InvalidInputError("log_feedback needs key= (or a feedback dict)")
        case.add_feedback(key, score, value, kwargs.pop("comment", None), **kwargs)
        return
    items = feedback if isinstance(feedback, list) else [feedback]
    for item in items:
        item = _as_dict(item, "log_feedback")
        case.add_feedback(item.pop("key", None), item.pop("score", None), item.pop("value", None),
                          item.pop("comment", None), **item, **kwargs)


@contextlib.contextmanager
def trace_feedback(*, name: str = "Feedback") -> Iterator[Any]:
    """Trace the computation of feedback as its own run (a child of the test's run); feedback
    logged inside names it as its source."""
    case = current_case("trace_feedback")
    from ..tracing import trace

    with trace(name, "chain", metadata={"assay_feedback": True}) as run:
        previous, case.feedback_run = case.feedback_run, run
        try:
            yield run
        finally:
            case.feedback_run = previous
