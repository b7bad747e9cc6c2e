"""Result models of the three agent evaluators.

The seed's models (``EvaluationScore``, ``PerformanceRunResult``, ``ToolCallCheck``,
``AccuracyEvaluationResult``, ``PerformanceEvaluationResult``, ``ReliabilityEvaluationResult``)
keep their documented names, types, validation and ``from_attributes``; fields added here all
have defaults, so code written against the seed constructs them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._hooks import report_result
from ..llm._parse import strict_json_schema

__all__ = [
    "AccuracyEvaluationResult",
    "AccuracyIteration",
    "EvaluationScore",
    "ExpectedToolCall",
    "PerformanceEvaluationResult",
    "PerformanceRunResult",
    "ReliabilityEvaluationResult",
    "ToolCall",
    "ToolCallCheck",
]


class EvaluationScore(BaseModel):
    """The judge's verdict on one generated output."""

    model_config = ConfigDict(from_attributes=True)

    score: float = Field(..., ge=1, le=10, description=(
        "A numerical score, on a scale of 1-10, representing the quality and accuracy of the "
        "generated response when compared to the expected output and guidelines"))
    reasoning: str = Field(..., description=(
        "The detailed, step-by-step reasoning of the judge explaining exactly why the score was "
        "assigned, referencing the query, expected output and guidelines"))
    is_met: bool = Field(..., description=(
        "True if the generated output meets the core requirements and spirit of the expected "
        "output"))
    critique: str = Field(..., description=(
        "Constructive, actionable feedback on how the response could have been improved; if it "
        "was perfect, say that no improvements are needed"))

    @classmethod
    def judge_json_schema(cls) -> dict[str, Any]:
        """The schema sent to judges: reasoning comes before the score it justifies."""
        return strict_json_schema(cls, order=["reasoning", "critique", "score", "is_met"])


class AccuracyIteration(BaseModel):
    """One iteration of an accuracy evaluation: what the agent said and what the judge thought.

    Exactly one of ``score`` and ``error`` is set; ``error_stage`` says whether the agent or the
    judge failed.
    """

    model_config = ConfigDict(from_attributes=True)

    index: int
    generated_output: str | None = None
    score: EvaluationScore | None = None
    error: str | None = None
    error_stage: Literal["agent", "judge"] | None = None
    agent_latency_seconds: float | None = None


class AccuracyEvaluationResult(BaseModel):
    """Aggregated result of an accuracy evaluation (seed fields first, then additions)."""

    model_config = ConfigDict(from_attributes=True)

    def model_post_init(self, context: Any, /) -> None:
        report_result(self)  # a marked pytest test records it as feedback (assay.testing)

    evaluation_scores: list[EvaluationScore]
    average_score: float
    user_query: str
    expected_output: str
    generated_output: str
    # additions
    iterations: list[AccuracyIteration] = Field(default_factory=list)
    num_iterations: int | None = None
    judge: str | None = None
    additional_guidelines: str | None = None

    @property
    def failed_iterations(self) -> list[AccuracyIteration]:
        return [it for it in self.iterations if it.error is not None]

    @property
    def is_met(self) -> bool | None:
        """True when every scored iteration met the expectation; None when none was scored."""
        if not self.evaluation_scores:
            return None
        return all(s.is_met for s in self.evaluation_scores)

    def assert_passed(self, min_score: float = 7.0) -> None:
        """Raise AssertionError unless every iteration was scored and the average reaches
        ``min_score``."""
        problems = [f"iteration {it.index} failed ({it.error_stage}): {it.error}"
                    for it in self.failed_iterations]
        if not self.evaluation_scores:
            problems.append("no iteration was scored")
        elif self.average_score < min_score:
            problems.append(f"average score {self.average_score:.2f} is below {min_score:g}")
        if problems:
            raise AssertionError("Accuracy evaluation failed: " + "; ".join(problems))


