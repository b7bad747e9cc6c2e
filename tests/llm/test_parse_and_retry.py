"""Tolerant JSON extraction, strict schemas, Retry-After parsing and the backoff policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from assay.evals import EvaluationScore
from assay.llm import JudgeOptions, extract_json_object, strict_json_schema
from assay.llm._retry import backoff_delay, parse_retry_after


@pytest.mark.parametrize("text", [
    '{"a": 1}',
    '  {"a": 1}\n',
    'Verdict:\n```json\n{"a": 1}\n```',
    '```\n{"a": 1}\n```',
    'My answer is {"a": 1} and that is final.',
    'Thinking about {sets} first... then {"a": 1}',
])
def test_extracts_the_object(text: str) -> None:
    assert extract_json_object(text) == {"a": 1}


def test_braces_inside_strings_do_not_confuse_it() -> None:
    text = 'Result: {"reasoning": "uses } and { freely", "score": 3} trailing'
    assert extract_json_object(text) == {"reasoning": "uses } and { freely", "score": 3}


@pytest.mark.parametrize("text,problem", [
    ("", "empty"),
    ("   ", "empty"),
    ("[1, 2]", "not an object"),
    ("no json here", "no JSON object found"),
    ('{"a": 1', "no JSON object found"),
])
def test_unusable_replies_say_why(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        extract_json_object(text)


def test_strict_schema_moves_bounds_into_description() -> None:
    schema = strict_json_schema(EvaluationScore)
    score = schema["properties"]["score"]
    assert "minimum" not in score and "maximum" not in score
    assert "minimum=1" in score["description"] and "maximum=10" in score["description"]
    assert schema["additionalProperties"] is False
    assert "title" not in schema


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    later = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 < parse_retry_after({"retry-after": format_datetime(later, usegmt=True)}) <= 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None


def test_backoff_grows_is_capped_and_defers_to_the_server() -> None:
    opts = JudgeOptions(backoff_initial=0.5, backoff_multiplier=2, backoff_max=3, jitter=0,
                        max_retry_after=10)
    assert [backoff_delay(i, opts) for i in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff_delay(0, opts, retry_after=4) == 4
    assert backoff_delay(0, opts, retry_after=600) == 10  # capped by max_retry_after
    jittered = JudgeOptions(backoff_initial=1, jitter=0.5)
    assert all(1 <= backoff_delay(0, jittered) <= 1.5 for _ in range(50))


def test_options_validate() -> None:
    with pytest.raises(ValueError, match="backoff_max"):
        JudgeOptions(backoff_initial=5, backoff_max=1)
    with pytest.raises(ValueError):
        JudgeOptions(timeout=0)
    with pytest.raises(ValueError):
        JudgeOptions(structured_output="xml")  # type: ignore[arg-type]
