"""``evaluate()`` / ``aevaluate()``: run a target over a dataset as a tracked experiment.

One async core (``aevaluate``); ``evaluate`` is a thin sync wrapper that runs it on a fresh event
loop, or, when the caller already has a running loop (Jupyter), on a worker thread. Setup (the
dataset, the experiment, what a resumed experiment already finished) happens before the first
example runs, so a bad argument fails fast and ``blocking=False`` returns an object that fills
in as rows complete. What can follow the first examples starts once they are all launched
(``_Followers``), so it neither delays nor competes with their start: the rest of the dataset
(the set-up reads only its first page), a fresh experiment's project row (its id claimed up
front; nothing naming it is stored before the row exists, see ``Creation``) and the git facts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from .._gc import relaxed_gc
from .._ids import new_id_text, utcnow
from .._sync import offload, run_sync
from ..errors import InvalidInputError
from ..schemas import Example, Feedback, TracerSession
from ..store._examples import StoredExample
from ..tracing import tracing_context
from ..tracing._sampling import EVALUATORS_PROJECT
from ._attachments import wants_attachments
from ._comparative import aevaluate_comparative, evaluate_comparative
from ._data import ResolvedData, dataset_id_of, load_dataset, resolve_data
from ._evaluators import adapt_evaluator, adapt_summary_evaluator, as_list
from ._experiment import (
    Creation,
    ExperimentState,
    check_resume,
    check_same_dataset,
    end_experiment,
    experiment_metadata,
    find_experiment,
    finished_rows,
    new_name,
    open_experiment,
    record_git,
)
from ._git import git_info
from ._ray import ExecutorOption, resolve_executor
from ._results import ExperimentResultRow, ExperimentResults
from ._runner import (
    MemoryClient,
    Plan,
    Unit,
    adapt_target,
    quick_gil_handoff,
    run_summary,
    run_units,
)
from ._schemas import EvaluationResult, EvaluationResults
from ._sink import FeedbackSink, feedback_rows
from ._stream import ExampleStream

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["aevaluate", "evaluate"]

ErrorHandling = Literal["log", "ignore"]


@dataclass
class _Options:
    """One evaluate() call's arguments, passed around as one object."""

    target: Any
    data: Any
    evaluators: Any
    summary_evaluators: Any
    metadata: Any
    experiment_prefix: str | None
    description: str | None
    max_concurrency: int | None
    num_repetitions: int | None
    client: Client | None
    experiment: Any
    upload_results: bool
    error_handling: str
    as_of: datetime | str | None
    splits: Sequence[str] | None
    timeout: float | None
    executor: Any


@dataclass
class _Prepared:
    plan: Plan
    units: Iterable[Unit]  # a list, or a generator over an ExampleStream
    results: ExperimentResults
    state: ExperimentState | None
    client: Client | None
    creation: Creation | None = None  # the experiment's row, written once examples run
    examples: ExampleStream | None = None  # the dataset, read on once examples run


