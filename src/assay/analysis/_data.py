"""One experiment as a row per example: what the comparison, the UI and the CLI all read.

An experiment may run each example several times (``num_repetitions``); a row averages the
repetitions so that two experiments can be paired example by example. Runs that name no example
get a row of their own (keyed by run id) and never pair.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..errors import AssayError
from ..schemas import Example, Feedback, Run, TracerSessionResult

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["ExampleResult", "ExperimentData", "load_experiment", "example_result",
           "BUILTIN_METRICS"]

# built-in per-example metrics (feedback keys are metrics too): name -> lower is better
BUILTIN_METRICS: dict[str, bool] = {"latency": True, "tokens": True, "cost": True, "error": True}


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


class ExampleResult(BaseModel):
    """An example's outcome in one experiment, repetitions averaged."""

    key: str  # the example id, or the run id for a run without an example
    example_id: uuid.UUID | None = None
    run_ids: list[uuid.UUID] = Field(default_factory=list)
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] | None = None  # of the first repetition
    reference: dict[str, Any] | None = None  # the example's outputs
    split: list[str] | None = None
    error: str | None = None  # the first error among repetitions
    error_rate: float = 0.0  # share of repetitions that errored
    latency: float | None = None  # seconds
    tokens: float | None = None  # total tokens of the trace's llm runs
    cost: float | None = None  # USD; None when no llm run carried a known cost
    scores: dict[str, float] = Field(default_factory=dict)  # numeric feedback, averaged
    labels: dict[str, list[str]] = Field(default_factory=dict)  # categorical feedback values
    comments: dict[str, str] = Field(default_factory=dict)

    @property
    def repetitions(self) -> int:
        return len(self.run_ids)

    def metric(self, name: str) -> float | None:
        """A metric's value: ``latency``, ``tokens``, ``cost``, ``error`` or a feedback key."""
        if name.startswith("feedback:"):
            return self.scores.get(name[len("feedback:"):])
        if name == "error":
            return self.error_rate if self.run_ids else None
        if name in BUILTIN_METRICS:
            return getattr(self, name)
        return self.scores.get(name)


class ExperimentData(BaseModel):
    project: TracerSessionResult
    rows: list[ExampleResult]
    score_keys: list[str] = Field(default_factory=list)  # feedback keys with numeric scores
    label_keys: list[str] = Field(default_factory=list)  # feedback keys with categorical values

    @property
    def by_key(self) -> dict[str, ExampleResult]:
        return {r.key: r for r in self.rows}


def _trace_runs(store: Store, pid: str) -> tuple[list[Run], dict[Any, list[Run]]]:
    roots = store.runs.list(project_ids=[pid], is_root=True)
    llm_by_trace: dict[Any, list[Run]] = defaultdict(list)
    for run in store.runs.list(project_ids=[pid], run_type="llm"):
        llm_by_trace[run.trace_id].append(run)
    return roots, llm_by_trace


def _feedback_by_root(store: Store, pid: str, roots: list[Run],
                      llm_by_trace: dict[Any, list[Run]]) -> dict[Any, list[Feedback]]:
    """Feedback on any run of a trace belongs to the trace's root (evaluators score roots)."""
    root_of: dict[Any, Any] = {r.id: r.id for r in roots}
    by_trace: dict[Any, Any] = {r.trace_id: r.id for r in roots}
    for trace_id, llms in llm_by_trace.items():
        for run in llms:
            if trace_id in by_trace:
                root_of.setdefault(run.id, by_trace[trace_id])
    items = [f for f in store.feedback.list(project_ids=[pid], pairwise=False)
             if f.run_id is not None]  # a comparison's scores are not the run's own
    unknown = list({f.run_id for f in items if f.run_id is not None and f.run_id not in root_of
                    and f.trace_id not in by_trace})
    if unknown:
        for run in store.runs.list(run_ids=unknown):
            if run.trace_id in by_trace:
                root_of[run.id] = by_trace[run.trace_id]
    out: dict[Any, list[Feedback]] = defaultdict(list)
    for f in items:
        root = root_of.get(f.run_id) or by_trace.get(f.trace_id)
        if root is not None:
            out[root].append(f)
    return out


def _examples(store: Store, project: TracerSessionResult) -> dict[str, Example]:
    """The dataset's examples at the version the experiment ran on (current one as fallback)."""
    if project.reference_dataset_id is None:
        return {}
    as_of = project.metadata.get("dataset_version")
    try:
        found = store.examples.list(dataset_id=project.reference_dataset_id, as_of=as_of)
    except AssayError:
        found = store.examples.list(dataset_id=project.reference_dataset_id)
    return {str(e.id): e for e in found}


def _label(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def example_result(key: str, runs: list[Run], example: Example | None,
                   feedback: Iterable[Feedback], tokens: list[float | None],
                   costs: list[float | None]) -> ExampleResult:
    """One example's row: its runs (repetitions, first first), their feedback in run order, and
    each run's tokens and cost. What ``load_experiment`` and the UI's experiment page show."""
    first = runs[0]
    scores: dict[str, list[float]] = defaultdict(list)
    labels: dict[str, list[str]] = defaultdict(list)
    comments: dict[str, str] = {}
    for f in feedback:
        if f.score is not None:
            scores[f.key].append(float(f.score))
        label = _label(f.value)
        if label is not None:
            labels[f.key].append(label)
        if f.comment and f.key not in comments:
            comments[f.key] = f.comment
    errors = [r.error for r in runs if r.error]
    return ExampleResult(
        key=key,
        example_id=first.reference_example_id,
        run_ids=[r.id for r in runs],
        inputs=first.inputs or (example.inputs if example else {}),
        outputs=first.outputs,
        reference=example.outputs if example else None,
        split=example.split if example else None,
        error=errors[0] if errors else None,
        error_rate=len(errors) / len(runs),
        latency=_mean(r.latency.total_seconds() if r.latency is not None else None
                      for r in runs),
        tokens=_mean(tokens),
        cost=_mean(costs),
        scores={k: sum(v) / len(v) for k, v in scores.items()},
        labels=dict(labels),
        comments=comments,
    )


def load_experiment(store: Store, project_id: uuid.UUID | str) -> ExperimentData:
    """Read an experiment (any project) into a row per example."""
    project = store.projects.read(project_id=project_id, include_stats=True)
    assert isinstance(project, TracerSessionResult)
    pid = str(project.id)
    roots, llm_by_trace = _trace_runs(store, pid)
    feedback = _feedback_by_root(store, pid, roots, llm_by_trace)
    examples = _examples(store, project)

    groups: dict[str, list[Run]] = defaultdict(list)
    for run in roots:
        key = str(run.reference_example_id) if run.reference_example_id else str(run.id)
        groups[key].append(run)
    order = {k: i for i, k in enumerate(examples)}
    keys = sorted(groups, key=lambda k: (order.get(k, len(order)), groups[k][0].start_time))

    rows: list[ExampleResult] = []
    for key in keys:
        runs = groups[key]
        tokens: list[float | None] = []
        costs: list[float | None] = []
        for run in runs:
            llms = llm_by_trace.get(run.trace_id, [])
            tokens.append(float(sum(r.total_tokens or 0 for r in llms)))
            known = [r.total_cost for r in llms if r.total_cost is not None]
            costs.append(float(sum(known)) if known else None)
        rows.append(example_result(key, runs, examples.get(key),
                                   [f for run in runs for f in feedback.get(run.id, [])],
                                   tokens, costs))
    return ExperimentData(project=project, rows=rows,
                          score_keys=sorted({k for r in rows for k in r.scores}),
                          label_keys=sorted({k for r in rows for k in r.labels}))
