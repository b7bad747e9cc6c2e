"""LangSmith's run filter language on the store: what each form selects, on SQLite and
PostgreSQL alike, and what it refuses (with the filter's text and the place in it)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from assay.errors import InvalidInputError
from assay.store import Store
from assay.store._run_filter import MAX_DEPTH, FilterError, parse_filter

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _run(name: str, run_type: str = "chain", *, parent: dict | None = None, start: float = 0,
         seconds: float | None = 1.0, **fields: object) -> dict:
    rid = str(uuid.uuid4())
    t = T0 + timedelta(seconds=start)
    run = {"id": rid, "trace_id": parent["trace_id"] if parent else rid, "name": name,
           "run_type": run_type, "start_time": t, "session_name": "filters", **fields}
    if parent:
        run["parent_run_id"] = parent["id"]
    if seconds is not None:
        run["end_time"] = t + timedelta(seconds=seconds)
    return run


@pytest.fixture
def world(store: Store) -> dict[str, str]:
    """Two traces and a run still open; names -> ids."""
    good = _run("agent", start=0, seconds=2.5, tags=["prod", "beta"],
                inputs={"q": "Refund please, 100% of it"}, outputs={"a": "ok"},
                extra={"metadata": {"user": "42", "tier": 3, "flag": True}})
    chat = _run("chat", "llm", parent=good, start=0.1, seconds=0.5,
                extra={"metadata": {"usage_metadata": {"input_tokens": 100, "output_tokens": 50,
                                                       "total_tokens": 150},
                                    "ls_provider": "openai", "ls_model_name": "gpt-4o-mini"}})
    bad = _run("agent", start=10, seconds=0.1, tags=["prod"], error="ValueError: boom",
               inputs={"q": "hello"}, extra={"metadata": {"user": "7"}})
    tool = _run("lookup", "tool", parent=bad, start=10.01, seconds=0.02)
    open_run = _run("pending-one", start=20, seconds=None, inputs={"q": "later"})
    store.runs.upsert(posts=[good, chat, bad, tool, open_run])
    store.feedback.create_many([
        {"run_id": good["id"], "key": "correctness", "score": 1.0, "value": "right"},
        {"run_id": good["id"], "key": "helpful", "score": 0.0},
        {"run_id": bad["id"], "key": "correctness", "score": 0.0, "value": "wrong"},
    ])
    return {"good": good["id"], "chat": chat["id"], "bad": bad["id"], "tool": tool["id"],
            "open": open_run["id"]}


def _names(store: Store, world: dict[str, str], **kw: object) -> set[str]:
    by_id = {v: k for k, v in world.items()}
    return {by_id[str(r.id)] for r in store.runs.list(**kw)}  # type: ignore[arg-type]


ALL = {"good", "chat", "bad", "tool", "open"}

CASES = [
    ('eq(run_type, "llm")', {"chat"}),
    ('neq(run_type, "chain")', {"chat", "tool"}),
    ('in(name, ["chat", "lookup"])', {"chat", "tool"}),
    ('and(eq(is_root, true), gt(latency, "1s"))', {"good"}),
    ("gt(latency, 2)", {"good"}),
    ('lt(latency, "200ms")', {"bad", "tool"}),
    ("eq(end_time, null)", {"open"}),
    ("neq(error, null)", {"bad"}),
    ("eq(error, null)", ALL - {"bad"}),
    ('neq(error, "ValueError: boom")', ALL - {"bad"}),  # a missing error differs from it
    ('eq(status, "error")', {"bad"}),
    ("eq(error, true)", {"bad"}),  # as list_runs(error=True)
    ("eq(error, false)", ALL - {"bad"}),
    ("neq(error, true)", ALL - {"bad"}),
    ('has(tags, "beta")', {"good"}),
    ('not(has(tags, "beta"))', ALL - {"good"}),  # runs without tags included
    ('gte(start_time, "2026-05-01T12:00:10Z")', {"bad", "tool", "open"}),
    # a chain's usage is its llm calls' (LangSmith's); the chat was posted with its parent
    # and no dotted order, which the store derives
    ("gt(total_tokens, 100)", {"good", "chat"}),
    ("gt(total_cost, 0)", {"good", "chat"}),
    ('eq(trace_id, "{good}")', {"good", "chat"}),
    ('eq(parent_run_id, "{bad}")', {"tool"}),
    # one feedback row meets both halves (the good run has correctness 1 and helpful 0)
    ('and(eq(feedback_key, "correctness"), eq(feedback_score, 1))', {"good"}),
    ('and(eq(feedback_key, "helpful"), eq(feedback_score, 1))', set()),
    ('and(eq(feedback_key, "helpful"), lt(feedback_score, 0.5))', {"good"}),
    ('eq(feedback_key, "correctness")', {"good", "bad"}),
    ('eq(feedback_value, "wrong")', {"bad"}),
    ('or(eq(feedback_key, "helpful"), neq(error, null))', {"good", "bad"}),
    # metadata entries likewise: key and value of one entry
    ('and(eq(metadata_key, "user"), eq(metadata_value, "42"))', {"good"}),
    ('and(eq(metadata_key, "tier"), eq(metadata_value, "42"))', set()),
    ("eq(metadata_value, 3)", {"good"}),
    ("eq(metadata_value, true)", {"good"}),
    ('eq(metadata_key, "user")', {"good", "bad"}),
    ('in(metadata_value, ["7", "8"])', {"bad"}),
    ('and(eq(input_key, "q"), search(input_value, "REFUND"))', {"good"}),
    ('eq(output_value, "ok")', {"good"}),
    ('search("refund")', {"good"}),
    ('search("boom")', {"bad"}),
    ('search("100%")', {"good"}),  # % is a character here, not a wildcard
    ('search("9%")', set()),
    ('search(name, "AGE")', {"good", "bad"}),
    ('and(search(name, "a"), not(eq(name, "chat")))', {"good", "bad"}),
    ("and(and(and(eq(is_root, true))), or(eq(is_root, false)))", set()),
]


@pytest.mark.parametrize("text,expected", CASES, ids=[c[0] for c in CASES])
def test_filter_selects(store: Store, world: dict[str, str], text: str, expected: set) -> None:
    text = text.format(**world)
    assert _names(store, world, filter=text) == expected


def test_trace_and_tree_filters(store: Store, world: dict[str, str]) -> None:
    good_trace = 'and(eq(feedback_key, "correctness"), eq(feedback_score, 1))'
    assert _names(store, world, trace_filter=good_trace) == {"good", "chat"}
    assert _names(store, world, filter='eq(run_type, "llm")', trace_filter=good_trace) == {"chat"}
    assert _names(store, world, is_root=True, tree_filter='eq(name, "lookup")') == {"bad"}
    assert _names(store, world, tree_filter='eq(run_type, "llm")') == {"good", "chat"}
    assert _names(store, world, query="LATER") == {"open"}
    assert _names(store, world, query="please", filter="eq(is_root, true)") == {"good"}


def test_filters_stay_in_their_workspace(store: Store, world: dict[str, str]) -> None:
    other = store.for_tenant(f"other-{uuid.uuid4().hex[:8]}")
    run = _run("agent", tags=["beta"])
    other.runs.upsert(posts=[run])
    other.feedback.create_many([{"run_id": run["id"], "key": "correctness", "score": 1}])
    assert _names(store, world, filter='has(tags, "beta")') == {"good"}
    assert [str(r.id) for r in other.runs.list(
        filter='eq(feedback_key, "correctness")')] == [run["id"]]


BAD = [
    ('foo(name, "x")', "unknown function 'foo'", 1),
    ('eq(colour, "x")', "unknown attribute 'colour'", 4),
    ('eq(latency, "fast")', "latency takes seconds", 4),
    ('eq(start_time, "yesterday")', "start_time takes an ISO time string", 4),
    ("eq(total_tokens, \"10\")", "total_tokens takes a number", 4),
    ('gt(is_root, true)', "is_root is true or false", 1),
    ('gt(name, null)', "compares with null only by eq or neq", 4),
    ('eq(id, "not-a-uuid")', "id takes a UUID string", 4),
    ('eq(tags, "x")', "has(tags", 4),
    ('gt(metadata_value, "3")', "compares as text", 1),
    ('has(name, "x")', "has() takes the tags", 1),
    ('eq(name, "x"', "the filter ends", 13),
    ('eq(name, "x")) ', "unexpected text after", 14),
    ('eq(name, "x) ', "unexpected character", 10),
    ("and()", "needs at least one condition", 1),
    ("not(eq(name, \"a\"), eq(name, \"b\"))", "not() takes one condition", 1),
    ("eq(name)", "takes an attribute and a value", 1),
    ('in(name, "x")', "takes a non-empty list", 1),
    ("name", "must be a call", 1),
    ("   ", "cannot be empty", None),
    ('eq(name, "x") @', "unexpected character '@'", 15),
    ('in(name, ["a", null])', "compares with null only by eq or neq", 4),
    ("gt(total_tokens, 99999999999999999999)", "out of range", 18),
    ("gt(total_cost, 1e400)", "out of range", 16),
    ('gt(latency, "99999999999999999s")', "latency takes seconds", 4),
    ('and(eq(metadata_key, "a"), search(metadata_value, 3))', "takes a string", 28),
    ('and(eq(feedback_key, "a"), search(feedback_score, "3"))', "takes a string", 28),
]


@pytest.mark.parametrize("text,words,at", BAD, ids=[b[0] for b in BAD])
def test_bad_filters_are_refused_naming_the_problem(store: Store, text: str, words: str,
                                                    at: int | None) -> None:
    with pytest.raises(FilterError) as err:
        store.runs.list(filter=text)
    message = str(err.value)
    assert words in message
    if at is not None:
        assert f"(at character {at})" in message and repr(text) in message
    assert isinstance(err.value, InvalidInputError)


def test_size_limits() -> None:
    deep = "not(" * (MAX_DEPTH + 2) + 'eq(name, "x")' + ")" * (MAX_DEPTH + 2)
    with pytest.raises(FilterError, match="nested deeper"):
        parse_filter(deep)
    parse_filter("not(" * (MAX_DEPTH - 2) + 'eq(name, "x")' + ")" * (MAX_DEPTH - 2))
    with pytest.raises(FilterError, match="at most"):
        parse_filter('eq(name, "' + "x" * 30_000 + '")')
    with pytest.raises(FilterError, match="must be a string"):
        parse_filter(3)  # type: ignore[arg-type]


def test_literals() -> None:
    node = parse_filter("""in(name, ["a\\"b", 'c\\'d', 1, -2.5e1, true, null, []])""")
    assert node.args[1] == ('a"b', "c'd", 1, -25.0, True, parse_filter("eq(a, null)").args[1], ())


def test_random_filters_either_run_or_are_refused_clearly(store: Store,
                                                          world: dict[str, str]) -> None:
    """Fragments of the language put together at random never reach the database as an error:
    every filter runs, or is refused with FilterError before any SQL."""
    import random

    rng = random.Random(5)
    words = ["and(", "or(", "not(", "eq(", "neq(", "gt(", "lt(", "in(", "has(", "search(", ")",
             ",", "[", "]", "name", "latency", "tags", "is_root", "feedback_key",
             "feedback_score", "metadata_value", "start_time", "total_tokens", "error", "id",
             '"x"', '"2s"', '"2026-05-01T12:00:00Z"', "1", "-2.5", "true", "null", "@", "'y'"]
    ran = refused = 0
    for _ in range(400):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        try:
            store.runs.list(filter=text, limit=5)
            ran += 1
        except FilterError:
            refused += 1
    assert refused > 0
    # and well-formed ones built at random run (both kinds were exercised)
    for _ in range(200):
        attr, value = rng.choice([("name", '"agent"'), ("latency", '"1s"'), ("is_root", "true"),
                                  ("feedback_score", "0.5"), ("metadata_value", '"42"'),
                                  ("total_tokens", "10"), ("error", "null")])
        op = "eq" if value in ("true", "null") else rng.choice(["eq", "neq", "gt", "lte"])
        if attr == "metadata_value" and op in ("gt", "lte"):
            op = "neq"
        inner = f"{op}({attr}, {value})"
        text = rng.choice([inner, f"not({inner})", f"and({inner}, eq(is_root, true))",
                           f"or({inner}, has(tags, \"prod\"))"])
        store.runs.list(filter=text, limit=5)
        ran += 1
    assert ran >= 200
