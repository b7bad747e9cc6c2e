"""Reliability: did the agent call the tools it should, in order, with the right arguments?

Seed semantics, case by case:

- every expected entry must be matched by a distinct actual call (so an expected list naming a
  tool twice needs two calls); unmatched entries are ``missing_tool_calls``;
- ``order_matters``: when nothing is missing, the expected calls must appear as a subsequence
  of the actual calls (other calls may come in between);
- ``exact_match``: calls of tools that are not expected at all are ``unexpected_tool_calls``
  (only then is that list filled) and fail the evaluation; repeats of expected tools do not;
- an empty history misses every expected call; ``summary`` says what failed, or
  "All reliability checks passed."; ``assert_passed()`` raises AssertionError with it.

Beyond the seed: ``ExpectedToolCall`` entries with arguments (subset or exact) or a predicate,
``min_times``/``max_times`` bounds, ``forbidden_tool_calls``, and an assignment of actual to
expected calls that succeeds whenever any assignment exists (see ``_matching``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

from ..errors import InvalidInputError
from ._matching import max_matching, ordered_matching
from ._models import ExpectedToolCall, ReliabilityEvaluationResult, ToolCall, ToolCallCheck
from ._toolcalls import extract_tool_calls

T = TypeVar("T")

__all__ = ["ReliabilityEvaluator", "args_match"]

ExpectedSpec = str | ExpectedToolCall | Mapping[str, Any]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    same: bool = a == b
    return same


def _subset(expected: Any, actual: Any, exact: bool) -> bool:
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return False
        if exact and set(expected) != set(actual):
            return False
        return all(k in actual and _subset(v, actual[k], exact) for k, v in expected.items())
    if isinstance(expected, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(expected) == len(actual)
                and all(_subset(e, a, exact) for e, a in zip(expected, actual, strict=True)))
    return _same(expected, actual)


def args_match(spec: ExpectedToolCall, call: ToolCall) -> bool:
    """True when ``call`` satisfies ``spec`` (name, then arguments if the spec has any)."""
    if call.name != spec.name:
        return False
    if spec.args is None:
        return True
    if callable(spec.args):
        try:
            return bool(spec.args(call.args))
        except Exception:  # noqa: BLE001 - a predicate that cannot read these arguments does not match them
            return False
    return _subset(spec.args, call.args, spec.args_match == "exact")


def _specs(values: Any, what: str) -> list[ExpectedToolCall]:
    if values is None:
        return []
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidInputError(f"{what} must be a list of tool names or ExpectedToolCall, got "
                                f"{type(values).__name__}")
    out = []
    for i, v in enumerate(values):
        try:
            if isinstance(v, ExpectedToolCall):
                out.append(v)
            elif isinstance(v, str):
                out.append(ExpectedToolCall(name=v))
            elif isinstance(v, Mapping):
                out.append(ExpectedToolCall(**v))
            else:
                raise InvalidInputError(f"{what}[{i}] must be a tool name, a dict or an "
                                        f"ExpectedToolCall, got {type(v).__name__}")
        except ValidationError as exc:
            raise InvalidInputError(f"{what}[{i}] is invalid: {exc.errors()[0]['msg']}") from None
    return out


def _unique(names: list[T]) -> list[T]:
    return list(dict.fromkeys(names))


def _show(call: ToolCall) -> str:
    return f"{call.name}({call.args!r})" if call.args not in (None, {}) else f"{call.name}()"


class ReliabilityEvaluator:
    """``ReliabilityEvaluator(["search", "summarize"], order_matters=True).run(history)``."""

    def __init__(
        self,
        expected_tool_calls: Sequence[ExpectedSpec] | None,
        order_matters: bool = False,
        exact_match: bool = False,
        *,
        forbidden_tool_calls: Sequence[ExpectedSpec] | None = None,
    ) -> None:
        self.expected_tool_calls = (None if expected_tool_calls is None
                                    else _specs(expected_tool_calls, "expected_tool_calls"))
        self.order_matters = bool(order_matters)
        self.exact_match = bool(exact_match)
        self.forbidden_tool_calls = _specs(forbidden_tool_calls, "forbidden_tool_calls")

    def __repr__(self) -> str:
        names = [s.describe() for s in self.expected_tool_calls or []]
        return (f"ReliabilityEvaluator({names}, order_matters={self.order_matters}, "
                f"exact_match={self.exact_match})")

    def run(self, run_result: Any) -> ReliabilityEvaluationResult:
        """Check the tool calls recorded in ``run_result`` (any source ``extract_tool_calls``
        reads)."""
        if self.expected_tool_calls is None:
            raise InvalidInputError("this ReliabilityEvaluator has no expected_tool_calls; pass "
                                    "them or use as_evaluator() with expectations in examples")
        return self.check(extract_tool_calls(run_result))

    def check(self, calls: list[ToolCall]) -> ReliabilityEvaluationResult:
        specs = self.expected_tool_calls or []
        names = [c.name for c in calls]
        slots = [k for k, spec in enumerate(specs) for _ in range(spec.min_times)]

        def fits(s: int, j: int) -> bool:
            return args_match(specs[slots[s]], calls[j])

        assigned = max_matching(len(slots), len(calls), fits)
        missing_slots = [s for s, j in enumerate(assigned) if j is None]
        missing = [specs[slots[s]].name for s in missing_slots]
        messages: list[str] = []
        mismatches: list[str] = []
        if missing:  # an expected call with arguments is named with them: its tool may
            # have been called, with others (the mismatches below say how)
            messages.append("Missing expected tool calls: "
                            f"{[specs[slots[s]].describe() for s in missing_slots]}.")
            for k in _unique([slots[s] for s in missing_slots]):
                spec = specs[k]
                same_name = [c for c in calls if c.name == spec.name]
                if spec.args is not None and same_name:
                    mismatches.append(f"{spec.describe()} was expected but the calls of "
                                      f"{spec.name!r} were: {', '.join(map(_show, same_name))}")
            if mismatches:
                messages.append("Argument mismatches: " + "; ".join(mismatches) + ".")

        out_of_order: list[str] = []
        if self.order_matters and not missing and slots:
            in_order = ordered_matching(len(slots), len(calls), fits)
            out_of_order = [specs[slots[s]].name for s, j in enumerate(in_order) if j is None]
            if out_of_order:
                messages.append(
                    "Tool calls were not made in the expected order. Expected "
                    f"{[specs[k].name for k in slots]} as a subsequence of {names}; could not "
                    f"place {out_of_order}.")

        unexpected: list[str] = []
        if self.exact_match:
            known = {s.name for s in specs}
            unexpected = _unique([n for n in names if n not in known])
            if unexpected:
                messages.append(f"Unexpected tool calls were made: {unexpected}.")

        violations: list[str] = []
        over_limit: set[str] = set()
        for spec in specs:
            if spec.max_times is None:
                continue
            n = sum(1 for c in calls if args_match(spec, c))
            if n > spec.max_times:
                over_limit.add(spec.name)
                violations.append(f"{spec.describe()} was called {n} times (at most "
                                  f"{spec.max_times} allowed)")
        if violations:
            messages.append("Call count violations: " + "; ".join(violations) + ".")

        forbidden: list[str] = []
        for spec in self.forbidden_tool_calls:
            hits = [c for c in calls if args_match(spec, c)]
            if hits:
                forbidden.append(spec.name)
                messages.append(f"Forbidden tool {spec.describe()} was called {len(hits)} "
                                f"time{'s' if len(hits) != 1 else ''}.")
        forbidden = _unique(forbidden)

        matched_by_name: dict[str, int] = {}
        for s, j in enumerate(assigned):
            if j is not None:
                name = specs[slots[s]].name
                matched_by_name[name] = matched_by_name.get(name, 0) + 1
        checks = []
        for name in _unique([s.name for s in specs]):
            expected_times = sum(s.min_times for s in specs if s.name == name)
            matched = matched_by_name.get(name, 0)
            times = names.count(name)
            checks.append(ToolCallCheck(
                tool_name=name, was_called=times > 0, times_called=times,
                expected_times=expected_times, matched_times=matched,
                passed=matched == expected_times and name not in over_limit))

        passed = not (missing or out_of_order or unexpected or violations or forbidden)
        return ReliabilityEvaluationResult(
            passed=passed,
            summary="All reliability checks passed." if passed else " ".join(messages),
            expected_tool_calls=[s.name for s in specs],
            actual_tool_calls=names,
            checks=checks,
            missing_tool_calls=missing,
            unexpected_tool_calls=unexpected,
            out_of_order_tool_calls=out_of_order,
            forbidden_tool_calls=forbidden,
            count_violations=violations,
            argument_mismatches=mismatches,
            tool_calls=list(calls),
        )

    def as_evaluator(
        self,
        *,
        key: str = "reliability",
        expected_key: str = "expected_tool_calls",
        client: Any = None,
    ) -> Callable[..., dict[str, Any]]:
        """An ``evaluate()`` evaluator: feedback ``key`` scored 1/0 with the summary as comment.

        Tool calls come from the run tree (loaded with its children through ``client`` or the
        default client when the run arrives without them). Without ``expected_tool_calls`` on
        this evaluator, each example's ``outputs[expected_key]`` supplies them.
        """
        template = self

        def reliability(run: Any, example: Any = None) -> dict[str, Any]:
            evaluator = template
            if template.expected_tool_calls is None:
                outputs = (example.get("outputs") if isinstance(example, Mapping)
                           else getattr(example, "outputs", None)) or {}
                if expected_key not in outputs:
                    raise InvalidInputError(
                        f"reliability evaluator: the example has no outputs[{expected_key!r}] "
                        "and the evaluator was built without expected_tool_calls")
                evaluator = ReliabilityEvaluator(
                    outputs[expected_key], template.order_matters, template.exact_match,
                    forbidden_tool_calls=template.forbidden_tool_calls)
            result = evaluator.run(_with_children(run, client))
            return {"key": key, "score": 1.0 if result.passed else 0.0,
                    "comment": result.summary}

        reliability.__name__ = key
        return reliability


def _with_children(run: Any, client: Any) -> Any:
    """The run with its subtree: as given when it carries ``child_runs``, else read back."""
    if run is None:
        raise InvalidInputError("reliability evaluator needs the run of the target")
    children = run.get("child_runs") if isinstance(run, Mapping) else getattr(run, "child_runs",
                                                                              None)
    run_id = run.get("id") if isinstance(run, Mapping) else getattr(run, "id", None)
    if children is not None or run_id is None:
        return run
    if client is None:
        from ..client import get_default_client

        client = get_default_client()
    return client.read_run(run_id, load_child_runs=True)
