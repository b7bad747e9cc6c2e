"""Pairwise evaluation: score the runs of two or more stored experiments against each other.

``evaluate((experiment_a, experiment_b), evaluators=[...])`` (LangSmith's form) or
``evaluate_comparative(...)``: the experiments must share a dataset; every example both ran is
given to each comparative evaluator with the runs of all of them, and the scores it returns per
run are stored as pairwise feedback of one new comparative experiment (``feedback_group_id``: the
runs scored together). That feedback stays out of each experiment's own statistics; the
comparison's ``feedback_stats`` count it per experiment (with 1/0 preferences, a win rate).

A comparative evaluator takes ``(runs, example)`` positionally, or names what it needs among
``runs``, ``example``, ``inputs``, ``outputs`` (one dict per run, in the runs' order) and
``reference_outputs``; sync or async. It returns a list of scores in the runs' order, a dict
``{"key": ..., "scores": {run_id: score}, "comment": ...}`` (``key`` defaults to the function's
name) or a ``ComparisonEvaluationResult`` (assay's or LangSmith's). One that raises, or returns
scores for runs it was not given, is recorded as an error result for that example and stores
nothing; the others go on.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from .._sync import offload, run_sync
from ..errors import InvalidInputError, NotFoundError
from ..schemas import ComparativeExperiment, Example, Run, TracerSession
from ._evaluators import as_list
from ._experiment import find_experiment

if TYPE_CHECKING:
    from ..client import Client

__all__ = [
    "ComparativeExperimentResults",
    "ComparisonEvaluationResult",
    "aevaluate_comparative",
    "evaluate_comparative",
]

log = logging.getLogger("assay.evaluation")

COMPARATIVE_ARGS = ("runs", "example", "inputs", "outputs", "reference_outputs")


class ComparisonEvaluationResult(BaseModel):
    """One comparative evaluator's scores for the runs of one example (LangSmith's shape):
    ``scores`` maps each run id to its score; ``comment`` is shared, or one per run id.
    ``error`` is set (and ``scores`` empty) when the evaluator failed on that example."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    key: str
    scores: dict[uuid.UUID | str, bool | int | float | None]
    source_run_id: uuid.UUID | str | None = None
    comment: str | dict[uuid.UUID | str, str] | None = None
    error: str | None = None


class ComparativeExperimentResults:
    """What ``evaluate((a, b), ...)`` returns: iterate for ``{"example", "evaluation_results"}``
    per example (``evaluation_results``: ``{"runs": [...], "feedback.<key>": result}``), index
    by example id; ``comparative_experiment`` is the stored comparison."""

    def __init__(self, results: dict[uuid.UUID, dict[str, Any]],
                 examples: dict[uuid.UUID, Example],
                 comparative_experiment: ComparativeExperiment) -> None:
        self._results = results
        self._examples = examples
        self.comparative_experiment = comparative_experiment
        self.url: str | None = None  # LangSmith's attribute; the web UI's page has no URL here

    @property
    def experiment_name(self) -> str | None:
        return self.comparative_experiment.name

    def __getitem__(self, example_id: uuid.UUID | str) -> dict[str, Any]:
        return self._results[uuid.UUID(str(example_id))]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for key, value in self._results.items():
            yield {"example": self._examples.get(key), "evaluation_results": value}

    def __len__(self) -> int:
        return len(self._results)

    def __repr__(self) -> str:
        return (f"<ComparativeExperimentResults {self.comparative_experiment.name!r}: "
                f"{len(self)} examples>")


