"""``evaluate(..., executor="ray")``: the examples of an experiment run as Ray tasks.

This process (the driver) keeps every job that touches the store or the caller: it creates the
experiment, finds what a resumed one still misses, stores runs and feedback through the usual
batching writers, runs the summary evaluators and fills the results in dataset order. The
workers only compute: each Ray task takes a batch of (example, repetition) pairs and runs them
through the same ``run_units`` as a local experiment (target, timeout, failures as data, then
the row evaluators), with a client whose writer keeps the traced runs in memory. Their wire
dicts come back with the evaluation results and the driver hands them to its own writer, so a
run traced on a worker lands under its root exactly as it would locally.

The target and evaluators travel once (``ray.put``; each worker unpickles them once per
experiment). An example's attachments (a target or evaluator taking ``attachments``) travel
with it: its readers pickle with their bytes, read from the store on the driver as its batch is
sent, since a worker has no store to read them from. Each example's result is pickled on the
worker by itself, so an output that cannot be pickled fails its own row (recorded on its run),
not the whole batch. A task that dies (worker crash, node lost) is retried by Ray; if it still
fails, the experiment stops with that error and ``evaluate(..., experiment=...)`` later runs
only the missing pairs.

``ray`` is imported only when an experiment runs on it (``pip install 'assay[ray]'``).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import io
import math
import os
import pickle
import sys
import threading
import uuid
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from .._gc import relaxed_gc
from ..errors import InvalidInputError, require
from ..schemas import Run
from ..tracing import tracing_context, tracing_is_enabled
from ..tracing._pending import settle as _settle_pending
from ..tracing._sampling import EVALUATORS_PROJECT
from ..tracing._writer import RunWriter
from ._evaluators import RowEvaluator, error_results
from ._results import ExperimentResultRow, ExperimentResults
from ._runner import Plan, Target, Unit, run_units
from ._schemas import EvaluationResult, EvaluationResults
from ._sink import feedback_rows

__all__ = ["ExecutorOption", "RayExecutor", "resolve_executor"]

FEATURE = "evaluate(executor='ray')"
MAX_AUTO_BATCH = 64  # examples per task when batch_size is not given
BATCHES_PER_SLOT = 4  # auto batch size: about this many batches per task slot (load balance)
QUEUED_PER_SLOT = 2  # unbounded: tasks in flight per slot (one running, one waiting)


def _ray() -> Any:
    return require("ray", "ray", FEATURE)


@dataclass
class RayExecutor:
    """Where ``evaluate()`` runs its examples: Ray tasks on a cluster (or a local Ray).

    ``address``: the cluster to join (``"auto"``, ``"ray://head:10001"``); None starts a local
    Ray. When Ray is already initialised in this process it is used as it is, and ``address``,
    ``num_cpus`` and ``runtime_env`` are not applied.
    ``num_cpus``: CPUs of a local Ray started here (None: all of this machine's).
    ``batch_size``: at most this many examples per Ray task; bigger batches spread the per-task
    cost (about a millisecond) over more examples, smaller ones balance the load and report
    progress sooner. None: about four batches per task slot, at most 64 examples each.
    ``max_concurrency`` always wins: a batch never holds more examples than it allows.
    ``task_concurrency``: examples of one batch in flight inside its task (raise it for
    I/O-bound async targets; a CPU-bound target wants 1).
    ``num_cpus_per_task``: CPUs Ray reserves for each task.
    ``runtime_env``: passed to ``ray.init``, e.g. ``{"working_dir": "."}`` when the cluster's
    workers cannot import the module that defines the target.
    """

    address: str | None = None
    num_cpus: int | None = None
    batch_size: int | None = None
    task_concurrency: int = 1
    num_cpus_per_task: float = 1.0
    runtime_env: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("num_cpus", "batch_size", "task_concurrency"):
            value = getattr(self, name)
            if value is None and name != "task_concurrency":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"RayExecutor {name} must be an int >= 1, got {value!r}")
        per_task = self.num_cpus_per_task
        if isinstance(per_task, bool) or not isinstance(per_task, (int, float)) or per_task <= 0:
            raise InvalidInputError(
                f"RayExecutor num_cpus_per_task must be a positive number, got {per_task!r}")
        if self.address is not None and not isinstance(self.address, str):
            raise InvalidInputError(f"RayExecutor address must be a string, got {self.address!r}")
        if self.address not in (None, "local") and self.num_cpus is not None:
            raise InvalidInputError("RayExecutor num_cpus sizes a local Ray started by assay: "
                                    "it cannot be combined with address= (a running cluster)")
        if self.runtime_env is not None and not isinstance(self.runtime_env, Mapping):
            raise InvalidInputError(
                f"RayExecutor runtime_env must be a mapping, got {self.runtime_env!r}")

    # -- UnitExecutor ---------------------------------------------------------------------------
    def check(self, target: Target, evaluators: Sequence[RowEvaluator]) -> None:
        """Everything sent to the workers must pickle: say which one does not, and why."""
        _ray()
        items = [(f"target {target.name!r}", target.fn)]
        items += [(f"evaluator {ev.name!r}", ev.func) for ev in evaluators]
        for what, obj in items:
            try:
                _dumps(obj)
            except Exception as exc:  # noqa: BLE001 - any pickling failure, reported by name
                raise InvalidInputError(
                    f"executor='ray' sends the {what} to Ray workers, but it cannot be pickled "
                    f"({type(exc).__name__}: {exc}). Define it at module level and create "
                    "clients, connections and locks inside it instead of capturing them."
                ) from None

    async def run(self, plan: Plan, units: Sequence[Unit], results: ExperimentResults) -> None:
        """Run ``units`` as batches of Ray tasks, at most ``max_concurrency`` examples in flight."""
        if not units:
            return
        ray = _ray()
        _connect(ray, self)
        if plan.max_concurrency == 0 and len(units) > 1:
            warnings.warn("executor='ray' with max_concurrency=0 (evaluate()'s default) runs one "
                          "example at a time; pass max_concurrency=None to use the whole "
                          "cluster", RuntimeWarning, stacklevel=2)
        slots = max(1, int(ray.cluster_resources().get("CPU", 1) // self.num_cpus_per_task))
        size, max_tasks = self.shape(len(units), plan.max_concurrency, slots)
        config = _WorkerConfig(plan.experiment_id, plan.experiment_name, plan.timeout,
                               plan.error_handling, plan.run_metadata, self.task_concurrency,
                               tracing_is_enabled())
        payload = ray.put(_dumps((plan.target, plan.evaluators, config)))
        task = _remote(ray).options(num_cpus=self.num_cpus_per_task,
                                    name=f"assay-evaluate:{plan.experiment_name}")
        writer = plan.client._tracing_writer()
        batches = (units[i:i + size] for i in range(0, len(units), size))
        pending: dict[asyncio.Future[Any], tuple[Any, Sequence[Unit]]] = {}
        try:
            while True:
                while len(pending) < max_tasks and (batch := next(batches, None)) is not None:
                    items = [(u.example, u.repetition) for u in batch]
                    ref = task.remote([payload], items)  # in a list: resolved on the worker
                    pending[asyncio.wrap_future(ref.future())] = (ref, batch)
                if not pending:
                    return
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    _, batch = pending.pop(fut)
                    _receive(plan, batch, fut.result(), results, writer)
        finally:
            for fut, (ref, _) in pending.items():  # stopped early: free the cluster
                fut.cancel()  # nobody will read its outcome
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001, S110 - already finished or gone
                    pass

    def shape(self, n: int, max_concurrency: int | None, slots: int) -> tuple[int, int]:
        """(examples per task, tasks in flight) so that in-flight examples never exceed the bound
        while every task slot gets work when the bound allows it."""
        auto = math.ceil(n / (BATCHES_PER_SLOT * slots))
        size = self.batch_size or max(1, min(MAX_AUTO_BATCH, auto))
        if max_concurrency is None:
            return size, QUEUED_PER_SLOT * slots
        bound = max(1, max_concurrency)  # 0: one at a time, as locally
        size = min(size, max(1, bound // min(slots, bound)))
        return size, max(1, bound // size)


ExecutorOption = Literal["local", "ray"] | RayExecutor | None


def resolve_executor(value: Any) -> RayExecutor | None:
    """``executor=`` as given to evaluate(): None runs locally."""
    if value is None or value == "local":
        return None
    if value == "ray":
        return RayExecutor()
    if isinstance(value, RayExecutor):
        return value
    raise InvalidInputError(f"executor must be 'local', 'ray' or a RayExecutor, got {value!r}")


# -- starting Ray -------------------------------------------------------------------------------
_init_lock = threading.Lock()


def _connect(ray: Any, ex: RayExecutor) -> None:
    """Join the cluster, or start a local Ray, unless this process already did.

    Ray's local processes die with the *thread* that started them (parent-death signal), so off
    the main thread (``evaluate()`` under Jupyter, a thread pool) Ray is started from a daemon
    thread that lives as long as the process.
    """
    if ray.is_initialized():
        return
    with _init_lock:
        if ray.is_initialized():
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # assay never phones home
        kwargs: dict[str, Any] = {"address": ex.address, "include_dashboard": False,
                                  "ignore_reinit_error": True}
        if ex.num_cpus is not None:
            kwargs["num_cpus"] = ex.num_cpus
        if ex.runtime_env is not None:
            kwargs["runtime_env"] = dict(ex.runtime_env)
        if threading.current_thread() is threading.main_thread():
            ray.init(**kwargs)
            return
        started: Future[None] = Future()

        def keeper() -> None:
            try:
                ray.init(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                started.set_exception(exc)
                return
            started.set_result(None)
            threading.Event().wait()  # keep Ray's processes alive until the process exits

        threading.Thread(target=keeper, name="assay-ray", daemon=True).start()
        started.result()


_remote_fn: Any = None


def _remote(ray: Any) -> Any:
    global _remote_fn
    if _remote_fn is None:
        _remote_fn = ray.remote(_run_batch)
    return _remote_fn


# -- the worker side ----------------------------------------------------------------------------
@dataclass
class _WorkerConfig:
    experiment_id: uuid.UUID | None
    experiment_name: str
    timeout: float | None
    error_handling: str
    run_metadata: dict[str, Any]
    task_concurrency: int
    trace_evaluators: bool  # whether runs evaluators trace themselves are recorded (as here)


class _PayloadError:
    """A worker could not unpickle the target or evaluators (reported by the driver)."""

    def __init__(self, message: str) -> None:
        self.message = message


class _BufferWriter(RunWriter):
    """A RunWriter that only collects (a worker has no store); ``take()`` gives wire dicts."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._items: list[Any] = []

    def _put(self, item: Any) -> None:
        self._items.append(item)

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def take(self) -> list[dict[str, Any]]:
        """Wire dicts of everything collected; a finished run is one merged post. (Read once at
        the end of a batch, so no patch can follow an earlier post; a run still open then, e.g.
        abandoned after a timeout, is sent as it stands.)"""
        _settle_pending(True)  # the runs integrations have logged but not built (they come here)
        items, self._items = self._items, []
        posts: list[dict[str, Any]] = []
        patches: list[dict[str, Any]] = []
        self._sort(items, posts, patches, [], [], local=False)
        return posts


class _BufferClient:
    """The tracing client of a worker: runs stay in memory until the batch returns."""

    def __init__(self) -> None:
        self.writer = _BufferWriter(self)

    def _tracing_writer(self) -> _BufferWriter:
        return self.writer

    def flush(self) -> None:
        pass


_loaded: dict[str, Any] = {}  # payload ref -> (target, evaluators, config), per worker process


def _load(ray: Any, ref: Any) -> Any:
    key = ref.hex()
    value = _loaded.get(key)
    if value is None:
        value = pickle.loads(ray.get(ref))
        while len(_loaded) >= 4:  # a few experiments at once at most; drop the oldest
            _loaded.pop(next(iter(_loaded)))
        _loaded[key] = value
    return value


def _run_batch(payload: list[Any], items: list[tuple[Any, int]]) -> Any:
    """The Ray task: run one batch, return ``(per-example blobs, evaluators' own runs)``."""
    import ray

    try:
        target, evaluators, config = _load(ray, payload[0])
    except Exception as exc:  # noqa: BLE001 - e.g. the target's module is missing here
        return _PayloadError(f"{type(exc).__name__}: {exc}")
    return asyncio.run(_run_batch_async(target, evaluators, config, items))


async def _run_batch_async(target: Target, evaluators: list[RowEvaluator], config: _WorkerConfig,
                           items: list[tuple[Any, int]]) -> tuple[list[bytes | None], bytes]:
    from ..tracing._context import _RUN

    _RUN.set(None)
    client = _BufferClient()
    plan = Plan(target=target, evaluators=evaluators, summary_evaluators=[], client=client,
                experiment_id=config.experiment_id, experiment_name=config.experiment_name,
                max_concurrency=config.task_concurrency, timeout=config.timeout,
                error_handling=config.error_handling, run_metadata=config.run_metadata,
                upload=False)
    rows = ExperimentResults(config.experiment_name, len(items))
    units = [Unit(i, example, rep) for i, (example, rep) in enumerate(items)]
    # as on the driver: runs the evaluators trace themselves go to the "evaluators" project,
    # if tracing is on there (the roots and what the target traces always are)
    with tracing_context(client=client, project_name=EVALUATORS_PROJECT,  # type: ignore[arg-type]  # _BufferClient: duck-typed
                         enabled=config.trace_evaluators), relaxed_gc():
        await run_units(plan, units, rows)
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for wire in client.writer.take():
        by_trace.setdefault(wire["trace_id"], []).append(wire)
    for trace_id in plan.ignored_traces:  # error_handling="ignore": nothing of it is kept
        by_trace.pop(str(trace_id), None)
    packed: list[bytes | None] = []
    for row in rows._rows:
        if row is None:
            packed.append(None)
            continue
        tree = row._tree
        packed.append(_pack(str(tree.id), by_trace.pop(str(tree.trace_id), []),
                            row.evaluation_results.results))
    others = [w for runs in by_trace.values() for w in runs]
    try:
        extra = _dumps(others)
    except Exception:  # noqa: BLE001 - evaluator traces are secondary: never fail the rows
        extra = _dumps([])
    return packed, extra


# -- pickling -----------------------------------------------------------------------------------
def _dumps(value: Any) -> bytes:
    """cloudpickle, plus assay's own context variables by reference.

    A function from ``__main__`` (a script, a notebook) travels by value with the globals it
    uses; a ``@traceable`` function defined there brings the tracing module's context variables
    along, which cannot be pickled. They are module attributes, so they travel as their names.
    """
    buffer = io.BytesIO()
    _pickler_class()(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


_pickler: Any = None


def _pickler_class() -> Any:
    global _pickler
    if _pickler is None:
        from ray import cloudpickle

        class Pickler(cloudpickle.Pickler):
            def reducer_override(self, obj: Any) -> Any:
                if type(obj) is contextvars.ContextVar:
                    where = _context_var_names().get(id(obj))
                    if where is not None:
                        return _context_var, where
                # ray's vendored cloudpickle has no annotations
                return super().reducer_override(obj)  # type: ignore[no-untyped-call]  # cloudpickle

        _pickler = Pickler
    return _pickler


def _context_var_names() -> dict[int, tuple[str, str]]:
    """``id -> (module, attribute)`` of every ContextVar defined by a loaded assay module."""
    out: dict[int, tuple[str, str]] = {}
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "assay" or name.startswith("assay.")):
            for attr, value in list(vars(module).items()):
                if type(value) is contextvars.ContextVar:
                    out[id(value)] = (name, attr)
    return out


def _context_var(module: str, attr: str) -> contextvars.ContextVar[Any]:
    var: contextvars.ContextVar[Any] = getattr(importlib.import_module(module), attr)
    return var


def _pack(root_id: str, runs: list[dict[str, Any]], evals: list[EvaluationResult]) -> bytes:
    """One example's result; if it cannot be pickled, its root run records why instead."""
    value = (root_id, runs, evals)
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)  # plain data: the C pickler
    except Exception:  # noqa: BLE001, S110 - e.g. a local class in the outputs: cloudpickle can
        pass
    try:
        return _dumps(value)
    except Exception as exc:  # noqa: BLE001 - any pickling failure fails this row only
        note = (f"the result could not be sent back from the Ray worker ({type(exc).__name__}: "
                f"{exc}); its outputs and child runs are not stored")
        root = dict(next(w for w in runs if w["id"] == root_id))
        root["outputs"] = None
        root["error"] = f"{root['error']}\n\n{note}" if root.get("error") else note
        try:
            _dumps(evals)
        except Exception:  # noqa: BLE001
            evals = error_results(list(dict.fromkeys(r.key for r in evals)), exc)
        return _dumps((root_id, [root], evals))


