"""``ExperimentResults``: the rows of an experiment, in dataset order, as they complete.

A row is ``{"run": Run, "example": Example, "evaluation_results": EvaluationResults}``, as in
LangSmith. With ``blocking=False`` the object is returned at once and iterating waits for each
next row, so a caller can drive a progress bar from it. ``to_pandas()`` adds per-row latency,
tokens, cost and time to first token, summed over the llm runs of each row's trace.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._ids import to_utc
from ..errors import require
from ..schemas import Example, Run
from ..store._examples import StoredExample
from ._attachments import fresh_attachments
from ._schemas import EvaluationResults, as_result

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["ExperimentResultRow", "ExperimentResults"]


_ROW_KEYS = ("run", "example", "evaluation_results")


class ExperimentResultRow(Mapping[str, Any]):
    """``{"run", "example", "evaluation_results"}`` as in LangSmith (also as attributes).

    Built per example on the experiment's hot path, so what nobody may read is made on first
    read: the run record from the in-memory trace, the ``Example`` from the stored row, the
    ``EvaluationResult`` objects from the plain (key, score) pairs most evaluators give. An
    experiment whose rows nobody inspects does not pay for tens of thousands of models.
    Evaluators receive the row itself and read ``run``, ``example``, ``inputs``, ``outputs``,
    ``reference_outputs``.
    """

    __slots__ = ("_example", "_results", "_run", "_tree")

    def __init__(self, example: Example | StoredExample, *, run: Run | None = None,
                 tree: Any = None,
                 evaluation_results: EvaluationResults | list[Any] | None = None) -> None:
        self._example = example
        self._run = run
        self._tree = tree
        self._results = evaluation_results if evaluation_results is not None else []

    @property
    def run(self) -> Run:
        run = self._run
        if run is None:
            run = self._run = self._tree.to_run()
        return run

    @property
    def example(self) -> Example:
        ex = self._example
        if ex.__class__ is StoredExample:
            ex = self._example = ex.model()
        return ex  # type: ignore[return-value]  # an Example now

    @property
    def evaluation_results(self) -> EvaluationResults:
        res = self._results
        if res.__class__ is not EvaluationResults:
            res = self._results = EvaluationResults._of([as_result(r) for r in res])
        return res

    @evaluation_results.setter
    def evaluation_results(self, value: EvaluationResults | list[Any]) -> None:
        self._results = value

    @property
    def inputs(self) -> dict[str, Any]:
        return self._example.inputs

    @property
    def outputs(self) -> dict[str, Any]:
        if self._run is None and self._tree is not None:
            return self._tree.outputs or {}
        return self.run.outputs or {}

    @property
    def reference_outputs(self) -> dict[str, Any]:
        return self._example.outputs or {}

    @property
    def attachments(self) -> dict[str, Any]:
        """The example's files (read only when the target or an evaluator asks for them)."""
        ex = self._example
        return {} if ex.__class__ is StoredExample else fresh_attachments(ex)

    def __getitem__(self, key: str) -> Any:
        if key == "run":
            return self.run
        if key == "example":
            return self.example
        if key == "evaluation_results":
            return self.evaluation_results
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_ROW_KEYS)

    def __len__(self) -> int:
        return 3

    def __repr__(self) -> str:
        return (f"ExperimentResultRow(example={self.example.id}, "
                f"results={[r.key for r in self.evaluation_results.results]})")


