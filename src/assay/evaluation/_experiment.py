"""Creating an experiment, or picking an interrupted one up where it stopped.

An experiment is a project tied to a dataset (``reference_dataset_id``) whose metadata records
what it ran on: ``revision_id``, ``dataset_version``, ``dataset_splits``, ``num_repetitions``,
and the git facts. Everything needed to resume is written when it starts, so a process killed
at any instant leaves an experiment that ``evaluate(..., experiment=<name or id>)`` can finish;
the git facts (which take git subprocesses) follow while the first examples run
(``record_git``).

What counts as finished on resume: a root run linked to its example with its repetition index,
ended, not failed when failures are ignored, and (when there are evaluators) with its feedback
stored. Feedback of a row is written in one transaction, so "some feedback" means "all of it".
Everything else in the experiment (unfinished roots, their children, children whose root never
got stored, feedback whose run is gone) is deleted before the missing pairs run again, so each
(example, repetition) ends with exactly one root run and one set of feedback.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._ids import utcnow
from ..errors import InvalidInputError, NotFoundError
from ..schemas import Feedback, Run, TracerSession

if TYPE_CHECKING:
    from ..client import Client
    from ._data import ResolvedData

__all__ = [
    "RUNNER",
    "Creation",
    "ExperimentState",
    "check_resume",
    "check_same_dataset",
    "experiment_metadata",
    "find_experiment",
    "finished_rows",
    "open_experiment",
    "record_git",
]

RUNNER = "assay_evaluate"
_REVISION_ENV = ("ASSAY_REVISION_ID", "LANGSMITH_REVISION_ID", "LANGCHAIN_REVISION_ID")


@dataclass
class ExperimentState:
    id: uuid.UUID
    name: str
    created: bool  # False: an existing experiment is being resumed
    metadata: dict[str, Any] = field(default_factory=dict)


def experiment_metadata(user: dict[str, Any] | None, data: ResolvedData,
                        num_repetitions: int) -> dict[str, Any]:
    """The metadata LangSmith's evaluate() records, but for git (``record_git``)."""
    meta: dict[str, Any] = dict(user or {})
    revision = meta.get("revision_id") or next(
        (os.environ[k] for k in _REVISION_ENV if os.environ.get(k)), None)
    meta["revision_id"] = revision
    meta["dataset_version"] = data.dataset_version
    meta["dataset_splits"] = list(data.splits)
    meta["num_repetitions"] = num_repetitions
    meta["__ls_runner"] = RUNNER
    return meta


def find_experiment(client: Client, experiment: Any) -> TracerSession | None:
    """The stored experiment ``experiment`` names (object, id or name), or None if no such name
    (a name first, as a project may be named like an id); an id that names none is an error."""
    if isinstance(experiment, TracerSession):
        return client.read_project(project_id=experiment.id)
    if isinstance(experiment, uuid.UUID):
        return client.read_project(project_id=experiment)
    if not isinstance(experiment, str) or not experiment:
        obj: Any = experiment  # an object with the id and name of an experiment
        if hasattr(obj, "id") and hasattr(obj, "name"):
            return client.read_project(project_id=obj.id)
        raise InvalidInputError(
            f"experiment must be an experiment name, id or TracerSession, got {experiment!r}")
    try:
        as_id = uuid.UUID(experiment)
    except ValueError:
        as_id = None
    try:
        return client.read_project(project_name=experiment)
    except NotFoundError:
        if as_id is None:
            return None  # a name not stored yet: the experiment is started under it
    try:  # an id: to resume, never to name a new experiment (a mistyped id would be one)
        return client.read_project(project_id=as_id)
    except NotFoundError:
        raise NotFoundError(f"experiment {experiment} not found: no experiment has that id "
                            "(experiment= resumes a stored experiment by id or name)") from None


def check_same_dataset(existing: TracerSession, dataset_id: str) -> None:
    if existing.reference_dataset_id is not None and (
            str(existing.reference_dataset_id) != str(dataset_id)):
        raise InvalidInputError(
            f"experiment {existing.name!r} ran on dataset {existing.reference_dataset_id}, "
            f"not on {dataset_id}: resume it on the same dataset (or omit data=)")


def open_experiment(
    client: Client,
    *,
    name: str,
    description: str | None,
    metadata: dict[str, Any],
    dataset_id: str | None,
    existing: TracerSession | None,
    generated_name: bool = True,
    id: uuid.UUID | None = None,
    start_time: datetime | None = None,
) -> ExperimentState:
    """Create the experiment, or check that ``existing`` matches the data and reuse it.

    ``id``, ``start_time``: the id to create it under and the time it started (claimed before
    its runs started, see ``Creation``)."""
    if existing is not None:
        if dataset_id is not None:
            check_same_dataset(existing, dataset_id)
        merged = {**existing.metadata, **metadata}
        client.update_project(existing.id, metadata=merged)
        return ExperimentState(id=existing.id, name=existing.name, created=False,
                               metadata=merged)
    from ..errors import ConflictError

    for attempt in range(10):
        try:
            session = client.store.projects.create(
                name, description=description, metadata=metadata,
                reference_dataset_id=dataset_id, id=id, start_time=start_time)
            break
        except ConflictError:
            if attempt == 9 or not generated_name:
                raise
            name = new_name(name.rsplit("-", 1)[0])
    return ExperimentState(id=session.id, name=session.name, created=True, metadata=metadata)