def _check(max_concurrency: Any, num_repetitions: Any, error_handling: Any, timeout: Any) -> None:
    if max_concurrency is not None and (
            isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int)
            or max_concurrency < 0):
        raise InvalidInputError(
            f"max_concurrency must be None (no limit) or an int >= 0, got {max_concurrency!r}")
    if num_repetitions is not None and (
            isinstance(num_repetitions, bool) or not isinstance(num_repetitions, int)
            or num_repetitions < 1):
        raise InvalidInputError(f"num_repetitions must be an int >= 1, got {num_repetitions!r}")
    if error_handling not in ("log", "ignore"):
        raise InvalidInputError(f"error_handling must be 'log' or 'ignore', got {error_handling!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise InvalidInputError(f"timeout must be a positive number of seconds, got {timeout!r}")


def _feedback_result(fb: Feedback) -> EvaluationResult:
    source = (fb.feedback_source.metadata if fb.feedback_source else None) or {}
    run = source.get("__run") or {}
    return EvaluationResult(key=fb.key, score=fb.score, value=fb.value, comment=fb.comment,
                            correction=fb.correction, source_run_id=run.get("run_id"),
                            extra=fb.extra)


def _resolve_data(o: _Options, existing: TracerSession | None) -> ResolvedData:
    """The examples to run; a resumed experiment keeps its dataset, version and splits."""
    files = wants_attachments(o.target, as_list(o.evaluators, "evaluators"))
    if existing is not None and o.data is None:
        if existing.reference_dataset_id is None:
            raise InvalidInputError(f"experiment {existing.name!r} has no dataset: pass data=")
        meta = existing.metadata
        return load_dataset(o.client, str(existing.reference_dataset_id),  # type: ignore[arg-type]  # client resolved
                            as_of=o.as_of or meta.get("dataset_version"),
                            splits=o.splits or meta.get("dataset_splits"),
                            attachments=files)
    ds_id = dataset_id_of(o.client, o.data) if o.client is not None else None
    as_of = o.as_of
    if existing is not None and ds_id is not None:
        check_same_dataset(existing, ds_id)
        if as_of is None:  # the version the experiment started on
            as_of = existing.metadata.get("dataset_version")
    if ds_id is not None:  # a fresh local experiment starts while the examples are read
        return load_dataset(o.client, ds_id, as_of=as_of, splits=o.splits,  # type: ignore[arg-type]  # remote too
                            stream=existing is None and o.executor is None, checked=True,
                            attachments=files)
    name_hint = (o.experiment if isinstance(o.experiment, str) and existing is None
                 else o.experiment_prefix)
    return resolve_data(o.client, o.data, as_of=as_of, splits=o.splits, upload=o.upload_results,
                        dataset_name=new_name(name_hint or "examples"))


def _stream_units(examples: ExampleStream, reps: int) -> Iterator[Unit]:
    """Units in order as the examples arrive (a fresh experiment: nothing done yet)."""
    n = len(examples)
    for rep in range(reps):
        for i, ex in enumerate(examples):
            yield Unit(rep * n + i, ex, rep)


def _eager_units(examples: Sequence[Example | StoredExample], reps: int,
                 done: dict[tuple[str, int], Any], results: ExperimentResults) -> list[Unit]:
    """Units still to run; rows a resumed experiment already finished go into ``results``."""
    n = len(examples)
    units: list[Unit] = []
    for rep in range(reps):
        for i, ex in enumerate(examples):
            index = rep * n + i
            prior = done.get((str(ex.id), rep)) if done else None
            if prior is None:
                units.append(Unit(index, ex, rep))
            else:
                evals = EvaluationResults(results=[_feedback_result(f) for f in prior.feedback])
                results._set(index, ExperimentResultRow(ex, run=prior.run,
                                                        evaluation_results=evals))
    return units


def _prepare(o: _Options) -> _Prepared:
    """Everything before the first example: arguments, data, experiment, what is already done.

    The examples' reader thread runs meanwhile: a quick GIL hand-over keeps it
    from holding this thread's next statement up to 5 ms each time it waits on the database."""
    with relaxed_gc(), quick_gil_handoff():  # relaxed: thousands of examples, all kept
        return _prepare_inner(o)


def _prepare_inner(o: _Options) -> _Prepared:
    _check(o.max_concurrency, o.num_repetitions, o.error_handling, o.timeout)
    remote = resolve_executor(o.executor)
    if o.metadata is not None and not isinstance(o.metadata, dict):
        raise InvalidInputError(f"metadata must be a dict, got {type(o.metadata).__name__}")
    for what, value in (("experiment_prefix", o.experiment_prefix),
                        ("description", o.description)):
        if value is not None and not isinstance(value, str):  # before anything is created
            raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}")
    tgt = adapt_target(o.target)
    evs = [adapt_evaluator(e) for e in as_list(o.evaluators, "evaluators")]
    sevs = [adapt_summary_evaluator(e)
            for e in as_list(o.summary_evaluators, "summary_evaluators")]
    if remote is not None:
        remote.check(tgt, evs)  # e.g. unpicklable for Ray: before the experiment exists
    needs_client = o.upload_results or isinstance(o.data, (str, uuid.UUID)) or (
        o.data is not None and hasattr(o.data, "id") and hasattr(o.data, "name"))
    if o.client is None and needs_client:
        from ..client import get_default_client

        o.client = get_default_client()

    existing = None
    if o.experiment is not None:
        if not o.upload_results:
            raise InvalidInputError("experiment= continues a stored experiment: it needs "
                                    "upload_results=True")
        existing = find_experiment(o.client, o.experiment)  # type: ignore[arg-type]  # client resolved
    generated = not (isinstance(o.experiment, str) and existing is None)
    # A fresh local experiment with a name of our own writes its row while its first examples
    # run (see Creation). Runs journaled earlier (a previous experiment) are folded first:
    # folded beside its examples, they would slow its runs and skew the latencies it measures.
    created_later = (o.upload_results and existing is None and generated and remote is None
                     and not o.client.is_remote)  # type: ignore[union-attr]  # client resolved
    if created_later:  # before the dataset's pages hold a connection
        o.client.store.settle()  # type: ignore[union-attr]  # client resolved
    resolved = _resolve_data(o, existing)
    reps = o.num_repetitions or (int(existing.metadata.get("num_repetitions") or 1)
                               if existing is not None else 1)

    wanted: set[tuple[str, int]] = set()
    roots = None  # the resumed experiment's root runs, read once
    if existing is not None:  # before its metadata changes: a mismatch changes nothing
        wanted = {(str(ex.id), r) for r in range(reps) for ex in resolved.examples}
        roots = check_resume(o.client, existing, wanted)  # type: ignore[arg-type]  # client resolved
    state: ExperimentState | None = None
    creation: Creation | None = None
    if o.upload_results:
        assert o.client is not None
        meta = experiment_metadata(o.metadata, resolved, reps)
        name = o.experiment if not generated else new_name(o.experiment_prefix or tgt.name)
        create = functools.partial(
            open_experiment, o.client, name=name, description=o.description, metadata=meta,
            dataset_id=resolved.dataset_id, existing=existing, generated_name=generated)
        if created_later:  # its id claimed now; nothing names it in the store before its row
            claimed = uuid.UUID(new_id_text())
            writer = o.client._tracing_writer()
            creation = Creation(functools.partial(_quickly, create, id=claimed,
                                                  start_time=utcnow()),  # before its runs
                                on_failure=lambda: writer.drop_session(str(claimed)))
            writer.hold(creation.done)
            state = ExperimentState(id=claimed, name=name, created=True, metadata=meta)
        else:
            state = create()
        exp_id, exp_name = state.id, state.name
    else:
        exp_id, exp_name = None, new_name(o.experiment_prefix or tgt.name)

    examples = resolved.examples
    n = len(examples)
    results = ExperimentResults(exp_name, n * reps, experiment_id=exp_id,
                                client=o.client if o.upload_results else None)
    done: dict[tuple[str, int], Any] = {}
    if state is not None and not state.created:
        wanted = wanted or {(str(ex.id), r) for r in range(reps) for ex in examples}
        done = finished_rows(o.client, state.id, wanted=wanted,  # type: ignore[arg-type]  # client resolved
                             need_feedback=bool(evs), errors_count=o.error_handling == "log",
                             roots=roots)
    units: Iterable[Unit]
    if isinstance(examples, ExampleStream) and not done:
        units = _stream_units(examples, reps)
    else:
        units = _eager_units(examples, reps, done, results)
    plan = Plan(
        target=tgt, evaluators=evs, summary_evaluators=sevs,
        client=o.client if o.upload_results else MemoryClient(), experiment_id=exp_id,
        experiment_name=exp_name, max_concurrency=o.max_concurrency, timeout=o.timeout,
        error_handling=o.error_handling, run_metadata=dict(o.metadata or {}),
        upload=o.upload_results, remote=remote,
    )
    return _Prepared(plan, units, results, state, o.client, creation,
                     examples if isinstance(examples, ExampleStream) else None)