class _Comparator:
    """A comparative evaluator with its calling convention worked out once."""

    def __init__(self, func: Any) -> None:
        if not callable(func):
            raise InvalidInputError(
                f"a comparative evaluator must be callable, got {type(func).__name__}")
        self.func = func
        self.name = getattr(func, "__name__", None) or type(func).__name__
        try:
            params = [p for p in inspect.signature(func).parameters.values()
                      if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        except (TypeError, ValueError):
            params = []
        required = [p.name for p in params if p.default is p.empty]
        if params and all(p.name in COMPARATIVE_ARGS or p.default is not p.empty
                          for p in params) and [p.name for p in params] != ["runs", "example"]:
            self.named: list[str] | None = [p.name for p in params if p.name in COMPARATIVE_ARGS]
        elif len(required) == 2:
            self.named = None  # (runs, example) by position, whatever their names
        else:
            raise InvalidInputError(
                f"comparative evaluator {self.name!r} must take (runs, example) or name what "
                f"it needs among {', '.join(COMPARATIVE_ARGS)}; it takes {required}")
        call = getattr(func, "__call__", None)  # noqa: B004 - callable objects
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)

    async def __call__(self, runs: list[Run], example: Example) -> Any:
        if self.named is None:
            args: tuple[Any, ...] = (runs, example)
            kwargs: dict[str, Any] = {}
        else:
            given = {"runs": runs, "example": example, "inputs": example.inputs or {},
                     "outputs": [r.outputs or {} for r in runs],
                     "reference_outputs": example.outputs or {}}
            args, kwargs = (), {name: given[name] for name in self.named}
        if self.is_async:
            return await self.func(*args, **kwargs)
        out = await offload(lambda: self.func(*args, **kwargs))  # an LLM judge blocks
        return await out if inspect.isawaitable(out) else out

    def result(self, out: Any, runs: list[Run]) -> ComparisonEvaluationResult:
        """The evaluator's answer as a result whose scores name exactly runs it was given."""
        if isinstance(out, ComparisonEvaluationResult):
            res = out
        elif hasattr(out, "scores") and hasattr(out, "key"):  # LangSmith's model
            res = ComparisonEvaluationResult(
                key=out.key, scores=dict(out.scores), comment=getattr(out, "comment", None),
                source_run_id=getattr(out, "source_run_id", None))
        elif isinstance(out, (list, tuple)):
            if len(out) != len(runs):
                raise ValueError(f"returned {len(out)} scores for {len(runs)} runs")
            scores: dict[uuid.UUID | str, Any] = dict(zip([r.id for r in runs], out, strict=True))
            res = ComparisonEvaluationResult(key=self.name, scores=scores)
        elif isinstance(out, dict) and "scores" in out:
            res = ComparisonEvaluationResult(**{"key": self.name, **out})
        else:
            raise ValueError(f"expected a list of scores, a dict with 'scores' or a "
                             f"ComparisonEvaluationResult, got {out!r}")
        mine = {str(r.id) for r in runs}
        stray = [str(k) for k in res.scores if str(k) not in mine]
        if stray:
            raise ValueError(f"scored run(s) {', '.join(stray)} it was not given")
        return res


def _name_of(experiment: Any) -> str:
    return str(getattr(experiment, "name", None) or getattr(experiment, "experiment_name", None)
               or experiment)


def _load_experiment(client: Client, experiment: Any) -> TracerSession:
    if hasattr(experiment, "experiment_name") and not isinstance(experiment, TracerSession):
        experiment = experiment.experiment_name  # an ExperimentResults
    found = find_experiment(client, experiment)
    if found is None:
        raise NotFoundError(f"experiment {_name_of(experiment)!r} not found")
    return found


def _root_runs(client: Client, project: TracerSession, load_nested: bool) -> list[Run]:
    if not load_nested:
        return list(client.list_runs(project_id=project.id, is_root=True))
    every = list(client.list_runs(project_id=project.id))
    by_id = {r.id: r for r in every}
    children: dict[uuid.UUID, list[Run]] = {}
    for r in every:
        if r.parent_run_id is not None:
            children.setdefault(r.parent_run_id, []).append(r)
    for pid, kids in children.items():
        if pid in by_id:
            by_id[pid].child_runs = sorted(kids, key=lambda r: r.dotted_order or "")
    return [r for r in every if r.parent_run_id is None]


def _feedback_rows(res: ComparisonEvaluationResult, runs: list[Run], cid: uuid.UUID,
                   group: uuid.UUID) -> list[dict[str, Any]]:
    by_id = {str(r.id): r for r in runs}
    comments = res.comment if isinstance(res.comment, dict) else {}
    meta = {"__run": {"run_id": str(res.source_run_id)}} if res.source_run_id else None
    rows = []
    for run_id, score in res.scores.items():
        run = by_id[str(run_id)]
        rows.append({
            "run_id": run.id, "session_id": run.session_id, "trace_id": run.trace_id,
            "key": res.key, "score": score,
            "comment": res.comment if isinstance(res.comment, str)
            else comments.get(run_id) or comments.get(str(run_id)),
            "feedback_source": {"type": "model", "metadata": meta},
            "comparative_experiment_id": cid, "feedback_group_id": group})
    return rows


