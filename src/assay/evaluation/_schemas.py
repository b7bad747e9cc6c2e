"""Evaluator results, shaped like LangSmith's so evaluators written for it work unchanged.

``EvaluationResult`` is one score; ``EvaluationResults`` several. LangSmith types the latter as a
``TypedDict`` (``{"results": [...]}``); here it is a model that also answers ``r["results"]``, so
code written either way reads it.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EvaluationResult", "EvaluationResults", "as_result"]


class EvaluationResult(BaseModel):
    """One evaluation of a run: a numeric ``score`` and/or a categorical ``value``.

    ``value`` strings are counted per label in ``feedback_stats.values`` (e.g. CORRECT /
    INCORRECT); ``score`` feeds ``avg`` and ``stdev``.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    key: str
    score: bool | int | float | None = None
    value: Any = None
    comment: str | None = None
    correction: Any = None
    evaluator_info: dict[str, Any] = Field(default_factory=dict)
    feedback_config: dict[str, Any] | None = None
    source_run_id: uuid.UUID | str | None = None
    target_run_id: uuid.UUID | str | None = None
    metadata: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None

    @classmethod
    def _of_score(cls, key: str, score: bool | int | float) -> EvaluationResult:
        """``EvaluationResult(key=key, score=score)`` without validating again what the caller
        checked (``evaluate()`` builds one per example)."""
        out = cls.__new__(cls)
        _set = object.__setattr__
        _set(out, "__dict__", {
            "key": key, "score": score, "value": None, "comment": None, "correction": None,
            "evaluator_info": {}, "feedback_config": None, "source_run_id": None,
            "target_run_id": None, "metadata": None, "extra": None})
        _set(out, "__pydantic_fields_set__", {"key", "score"})
        _set(out, "__pydantic_extra__", None)
        _set(out, "__pydantic_private__", None)
        return out

    @property
    def is_error(self) -> bool:
        """True when this result records an evaluator that raised."""
        return bool((self.extra or {}).get("error"))


class EvaluationResults(BaseModel):
    """Several results from one evaluator (or all results of one row)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    results: list[EvaluationResult] = Field(default_factory=list)

    @classmethod
    def _of(cls, results: list[EvaluationResult]) -> EvaluationResults:
        """``EvaluationResults(results=results)`` for items that are results already."""
        out = cls.__new__(cls)
        _set = object.__setattr__
        _set(out, "__dict__", {"results": results})
        _set(out, "__pydantic_fields_set__", {"results"})
        _set(out, "__pydantic_extra__", None)
        _set(out, "__pydantic_private__", None)
        return out

    def __getitem__(self, key: str) -> Any:  # LangSmith code indexes it like a dict
        if key == "results":
            return self.results
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self.results if key == "results" else default

    def __contains__(self, key: object) -> bool:
        return key == "results"


def as_result(item: EvaluationResult | tuple[str, bool | int | float]) -> EvaluationResult:
    """An ``EvaluationResult`` from what a row keeps: one already, or a (key, score) pair."""
    if item.__class__ is tuple:
        return EvaluationResult._of_score(*item)
    return item  # type: ignore[return-value]  # not a pair: a result