# -- the driver side ----------------------------------------------------------------------------
def _receive(plan: Plan, batch: Sequence[Unit], reply: Any, results: ExperimentResults,
             writer: Any) -> None:
    """Hand a finished batch's runs to the writer, its feedback to the sink, its rows to results."""
    if isinstance(reply, _PayloadError):
        raise InvalidInputError(
            f"the Ray workers could not load the target or evaluators ({reply.message}). Workers "
            "import modules by name: make the defining module importable there (install it, or "
            "RayExecutor(runtime_env={'working_dir': ...}))")
    packed, extra = reply
    for wire in pickle.loads(extra):
        writer.patch(_WireRun(wire))
    for unit, blob in zip(batch, packed, strict=True):
        if blob is None:  # failed, and error_handling="ignore"
            continue
        root_id, runs, evals = pickle.loads(blob)
        for wire in runs:
            writer.patch(_WireRun(wire))
        root = next(w for w in runs if w["id"] == root_id)
        row = ExperimentResultRow(unit.example, tree=_WireTree(root, runs),
                                  evaluation_results=EvaluationResults(results=evals))
        if plan.sink is not None and evals:
            plan.sink.add(feedback_rows(evals, uuid.UUID(root_id), uuid.UUID(root["trace_id"]),
                                        plan.experiment_id))
        results._set(unit.index, row)