async def aevaluate_comparative(
    experiments: Sequence[Any],
    /,
    evaluators: Sequence[Callable[..., Any]],
    experiment_prefix: str | None = None,
    description: str | None = None,
    max_concurrency: int | None = 5,
    client: Client | None = None,
    metadata: dict[str, Any] | None = None,
    load_nested: bool = False,
    randomize_order: bool = False,
) -> ComparativeExperimentResults:
    """Score stored experiments' runs against each other (see the module docstring).

    ``experiments``: two or more names, ids, ``TracerSession``s or ``ExperimentResults`` on one
    dataset. ``randomize_order`` shuffles the runs for each call (against an LLM judge's
    position bias); ``load_nested`` gives each run its ``child_runs``; ``max_concurrency``
    bounds the evaluator calls in flight (0 or None: one at a time).
    """
    if isinstance(experiments, (str, uuid.UUID)) or len(experiments) < 2:
        raise InvalidInputError("a pairwise evaluation needs two or more experiments, got "
                                f"{experiments!r}")
    comparators = [_Comparator(e) for e in as_list(evaluators, "evaluators")]
    if not comparators:
        raise InvalidInputError("a pairwise evaluation needs at least one comparative evaluator")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInputError(f"metadata must be a dict, got {type(metadata).__name__}")
    if client is None:
        from ..client import get_default_client

        client = get_default_client()
    client.flush()  # runs this process traced (the experiments just run) are stored first
    projects = await offload(lambda: [_load_experiment(client, e) for e in experiments])
    if experiment_prefix is None:
        name = " vs. ".join(p.name for p in projects) + "-" + uuid.uuid4().hex[:4]
    else:
        name = f"{experiment_prefix}-{uuid.uuid4().hex[:8]}"
    cmp = await offload(lambda: client.create_comparative_experiment(
        name, [p.id for p in projects], description=description, metadata=metadata))
    all_runs = await offload(lambda: [_root_runs(client, p, load_nested) for p in projects])
    shared: set[uuid.UUID] = set.intersection(*({r.reference_example_id for r in runs
                                                  if r.reference_example_id is not None}
                                                 for runs in all_runs))
    version = projects[0].metadata.get("dataset_version")
    examples = {ex.id: ex for ex in await offload(lambda: list(client.list_examples(
        dataset_id=cmp.reference_dataset_id, as_of=version,
        example_ids=sorted(shared, key=str))))} if shared else {}
    per_example: dict[uuid.UUID, list[Run]] = {}
    for runs in all_runs:  # each example's runs, experiment by experiment
        for r in runs:
            if r.reference_example_id in examples:
                per_example.setdefault(r.reference_example_id, []).append(r)
    results: dict[uuid.UUID, dict[str, Any]] = {ex: {"runs": rs} for ex, rs in
                                                per_example.items()}
    gate = asyncio.Semaphore(max_concurrency or 1)

    async def compare(example_id: uuid.UUID, comparator: _Comparator) -> None:
        runs = list(per_example[example_id])
        if randomize_order:
            random.shuffle(runs)
        async with gate:
            try:
                res = comparator.result(await comparator(runs, examples[example_id]), runs)
            except Exception as exc:  # noqa: BLE001 - recorded, the others go on
                log.warning("comparative evaluator %r failed on example %s: %r",
                            comparator.name, example_id, exc)
                res = ComparisonEvaluationResult(key=comparator.name, scores={},
                                                 error=f"{type(exc).__name__}: {exc}")
        results[example_id][f"feedback.{res.key}"] = res
        if res.scores:  # one group's rows at once: all of them stored or none
            rows = _feedback_rows(res, runs, cmp.id, uuid.uuid4())
            await offload(lambda: client.store.feedback.create_many(rows, return_records=False))

    await asyncio.gather(*(compare(ex, c) for ex in per_example for c in comparators))
    final = await offload(lambda: client.read_comparative_experiment(cmp.id))
    return ComparativeExperimentResults(results, examples, final)


def evaluate_comparative(
    experiments: Sequence[Any],
    /,
    evaluators: Sequence[Callable[..., Any]],
    experiment_prefix: str | None = None,
    description: str | None = None,
    max_concurrency: int | None = 5,
    client: Client | None = None,
    metadata: dict[str, Any] | None = None,
    load_nested: bool = False,
    randomize_order: bool = False,
) -> ComparativeExperimentResults:
    """The sync form of ``aevaluate_comparative`` (on the process's one event loop)."""
    return run_sync(aevaluate_comparative(
        experiments, evaluators, experiment_prefix, description, max_concurrency, client,
        metadata, load_nested, randomize_order))
