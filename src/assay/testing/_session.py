"""The experiment a pytest session records: datasets, examples, root runs and feedback.

Each test suite (``test_suite_name=`` on the marker, else ``ASSAY_TEST_SUITE`` /
``LANGSMITH_TEST_SUITE``, else the name of pytest's root directory) is a dataset; each marked
test (one per parameter set) an example of it, with a stable id derived from the test's node id,
so the next session finds the same example (a changed input makes a new version of it). The
whole session is one experiment per suite, named ``<suite>:<session id>``; under pytest-xdist the
controller hands its session id to every worker, so their rows land in the same experiment.

Tracking never changes a test's outcome: a store that cannot be opened or a write that fails is
reported once at the end of the session, and the tests pass or fail as they would without assay.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..client import Client
    from ._case import TestCase

__all__ = ["TestSession", "feedback_of_result"]

log = logging.getLogger("assay.testing")
_NS = uuid.UUID("5b1c1f0e-9a51-4b1e-8f6a-a55a7e57c0de")


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


def feedback_of_result(result: Any) -> list[dict[str, Any]]:
    """Feedback for an agent evaluator's result (accuracy, performance, reliability)."""
    from ..evals import (
        AccuracyEvaluationResult,
        PerformanceEvaluationResult,
        ReliabilityEvaluationResult,
    )

    if isinstance(result, AccuracyEvaluationResult):
        out = [{"key": "accuracy", "score": result.average_score if result.evaluation_scores
                else None, "comment": (result.evaluation_scores[-1].critique
                                       if result.evaluation_scores else "no iteration scored")}]
        if result.is_met is not None:
            out.append({"key": "accuracy_is_met", "score": float(result.is_met)})
        return out
    if isinstance(result, PerformanceEvaluationResult):
        stats = result.latency_stats
        return [{"key": "latency_seconds", "score": stats.get("average"),
                 "comment": ", ".join(f"{k} {v:.4g}s" for k, v in stats.items())},
                {"key": "memory_peak_bytes", "score": result.memory_peak_stats.get("average")}]
    if isinstance(result, ReliabilityEvaluationResult):
        return [{"key": "reliability", "score": float(result.passed), "comment": result.summary}]
    return []


