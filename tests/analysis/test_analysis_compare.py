"""compare(): pairing by example, directions, significance and regressions."""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from assay.analysis import (
    CompareOptions,
    ExampleResult,
    ExperimentData,
    compare,
    compare_experiments,
    load_experiment,
    side_by_side,
)
from assay.errors import InvalidInputError, NotFoundError
from assay.schemas import TracerSessionResult
from assay.store import Store

sys.path.insert(0, str(Path(__file__).parent))
from assay_factory import Outcome, add_experiment, make_dataset  # noqa: E402

DS = uuid.uuid4()
EXAMPLES = [uuid.uuid4() for _ in range(40)]


def _exp(name: str, scores: np.ndarray, latency: np.ndarray, *, dataset: uuid.UUID = DS,
         errors: np.ndarray | None = None, examples: list[uuid.UUID] = EXAMPLES) -> ExperimentData:
    project = TracerSessionResult(id=uuid.uuid4(), name=name, reference_dataset_id=dataset,
                                  start_time=datetime.now(UTC))
    rows = [ExampleResult(key=str(ex), example_id=ex, run_ids=[uuid.uuid4()],
                          latency=float(latency[i]), tokens=100.0, cost=0.01,
                          error_rate=float(errors[i]) if errors is not None else 0.0,
                          scores={"correctness": float(scores[i])})
            for i, ex in enumerate(examples)]
    return ExperimentData(project=project, rows=rows, score_keys=["correctness"])


def _by_metric(comparison, candidate: int = 0) -> dict:
    name = comparison.candidates[candidate].name
    return {d.metric: d for d in comparison.diffs if d.candidate.name == name}


rng = np.random.default_rng(0)
BASE_SCORES = rng.uniform(0.4, 1.0, size=40)
BASE_LAT = rng.uniform(0.5, 2.0, size=40)


def test_identical_experiments_show_no_regression() -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT)
    b = _exp("b", BASE_SCORES.copy(), BASE_LAT.copy())
    result = compare([a, b])
    diffs = _by_metric(result)
    assert set(diffs) == {"correctness", "latency", "tokens", "cost", "error"}
    for d in diffs.values():
        assert d.n == 40
        assert d.diff == 0 and d.ci_low <= 0 <= d.ci_high
        assert not d.significant and not d.regression and not d.improvement
        assert d.status == "no significant change"
    assert result.regressions == []


def test_score_drop_is_a_regression() -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT)
    b = _exp("b", BASE_SCORES - 0.3 + rng.normal(0, 0.05, 40), BASE_LAT)
    d = _by_metric(compare([a, b]))["correctness"]
    assert d.better == "higher" and d.kind == "feedback"
    assert d.diff == pytest.approx(d.candidate_mean - d.baseline_mean)
    assert d.diff < -0.2 and d.ci_high < 0
    assert d.regression and d.significant and not d.improvement
    assert d.status == "regression"


def test_score_gain_is_an_improvement_not_a_regression() -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT)
    b = _exp("b", BASE_SCORES + 0.2, BASE_LAT)
    d = _by_metric(compare([a, b]))["correctness"]
    assert d.improvement and not d.regression


def test_more_latency_and_errors_are_regressions() -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT, errors=np.zeros(40))
    errs = np.zeros(40)
    errs[:20] = 1
    b = _exp("b", BASE_SCORES, BASE_LAT * 1.5, errors=errs)
    diffs = _by_metric(compare([a, b]))
    assert diffs["latency"].better == "lower"
    assert diffs["latency"].regression and diffs["latency"].ci_low > 0
    assert diffs["error"].regression and diffs["error"].diff == pytest.approx(0.5)
    faster = _by_metric(compare([b, a]))
    assert faster["latency"].improvement and not faster["latency"].regression


def test_lower_is_better_flips_a_feedback_key() -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT)
    b = _exp("b", BASE_SCORES + 0.2, BASE_LAT)
    opts = CompareOptions(lower_is_better=frozenset({"correctness"}))
    d = _by_metric(compare([a, b], opts))["correctness"]
    assert d.better == "lower" and d.regression


def test_only_paired_examples_count() -> None:
    a = _exp("a", BASE_SCORES[:30], BASE_LAT[:30], examples=EXAMPLES[:30])
    b = _exp("b", BASE_SCORES[10:] - 0.5, BASE_LAT[10:], examples=EXAMPLES[10:])
    d = _by_metric(compare([a, b]))["correctness"]
    assert d.n == 20
    assert d.diff == pytest.approx(-0.5)
    rows = side_by_side([a, b])
    assert len(rows) == 40
    assert rows[0][1][1] is None and rows[-1][1][0] is None