async def _execute(prep: _Prepared) -> ExperimentResults:
    """Run the prepared units, then flush, summarize and close the experiment."""
    from ..tracing._context import _RUN

    _RUN.set(None)  # this task's own context: roots are roots even inside a caller's trace
    # Runs that evaluators trace themselves (an LLM judge's calls) become roots of the
    # "evaluators" project of the same store, as in LangSmith, not of the experiment.
    with tracing_context(client=prep.plan.client, project_name=EVALUATORS_PROJECT):
        return await _execute_inner(prep)


class _Followers:
    """Set-up that follows the launch of the first examples instead of preceding it: the rest
    of the dataset, a fresh experiment's row, the git facts (several git subprocesses: tens of
    milliseconds, mostly waiting, and CPU of their own). Started once (``launch``)."""

    def __init__(self, prep: _Prepared) -> None:
        self.prep = prep
        self.launched = False
        self.git: asyncio.Future[None] | None = None

    def launch(self) -> None:
        if self.launched:
            return
        self.launched = True
        prep = self.prep
        if prep.examples is not None:
            prep.examples.start()
        if prep.creation is not None:
            prep.creation.start()
        if prep.state is not None:
            self.git = offload(_record_git, prep)


async def _execute_inner(prep: _Prepared) -> ExperimentResults:
    plan, results = prep.plan, prep.results
    followers = _Followers(prep)
    plan.on_launch = followers.launch
    stored = False  # the feedback and runs left at the end went to the store
    try:
        if plan.upload:
            plan.sink = FeedbackSink(prep.client.store, interval=0.02,  # type: ignore[union-attr]  # client resolved
                                     hold=prep.creation, experiment_id=plan.session_id,
                                     writer=plan.writer)
            plan.sink.start()
        try:
            with relaxed_gc():
                if plan.remote is not None:
                    followers.launch()
                    assert isinstance(prep.units, list)  # never a stream with an executor
                    await plan.remote.run(plan, prep.units, results)
                else:
                    await _while_created(prep, run_units(plan, prep.units, results))
        finally:
            followers.launch()  # when the examples failed before they were launched
        rows = [r for r in results._rows if r is not None]
        summary = await run_summary(plan, rows)  # needs the rows, not the store
        results.summary_results = EvaluationResults(results=summary)
        if followers.git is not None:
            await followers.git
        if plan.sink is not None:
            rest = await plan.sink.detach()
            stored = True
            await offload(_store_the_end, prep, rest, summary)
    except BaseException as exc:
        followers.launch()
        try:
            if plan.sink is not None and not stored:  # what did run is kept, runs first
                await offload(prep.client.flush)  # type: ignore[union-attr]  # client resolved
                with contextlib.suppress(Exception):  # a failed write: raised already, or
                    await plan.sink.close()           # second to the error being raised
        finally:
            if followers.git is not None:  # its write never outlives the experiment
                await asyncio.gather(followers.git, return_exceptions=True)
            results._finish(exc)
        raise
    results._finish()
    return results