class TestSession:
    """One pytest session's tracking state (one per process; workers share ``run_id``)."""

    def __init__(self, run_id: str, *, root_name: str, prefix: str | None = None) -> None:
        self.run_id = run_id
        self.root_name = root_name
        self.prefix = prefix
        self.problems: list[str] = []
        self.experiments: dict[str, str] = {}  # suite -> experiment (project) id
        self.cases = 0
        self._client: Client | None = None
        self._client_failed = False
        self._datasets: dict[str, str] = {}
        self._lock = threading.RLock()

    # -- the store ----------------------------------------------------------------------------
    def client(self) -> Client | None:
        """The client of the session (``Client()``: ASSAY_API_URL, ASSAY_DATABASE_URL or the
        embedded store), or None when it could not be opened (reported once)."""
        if self._client is None and not self._client_failed:
            try:
                from ..client import Client

                self._client = Client()
            except Exception as exc:  # reported at the end; the tests go on untracked
                self._client_failed = True
                self.problem(f"could not open the store: {type(exc).__name__}: {exc}")
        return self._client

    def problem(self, message: str) -> None:
        with self._lock:
            if message not in self.problems:
                self.problems.append(message)
        log.warning("assay pytest tracking: %s", message)

    def suite_name(self, marker_kwargs: Mapping[str, Any]) -> str:
        return str(marker_kwargs.get("test_suite_name") or os.environ.get("ASSAY_TEST_SUITE")
                   or os.environ.get("LANGSMITH_TEST_SUITE") or self.root_name)

    def example_id(self, suite: str, nodeid: str, given: Any = None) -> str:
        if given is not None:
            return str(uuid.UUID(str(given)))
        return str(uuid.uuid5(_NS, f"{suite}\0{nodeid}"))

    def experiment_name(self, suite: str) -> str:
        prefix = (self.prefix or os.environ.get("ASSAY_EXPERIMENT")
                  or os.environ.get("LANGSMITH_EXPERIMENT") or suite)
        return f"{prefix}:{self.run_id[:8]}"

    def ensure(self, suite: str, experiment_metadata: Mapping[str, Any] | None = None
               ) -> str | None:
        """The experiment (project) id of ``suite`` in this session, made on first use."""
        with self._lock:
            if suite in self.experiments:
                return self.experiments[suite]
            client = self.client()
            if client is None:
                return None
            try:
                dataset_id = self._dataset(client, suite)
                meta: dict[str, Any] = {**(experiment_metadata or {}),
                                        "pytest": {"run_id": self.run_id}, "num_repetitions": 1,
                                        "dataset_splits": []}
                revision = os.environ.get("ASSAY_REVISION_ID") or os.environ.get(
                    "LANGSMITH_REVISION_ID")
                if revision:
                    meta["revision_id"] = revision
                from ..evaluation._git import git_info

                git = git_info()
                if git is not None:
                    meta["git"] = git
                project = client.create_project(
                    self.experiment_name(suite), reference_dataset_id=dataset_id,
                    description=f"pytest session {self.run_id} of suite {suite}",
                    metadata=meta, upsert=True)
            except Exception as exc:
                self.problem(f"could not create the experiment of suite {suite!r}: "
                             f"{type(exc).__name__}: {exc}")
                return None
            self.experiments[suite] = str(project.id)
            return self.experiments[suite]

    def _dataset(self, client: Client, suite: str) -> str:
        from ..errors import ConflictError, NotFoundError

        if suite in self._datasets:
            return self._datasets[suite]
        try:
            ds = client.read_dataset(dataset_name=suite)
        except NotFoundError:
            try:
                ds = client.create_dataset(suite, description="assay pytest suite: an example "
                                           "per marked test (one per parameter set)")
            except ConflictError:  # another xdist worker made it first
                ds = client.read_dataset(dataset_name=suite)
        self._datasets[suite] = str(ds.id)
        return self._datasets[suite]

    # -- one test case ------------------------------------------------------------------------
    def record(self, case: TestCase, *, passed: bool | None, error: str | None,
               metadata: Mapping[str, Any] | None, split: Any) -> None:
        """Store a finished case: its example (if new or changed) and its feedback."""
        client = self.client()
        suite_id = self.experiments.get(case.suite)
        if client is None or suite_id is None:
            return
        from ..errors import NotFoundError

        try:
            inputs = _json_safe(case.inputs)
            outputs = _json_safe(case.reference_outputs) if case.reference_outputs else None
            meta = _json_safe({**(metadata or {}), "pytest_nodeid": case.nodeid})
            try:
                current = client.read_example(case.example_id)
            except NotFoundError:
                current = None
            if current is None:
                try:
                    client.create_example(inputs=inputs, outputs=outputs, metadata=meta,
                                          split=split, example_id=case.example_id,
                                          dataset_id=self._datasets[case.suite])
                except Exception:  # a concurrent worker created it: fall back to an update
                    current = client.read_example(case.example_id)
            if current is not None and (current.inputs != inputs
                                        or (current.outputs or None) != outputs):
                client.update_example(case.example_id, inputs=inputs, outputs=outputs or {},
                                      metadata=meta)
            items = list(case.feedback)
            if passed is not None:
                items.insert(0, {"key": "pass", "score": float(passed), "comment": error})
            if items and case.run is not None:
                # no flush per test: feedback names its project, and feedback that arrives
                # before its run is adopted when the run is stored (finish() flushes once)
                for item in items:
                    item = dict(item)
                    client.create_feedback(
                        case.run.id, item.pop("key"), score=item.pop("score", None),
                        value=item.pop("value", None), comment=item.pop("comment", None),
                        project_id=suite_id, feedback_source_type="model",
                        source_run_id=item.pop("source_run_id", None),
                        source_info=item.pop("source_info", None))
            with self._lock:
                self.cases += 1
        except Exception as exc:
            self.problem(f"could not record {case.nodeid}: {type(exc).__name__}: {exc}")

    def listen(self, case: TestCase) -> Any:
        """A listener for ``assay._hooks``: evaluator results become the case's feedback."""
        def on_result(result: Any) -> None:
            try:
                for item in feedback_of_result(result):
                    case.add_feedback(item.pop("key"), item.pop("score", None), None,
                                      item.pop("comment", None))
            except Exception as exc:  # never break the evaluator's own result
                self.problem(f"could not record an evaluator result: {exc}")
        return on_result

    def finish(self) -> None:
        """Flush what was traced and stamp the end time on this process's experiments."""
        client = self._client
        if client is None:
            return
        try:
            client.flush()
        except Exception as exc:
            self.problem(f"could not store the last runs: {exc}")