class PerformanceRunResult(BaseModel):
    """Raw metrics of one measured execution."""

    model_config = ConfigDict(from_attributes=True)

    latency_seconds: float
    memory_increase_bytes: int
    memory_peak_bytes: int
    # additions
    memory_run_latency_seconds: float | None = Field(
        None, description="wall time of the separate run with tracemalloc on (not a latency "
                          "figure: tracing slows allocation)")


class PerformanceEvaluationResult(BaseModel):
    """Statistics over the measured runs: average, median, min, max, std_dev, p90, p95, p99."""

    model_config = ConfigDict(from_attributes=True)

    def model_post_init(self, context: Any, /) -> None:
        report_result(self)  # a marked pytest test records it as feedback (assay.testing)

    all_runs: list[PerformanceRunResult]
    num_iterations: int
    warmup_runs: int
    latency_stats: dict[str, float]
    memory_increase_stats: dict[str, float]
    memory_peak_stats: dict[str, float]
    # additions
    latency_measured_with_tracemalloc: bool = Field(
        False, description="True when tracemalloc was already running (started by the caller), "
                           "so latency could not be measured without it")
    agent: str | None = None


class ToolCall(BaseModel):
    """One tool call as executed: name, arguments (parsed JSON when possible), call id."""

    model_config = ConfigDict(from_attributes=True)

    name: str
    args: Any = None
    id: str | None = None


class ExpectedToolCall(BaseModel):
    """An expectation richer than a bare tool name.

    ``args``: a dict compared with the call's arguments (``args_match="subset"``: every given
    key must be present with an equal value, recursively; ``"exact"``: equal dicts), or a
    predicate ``f(args) -> bool``. ``min_times``: how many distinct matching calls are required
    (0 makes the tool optional); ``max_times``: how many matching calls are allowed at most.
    """

    model_config = ConfigDict(from_attributes=True, frozen=True, arbitrary_types_allowed=True)

    name: str = Field(..., min_length=1)
    args: dict[str, Any] | Callable[[Any], bool] | None = None
    args_match: Literal["subset", "exact"] = "subset"
    min_times: int = Field(1, ge=0)
    max_times: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> ExpectedToolCall:
        if self.max_times is not None and self.max_times < self.min_times:
            raise ValueError(f"max_times ({self.max_times}) is below min_times ({self.min_times})")
        return self

    def describe(self) -> str:
        if self.args is None:
            return self.name
        if callable(self.args):
            return f"{self.name}(<predicate>)"
        return f"{self.name}({self.args!r})"


class ToolCallCheck(BaseModel):
    """The check of one expected tool (one entry per distinct expected tool name)."""

    model_config = ConfigDict(from_attributes=True)

    tool_name: str
    was_called: bool
    times_called: int
    # additions
    expected_times: int = Field(1, description="distinct calls required (duplicates, min_times)")
    matched_times: int = Field(0, description="required calls matched, arguments included")
    passed: bool = True


class ReliabilityEvaluationResult(BaseModel):
    """Pass/fail of a reliability evaluation with the tool-call diagnostics behind it."""

    model_config = ConfigDict(from_attributes=True)

    def model_post_init(self, context: Any, /) -> None:
        report_result(self)  # a marked pytest test records it as feedback (assay.testing)

    passed: bool
    summary: str
    expected_tool_calls: list[str]
    actual_tool_calls: list[str]
    checks: list[ToolCallCheck]
    missing_tool_calls: list[str]
    unexpected_tool_calls: list[str]
    # additions
    out_of_order_tool_calls: list[str] = Field(default_factory=list)
    forbidden_tool_calls: list[str] = Field(default_factory=list)
    count_violations: list[str] = Field(default_factory=list)
    argument_mismatches: list[str] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str) -> str:
        return value.strip()

    def assert_passed(self) -> None:
        """Raise AssertionError carrying the summary unless the evaluation passed."""
        if not self.passed:
            raise AssertionError(f"Reliability evaluation failed: {self.summary}")
