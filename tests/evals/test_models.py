"""The seed's result models, field for field: names, types, validation, from_attributes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from assay.evals import (
    AccuracyEvaluationResult,
    EvaluationScore,
    PerformanceEvaluationResult,
    PerformanceRunResult,
    ReliabilityEvaluationResult,
    ToolCallCheck,
)

SEED_FIELDS = {
    EvaluationScore: {"score": float, "reasoning": str, "is_met": bool, "critique": str},
    PerformanceRunResult: {"latency_seconds": float, "memory_increase_bytes": int,
                           "memory_peak_bytes": int},
    ToolCallCheck: {"tool_name": str, "was_called": bool, "times_called": int},
    AccuracyEvaluationResult: {"evaluation_scores": list[EvaluationScore], "average_score": float,
                               "user_query": str, "expected_output": str,
                               "generated_output": str},
    PerformanceEvaluationResult: {"all_runs": list[PerformanceRunResult], "num_iterations": int,
                                  "warmup_runs": int, "latency_stats": dict[str, float],
                                  "memory_increase_stats": dict[str, float],
                                  "memory_peak_stats": dict[str, float]},
    ReliabilityEvaluationResult: {"passed": bool, "summary": str,
                                  "expected_tool_calls": list[str],
                                  "actual_tool_calls": list[str],
                                  "checks": list[ToolCallCheck],
                                  "missing_tool_calls": list[str],
                                  "unexpected_tool_calls": list[str]},
}


@pytest.mark.parametrize("model", list(SEED_FIELDS), ids=lambda m: m.__name__)
def test_seed_fields_are_present_required_and_typed(model: type) -> None:
    fields = model.model_fields  # type: ignore[attr-defined]
    for name, annotation in SEED_FIELDS[model].items():
        assert name in fields, f"{model.__name__}.{name} missing"
        assert fields[name].is_required(), f"{model.__name__}.{name} must be required"
        assert fields[name].annotation == annotation, (name, fields[name].annotation)
    for name, info in fields.items():  # additions never break seed-style construction
        if name not in SEED_FIELDS[model]:
            assert not info.is_required(), f"added field {name} must have a default"


@pytest.mark.parametrize("model", [EvaluationScore, PerformanceRunResult, ToolCallCheck,
                                   AccuracyEvaluationResult, PerformanceEvaluationResult,
                                   ReliabilityEvaluationResult], ids=lambda m: m.__name__)
def test_from_attributes(model: type) -> None:
    assert model.model_config.get("from_attributes") is True  # type: ignore[attr-defined]


def test_score_is_validated_1_to_10() -> None:
    base = {"reasoning": "r", "is_met": True, "critique": "c"}
    assert EvaluationScore(score=1, **base).score == 1
    assert EvaluationScore(score=10, **base).score == 10
    assert EvaluationScore(score=7.5, **base).score == 7.5
    for bad in (0, 0.99, 10.01, 11, -3):
        with pytest.raises(ValidationError, match="score"):
            EvaluationScore(score=bad, **base)
    for missing in ("reasoning", "is_met", "critique"):
        data = {"score": 5, **base}
        del data[missing]
        with pytest.raises(ValidationError, match=missing):
            EvaluationScore(**data)


def test_seed_usage_patterns_construct() -> None:
    scores = [EvaluationScore(score=8, reasoning="r", is_met=True, critique="c"),
              EvaluationScore(score=9, reasoning="r", is_met=True, critique="c")]
    acc = AccuracyEvaluationResult(
        evaluation_scores=scores, average_score=8.5, user_query="What is the capital of France?",
        expected_output="Paris", generated_output="The capital of France is Paris.")
    assert acc.is_met is True and acc.iterations == []
    runs = [PerformanceRunResult(latency_seconds=1.5, memory_increase_bytes=1024,
                                 memory_peak_bytes=2048)] * 2
    perf = PerformanceEvaluationResult(
        all_runs=runs, num_iterations=10, warmup_runs=2,
        latency_stats={"average": 1.5, "median": 1.4, "min": 1.2, "max": 1.8, "std_dev": 0.2},
        memory_increase_stats={"average": 1024, "median": 1000, "min": 800, "max": 1200,
                               "std_dev": 100},
        memory_peak_stats={"average": 2048, "median": 2000, "min": 1800, "max": 2400,
                           "std_dev": 150})
    assert perf.memory_increase_stats["average"] == 1024.0
    checks = [ToolCallCheck(tool_name="search", was_called=True, times_called=2)]
    rel = ReliabilityEvaluationResult(
        passed=True, summary="All reliability checks passed.",
        expected_tool_calls=["search", "analyze"], actual_tool_calls=["search", "analyze"],
        checks=checks, missing_tool_calls=[], unexpected_tool_calls=[])
    rel.assert_passed()  # no error


def test_from_attributes_builds_from_plain_objects() -> None:
    obj = SimpleNamespace(score=6, reasoning="ok", is_met=False, critique="more detail")
    assert EvaluationScore.model_validate(obj).score == 6
    check = ToolCallCheck.model_validate(SimpleNamespace(tool_name="t", was_called=False,
                                                         times_called=0))
    assert check.tool_name == "t"
    rel = ReliabilityEvaluationResult.model_validate(SimpleNamespace(
        passed=False, summary="Missing expected tool calls: ['t'].", expected_tool_calls=["t"],
        actual_tool_calls=[], checks=[check], missing_tool_calls=["t"],
        unexpected_tool_calls=[]))
    assert rel.checks[0] == check


def test_reliability_assert_passed_raises_with_summary() -> None:
    rel = ReliabilityEvaluationResult(
        passed=False, summary="Missing expected tool calls: ['analyze'].",
        expected_tool_calls=["search", "analyze"], actual_tool_calls=["search"], checks=[],
        missing_tool_calls=["analyze"], unexpected_tool_calls=[])
    with pytest.raises(AssertionError, match=r"Missing expected tool calls: \['analyze'\]"):
        rel.assert_passed()


def test_accuracy_assert_passed() -> None:
    s = EvaluationScore(score=6, reasoning="r", is_met=False, critique="c")
    res = AccuracyEvaluationResult(evaluation_scores=[s], average_score=6, user_query="q",
                                   expected_output="e", generated_output="g")
    res.assert_passed(min_score=5)
    with pytest.raises(AssertionError, match="average score 6.00 is below 7"):
        res.assert_passed()
