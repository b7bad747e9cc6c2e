"""ReliabilityEvaluator: the seed's semantics case by case, then the rules beyond the seed."""

from __future__ import annotations

from typing import Any

import pytest

from assay.errors import InvalidInputError
from assay.evals import ExpectedToolCall, ReliabilityEvaluator, ToolCall, args_match

# --- seed semantics ---------------------------------------------------------------------------


def test_all_expected_called_passes() -> None:
    res = ReliabilityEvaluator(["search", "analyze"]).run(["search", "analyze", "search"])
    assert res.passed is True
    assert res.summary == "All reliability checks passed."
    assert res.expected_tool_calls == ["search", "analyze"]
    assert res.actual_tool_calls == ["search", "analyze", "search"]
    assert [(c.tool_name, c.was_called, c.times_called) for c in res.checks] == [
        ("search", True, 2), ("analyze", True, 1)]
    assert res.missing_tool_calls == [] and res.unexpected_tool_calls == []
    res.assert_passed()


def test_missing_tool_fails_and_is_listed() -> None:
    res = ReliabilityEvaluator(["search", "analyze"]).run(["search"])
    assert res.passed is False
    assert res.missing_tool_calls == ["analyze"]
    assert res.summary == "Missing expected tool calls: ['analyze']."
    assert [(c.tool_name, c.was_called, c.times_called) for c in res.checks] == [
        ("search", True, 1), ("analyze", False, 0)]
    with pytest.raises(AssertionError, match=r"Missing expected tool calls: \['analyze'\]"):
        res.assert_passed()


def test_order_matters_is_a_subsequence_check() -> None:
    ev = ReliabilityEvaluator(["search", "summarize"], order_matters=True)
    assert ev.run(["search", "fetch", "summarize"]).passed  # other calls may come in between
    assert ev.run(["summarize", "search", "summarize"]).passed  # a later summarize follows search
    res = ev.run(["summarize", "search"])
    assert res.passed is False
    assert res.missing_tool_calls == []  # both were called ...
    assert "Tool calls were not made in the expected order." in res.summary  # ... out of order
    assert res.out_of_order_tool_calls in (["search"], ["summarize"])
    # without order_matters the same history passes
    assert ReliabilityEvaluator(["search", "summarize"]).run(["summarize", "search"]).passed


def test_order_is_only_judged_when_nothing_is_missing() -> None:
    res = ReliabilityEvaluator(["a", "b", "c"], order_matters=True).run(["c", "a"])
    assert res.missing_tool_calls == ["b"]
    assert res.summary == "Missing expected tool calls: ['b']."
    assert res.out_of_order_tool_calls == []


def test_order_diagnostics_place_the_longest_in_order_run() -> None:
    res = ReliabilityEvaluator(["a", "b", "c"], order_matters=True).run(["b", "c", "a"])
    assert res.passed is False
    assert res.out_of_order_tool_calls == ["a"]  # b, c are in order; only a could not be placed


def test_duplicates_need_distinct_calls() -> None:
    ev = ReliabilityEvaluator(["search", "search"])
    res = ev.run(["search"])
    assert res.passed is False
    assert res.missing_tool_calls == ["search"]
    (check,) = res.checks  # one check per distinct tool
    assert (check.was_called, check.times_called, check.expected_times, check.matched_times,
            check.passed) == (True, 1, 2, 1, False)
    assert ev.run(["search", "other", "search"]).passed
    ordered = ReliabilityEvaluator(["a", "b", "a"], order_matters=True)
    assert ordered.run(["a", "x", "b", "a"]).passed
    assert not ordered.run(["a", "a", "b"]).passed


def test_exact_match_reports_unexpected_tools_only_then() -> None:
    history = ["search", "delete_everything", "search", "email"]
    loose = ReliabilityEvaluator(["search"]).run(history)
    assert loose.passed is True and loose.unexpected_tool_calls == []
    strict = ReliabilityEvaluator(["search"], exact_match=True).run(history)
    assert strict.passed is False
    assert strict.unexpected_tool_calls == ["delete_everything", "email"]
    assert strict.summary == "Unexpected tool calls were made: ['delete_everything', 'email']."
    # repeats of an expected tool are not "unexpected"
    assert ReliabilityEvaluator(["search"], exact_match=True).run(["search", "search"]).passed


