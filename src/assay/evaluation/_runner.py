"""The execution core: every (example, repetition) as one traced root run, then its evaluators.

One async core serves ``evaluate`` and ``aevaluate``. A unit holds one of ``max_concurrency``
slots from the start of its target call to the end of its last evaluator, so target and
evaluators together never exceed the bound. Units are pulled by a fixed pool of workers (no task
per example, no semaphore), and with a bound of 0 or 1 they run inline: a sync target is then
called on the loop's thread, with no thread hop per example. Results are placed by index, so
they come back in dataset order whatever finishes first. An executor in ``Plan.remote`` (e.g.
``RayExecutor``) runs the units elsewhere instead; on each of its workers it calls ``run_units``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import InvalidInputError
from ..integrations._registry import (
    AgentAdapter,
    adapter_for,
    instrument_loaded,
    supported_kinds,
)
from ..schemas import Example
from ..store._examples import StoredExample
from ..tracing._context import _RUN
from ..tracing._run_tree import _as_outputs, _now_us, fast_root
from ..tracing._writer import RunWriter
from ._attachments import example_args, wrap_target
from ._evaluators import RowEvaluator, SummaryEvaluator
from ._results import ExperimentResultRow, ExperimentResults
from ._schemas import EvaluationResult

if TYPE_CHECKING:
    from ._sink import FeedbackSink

__all__ = ["Plan", "Target", "UnitExecutor", "adapt_target", "run_units"]

MAX_THREADS = 128  # sync targets and evaluators: at most this many threads however high the bound


@dataclass
class Target:
    fn: Callable[..., Any]
    is_async: bool
    name: str
    takes_example: bool = False  # fn is called with the example, not its inputs (attachments)


def adapt_target(target: Any) -> Target:
    """A sync or async callable on the inputs dict, an object with ``ainvoke``/``invoke``, or an
    agent of a framework assay knows (``assay.integrations``: run through its adapter, its
    outputs stored as the adapter's JSON-safe dict).

    Also instruments every framework already imported, so a plain function calling one inside
    is traced too."""
    if target is None:
        raise InvalidInputError("evaluate() needs a target: a function of the example's inputs")
    instrument_loaded(adopt=True)  # and agents built since the last experiment
    adapter = adapter_for(target)
    if adapter is not None:
        return _adapter_target(adapter)
    name = getattr(target, "__name__", None) or type(target).__name__
    if name == "<lambda>":
        name = "Target"
    if not inspect.isfunction(target) and not inspect.ismethod(target):
        ainvoke = getattr(target, "ainvoke", None)
        if callable(ainvoke):
            return Target(ainvoke, True, getattr(target, "name", None) or type(target).__name__)
        invoke = getattr(target, "invoke", None)
        if callable(invoke):
            return Target(invoke, False, getattr(target, "name", None) or type(target).__name__)
    if not callable(target):
        cls = type(target)
        raise InvalidInputError(
            f"target {target!r} is not callable: pass a function of the inputs dict, an object "
            f"with invoke/ainvoke, or {supported_kinds()}; got a {cls.__module__}."
            f"{cls.__qualname__}")
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params is not None:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                      p.VAR_POSITIONAL)]
        if not positional:
            raise InvalidInputError(
                f"target {name!r} takes no positional parameter: it is called with the "
                "example's inputs dict, e.g. def target(inputs: dict) -> dict")
    is_async = inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None))  # noqa: B004 - the method itself
    names = example_args(target)  # LangSmith's (inputs, attachments, metadata) convention
    if names is not None:
        return Target(wrap_target(target, names, is_async), is_async, name, takes_example=True)
    return Target(target, is_async, name)


def _adapter_target(adapter: AgentAdapter) -> Target:
    async def run_agent(inputs: dict[str, Any]) -> dict[str, Any]:
        return adapter.outputs(await adapter.arun(inputs))

    return Target(run_agent, True, str(adapter.name or adapter.framework))


@dataclass
class Unit:
    index: int
    example: Example | StoredExample
    repetition: int


class UnitExecutor(Protocol):
    """Runs an experiment's units somewhere other than this event loop (e.g. ``RayExecutor``).

    ``check`` is called while ``evaluate()`` sets up, before the experiment exists, so a target
    that cannot run there fails fast. ``run`` must leave what ``run_units`` leaves: every row
    in ``results`` by index, runs handed to ``plan.client``'s writer, feedback to ``plan.sink``.
    """

    def check(self, target: Target, evaluators: Sequence[RowEvaluator]) -> None: ...

    async def run(self, plan: Plan, units: Sequence[Unit], results: ExperimentResults) -> None: ...


@dataclass
class Plan:
    """Everything a run needs, decided once before the first example."""

    target: Target
    evaluators: list[RowEvaluator]
    summary_evaluators: list[SummaryEvaluator]
    client: Any  # Client, or the in-memory stand-in when results are not uploaded
    experiment_id: uuid.UUID | None
    experiment_name: str
    max_concurrency: int | None
    timeout: float | None
    error_handling: str
    run_metadata: dict[str, Any]
    upload: bool
    remote: UnitExecutor | None = None  # None: the units run on this event loop
    sink: FeedbackSink | None = None
    executor: ThreadPoolExecutor | None = None  # threads for sync targets and evaluators
    ignored_traces: list[uuid.UUID] = field(default_factory=list)
    # called (it may be more than once) when the first examples are on their way (on a pool:
    # every worker has started its first one), so set-up work that can follow them does not
    # delay their launch
    on_launch: Callable[[], None] | None = None
    session_id: str | None = field(init=False, default=None)  # experiment_id as run wire text
    writer: RunWriter | None = field(init=False, default=None)  # the client's run writer
    inline_target: bool = field(init=False, default=False)  # set by run_units

    def __post_init__(self) -> None:
        if self.experiment_id is not None:
            self.session_id = str(self.experiment_id)
        self.writer = self.client._tracing_writer()


class _DiscardWriter(RunWriter):
    """Where runs go when results are not uploaded: nowhere (the trees stay in memory).

    A RunWriter whose queue drops everything, so it answers whatever the tracing hot path calls.
    """

    def _put(self, item: Any) -> None:
        pass

    def flush(self, timeout: float | None = None) -> bool:
        return True


class MemoryClient:
    """Stands in for a Client when ``upload_results=False``: runs are traced, never stored."""

    def __init__(self) -> None:
        self._writer = _DiscardWriter(self)

    def _tracing_writer(self) -> RunWriter:
        return self._writer

    def flush(self) -> None:
        pass


async def _call_target(plan: Plan, inputs: Any) -> Any:
    """``inputs``: the example's inputs dict, or the example itself for a target taking it."""
    t = plan.target
    if t.is_async:
        coro = t.fn(inputs)
    elif plan.executor is not None:  # the thread inherits the run context: children nest
        ctx = contextvars.copy_context()
        coro = asyncio.get_running_loop().run_in_executor(plan.executor, ctx.run, t.fn, inputs)
    else:
        out = t.fn(inputs)
        if out.__class__ is dict:  # the common case skips the awaitable check
            return out
        return await out if inspect.isawaitable(out) else out
    if plan.timeout is None:
        out = await coro
    else:
        try:
            out = await asyncio.wait_for(coro, plan.timeout)
        except TimeoutError:
            raise TimeoutError(
                f"the target took longer than the per-example timeout of {plan.timeout:g}s"
            ) from None
    return await out if inspect.isawaitable(out) else out


async def _run_unit(plan: Plan, unit: Unit) -> ExperimentResultRow | None:
    ex = unit.example
    meta = dict(plan.run_metadata)
    meta["repetition"] = unit.repetition
    # The root run is built here and made the parent of everything the target traces. It is
    # handed to the writer once, finished (``trace()`` would also send its start): with slow
    # targets the start would be stored on its own and the end as an update, twice the store
    # work per example. Children still stream in as they happen.
    tree = fast_root(plan.target.name, "chain", ex.inputs, plan.client, plan.session_id, None,
                     meta, ex.id_text if ex.__class__ is StoredExample else ex.id)
    tree._writer = plan.writer  # resolved once; children the target traces inherit it
    failed = False
    # The root is made current directly (not with tracing_context(parent=...)): the scoped
    # switches stay those of the experiment, which is what that would give, minus a context
    # manager and a config object per example.
    token = _RUN.set(tree)
    try:
        if plan.inline_target:  # sync, no threads, no timeout: called right here
            out = plan.target.fn(ex if plan.target.takes_example else ex.inputs)
            if out.__class__ is not dict and inspect.isawaitable(out):
                out = await out
        else:
            out = await _call_target(plan, ex if plan.target.takes_example else ex.inputs)
    except Exception as exc:  # recorded on the run; the experiment goes on
        tree.end(error=exc)
        failed = True
    except BaseException as exc:  # cancelled or interrupted: record it, then stop
        tree.end(error=exc)
        tree.patch()
        raise
    else:  # tree.end(outputs=out), inlined: the end time stays one the target gave it
        tree.outputs = _as_outputs(out)
        if tree._end_us is None:
            tree._end_us = _now_us()
    finally:
        _RUN.reset(token)
    tree._closed = True  # tree.patch(), inlined: ended above, its writer known
    plan.writer.patch(tree)  # type: ignore[union-attr]  # set in __post_init__
    if failed and plan.error_handling == "ignore":
        plan.ignored_traces.append(tree.trace_id)
        return None
    row = ExperimentResultRow(ex, tree=tree)
    results: list[Any] = []
    for ev in plan.evaluators:
        results.extend(await ev._aevaluate(row, plan.executor))
    row._results = results  # plain scores stay (key, score) pairs until the row is read
    if plan.sink is not None and results:
        plan.sink.add_results(results, tree._id)
    return row


# seconds a thread may hold the GIL while another waits for it: the run writer's and the
# feedback sink's batches (a millisecond or two of Python each) then delay an example that
# finished meanwhile by at most this. 0.5 -> 0.1 ms: 2,000 examples awaiting 20 ms at
# concurrency 100 finished 3.5 ms sooner (median of 16 interleaved runs); no-op examples at
# concurrency 50, where the threads contend all the time, cost ~5% more CPU, the same wall.
SWITCH_INTERVAL = 0.0001
_switch_lock = threading.Lock()
_switch_users = 0
_switch_before = 0.0


@contextlib.contextmanager
def quick_gil_handoff() -> Iterator[None]:
    """Hand the GIL over sooner while examples run concurrently, as it was before afterwards.

    With many examples in flight the event loop wakes often for a moment of work, while the
    run writer and the feedback sink do long stretches of Python on their threads. At the
    default switch interval (5 ms) each wake-up can wait that long for the GIL, which delays
    every example that finished meanwhile. Shared by experiments running at the same time: the
    first one in sets it, the last one out restores it.
    """
    global _switch_users, _switch_before
    with _switch_lock:
        if _switch_users == 0:
            _switch_before = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_before, SWITCH_INTERVAL))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_before)