class _WireRun:
    """A finished run already in wire form, queued on the driver's RunWriter like a RunTree
    (the writer stores it as one post, batched with everything else)."""

    __slots__ = ("_data", "_id", "_sent")
    _closed = True

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self._id = data["id"]
        self._sent = 0

    def _wire(self, final: bool, micros: bool = False) -> dict[str, Any]:
        return self._data  # times as the worker wrote them: the store reads either form

    def _row(self) -> dict[str, Any]:
        return self._data  # the journal takes a post as a dict as well as a list of values


class _WireTree:
    """What ``ExperimentResultRow`` reads from a worker's trace: outputs, and the run record
    (with its children) built only when asked for, as from a local RunTree."""

    __slots__ = ("_root", "_runs")

    def __init__(self, root: dict[str, Any], runs: list[dict[str, Any]]) -> None:
        self._root = root
        self._runs = runs

    @property
    def outputs(self) -> dict[str, Any] | None:
        return self._root.get("outputs")

    def to_run(self) -> Run:
        from .._usage import derive_usage

        children: dict[str, list[dict[str, Any]]] = {}
        for wire in self._runs:
            if wire.get("parent_run_id") is not None:
                children.setdefault(wire["parent_run_id"], []).append(wire)

        def build(wire: dict[str, Any]) -> Run:
            data = dict(wire)
            data.update(derive_usage(data))
            data["status"] = ("error" if data.get("error") else
                              "success" if data.get("end_time") else "pending")
            kids = sorted(children.get(wire["id"], []), key=lambda w: w["dotted_order"])
            data["child_runs"] = [build(k) for k in kids]
            return Run.model_validate(data)

        return build(self._root)