def test_exact_match_with_order_and_missing_combined() -> None:
    res = ReliabilityEvaluator(["a", "b"], order_matters=True, exact_match=True).run(["a", "z"])
    assert res.passed is False
    assert res.missing_tool_calls == ["b"] and res.unexpected_tool_calls == ["z"]
    assert res.summary == ("Missing expected tool calls: ['b']. "
                           "Unexpected tool calls were made: ['z'].")


def test_empty_history() -> None:
    res = ReliabilityEvaluator(["search", "analyze"]).run([])
    assert res.passed is False
    assert res.actual_tool_calls == []
    assert res.missing_tool_calls == ["search", "analyze"]
    assert all(not c.was_called and c.times_called == 0 for c in res.checks)
    assert ReliabilityEvaluator(["x"], order_matters=True, exact_match=True).run(None).passed \
        is False


def test_empty_expectations() -> None:
    assert ReliabilityEvaluator([]).run(["anything"]).passed
    no_tools = ReliabilityEvaluator([], exact_match=True)
    assert no_tools.run([]).passed
    assert no_tools.run(["oops"]).unexpected_tool_calls == ["oops"]


# --- beyond the seed ------------------------------------------------------------------------

def calls(*items: tuple[str, Any]) -> list[ToolCall]:
    return [ToolCall(name=n, args=a) for n, a in items]


def test_argument_subset_and_exact_matching() -> None:
    history = calls(("search", {"q": "weather", "limit": 5}))
    subset = ReliabilityEvaluator([ExpectedToolCall(name="search", args={"q": "weather"})])
    assert subset.run(history).passed
    exact = ReliabilityEvaluator([ExpectedToolCall(name="search", args={"q": "weather"},
                                                   args_match="exact")])
    res = exact.run(history)
    assert res.passed is False
    assert res.missing_tool_calls == ["search"]
    assert res.checks[0].was_called is True and res.checks[0].matched_times == 0
    assert len(res.argument_mismatches) == 1
    assert "'limit': 5" in res.argument_mismatches[0] and "Argument mismatches" in res.summary
    # the summary names the call that is missing, not just its tool (which was called)
    assert res.summary.startswith("Missing expected tool calls: [\"search({'q': 'weather'})\"]")
    assert ReliabilityEvaluator([{"name": "search", "args": {"q": "weather", "limit": 5},
                                  "args_match": "exact"}]).run(history).passed


def test_nested_subset_and_strict_types() -> None:
    spec = ExpectedToolCall(name="book", args={"trip": {"to": "Rome"}, "seats": [1, 2]})
    ok = ToolCall(name="book", args={"trip": {"to": "Rome", "from": "Paris"}, "seats": [1, 2]})
    assert args_match(spec, ok)
    assert not args_match(spec, ToolCall(name="book", args={"trip": {"to": "Oslo"},
                                                            "seats": [1, 2]}))
    assert not args_match(spec, ToolCall(name="book", args={"trip": {"to": "Rome"},
                                                            "seats": [1]}))
    assert not args_match(ExpectedToolCall(name="f", args={"flag": 1}),
                          ToolCall(name="f", args={"flag": True}))  # True is not 1 here
    assert not args_match(ExpectedToolCall(name="f", args={"a": 1}),
                          ToolCall(name="f", args="{broken json"))


def test_argument_predicates() -> None:
    spec = ExpectedToolCall(name="transfer", args=lambda a: a["amount"] <= 100)
    ev = ReliabilityEvaluator([spec])
    assert ev.run(calls(("transfer", {"amount": 50}))).passed
    assert not ev.run(calls(("transfer", {"amount": 500}))).passed
    assert not ev.run(calls(("transfer", "no dict"))).passed  # predicate error = no match


def test_call_count_bounds() -> None:
    twice = ReliabilityEvaluator([ExpectedToolCall(name="retry", min_times=2)])
    assert not twice.run(["retry"]).passed
    assert twice.run(["retry", "retry"]).passed
    at_most = ReliabilityEvaluator(["plan", ExpectedToolCall(name="search", min_times=0,
                                                              max_times=2)])
    assert at_most.run(["plan"]).passed  # optional tool
    assert at_most.run(["plan", "search", "search"]).passed
    res = at_most.run(["plan", "search", "search", "search"])
    assert res.passed is False
    assert res.count_violations == ["search was called 3 times (at most 2 allowed)"]
    assert "Call count violations" in res.summary
    check = {c.tool_name: c for c in res.checks}["search"]
    assert (check.times_called, check.expected_times, check.passed) == (3, 0, False)
    bounded_args = ReliabilityEvaluator([ExpectedToolCall(name="search", args={"q": "a"},
                                                          max_times=1)])
    assert bounded_args.run(calls(("search", {"q": "a"}), ("search", {"q": "b"}))).passed
    assert not bounded_args.run(calls(("search", {"q": "a"}), ("search", {"q": "a"}))).passed