class Creation:
    """A fresh experiment's project row, written on a thread while its first examples run.

    Its id is claimed up front, so runs and feedback can name it at once; the run writer and
    the feedback sink hold their writes until ``done`` (no stored run names a project that does
    not exist yet, so no reader's fold makes a placeholder of it). The row is written once
    ``start`` is called (when the first examples are on their way, so it does not compete with
    their launch) or after ``start_wait`` seconds without it. If writing it fails,
    ``on_failure`` (dropping what was held) runs before ``done`` is set. ``result()`` waits and
    returns the state (its name may differ on a clash with a generated name), or raises.
    """

    def __init__(self, create: Callable[[], ExperimentState],
                 on_failure: Callable[[], None] | None = None, start_wait: float = 1.0) -> None:
        self.done = threading.Event()  # for the writer and the sink, which hold until it
        self.failed = False
        # the outcome: ``result()`` here, ``asyncio.wrap_future`` on an event loop (no thread)
        self.future: concurrent.futures.Future[ExperimentState] = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()  # a waiter that gives up cannot cancel it
        self._go = threading.Event()
        thread = threading.Thread(target=self._run, args=(create, on_failure, start_wait),
                                  name="assay-experiment", daemon=True)
        thread.start()

    def start(self) -> None:
        """Write the row now."""
        self._go.set()

    def _run(self, create: Callable[[], ExperimentState],
             on_failure: Callable[[], None] | None, start_wait: float) -> None:
        error: BaseException | None = None
        state = None
        try:
            self._go.wait(start_wait)
            state = create()
        except BaseException as exc:  # raised by result(), in the experiment's task
            error = exc
            self.failed = True
            if on_failure is not None:
                on_failure()  # before ``done``: what was held is dropped, never stored
        finally:
            self.done.set()
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(state)  # type: ignore[arg-type]  # set when no error

    def result(self) -> ExperimentState:
        return self.future.result()


def new_name(prefix: str | None) -> str:
    base = (prefix or "experiment").strip() or "experiment"
    return f"{base}-{uuid.uuid4().hex[:8]}"


@dataclass
class Finished:
    run: Run
    feedback: list[Feedback]


def check_resume(client: Client, existing: TracerSession,
                 wanted: set[tuple[str, int]]) -> list[Run]:
    """Refuse a resume that would delete what it does not redo: the runs of (example,
    repetition) pairs outside this request (other splits, examples or repetitions than the
    experiment was started with), or a project's runs that are no experiment's examples (a
    tracing project named as the experiment). ``finished_rows`` deletes every trace not kept.
    Returns the experiment's root runs, for ``finished_rows``."""
    roots = client.store.runs.list(project_ids=[str(existing.id)], is_root=True)
    foreign = [r for r in roots if r.reference_example_id is None]
    outside = {(str(r.reference_example_id), r.metadata.get("repetition"))
               for r in roots if r.reference_example_id is not None} - wanted
    if foreign:
        raise InvalidInputError(
            f"{existing.name!r} holds {len(foreign)} run(s) that are not an experiment's "
            f"examples (a tracing project?): evaluate() resumes experiments only, and would "
            f"delete them; name a new experiment (experiment_prefix=...)")
    if outside:
        raise InvalidInputError(
            f"experiment {existing.name!r} holds {len(outside)} (example, repetition) pair(s) "
            f"this run would not redo (other splits, examples or repetitions than it was "
            f"started with: {existing.metadata.get('dataset_splits') or 'all'} splits, "
            f"{existing.metadata.get('num_repetitions') or 1} repetition(s)): resuming would "
            f"delete them; resume with the same data, splits and num_repetitions, or start a "
            f"new experiment")
    return roots


def finished_rows(
    client: Client,
    experiment_id: uuid.UUID,
    *,
    wanted: set[tuple[str, int]],
    need_feedback: bool,
    errors_count: bool,
    roots: list[Run] | None = None,
) -> dict[tuple[str, int], Finished]:
    """Rows already done in a resumed experiment; deletes every trace and feedback that is not
    part of one (see the module docstring). ``roots``: its root runs, if read already."""
    store = client.store
    if roots is None:
        roots = store.runs.list(project_ids=[str(experiment_id)], is_root=True)
    feedback: dict[str, list[Feedback]] = {}
    for fb in store.feedback.list(project_ids=[str(experiment_id)], pairwise=False):
        if fb.run_id is not None:
            feedback.setdefault(str(fb.run_id), []).append(fb)
    done: dict[tuple[str, int], Finished] = {}
    for run in roots:
        rep = run.metadata.get("repetition")
        if run.reference_example_id is None or not isinstance(rep, int) or run.end_time is None:
            continue
        key = (str(run.reference_example_id), rep)
        if key not in wanted or key in done:
            continue
        if run.error is not None and not errors_count:
            continue
        fbs = feedback.get(str(run.id), [])
        if need_feedback and not fbs:
            continue
        done[key] = Finished(run=run, feedback=fbs)
    keep = {str(f.run.trace_id) for f in done.values()}
    store.runs.delete_traces(str(experiment_id), keep=keep)
    return done


def record_git(client: Client, state: ExperimentState, git: dict[str, Any] | None) -> None:
    """Add the git facts to the experiment's metadata (none outside a work tree)."""
    if git is not None:
        state.metadata = {**state.metadata, "git": git}
        client.update_project(state.id, metadata=state.metadata)


def end_experiment(client: Client, state: ExperimentState) -> None:
    """Record the end time."""
    client.store.projects.end(state.id, utcnow())