def _quickly(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn`` with a quick GIL hand-over: on a thread beside the event loop, it should not
    keep the loop from its next example for a whole 5 ms switch interval."""
    with quick_gil_handoff():
        return fn(*args, **kwargs)


async def _while_created(prep: _Prepared, work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` (the examples) while the experiment's row is written (``prep.creation``);
    if writing it fails, stop them and raise that. Returns once both are done."""
    if prep.creation is None:
        return await work
    creation = prep.creation
    running: asyncio.Future[Any] = asyncio.ensure_future(work)
    created = asyncio.wrap_future(creation.future)
    try:
        await asyncio.wait({running, created}, return_when=asyncio.FIRST_COMPLETED)
        if created.done() and created.exception() is not None:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            created.result()  # raises: the experiment could not be created
        await running
        state = await created
    except BaseException:
        running.cancel()
        creation.start()  # the examples stopped before their launch started it
        await asyncio.gather(running, created, return_exceptions=True)
        raise
    prep.results.experiment_name = prep.plan.experiment_name = state.name  # renamed on a clash
    if prep.state is not None:
        prep.state.name = state.name


def _record_git(prep: _Prepared) -> None:
    assert prep.client is not None and prep.state is not None
    if prep.creation is not None:
        prep.creation.result()  # the row to record them in (raises if it failed)
    record_git(prep.client, prep.state, git_info())


def _store_the_end(prep: _Prepared, feedback: list[dict[str, Any]],
                   summary: list[EvaluationResult]) -> None:
    """Everything an experiment stores after its last example, on one thread: the last runs,
    then the feedback still queued (after its runs: feedback is never stored before the run it
    scores; one after the other is measured faster than side by side: the two only contend
    for the interpreter and the write lock), then what needs them stored (dropping the traces
    of ignored errors), the summary feedback and the end time."""
    client, state, sink = prep.client, prep.state, prep.plan.sink
    assert client is not None and state is not None and sink is not None
    client.flush()
    sink.finish(feedback)
    if prep.plan.ignored_traces:
        client.store.runs.delete_traces(str(state.id), trace_ids=prep.plan.ignored_traces)
    if summary:
        rows = feedback_rows(summary, None, None, state.id)
        for i, row in enumerate(rows):  # fixed ids: a resumed experiment replaces, never adds
            row["id"] = uuid.uuid5(state.id, f"summary:{row['key']}:{i}")
            del row["run_id"], row["trace_id"]
        client.store.feedback.create_many(rows)
    end_experiment(client, state)


async def aevaluate(
    target: Any,
    /,
    data: Any = None,
    evaluators: Sequence[Any] | None = None,
    summary_evaluators: Sequence[Any] | None = None,
    metadata: dict[str, Any] | None = None,
    experiment_prefix: str | None = None,
    description: str | None = None,
    max_concurrency: int | None = None,
    num_repetitions: int | None = None,
    client: Client | None = None,
    blocking: bool = True,
    experiment: Any = None,
    upload_results: bool = True,
    error_handling: ErrorHandling = "log",
    *,
    as_of: datetime | str | None = None,
    splits: Sequence[str] | None = None,
    timeout: float | None = None,
    executor: ExecutorOption = None,
    load_nested: bool = False,
    randomize_order: bool = False,
) -> ExperimentResults:
    """Evaluate ``target`` on every example of ``data``, ``num_repetitions`` times.

    Same parameters as LangSmith's ``aevaluate`` (``max_concurrency=None``: no limit), plus
    ``as_of`` / ``splits`` to pin the dataset version and splits, and ``timeout``: seconds per
    target call, past which the run is recorded as a ``TimeoutError``. ``experiment=`` names an
    experiment to continue: only its missing (example, repetition) pairs run (a name that does
    not exist yet creates the experiment under exactly that name). Returns ExperimentResults;
    read its statistics with ``client.read_project(project_name=results.experiment_name,
    include_stats=True)``.

    ``target`` a tuple (or list) of two or more stored experiments on one dataset makes it a
    pairwise evaluation, as in LangSmith: ``evaluators`` are then comparative evaluators and
    ``randomize_order`` / ``load_nested`` apply; it returns ``ComparativeExperimentResults``
    (``evaluate_comparative`` is the same call, typed as such; see ``_comparative``).

    ``executor`` says where the (example, repetition) pairs run: ``None``/``"local"`` on this
    event loop (threads for sync code), ``"ray"`` or ``RayExecutor(address=..., num_cpus=...,
    batch_size=...)`` as Ray tasks on a cluster (``pip install 'assay[ray]'``; a local Ray is
    started when none is running). On Ray the target and the row evaluators run on the workers,
    in batches, so they must be picklable (cloudpickle; a clear error says which one is not);
    runs the target traces there (``@traceable``, llm and tool runs) come back with each result
    and are stored under its root run. This process still creates the experiment, stores runs
    and feedback in batches, runs the summary evaluators and fills the results in dataset
    order; ``max_concurrency`` bounds the examples in flight on the cluster (``None``: every
    CPU kept busy), ``timeout``, ``error_handling`` and resuming behave as locally.
    """
    if isinstance(target, (tuple, list)):  # LangSmith's pairwise form
        _check_pairwise_args(data=data, summary_evaluators=summary_evaluators,
                             num_repetitions=num_repetitions, experiment=experiment,
                             upload_results=upload_results, as_of=as_of, splits=splits,
                             timeout=timeout, executor=executor, blocking=blocking)
        return await aevaluate_comparative(  # type: ignore[return-value]  # see the overloads
            target, evaluators or (), experiment_prefix, description,
            5 if max_concurrency is None else max_concurrency, client, metadata,
            load_nested, randomize_order)
    prep = await offload(_prepare, _Options(
        target, data, evaluators, summary_evaluators, metadata, experiment_prefix, description,
        max_concurrency, num_repetitions, client, experiment, upload_results, error_handling,
        as_of, splits, timeout, executor))
    task = asyncio.get_running_loop().create_task(_execute(prep))
    if not blocking:
        prep.results._task = task  # type: ignore[attr-defined]  # keep it referenced
        return prep.results
    return await task


def evaluate(
    target: Any,
    /,
    data: Any = None,
    evaluators: Sequence[Any] | None = None,
    summary_evaluators: Sequence[Any] | None = None,
    metadata: dict[str, Any] | None = None,
    experiment_prefix: str | None = None,
    description: str | None = None,
    max_concurrency: int | None = 0,
    num_repetitions: int | None = None,
    client: Client | None = None,
    blocking: bool = True,
    experiment: Any = None,
    upload_results: bool = True,
    error_handling: ErrorHandling = "log",
    *,
    as_of: datetime | str | None = None,
    splits: Sequence[str] | None = None,
    timeout: float | None = None,
    executor: ExecutorOption = None,
    load_nested: bool = False,
    randomize_order: bool = False,
) -> ExperimentResults:
    """The sync form of ``aevaluate`` (``max_concurrency=0``: one example at a time).

    Works with or without a running event loop in the calling thread (in Jupyter the experiment
    runs on a worker thread while the call waits). ``blocking=False`` returns at once; iterate
    the results to receive rows as they finish, or call ``results.wait()``.

    ``executor="ray"`` (or a ``RayExecutor``) runs the examples on a Ray cluster; see
    ``aevaluate``. With Ray, pass ``max_concurrency=None`` (or a number): the default of 0 runs
    one example at a time there too.
    """
    if isinstance(target, (tuple, list)):  # LangSmith's pairwise form
        _check_pairwise_args(data=data, summary_evaluators=summary_evaluators,
                             num_repetitions=num_repetitions, experiment=experiment,
                             upload_results=upload_results, as_of=as_of, splits=splits,
                             timeout=timeout, executor=executor, blocking=blocking)
        return evaluate_comparative(  # type: ignore[return-value]  # see the overloads
            target, evaluators or (), experiment_prefix, description,
            max_concurrency or 1, client, metadata, load_nested, randomize_order)
    prep = _prepare(_Options(
        target, data, evaluators, summary_evaluators, metadata, experiment_prefix, description,
        max_concurrency, num_repetitions, client, experiment, upload_results, error_handling,
        as_of, splits, timeout, executor))
    if blocking:  # here, or on a helper thread when this thread already runs a loop
        return run_sync(_execute(prep))
    ctx = contextvars.copy_context()
    thread = threading.Thread(target=ctx.run, args=(_run_quietly, prep),
                              name=f"assay-evaluate-{prep.results.experiment_name}")
    prep.results._thread = thread
    thread.start()
    return prep.results


def _check_pairwise_args(**given: Any) -> None:
    """A pairwise evaluation runs no target: the arguments of a new experiment are refused by
    name rather than ignored."""
    defaults = {"upload_results": True, "blocking": True}
    wrong = sorted(k for k, v in given.items()
                   if v != defaults.get(k) and not (k == "num_repetitions" and v == 1))
    if wrong:
        raise InvalidInputError(
            f"{', '.join(wrong)} cannot be given when the target is a tuple of existing "
            f"experiments (a pairwise evaluation scores their stored runs)")


def _run_quietly(prep: _Prepared) -> None:
    """Thread body: the error is kept on the results (``wait()`` re-raises it)."""
    try:  # on the process's loop, like every sync entry point: agents' clients stay usable
        run_sync(_execute(prep))
    except BaseException:  # noqa: BLE001 - surfaced through ExperimentResults
        pass