async def run_units(plan: Plan, units: Iterable[Unit], results: ExperimentResults) -> None:
    """Run every unit within the concurrency bound, filling ``results`` by index.

    ``units`` may be a generator (examples still being read): then there are as many as
    ``results`` has rows."""
    limit = plan.max_concurrency
    count = len(units) if isinstance(units, Sized) else len(results)
    workers = count if limit is None else max(1, min(limit, count))
    if workers > 1 or plan.timeout is not None:
        # Our own pool, not the loop's default one: it is sized to the bound (the default has
        # min(32, cpus + 4) threads), and a target abandoned after its timeout does not make
        # the end of the experiment wait for it. With a timeout, a call stuck past it keeps its
        # thread, so the pool may grow beyond the bound (idle threads are reused first): the
        # coroutine workers, not the threads, enforce max_concurrency.
        threads = MAX_THREADS if plan.timeout is not None else min(workers, MAX_THREADS)
        plan.executor = ThreadPoolExecutor(threads, thread_name_prefix="assay-evaluate")
    plan.inline_target = not plan.target.is_async and plan.executor is None

    async def one(unit: Unit) -> None:
        row = await _run_unit(plan, unit)
        if row is not None:
            results._set(unit.index, row)

    try:
        if workers <= 1:
            _launched(plan)
            for unit in units:
                await one(unit)
            return
        it = iter(units)

        async def worker() -> None:
            for unit in it:
                await one(unit)

        with quick_gil_handoff():
            async with asyncio.TaskGroup() as group:
                for _ in range(workers):
                    group.create_task(worker())
                # after every worker's first step: its first example is running (or waiting)
                asyncio.get_running_loop().call_soon(_launched, plan)
    finally:
        if plan.executor is not None:
            plan.executor.shutdown(wait=False, cancel_futures=True)
            plan.executor = None


def _launched(plan: Plan) -> None:
    if plan.on_launch is not None:
        plan.on_launch()


async def run_summary(plan: Plan, rows: Sequence[ExperimentResultRow]) -> list[EvaluationResult]:
    if not plan.summary_evaluators:
        return []
    runs = [r.run for r in rows]
    examples = [r.example for r in rows]
    out: list[EvaluationResult] = []
    for ev in plan.summary_evaluators:
        out.extend(await ev.aevaluate(runs, examples))
    return out
