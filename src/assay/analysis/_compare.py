"""Compare experiments on one dataset: per metric, the paired difference and whether it matters.

The first experiment is the baseline; every other one is compared with it. A difference is
*significant* when its confidence interval excludes 0, a *regression* when it is significant in
the bad direction (a lower score, or more latency, tokens, cost or errors).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from ..errors import InvalidInputError
from ._bootstrap import paired_bootstrap
from ._data import BUILTIN_METRICS, ExampleResult, ExperimentData, load_experiment

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["LOWER_IS_BETTER", "CompareOptions", "MetricDiff", "ExperimentRef", "Comparison",
           "Pairing", "compare", "compare_experiments", "side_by_side"]


class CompareOptions(BaseModel):
    """How to compare: bootstrap size, confidence, seed, and which scores are better lower."""

    resamples: int = Field(2000, ge=1)
    confidence: float = Field(0.95, gt=0, lt=1)
    seed: int | None = 0
    # feedback keys where less is better, besides assay's own (``LOWER_IS_BETTER``)
    lower_is_better: frozenset[str] = frozenset()
    min_pairs: int = Field(2, ge=1)  # fewer paired examples: reported, never significant


class ExperimentRef(BaseModel):
    id: uuid.UUID
    name: str


class MetricDiff(BaseModel):
    """One metric of one candidate against the baseline (diff = candidate - baseline)."""

    metric: str  # "latency", "tokens", "cost", "error" or a feedback key
    kind: Literal["feedback", "latency", "tokens", "cost", "error"]
    better: Literal["higher", "lower"]
    baseline: ExperimentRef
    candidate: ExperimentRef
    n: int  # examples with a value in both
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float
    significant: bool = False
    regression: bool = False
    improvement: bool = False

    @property
    def status(self) -> str:
        if self.regression:
            return "regression"
        if self.improvement:
            return "improvement"
        if self.diff is None:
            return "no data"
        return "no significant change"


class Pairing(BaseModel):
    """How one candidate's examples paired with the baseline's: only ``paired`` examples are
    compared; the others (a partial run, a dataset edited between the two) are left out, and
    a reader must know how many."""

    candidate: ExperimentRef
    paired: int
    only_in_baseline: int
    only_in_candidate: int

    @property
    def unpaired(self) -> int:
        return self.only_in_baseline + self.only_in_candidate


class Comparison(BaseModel):
    dataset_id: uuid.UUID
    baseline: ExperimentRef
    candidates: list[ExperimentRef]
    options: CompareOptions
    diffs: list[MetricDiff]
    pairings: list[Pairing] = []

    @property
    def regressions(self) -> list[MetricDiff]:
        return [d for d in self.diffs if d.regression]


def _ref(data: ExperimentData) -> ExperimentRef:
    return ExperimentRef(id=data.project.id, name=data.project.name)


# Feedback assay writes itself where less is better: the distances ``expect`` records, the
# performance evaluator's latencies and memory (under any ``key_prefix``). Read as "higher is
# better", a worse answer passed the pytest gate as an improvement.
LOWER_IS_BETTER = ("edit_distance", "embedding_distance", "latency_seconds",
                   "latency_p95_seconds", "memory_increase_bytes", "memory_peak_bytes")


def _metrics(experiments: Sequence[ExperimentData],
             lower: frozenset[str]) -> list[tuple[str, str, bool]]:
    """(metric id, display name, lower is better): feedback keys first, then the built-ins."""
    keys: list[str] = []
    for data in experiments:
        keys += [k for k in data.score_keys if k not in keys]
    out = [(f"feedback:{k}", k, k in lower or k.endswith(LOWER_IS_BETTER)) for k in keys]
    return out + [(m, m, low) for m, low in BUILTIN_METRICS.items()]


def _pairing(base: ExperimentData, cand: ExperimentData) -> Pairing:
    b = {r.key for r in base.rows if r.example_id is not None}
    c = {r.key for r in cand.rows if r.example_id is not None}
    return Pairing(candidate=_ref(cand), paired=len(b & c), only_in_baseline=len(b - c),
                   only_in_candidate=len(c - b))


def _diff(metric: str, name: str, lower_better: bool, base: ExperimentData,
          cand: ExperimentData, opts: CompareOptions) -> MetricDiff:
    b_rows = {r.key: r for r in base.rows if r.example_id is not None}
    a_vals: list[float] = []
    c_vals: list[float] = []
    for row in cand.rows:
        other = b_rows.get(row.key)
        if row.example_id is None or other is None:
            continue
        x, y = other.metric(metric), row.metric(metric)
        if x is not None and y is not None:
            a_vals.append(x)
            c_vals.append(y)
    out = MetricDiff(
        metric=name, kind="feedback" if metric.startswith("feedback:") else metric,  # type: ignore[arg-type]  # a known metric kind
        better="lower" if lower_better else "higher", baseline=_ref(base), candidate=_ref(cand),
        n=len(a_vals), confidence=opts.confidence,
    )
    if not a_vals:
        return out
    res = paired_bootstrap(a_vals, c_vals, resamples=opts.resamples,
                           confidence=opts.confidence, seed=opts.seed)
    out.baseline_mean = sum(a_vals) / len(a_vals)
    out.candidate_mean = sum(c_vals) / len(c_vals)
    out.diff, out.ci_low, out.ci_high = res.diff, res.low, res.high
    if res.n >= opts.min_pairs and res.excludes_zero:
        out.significant = True
        worse = res.low > 0 if lower_better else res.high < 0
        out.regression, out.improvement = worse, not worse
    return out


def compare(experiments: Sequence[ExperimentData],
            options: CompareOptions | None = None) -> Comparison:
    """Compare loaded experiments; the first is the baseline. They must share one dataset."""
    opts = options or CompareOptions()
    if len(experiments) < 2:
        raise InvalidInputError("compare needs at least two experiments")
    datasets = {e.project.reference_dataset_id for e in experiments}
    if None in datasets:
        names = [e.project.name for e in experiments if e.project.reference_dataset_id is None]
        raise InvalidInputError(f"not an experiment on a dataset: {', '.join(names)}")
    if len(datasets) > 1:
        raise InvalidInputError(
            "experiments must be on the same dataset to be compared: "
            + ", ".join(f"{e.project.name} -> {e.project.reference_dataset_id}"
                        for e in experiments))
    ids = [e.project.id for e in experiments]
    if len(set(ids)) != len(ids):
        raise InvalidInputError("the same experiment was given twice")
    base, *cands = experiments
    diffs = [
        _diff(metric, name, lower, base, cand, opts)
        for cand in cands
        for metric, name, lower in _metrics([base, cand], opts.lower_is_better)
    ]
    return Comparison(dataset_id=datasets.pop(), baseline=_ref(base),  # type: ignore[arg-type]  # None refused above
                      candidates=[_ref(c) for c in cands], options=opts, diffs=diffs,
                      pairings=[_pairing(base, c) for c in cands])


def compare_experiments(
    store: Store, experiments: Sequence[uuid.UUID | str], options: CompareOptions | None = None,
) -> tuple[Comparison, list[ExperimentData]]:
    """Load experiments by id or name from ``store`` and compare them (first = baseline)."""
    loaded = [load_experiment(store, _project_id(store, e)) for e in experiments]
    return compare(loaded, options), loaded


def _project_id(store: Store, ref: uuid.UUID | str) -> str:
    if isinstance(ref, uuid.UUID):
        return str(ref)
    try:
        return str(uuid.UUID(ref))
    except ValueError:
        return str(store.projects.read(project_name=ref).id)


def side_by_side(
    experiments: Sequence[ExperimentData],
) -> list[tuple[str, list[ExampleResult | None]]]:
    """Every example key in any experiment, with each experiment's row (or None), in order."""
    keys: list[str] = []
    seen: set[str] = set()
    for data in experiments:
        for row in data.rows:
            if row.key not in seen:
                seen.add(row.key)
                keys.append(row.key)
    maps = [data.by_key for data in experiments]
    return [(k, [m.get(k) for m in maps]) for k in keys]
