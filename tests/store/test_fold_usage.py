"""The usage columns of the fold's runs in C (``_cencode.usage_columns``, ``_cusage.c``)
against the Python they stand in for (``derive_usage_us``, through ``usage_columns_py``):
generated runs with every shape of usage, cost and first token a sender may give, as values
and as an admitted post's JSON text; what C declines goes to the Python, which alone raises."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from compiled_paths import is_in_use, needs_c

from assay.store import _fold_usage
from assay.store._fold_usage import usage_columns, usage_columns_py, usage_view

START = 1_795_986_000_000_000  # 2026-11-29T21:00:00Z in epoch microseconds

_TIMES = ["2026-11-29T21:00:00.080000+00:00", "2026-11-29T21:00:00.08Z", "2026-11-29T21:00:01",
          "2026-11-29T22:00:00.080000+01:00", "2026-11-29 21:00:00.5", 1795986000.25,
          1795986000250000, "not a time", None, [1], True, "9999-12-31T23:59:59.999999Z",
          -1e300, "2026-02-30T00:00:00Z"]
_COUNTS = [120, 0, 40, None, 10**12, 10**12 - 1, -5, 12.7, float("nan"), float("inf"), True,
           "33", 2**70, -(2**70)]
_MODELS = ["gpt-4o-mini", "gpt-4o", "claude-3-5-sonnet-latest", "claude-sonnet-4-6",
           "anthropic/claude-sonnet-4-6",
           "no-such-model", "", None, 7]
_PROVIDERS = ["openai", "anthropic", "azure_openai", None, "", 3]


def _pick(rng: random.Random, values: list[Any]) -> Any:
    return values[rng.randrange(len(values))]


def _usage(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return _pick(rng, [{}, None, [], "usage", 3])
    usage: dict[str, Any] = {}
    for key, other in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
        if rng.random() < 0.8:
            usage[key if rng.random() < 0.8 else other] = _pick(rng, _COUNTS)
    if rng.random() < 0.6:
        usage["total_tokens"] = _pick(rng, _COUNTS)
    if rng.random() < 0.2:
        usage["input_token_details"] = _pick(rng, [
            {"cache_read": _pick(rng, _COUNTS)}, {}, None, "x", {"audio": 1},
            {"cache_read": _pick(rng, _COUNTS), "cache_creation": _pick(rng, _COUNTS)},
            {"cache_creation": 0, "ephemeral_5m_input_tokens": _pick(rng, _COUNTS),
             "ephemeral_1h_input_tokens": _pick(rng, _COUNTS)},
            {"cache_creation": _pick(rng, _COUNTS),
             "ephemeral_1h_input_tokens": _pick(rng, _COUNTS)}])
    if rng.random() < 0.05:
        usage[_pick(rng, ["input_cost", "output_cost", "total_cost"])] = _pick(rng, [0.5, None])
    return usage


def _run(rng: random.Random) -> dict[str, Any]:
    """A run as the fold sees it, its JSON columns as values."""
    run: dict[str, Any] = {"run_type": _pick(rng, ["llm"] * 6 + ["chain", "tool", None])}
    meta: dict[str, Any] = {}
    if rng.random() < 0.8:
        meta["ls_model_name"] = _pick(rng, _MODELS)
    if rng.random() < 0.8:
        meta["ls_provider"] = _pick(rng, _PROVIDERS)
    where = rng.random()
    if where < 0.5:
        meta["usage_metadata"] = _usage(rng)
    extra: Any = {"metadata": meta}
    if rng.random() < 0.2:
        extra["invocation_params"] = {_pick(rng, ["model", "model_name"]): _pick(rng, _MODELS)}
    if rng.random() < 0.05:
        extra = _pick(rng, [None, [], "x", {"metadata": "not a map"}])
    run["extra"] = extra
    outputs: dict[str, Any] = {"content": "answer"}
    if 0.5 <= where < 0.7:
        outputs["usage_metadata"] = _usage(rng)
    elif 0.7 <= where < 0.85:
        outputs["llm_output"] = _pick(rng, [
            {"token_usage": {"prompt_tokens": _pick(rng, _COUNTS),
                             "completion_tokens": _pick(rng, _COUNTS),
                             "total_tokens": _pick(rng, _COUNTS)}},
            {"token_usage": None}, {}, "x"])
    elif 0.85 <= where < 0.9:
        run["usage_metadata"] = _usage(rng)
    run["outputs"] = outputs if rng.random() < 0.95 else _pick(rng, [None, [], "text"])
    if rng.random() < 0.7:
        events: Any = [{"name": "new_token", "time": _pick(rng, _TIMES)}
                       for _ in range(rng.randrange(3))]
        if rng.random() < 0.3:
            events.insert(0, {"name": _pick(rng, ["start", "end", 5, None]), "time": "x"})
        if rng.random() < 0.05:
            events = _pick(rng, [{}, "x", [1, "a"], []])
        run["events"] = events
    if rng.random() < 0.03:
        run[_pick(rng, ["prompt_tokens", "total_cost", "completion_cost"])] = 5
    return run


def _text(run: dict[str, Any]) -> dict[str, Any]:
    """The run as an admitted post: its outputs, extra and events as the JSON text stored."""
    post = dict(run)
    for key in ("outputs", "extra", "events"):
        if post.get(key) is not None:
            post[key] = json.dumps(post[key], allow_nan=True, separators=(",", ":"))
    return post


def _python(run: dict[str, Any], start: int | None, texts: bool) -> Any:
    try:
        return usage_columns_py(usage_view(run) if texts else run, start)
    except Exception as exc:  # noqa: BLE001 - the C path must raise the same
        return type(exc)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def _both(run: dict[str, Any], start: int | None, texts: bool) -> tuple[Any, Any]:
    expected = _python(run, start, texts)
    try:
        got = usage_columns(run, start, texts=texts)
    except Exception as exc:  # noqa: BLE001
        got = type(exc)
    return expected, got


def test_the_c_path_is_built() -> None:
    is_in_use(_fold_usage._CUSAGE, "assay.store._cencode")


@needs_c
@pytest.mark.parametrize("texts", [False, True], ids=["values", "texts"])
def test_c_gives_what_the_python_gives_on_generated_runs(texts: bool) -> None:
    rng = random.Random(20261129 + texts)
    taken = 0
    for i in range(4000):
        run = _run(rng)
        if texts:
            run = _text(run)
        start = _pick(rng, [START, START, 0, None])
        expected, got = _both(run, start, texts)
        assert _same(got, expected), (i, run, start, got, expected)
        taken += _fold_usage._CUSAGE(run, texts, start) is not None
    # the usual runs are C's (most generated ones), the odd ones the Python's
    assert 2000 < taken < 4000, taken


@needs_c
def test_the_usual_llm_run_is_derived_in_c() -> None:
    post = _text({"run_type": "llm", "outputs": {"content": "a"},
                  "extra": {"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                                         "usage_metadata": {"input_tokens": 120,
                                                            "output_tokens": 40,
                                                            "total_tokens": 160}}},
                  "events": [{"name": "new_token", "time": "2026-11-29T21:00:00.080000+00:00"}]})
    got = _fold_usage._CUSAGE(post, True, START)
    assert got is not None
    assert got == _python(post, START, True)
    ft, since, p, c, total, pc, cc, tc = got
    assert (ft, since, p, c, total) == (START + 80_000, 80_000, 120, 40, 160)
    assert pc > 0 and cc > 0 and tc == pc + cc  # priced by genai-prices


@needs_c
@pytest.mark.parametrize(("run", "declined"), [
    ({"run_type": "llm", "extra": {"metadata": {"usage_metadata": {"input_tokens": "12"}}}}, True),
    ({"run_type": "llm", "prompt_tokens": 3}, True),
    ({"run_type": "llm", "events": [{"name": "new_token", "time": "2026-11-29T21:00:00+02:00"}]},
     False),
], ids=["count as text", "explicit count", "time with an offset"])
def test_what_c_declines_the_python_derives(run: dict[str, Any], declined: bool) -> None:
    assert (_fold_usage._CUSAGE(run, False, START) is None) is declined
    assert usage_columns(run, START) == _python(run, START, False)


@needs_c
def test_a_malformed_text_is_raised_by_the_python() -> None:
    post = {"run_type": "llm", "extra": "{not json", "events": None, "outputs": None}
    assert _fold_usage._CUSAGE(post, True, START) is None
    with pytest.raises(ValueError):
        usage_columns(post, START, texts=True)