def test_too_few_pairs_are_never_significant() -> None:
    a = _exp("a", BASE_SCORES[:1], BASE_LAT[:1], examples=EXAMPLES[:1])
    b = _exp("b", BASE_SCORES[:1] - 0.9, BASE_LAT[:1], examples=EXAMPLES[:1])
    d = _by_metric(compare([a, b]))["correctness"]
    assert d.n == 1 and d.diff == pytest.approx(-0.9) and not d.regression


def test_three_experiments_compare_to_the_first() -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT)
    b = _exp("b", BASE_SCORES, BASE_LAT)
    c = _exp("c", BASE_SCORES - 0.4, BASE_LAT)
    result = compare([a, b, c])
    assert [x.name for x in result.candidates] == ["b", "c"]
    assert not _by_metric(result, 0)["correctness"].regression
    assert _by_metric(result, 1)["correctness"].regression
    assert [r.candidate.name for r in result.regressions] == ["c"]


def test_seed_gives_the_same_intervals() -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT)
    b = _exp("b", BASE_SCORES + rng.normal(0, 0.1, 40), BASE_LAT)
    one = compare([a, b], CompareOptions(seed=5)).diffs
    two = compare([a, b], CompareOptions(seed=5)).diffs
    assert [(d.ci_low, d.ci_high) for d in one] == [(d.ci_low, d.ci_high) for d in two]


@pytest.mark.parametrize("case, match", [
    ("one", "at least two"),
    ("other-dataset", "same dataset"),
    ("no-dataset", "not an experiment on a dataset"),
    ("twice", "twice"),
])
def test_invalid_comparisons_are_named(case: str, match: str) -> None:
    a = _exp("a", BASE_SCORES, BASE_LAT)
    others = {
        "one": [],
        "other-dataset": [_exp("b", BASE_SCORES, BASE_LAT, dataset=uuid.uuid4())],
        "no-dataset": [_exp("b", BASE_SCORES, BASE_LAT)],
        "twice": [a],
    }[case]
    if case == "no-dataset":
        others[0].project.reference_dataset_id = None
    with pytest.raises(InvalidInputError, match=match):
        compare([a, *others])


# -- against a real store --------------------------------------------------------------------

def test_load_experiment_averages_repetitions(store: Store) -> None:
    ds, examples = make_dataset(store, "qa", 4)

    def outcome(i: int, ex, rep: int) -> Outcome:
        return Outcome(latency=1.0 + i + rep, prompt_tokens=100 * (rep + 1), completion_tokens=10,
                       cost=0.01 * (i + 1), error="boom" if (i == 3 and rep == 0) else None,
                       scores={"correctness": float(rep)}, labels={"verdict": "CORRECT"})

    project = add_experiment(store, ds.id, examples, "exp-1", outcome, repetitions=2)
    data = load_experiment(store, project.id)
    assert [r.example_id for r in data.rows] == [e.id for e in examples]
    assert data.score_keys == ["correctness"] and data.label_keys == ["verdict"]
    row = data.rows[1]
    assert row.repetitions == 2
    assert row.latency == pytest.approx(2.5)  # (2 + 3) / 2
    assert row.tokens == pytest.approx(160)  # (110 + 210) / 2
    assert row.cost == pytest.approx(0.02)
    assert row.scores == {"correctness": pytest.approx(0.5)}
    assert row.labels == {"verdict": ["CORRECT", "CORRECT"]}
    assert row.reference == {"answer": "a1"} and row.inputs == {"question": "q1"}
    assert row.comments["correctness"] == "correctness of example 1"
    assert data.rows[3].error == "boom" and data.rows[3].error_rate == 0.5
    assert data.rows[0].error is None and data.rows[0].metric("error") == 0.0
    assert data.project.run_count == 8


def test_compare_experiments_by_name_and_id(store: Store) -> None:
    ds, examples = make_dataset(store, "qa", 12)
    base = add_experiment(store, ds.id, examples, "base",
                          lambda i, ex, rep: Outcome(scores={"correctness": 1.0}))
    worse = add_experiment(store, ds.id, examples, "worse",
                           lambda i, ex, rep: Outcome(scores={"correctness": 0.0 if i % 2 else 1.0},
                                                      latency=2.0))
    result, loaded = compare_experiments(store, ["base", str(worse.id)])
    assert result.baseline.id == base.id and len(loaded) == 2
    diffs = _by_metric(result)
    assert diffs["correctness"].diff == pytest.approx(-0.5) and diffs["correctness"].regression
    assert diffs["latency"].diff == pytest.approx(1.0) and diffs["latency"].regression
    assert diffs["tokens"].diff == 0 and not diffs["tokens"].significant
    with pytest.raises(NotFoundError):
        compare_experiments(store, ["base", "nope"])