def test_forbidden_tools() -> None:
    ev = ReliabilityEvaluator(["read"], forbidden_tool_calls=[
        "drop_table", ExpectedToolCall(name="shell", args={"cmd": "rm -rf /"})])
    assert ev.run(calls(("read", {}), ("shell", {"cmd": "ls"}))).passed
    res = ev.run(calls(("read", {}), ("drop_table", {}), ("drop_table", {}),
                       ("shell", {"cmd": "rm -rf /"})))
    assert res.passed is False
    assert res.forbidden_tool_calls == ["drop_table", "shell"]
    assert "Forbidden tool drop_table was called 2 times." in res.summary
    assert "Forbidden tool shell({'cmd': 'rm -rf /'}) was called 1 time." in res.summary


def _greedy_first_fit(specs: list[ExpectedToolCall], history: list[ToolCall]) -> bool:
    used: set[int] = set()
    for spec in specs:
        j = next((j for j, c in enumerate(history) if j not in used and args_match(spec, c)),
                 None)
        if j is None:
            return False
        used.add(j)
    return True


def test_matching_finds_an_assignment_where_greedy_first_fit_fails() -> None:
    specs = [ExpectedToolCall(name="search"),  # any arguments
             ExpectedToolCall(name="search", args={"q": "weather"})]
    history = calls(("search", {"q": "weather"}), ("search", {"q": "news"}))
    assert _greedy_first_fit(specs, history) is False  # the trap is real
    res = ReliabilityEvaluator(specs).run(history)
    assert res.passed is True, res.summary
    assert res.checks[0].matched_times == 2


def test_matching_on_a_larger_overlapping_instance() -> None:
    # expectation i accepts calls with k >= i; calls arrive in increasing k: first-fit gives the
    # loosest expectation the strongest call... a chain only augmenting paths can untangle
    n = 30
    specs = [ExpectedToolCall(name="t", args=(lambda a, i=i: a["k"] >= i)) for i in range(n)]
    history = calls(*[("t", {"k": k}) for k in range(n - 1, -1, -1)])
    assert _greedy_first_fit(specs, history) is False
    assert ReliabilityEvaluator(specs).run(history).passed
    assert not ReliabilityEvaluator(specs).run(history[1:]).passed


def test_ordered_matching_with_arguments() -> None:
    specs = [ExpectedToolCall(name="s", args={"step": 1}), ExpectedToolCall(name="s"),
             ExpectedToolCall(name="s", args={"step": 3})]
    ev = ReliabilityEvaluator(specs, order_matters=True)
    assert ev.run(calls(("s", {"step": 1}), ("s", {"step": 3}), ("s", {"step": 3}))).passed
    res = ev.run(calls(("s", {"step": 3}), ("s", {"step": 1}), ("s", {"step": 2})))
    assert res.passed is False and res.missing_tool_calls == []
    assert res.out_of_order_tool_calls == ["s"]


@pytest.mark.parametrize("spec,match", [
    ("search", "must be a list"),
    (["a", 3], r"expected_tool_calls\[1\] must be a tool name"),
    ([{"name": ""}], r"expected_tool_calls\[0\] is invalid"),
    ([{"name": "a", "min_times": 2, "max_times": 1}], "max_times"),
    ([{"name": "a", "args_match": "fuzzy"}], r"expected_tool_calls\[0\]"),
])
def test_bad_expectations_are_named(spec: Any, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        ReliabilityEvaluator(spec)


def test_real_pydantic_ai_agent_history() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    agent = Agent(TestModel())

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return "sunny"

    @agent.tool_plain
    def get_time(zone: str) -> str:
        return "noon"

    result = agent.run_sync("weather and time?")
    assert ReliabilityEvaluator(["get_weather", "get_time"], exact_match=True).run(result).passed
    res = ReliabilityEvaluator(["get_weather", "book_flight"]).run(result.all_messages())
    assert res.missing_tool_calls == ["book_flight"]
