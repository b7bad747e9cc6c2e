"""Every evaluator shape LangSmith accepts, adapted once and called the same way."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from assay.errors import InvalidInputError
from assay.evaluation import (
    EvaluationResult,
    EvaluationResults,
    ExperimentResultRow,
    adapt_evaluator,
    adapt_summary_evaluator,
)
from assay.evaluation._evaluators import to_results
from assay.schemas import Example, Run

NOW = datetime.now(UTC)
EX = Example(id=uuid.uuid4(), dataset_id=uuid.uuid4(), inputs={"q": "2+2"}, outputs={"a": 4},
             created_at=NOW)
RUN = Run(id=uuid.uuid4(), trace_id=uuid.uuid4(), name="t", run_type="chain", start_time=NOW,
          end_time=NOW, inputs={"q": "2+2"}, outputs={"a": 4})
ROW = ExperimentResultRow(EX, run=RUN)


async def call(ev: object) -> list[EvaluationResult]:
    return await adapt_evaluator(ev).aevaluate(ROW)


@pytest.mark.parametrize("fn", [
    lambda run, example: run.outputs["a"] == example.outputs["a"],
    lambda root_run, ex: root_run.outputs["a"] == ex.outputs["a"],  # any names, positional
    lambda outputs, reference_outputs: outputs == reference_outputs,
    lambda inputs, outputs: inputs["q"] == "2+2" and outputs["a"] == 4,
    lambda *, outputs: outputs["a"] == 4,
    lambda run: run.outputs["a"] == 4,
    lambda example: example.inputs["q"] == "2+2",
    lambda outputs, extra=1: outputs["a"] == 4,
])
async def test_signatures(fn: object) -> None:
    res = await call(fn)
    assert [(r.key, r.score) for r in res] == [("lambda", True)]


@pytest.mark.parametrize("fn", [
    lambda inputs, outputs, reference_outputs: (inputs, outputs, reference_outputs),
    lambda reference_outputs, inputs, outputs: (inputs, outputs, reference_outputs),
    lambda outputs, reference_outputs, inputs=None: (inputs, outputs, reference_outputs),
    lambda outputs, *, inputs, reference_outputs: (inputs, outputs, reference_outputs),
    lambda outputs, unused=0, inputs=None, reference_outputs=None: (
        inputs, outputs, reference_outputs),
])
async def test_named_parameters_get_their_own_values_in_any_order(fn: object) -> None:
    """Named fields reach the parameter of that name, whether the call is positional (names
    first and in order) or by keyword (any other shape)."""
    row = ExperimentResultRow(EX, run=RUN.model_copy(update={"outputs": {"a": 5}}))
    seen = []

    def ev(*args: object, **kwargs: object) -> bool:
        seen.append(fn(*args, **kwargs))  # type: ignore[operator]
        return True

    ev.__signature__ = __import__("inspect").signature(fn)  # type: ignore[attr-defined]
    await adapt_evaluator(ev).aevaluate(row)
    assert seen == [({"q": "2+2"}, {"a": 5}, {"a": 4})]


async def test_async_and_named_functions_and_return_shapes() -> None:
    async def correct(outputs, reference_outputs):
        return {"score": 1, "value": "CORRECT", "comment": "same"}

    res = await call(correct)
    assert [(r.key, r.score, r.value, r.comment) for r in res] == [
        ("correct", 1, "CORRECT", "same")]

    def many(outputs):
        return [{"key": "a", "score": 0.5}, EvaluationResult(key="b", value="x")]

    assert [(r.key, r.score, r.value) for r in await call(many)] == [("a", 0.5, None),
                                                                     ("b", None, "x")]

    def wrapped(outputs):
        return EvaluationResults(results=[EvaluationResult(key="c", score=2)])

    assert [(r.key, r.score) for r in await call(wrapped)] == [("c", 2)]

    def label(outputs):
        return "great"

    assert [(r.key, r.value) for r in await call(label)] == [("label", "great")]

    def number(outputs):
        return 0.25

    assert [(r.key, r.score) for r in await call(number)] == [("number", 0.25)]


async def test_bad_results_become_error_results() -> None:
    def empty(outputs):
        return {}

    def nothing(outputs):
        return None

    def wrong_type(outputs):
        return object()

    def no_key_in_list(outputs):
        return [{"score": 1}]

    def bad_score(outputs):
        return {"key": "k", "score": "high"}

    for fn, msg in [(empty, "empty"), (nothing, "None"), (wrong_type, "object"),
                    (no_key_in_list, "without a 'key'"), (bad_score, "score")]:
        res = await call(fn)
        assert len(res) == 1 and res[0].is_error and res[0].key == fn.__name__, fn
        assert msg in res[0].comment, (msg, res[0].comment)


def test_signature_errors_name_the_evaluator() -> None:
    def three(a, b, c):
        return 1

    with pytest.raises(InvalidInputError, match=r"'three' has parameters \['a', 'b', 'c'\]"):
        adapt_evaluator(three)
    with pytest.raises(InvalidInputError, match="not callable"):
        adapt_evaluator(42)
    with pytest.raises(InvalidInputError, match="summary evaluator 'one'"):
        def one(x):
            return 1
        adapt_summary_evaluator(one)


async def test_run_evaluator_objects_and_as_evaluator() -> None:
    from langsmith.evaluation import EvaluationResult as LsResult
    from langsmith.evaluation import RunEvaluator, run_evaluator

    class Mine(RunEvaluator):
        def evaluate_run(self, run, example=None, evaluator_run_id=None):
            return LsResult(key="ls", score=1, comment="from langsmith")

    res = await call(Mine())
    assert [(r.key, r.score, r.comment) for r in res] == [("ls", 1, "from langsmith")]

    @run_evaluator
    def decorated(run, example):
        return {"key": "dec", "score": 0.5}

    assert [(r.key, r.score) for r in await call(decorated)] == [("dec", 0.5)]

    class Agentish:
        def as_evaluator(self):
            def reliability(run, example):
                return {"key": "reliability", "score": True}
            return reliability

    assert [(r.key, r.score) for r in await call(Agentish())] == [("reliability", True)]


async def test_summary_evaluators() -> None:
    runs, examples = [RUN, RUN], [EX, EX]

    def positional(rs, exs):
        return {"key": "n", "score": len(rs) + len(exs)}

    async def named(outputs, reference_outputs):
        return sum(o == r for o, r in zip(outputs, reference_outputs, strict=True)) / len(outputs)

    def boom(runs, examples):
        raise ZeroDivisionError("no rows")

    assert [(r.key, r.score) for r in await adapt_summary_evaluator(positional).aevaluate(
        runs, examples)] == [("n", 4)]
    assert [(r.key, r.score) for r in await adapt_summary_evaluator(named).aevaluate(
        runs, examples)] == [("named", 1.0)]
    err = await adapt_summary_evaluator(boom).aevaluate(runs, examples)
    assert err[0].key == "boom" and err[0].is_error and "ZeroDivisionError" in err[0].comment


def test_to_results_rules() -> None:
    assert to_results(True, "k")[0].score is True
    assert to_results({"results": [{"key": "a", "score": 1}]}, "k")[0].key == "a"
    with pytest.raises(InvalidInputError, match="unknown field"):
        to_results({"key": "a", "scor": 1}, "k")
    with pytest.raises(InvalidInputError, match="no results"):
        to_results([], "k")


def test_row_mapping() -> None:
    assert dict(ROW)["run"] is RUN and ROW["example"] is EX
    assert ROW.outputs == {"a": 4} and ROW.reference_outputs == {"a": 4}
    assert list(ROW) == ["run", "example", "evaluation_results"]