class ExperimentResults:
    """Rows of one experiment; iterate it, index it, or call ``to_pandas()``."""

    def __init__(self, experiment_name: str, total: int, *, experiment_id: uuid.UUID | None = None,
                 client: Client | None = None) -> None:
        self.experiment_name = experiment_name
        self.experiment_id = experiment_id
        self.summary_results = EvaluationResults()
        self._client = client
        self._rows: list[ExperimentResultRow | None] = [None] * total
        self._ready = 0  # rows[:ready] are all filled
        self._done = False
        self._error: BaseException | None = None
        # _set holds the lock itself (C-level enter and exit, once per example); readers wait
        # on the condition built on it
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0  # readers blocked in _cond.wait(): only they need a notify
        self._thread: threading.Thread | None = None

    # -- filled by the runner -------------------------------------------------------------
    def _set(self, index: int, row: ExperimentResultRow) -> None:
        with self._lock:
            self._rows[index] = row
            if index == self._ready:
                while self._ready < len(self._rows) and self._rows[self._ready] is not None:
                    self._ready += 1
                if self._waiting:
                    self._cond.notify_all()

    def _wait(self, timeout: float | None) -> bool:
        """``_cond.wait``, counted (the caller holds ``_cond``)."""
        self._waiting += 1
        try:
            return self._cond.wait(timeout)
        finally:
            self._waiting -= 1

    def _finish(self, error: BaseException | None = None) -> None:
        with self._cond:
            self._done = True
            self._error = error
            if error is None and self._ready < len(self._rows):
                # rows skipped on purpose (error_handling="ignore") leave holes: close them up
                self._rows = [r for r in self._rows if r is not None]
                self._ready = len(self._rows)
            self._cond.notify_all()

    # -- reading --------------------------------------------------------------------------
    @property
    def experiment(self) -> Any:
        """The stored experiment (a TracerSession), or None when results were not uploaded."""
        if self._client is None or self.experiment_id is None:
            return None
        return self._client.read_project(project_id=self.experiment_id)

    def wait(self) -> ExperimentResults:
        """Block until the experiment has finished; re-raise what stopped it, if anything."""
        with self._cond:
            while not self._done:
                self._wait(None)
            error = self._error
        if error is not None:
            raise error
        return self

    def _next(self, i: int, timeout: float | None = None) -> ExperimentResultRow | None:
        with self._cond:
            while i >= self._ready and not self._done:
                if not self._wait(timeout):
                    return None
            if i < self._ready:
                return self._rows[i]
            if self._error is not None:
                raise self._error
            raise StopIteration

    def __iter__(self) -> Iterator[ExperimentResultRow]:
        i = 0
        while True:
            try:
                row = self._next(i)
            except StopIteration:
                return
            assert row is not None
            yield row
            i += 1

    async def __aiter__(self) -> AsyncIterator[ExperimentResultRow]:
        i = 0
        while True:
            try:
                row = self._next(i, timeout=0)
                while row is None:
                    await asyncio.sleep(0.005)
                    row = self._next(i, timeout=0)
            except StopIteration:
                return
            yield row
            i += 1

    def __len__(self) -> int:
        with self._cond:
            return self._ready if self._done else len(self._rows)

    def __getitem__(self, index: int) -> ExperimentResultRow:
        self.wait()
        row = self._rows[index]
        assert row is not None
        return row

    @property
    def results(self) -> list[ExperimentResultRow]:
        self.wait()
        return list(self._rows)  # type: ignore[arg-type]  # all set after wait()

    def __repr__(self) -> str:
        return f"<ExperimentResults {self.experiment_name}>"

    def _repr_html_(self) -> str:
        import importlib.util

        if importlib.util.find_spec("pandas") and self._done and self._rows:
            html: str = self.to_pandas()._repr_html_()
            return html
        return repr(self)

    # -- tabular --------------------------------------------------------------------------
    def to_pandas(self, start: int | None = 0, end: int | None = None) -> Any:
        """One row per (example, repetition) with inputs, outputs, reference, feedback, error,
        latency, tokens, cost and first-token columns (pandas is the ``assay[pandas]`` extra)."""
        pd = require("pandas", "pandas", "ExperimentResults.to_pandas()")
        return pd.DataFrame(self.to_records(start, end))

    def to_records(self, start: int | None = 0, end: int | None = None) -> list[dict[str, Any]]:
        """The rows of ``to_pandas()`` as plain dicts (no pandas needed)."""
        rows = self.results[start:end]
        metrics = _trace_metrics(self._client, self.experiment_id, [r["run"] for r in rows])
        out = []
        for r in rows:
            run, ex = r["run"], r["example"]
            rec: dict[str, Any] = {f"inputs.{k}": v for k, v in (ex.inputs or {}).items()}
            rec.update({f"outputs.{k}": v for k, v in (run.outputs or {}).items()})
            rec["error"] = run.error
            rec.update({f"reference.{k}": v for k, v in (ex.outputs or {}).items()})
            for res in r["evaluation_results"].results:
                rec[f"feedback.{res.key}"] = res.score if res.score is not None else res.value
            latency = run.latency.total_seconds() if run.latency is not None else None
            rec["execution_time"] = latency  # LangSmith's name
            rec["latency"] = latency
            rec.update(metrics.get(str(run.trace_id), _EMPTY))
            rec["repetition"] = run.metadata.get("repetition")
            rec["example_id"] = run.reference_example_id or ex.id
            rec["id"] = run.id
            out.append(rec)
        return out


_EMPTY = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None,
          "prompt_cost": None, "completion_cost": None, "total_cost": None,
          "first_token_latency": None}


def _add(acc: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        acc[key] = (acc[key] or 0) + value


def _utc(value: Any) -> datetime | None:
    """A datetime (naive taken as UTC) from a datetime, an ISO string or epoch seconds."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    elif isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value, UTC)
    return to_utc(value)


def _trace_metrics(client: Client | None, experiment_id: uuid.UUID | None,
                   roots: list[Run]) -> dict[str, dict[str, Any]]:
    """Per trace: tokens and costs summed over its llm runs; seconds from the root's start to
    the first streamed token anywhere in the trace."""
    from .._usage import derive_usage

    by_trace: dict[str, list[Run]] = {}
    if client is not None and experiment_id is not None:
        wanted = {str(r.trace_id) for r in roots}
        for run in client.list_runs(project_id=experiment_id, run_type="llm"):
            if str(run.trace_id) in wanted:
                by_trace.setdefault(str(run.trace_id), []).append(run)
        stored = True
    else:
        for root in roots:
            stack, found = list(root.child_runs or []), []
            while stack:
                run = stack.pop()
                if run.run_type == "llm":
                    found.append(run)
                stack.extend(run.child_runs or [])
            by_trace[str(root.trace_id)] = found
        stored = False
    out: dict[str, dict[str, Any]] = {}
    for root in roots:
        acc: dict[str, Any] = dict(_EMPTY)
        first = _utc(root.first_token_time)
        for run in by_trace.get(str(root.trace_id), []):
            fields = run if stored else None
            usage = derive_usage(run.model_dump()) if fields is None else {
                k: getattr(run, k) for k in ("prompt_tokens", "completion_tokens", "total_tokens",
                                             "prompt_cost", "completion_cost", "total_cost")}
            for key in ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_cost",
                        "completion_cost", "total_cost"):
                _add(acc, key, usage.get(key))
            ft = _utc(run.first_token_time if stored else usage.get("first_token_time"))
            if ft is not None and (first is None or ft < first):
                first = ft
        start = _utc(root.start_time)
        if first is not None and start is not None:
            acc["first_token_latency"] = (first - start).total_seconds()
        out[str(root.trace_id)] = acc
    return out
