"""Adapting every evaluator shape LangSmith accepts to one call: ``await ev.aevaluate(row)``.

Row evaluators take ``(run, example)`` positionally (any two parameter names, LangSmith's legacy
form) or name what they need: ``run``, ``example``, ``inputs``, ``outputs``,
``reference_outputs``, ``attachments``. Summary evaluators take ``(runs, examples)`` or name
``runs``, ``examples``, ``inputs``, ``outputs``, ``reference_outputs`` (lists, one item per row).
Either may be sync or async and may return a bool, a number, a string, a dict, an
``EvaluationResult``, ``EvaluationResults`` / ``{"results": [...]}``, or a list of those.
Objects with ``evaluate_run`` / ``aevaluate_run`` (LangSmith's ``RunEvaluator``) and objects with
``as_evaluator()`` (assay's agent evaluators) work too.

The signature is inspected once, when ``evaluate()`` starts, so a malformed evaluator fails
before any example runs; a failure while evaluating becomes an error result instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import operator
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from ..errors import InvalidInputError
from ._schemas import EvaluationResult, EvaluationResults, as_result

__all__ = [
    "RowEvaluator",
    "SummaryEvaluator",
    "adapt_evaluator",
    "adapt_summary_evaluator",
    "as_list",
    "error_results",
    "to_results",
]

ROW_ARGS = ("run", "example", "inputs", "outputs", "reference_outputs", "attachments")
SUMMARY_ARGS = ("runs", "examples", "inputs", "outputs", "reference_outputs")
_RESULT_FIELDS = set(EvaluationResult.model_fields)
_PLAIN_RESULTS = frozenset((bool, int, float, str, dict, list))  # never awaitable
INLINE_MAX_SECONDS = 0.001  # a sync evaluator slower than this ...
INLINE_SLOW_STREAK = 3  # ... this many calls in a row runs on threads from then on


def _name_of(obj: Any) -> str:
    if isinstance(obj, functools.partial):
        return _name_of(obj.func)
    name = getattr(obj, "name", None) if not inspect.isfunction(obj) else None
    if not isinstance(name, str) or not name:
        name = getattr(obj, "__name__", None) or type(obj).__name__
    return "lambda" if name == "<lambda>" else name


def _is_async_callable(obj: Any) -> bool:
    while isinstance(obj, functools.partial):
        obj = obj.func
    if inspect.iscoroutinefunction(obj):
        return True
    call = getattr(obj, "__call__", None)  # noqa: B004 - callable objects
    return call is not None and inspect.iscoroutinefunction(call)


def _positional(func: Any, plan: tuple[str, ...]) -> bool:
    """Whether ``plan``'s names are the function's first parameters, in order, each one that
    can be given by position: then it is called positionally (no keyword dict per call)."""
    try:
        params = list(inspect.signature(func).parameters.values())[:len(plan)]
    except (TypeError, ValueError):
        return False
    return [p.name for p in params] == list(plan) and all(
        p.kind is p.POSITIONAL_OR_KEYWORD for p in params)


def _plan(func: Any, supported: tuple[str, ...], legacy: tuple[str, str],
          what: str) -> tuple[str, ...] | None:
    """Which row fields to pass, in order; None means the legacy positional pair.

    Same rule as LangSmith: if every parameter is a supported name (or has a default) and the
    names are not exactly the legacy pair, pass by name; otherwise two required parameters are
    taken as the legacy pair whatever they are called.
    """
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"{what} {_name_of(func)!r}: cannot read its signature ({exc})") from None
    params = [p for p in sig.parameters.values()
              if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    names = [p.name for p in params]
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    if names == list(legacy):
        return None
    if names and all(n in supported or n not in required for n in names):
        chosen = tuple(n for n in names if n in supported)
        if chosen:
            return chosen
    if len(required) == 2:
        return None
    raise InvalidInputError(
        f"{what} {_name_of(func)!r} has parameters {names}: it must take two positional "
        f"parameters ({legacy[0]}, {legacy[1]}) or name any of {list(supported)}"
    )


# -- results ---------------------------------------------------------------------------------
def _one(item: Any, name: str, *, allow_no_key: bool) -> EvaluationResult:
    if isinstance(item, EvaluationResult):
        return item
    if not isinstance(item, dict) and hasattr(item, "model_dump") and hasattr(item, "key"):
        item = item.model_dump()  # e.g. langsmith's own EvaluationResult
    if not isinstance(item, dict):
        raise InvalidInputError(
            f"evaluator {name!r} returned {type(item).__name__} inside a list: expected dicts "
            "or EvaluationResult objects")
    if not item:
        raise InvalidInputError(f"evaluator {name!r} returned an empty dict")
    data = {k: v for k, v in item.items() if k in _RESULT_FIELDS}
    unknown = set(item) - _RESULT_FIELDS
    if unknown:
        raise InvalidInputError(
            f"evaluator {name!r} returned unknown field(s) {sorted(unknown)}; "
            f"use {sorted(_RESULT_FIELDS)}")
    if "key" not in data:
        if not allow_no_key:
            raise InvalidInputError(f"evaluator {name!r} returned a result without a 'key': {item}")
        data["key"] = name
    if not any(k in data for k in ("score", "value", "comment")):
        raise InvalidInputError(
            f"evaluator {name!r} returned {item}: give a 'score', a categorical 'value' or a "
            "'comment'")
    score = data.get("score")
    if score is not None and not isinstance(score, (bool, int, float)):
        raise InvalidInputError(
            f"evaluator {name!r}: score must be a number or bool, got {score!r}")
    try:
        return EvaluationResult(**data)
    except Exception as exc:  # pydantic ValidationError: say which evaluator
        raise InvalidInputError(
            f"evaluator {name!r} returned an invalid result {item}: {exc}") from None


# exactly these types: stored as they are
_SCORES: frozenset[type[Any]] = frozenset((bool, int, float))


def to_results(raw: Any, name: str, *, plain: bool = False) -> list[Any]:
    """Normalize whatever an evaluator returned to a list of results (LangSmith's rules).

    ``plain``: a bare score stays a ``(key, score)`` pair (``as_result`` makes it a result),
    which is how an experiment keeps it until someone reads its rows."""
    if raw.__class__ in _SCORES:  # first: isinstance on a pydantic model class is slow
        return [(name, raw)] if plain else [EvaluationResult._of_score(name, raw)]
    if isinstance(raw, EvaluationResult):
        return [raw]
    if isinstance(raw, EvaluationResults):
        items: Any = raw.results
    elif isinstance(raw, bool) or isinstance(raw, (int, float)):
        return [EvaluationResult(key=name, score=raw)]
    elif isinstance(raw, str):
        if not raw:
            raise InvalidInputError(f"evaluator {name!r} returned an empty string")
        return [EvaluationResult(key=name, value=raw)]
    elif isinstance(raw, dict):
        if "results" in raw:
            items = raw["results"]
            if not isinstance(items, (list, tuple)):
                raise InvalidInputError(f"evaluator {name!r}: 'results' must be a list")
        else:
            return [_one(raw, name, allow_no_key=True)]
    elif isinstance(raw, (list, tuple)):
        items = raw
    elif raw is not None and hasattr(raw, "model_dump") and hasattr(raw, "key"):
        return [_one(raw, name, allow_no_key=True)]
    elif raw is None:
        raise InvalidInputError(
            f"evaluator {name!r} returned None: return a score, a value or a dict")
    else:
        raise InvalidInputError(
            f"evaluator {name!r} returned {type(raw).__name__}: expected a bool, number, str, "
            "dict, list, EvaluationResult or EvaluationResults")
    if not items:
        raise InvalidInputError(f"evaluator {name!r} returned no results")
    return [_one(x, name, allow_no_key=False) for x in items]


def as_list(value: Any, what: str) -> list[Any]:
    """The evaluators given (None: none); a bare evaluator is refused, as LangSmith does."""
    if value is None:
        return []
    if callable(value) and not isinstance(value, (list, tuple)):
        raise InvalidInputError(f"{what} must be a list (wrap the single evaluator in [...])")
    return list(value)


# what a sync call into an async agent says inside evaluate(): run on evaluate()'s running
# loop, or on a loop of its own while the agent's async client belongs to evaluate()'s
_OTHER_LOOP = ("different event loop", "attached to a different loop", "Event loop is closed",
               "event loop is already running", "from a running event loop")
_OTHER_LOOP_HINT = (
    " (assay: a sync evaluator that runs an agent, with its run_sync() or asyncio.run(), cannot "
    "run it on evaluate()'s event loop, where the target ran it and where the agent's clients "
    "belong; make the evaluator async and await the agent: "
    "async def check(inputs): result = await agent.run(...))")


def error_results(keys: Sequence[str], exc: BaseException, *,
                  sync: bool = False) -> list[EvaluationResult]:
    """What an evaluator that raised leaves behind: one result per key it would have written
    (``sync``: a sync evaluator's, told how to mend an agent run on another loop)."""
    message = str(exc) or type(exc).__name__
    extra = {"error": True, "error_type": type(exc).__name__, "error_message": message}
    comment = f"{type(exc).__name__}: {message}"
    if sync and any(s in message for s in _OTHER_LOOP):
        comment += _OTHER_LOOP_HINT
    return [EvaluationResult(key=k, score=None, comment=comment, extra=dict(extra)) for k in keys]


# -- row evaluators ----------------------------------------------------------------------------
class RowEvaluator:
    """One evaluator in one calling convention; ``aevaluate(row)`` never raises.

    ``row`` offers ``run``, ``example``, ``inputs``, ``outputs``, ``reference_outputs`` and
    ``attachments``; the run is only built if the evaluator asks for it.
    """

    def __init__(self, func: Any, *, name: str | None = None, kind: str = "function",
                 plan: tuple[str, ...] | None = None, keys: Sequence[str] | None = None) -> None:
        self.func = func
        self.name = name or _name_of(func)
        self.kind = kind  # "function" | "run_evaluator"
        self.plan = plan
        self.is_async = kind == "run_evaluator_async" or (kind == "function"
                                                          and _is_async_callable(func))
        self.keys = list(keys) if keys else [self.name]
        # A sync evaluator is called on the loop's thread while its calls stay fast (a thread
        # hop costs more than a trivial evaluator); a few slow calls in a row move it to the
        # executor's threads for the rest of the experiment, so a blocking one (an LLM judge
        # on a sync client) stalls the other examples only that often. One slow call is not
        # enough: a garbage collection or a wait for the GIL makes a trivial call slow once.
        self.inline = True
        self._slow = 0  # slow calls in a row
        self._args = operator.attrgetter(*plan) if plan else None
        self._by_position = plan is not None and len(plan) > 1 and _positional(func, plan)

    @property
    def needs_run(self) -> bool:
        return self.plan is None or "run" in self.plan

    def _call(self, row: Any) -> Any:
        if self.kind.startswith("run_evaluator"):
            method = (self.func.aevaluate_run if self.kind == "run_evaluator_async"
                      else self.func.evaluate_run)
            return method(row.run, row.example)
        if self.plan is None:
            return self.func(row.run, row.example)
        assert self._args is not None  # set with the plan
        if len(self.plan) == 1:
            return self.func(**{self.plan[0]: self._args(row)})
        if self._by_position:
            return self.func(*self._args(row))
        return self.func(**dict(zip(self.plan, self._args(row), strict=True)))

    async def aevaluate(self, row: Any, *,
                        executor: Executor | None = None) -> list[EvaluationResult]:
        """Run the evaluator on one row (a sync one on ``executor`` if given); an exception
        becomes an error result."""
        return [as_result(r) for r in await self._aevaluate(row, executor)]

    async def _aevaluate(self, row: Any, executor: Executor | None) -> list[Any]:
        """``aevaluate`` keeping plain scores as (key, score) pairs (see ``to_results``)."""
        try:
            if self.is_async:
                raw = await self._call(row)
            elif executor is not None and not self.inline:
                ctx = contextvars.copy_context()
                raw = await asyncio.get_running_loop().run_in_executor(
                    executor, ctx.run, self._call, row)
            elif executor is not None:  # its own context, as on a thread
                start = time.perf_counter()
                try:
                    raw = contextvars.copy_context().run(self._call, row)
                except RuntimeError as exc:
                    if "loop" not in str(exc):
                        raise
                    # it runs an event loop itself (asyncio.run): it needs a thread of its own
                    self.inline = False
                    ctx = contextvars.copy_context()
                    raw = await asyncio.get_running_loop().run_in_executor(
                        executor, ctx.run, self._call, row)
                finally:
                    if time.perf_counter() - start <= INLINE_MAX_SECONDS:
                        self._slow = 0
                    else:
                        self._slow += 1
                        if self._slow >= INLINE_SLOW_STREAK:
                            self.inline = False
            else:
                raw = self._call(row)
            if raw.__class__ not in _PLAIN_RESULTS and inspect.isawaitable(raw):
                raw = await raw
            return to_results(raw, self.name, plain=True)
        except Exception as exc:
            return error_results(self.keys, exc, sync=not self.is_async)

    def __repr__(self) -> str:
        return f"<RowEvaluator {self.name}>"


def adapt_evaluator(obj: Any) -> RowEvaluator:
    """Inspect one evaluator and fix how it will be called (raises InvalidInputError)."""
    if isinstance(obj, RowEvaluator):
        return obj
    keys = getattr(obj, "feedback_keys", None)
    keys = list(keys) if isinstance(keys, (list, tuple)) and keys else None
    as_evaluator = getattr(obj, "as_evaluator", None)
    if callable(as_evaluator) and not inspect.isfunction(obj):
        inner = as_evaluator()
        ev = adapt_evaluator(inner)
        if not getattr(inner, "__name__", None) or ev.name in ("function", "lambda"):
            ev.name = _name_of(obj)
            ev.keys = keys or [ev.name]
        return ev
    run_ev = getattr(obj, "evaluate_run", None)
    arun_ev = getattr(obj, "aevaluate_run", None)
    if callable(run_ev) or callable(arun_ev):
        # a LangSmith RunEvaluator: prefer the async method when the object implements it
        own_async = callable(arun_ev) and inspect.iscoroutinefunction(arun_ev) and (
            getattr(obj, "is_async", False) or not callable(run_ev))
        kind = "run_evaluator_async" if own_async else "run_evaluator"
        name = getattr(obj, "_name", None) or _name_of(obj)
        return RowEvaluator(obj, name=name, kind=kind, keys=keys)
    if not callable(obj):
        raise InvalidInputError(
            f"evaluator {obj!r} is not callable: pass a function, an object with "
            "evaluate_run/aevaluate_run, or one with as_evaluator()")
    plan = _plan(obj, ROW_ARGS, ("run", "example"), "evaluator")
    return RowEvaluator(obj, plan=plan, keys=keys)


# -- summary evaluators -------------------------------------------------------------------------
class SummaryEvaluator:
    """An evaluator over the whole experiment: all runs and all examples, in row order."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.name = _name_of(func)
        self.plan = _plan(func, SUMMARY_ARGS, ("runs", "examples"), "summary evaluator")
        self.is_async = _is_async_callable(func)

    async def aevaluate(self, runs: list[Any], examples: list[Any]) -> list[EvaluationResult]:
        try:
            if self.plan is None:
                raw = self.func(runs, examples)
            else:
                values = {
                    "runs": runs,
                    "examples": examples,
                    "inputs": [e.inputs for e in examples],
                    "outputs": [r.outputs or {} for r in runs],
                    "reference_outputs": [e.outputs or {} for e in examples],
                }
                raw = self.func(**{n: values[n] for n in self.plan})
            if inspect.isawaitable(raw):
                raw = await raw
            return to_results(raw, self.name)
        except Exception as exc:
            return error_results([self.name], exc)


def adapt_summary_evaluator(obj: Any) -> SummaryEvaluator:
    if isinstance(obj, SummaryEvaluator):
        return obj
    if not callable(obj):
        raise InvalidInputError(f"summary evaluator {obj!r} is not callable")
    return SummaryEvaluator(obj)
