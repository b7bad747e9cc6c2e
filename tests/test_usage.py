"""derive_usage: the tokens, costs and first-token time stored beside a run, from wherever the
run's sender put them, explicit fields first, genai-prices for the rest."""

from __future__ import annotations

from genai_prices import Usage, calc_price

from assay._time import to_micros
from assay._usage import derive_usage, derive_usage_us, first_token_time, usage_of


def _calc(inp: int, out: int, cached: int = 0, model: str = "gpt-4o-mini") -> tuple[float, float]:
    got = calc_price(Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached or None),
                     model, provider_id="openai")
    return float(got.input_price), float(got.output_price)


def _llm(usage: dict | None = None, **extra_meta: object) -> dict:
    meta = {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini", **extra_meta}
    if usage is not None:
        meta["usage_metadata"] = usage
    return {"run_type": "llm", "extra": {"metadata": meta}, "outputs": {"messages": []}}


def test_chain_without_usage_is_all_none() -> None:
    got = derive_usage({"run_type": "chain", "outputs": {"output": 1}, "extra": {}})
    assert got == dict.fromkeys(("prompt_tokens", "completion_tokens", "total_tokens",
                                 "prompt_cost", "completion_cost", "total_cost",
                                 "first_token_time"))


def test_llm_usage_metadata_priced_by_genai_prices() -> None:
    got = derive_usage(_llm({"input_tokens": 1234, "output_tokens": 56}))
    p, c = _calc(1234, 56)
    assert got["prompt_tokens"] == 1234 and got["completion_tokens"] == 56
    assert got["total_tokens"] == 1290
    assert (got["prompt_cost"], got["completion_cost"]) == (p, c)
    assert got["total_cost"] == p + c
    assert got["first_token_time"] is None


def test_cache_reads_priced_at_their_rate() -> None:
    usage = {"input_tokens": 5000, "output_tokens": 10, "total_tokens": 5010,
             "input_token_details": {"cache_read": 4000}}
    got = derive_usage(_llm(usage))
    assert (got["prompt_cost"], got["completion_cost"]) == _calc(5000, 10, 4000)
    assert got["prompt_cost"] < derive_usage(_llm({"input_tokens": 5000,
                                                   "output_tokens": 10}))["prompt_cost"]


def test_cache_writes_priced_at_their_rate_whichever_way_they_are_itemised() -> None:
    """Anthropic's prompt caching: writes cost more than input (hour-long ones more still).
    assay's wrappers and pydantic-ai give the writes as ``cache_creation`` (and the hour-long
    part), LangChain's ChatAnthropic by lifetime with a ``cache_creation`` of 0: all priced as
    genai-prices prices the writes, not as plain input."""
    model = "claude-sonnet-4-6"

    def calc(**counts: int) -> tuple[float, float]:
        got = calc_price(Usage(input_tokens=5000, output_tokens=10, **counts), model,
                         provider_id="anthropic")
        return float(got.input_price), float(got.output_price)

    def priced(details: dict[str, int]) -> tuple[float, float]:
        got = derive_usage(_llm({"input_tokens": 5000, "output_tokens": 10,
                                 "input_token_details": details},
                                ls_provider="anthropic", ls_model_name=model))
        return got["prompt_cost"], got["completion_cost"]

    plain = priced({})
    five = calc(cache_write_tokens=4000)
    assert priced({"cache_creation": 4000}) == five
    assert priced({"cache_creation": 0, "ephemeral_5m_input_tokens": 4000,
                   "ephemeral_1h_input_tokens": 0}) == five
    assert five[0] > plain[0]  # (a write costs 1.25 input tokens)
    hour = calc(cache_write_tokens=4000, cache_write_1h_tokens=3000)
    assert priced({"cache_creation": 4000, "ephemeral_1h_input_tokens": 3000}) == hour
    assert priced({"cache_creation": 0, "ephemeral_5m_input_tokens": 1000,
                   "ephemeral_1h_input_tokens": 3000}) == hour
    assert hour[0] > five[0]
    both = calc(cache_read_tokens=2000, cache_write_tokens=1000)
    assert priced({"cache_read": 2000, "cache_creation": 1000}) == both
    # counts past the input the library refuses: no price rather than a wrong one
    over = derive_usage(_llm({"input_tokens": 5000, "output_tokens": 10,
                              "input_token_details": {"cache_creation": 6000}},
                             ls_provider="anthropic", ls_model_name=model))
    assert over["prompt_cost"] is None and over["prompt_tokens"] == 5000


def test_a_gateways_provider_slash_model_name_is_priced_as_that_providers() -> None:
    """OpenRouter's or LiteLLM's name for another provider's model, through an OpenAI client
    (``ls_provider`` openai, ``anthropic/claude-...``): that provider's price, not none; a
    prefix genai-prices knows no provider by stays unpriced."""
    for model, provider, bare in (("anthropic/claude-sonnet-4-6", "anthropic",
                                   "claude-sonnet-4-6"),
                                  ("gemini/gemini-2.5-flash", "google", "gemini-2.5-flash")):
        got = derive_usage(_llm({"input_tokens": 5000, "output_tokens": 10,
                                 "input_token_details": {"cache_read": 1000}},
                                ls_model_name=model))
        want = calc_price(Usage(input_tokens=5000, output_tokens=10, cache_read_tokens=1000),
                          bare, provider_id=provider)
        assert (got["prompt_cost"], got["completion_cost"]) == (float(want.input_price),
                                                                float(want.output_price))
    none = derive_usage(_llm({"input_tokens": 5000, "output_tokens": 10},
                             ls_model_name="no-such-org/no-such-model-xyz"))
    assert none["prompt_cost"] is None and none["prompt_tokens"] == 5000


def test_explicit_top_level_fields_win() -> None:
    run = {**_llm({"input_tokens": 1, "output_tokens": 2, "total_tokens": 3,
                   "input_cost": 9.0}),
           "prompt_tokens": "100", "completion_tokens": 20.7, "total_cost": "0.5"}
    got = derive_usage(run)
    assert got["prompt_tokens"] == 100 and got["completion_tokens"] == 20
    assert got["total_tokens"] == 3  # not explicit: from the usage
    assert got["prompt_cost"] == 9.0 and got["completion_cost"] is None
    assert got["total_cost"] == 0.5  # explicit costs: nothing priced


def test_explicit_costs_in_usage_metadata_are_not_repriced() -> None:
    got = derive_usage(_llm({"input_tokens": 10, "output_tokens": 5, "input_cost": 0.25,
                             "output_cost": "0.5"}))
    assert (got["prompt_cost"], got["completion_cost"], got["total_cost"]) == (0.25, 0.5, 0.75)


def test_usage_holders_in_precedence_order() -> None:
    """metadata first, then outputs (the JS SDK), then the run itself, then LangChain's
    llm_output.token_usage; an input_tokens key that is None is taken as None (no
    prompt_tokens fallback), an absent one falls back to prompt_tokens."""
    outputs_usage = {"run_type": "chain",
                     "outputs": {"usage_metadata": {"input_tokens": 7, "output_tokens": 3}}}
    assert derive_usage(outputs_usage)["total_tokens"] == 10
    top = {"run_type": "chain", "usage_metadata": {"prompt_tokens": 4, "completion_tokens": 1}}
    got = derive_usage(top)
    assert (got["prompt_tokens"], got["completion_tokens"], got["total_tokens"]) == (4, 1, 5)
    assert got["prompt_cost"] is None  # a chain is not priced
    none_key = derive_usage({"run_type": "chain", "usage_metadata": {
        "input_tokens": None, "prompt_tokens": 4, "output_tokens": 2}})
    assert none_key["prompt_tokens"] is None and none_key["total_tokens"] == 2
    both = {**_llm({"input_tokens": 11, "output_tokens": 1}),
            "outputs": {"usage_metadata": {"input_tokens": 99, "output_tokens": 99}}}
    assert derive_usage(both)["prompt_tokens"] == 11
    lc = {"run_type": "llm", "extra": {"invocation_params": {"model": "gpt-4o-mini"},
                                       "metadata": {"ls_provider": "openai"}},
          "outputs": {"llm_output": {"token_usage": {"prompt_tokens": 30,
                                                     "completion_tokens": 4,
                                                     "total_tokens": 34}}}}
    got = derive_usage(lc)
    assert (got["prompt_tokens"], got["completion_tokens"], got["total_tokens"]) == (30, 4, 34)
    assert (got["prompt_cost"], got["completion_cost"]) == _calc(30, 4)


def test_unknown_model_and_no_model_give_tokens_without_cost() -> None:
    for run in (_llm({"input_tokens": 10, "output_tokens": 5}, ls_model_name="no-such-model-xyz"),
                {"run_type": "llm", "usage_metadata": {"input_tokens": 10, "output_tokens": 5}}):
        got = derive_usage(run)
        assert got["total_tokens"] == 15
        assert got["prompt_cost"] is got["completion_cost"] is got["total_cost"] is None


def test_first_token_time_is_the_earliest_new_token_event() -> None:
    run = {**_llm({"input_tokens": 1, "output_tokens": 1}),
           "events": [{"name": "start", "time": "2026-01-01T00:00:00Z"},
                      {"name": "new_token", "time": "2026-01-01T00:00:02Z"},
                      {"name": "new_token", "time": "2026-01-01T00:00:01Z"}]}
    assert derive_usage(run)["first_token_time"] == "2026-01-01T00:00:01Z"
    chain = {"run_type": "chain", "events": [{"name": "new_token", "time": 5.0}]}
    assert derive_usage(chain)["first_token_time"] == 5.0
    assert derive_usage({"run_type": "chain", "events": []})["first_token_time"] is None


def test_first_token_time_edge_cases() -> None:
    def first(*events: object) -> object:
        return first_token_time(list(events))

    t1, t2 = "2026-01-01T00:00:01Z", "2026-01-01T00:00:01+00:00"  # the same instant
    assert first({"name": "new_token", "time": t1}, {"name": "new_token", "time": t2}) == t1
    assert first({"name": "new_token", "time": t2}, {"name": "new_token", "time": t1}) == t2
    # epoch seconds and ISO strings compared as instants; a time that is none is skipped
    assert first({"name": "new_token", "time": "1970-01-01T00:00:10Z"},
                 {"name": "new_token", "time": None},
                 {"name": "new_token", "time": 2.5}) == 2.5
    # one time that is not a time makes the answer None, wherever it is
    for bad in ("not a time", True, [1]):
        assert first({"name": "new_token", "time": t1}, {"name": "new_token", "time": bad}) \
            is None
        assert first({"name": "new_token", "time": bad}, {"name": "new_token", "time": t1}) \
            is None
    assert first({"name": "other", "time": "x"}, "not an event", {"name": "new_token"}) is None
    assert first_token_time("not a list") is None
    # the run keeps its tokens and cost when its event's time is not a time
    run = {**_llm({"input_tokens": 3, "output_tokens": 4}),
           "events": [{"name": "new_token", "time": [1]}]}
    got = derive_usage(run)
    assert got["first_token_time"] is None and got["total_tokens"] == 7


def test_usage_of_returns_a_copy() -> None:
    run = _llm({"input_tokens": 3, "output_tokens": 4})
    found = usage_of(run)
    assert found == {"input_tokens": 3, "output_tokens": 4}
    assert found is not None
    found["input_tokens"] = 1000
    assert run["extra"]["metadata"]["usage_metadata"]["input_tokens"] == 3
    assert derive_usage(run)["prompt_tokens"] == 3


def test_the_folds_first_token_microseconds_are_the_time_parsed_once() -> None:
    """``derive_usage_us`` gives the fold ``derive_usage`` and the first token's time as epoch
    microseconds, parsed once: the same number ``to_micros`` makes of the time as sent."""
    import datetime as dt

    times: list[object] = ["2026-01-01T00:00:01Z", "2026-01-01T00:00:01.250000+02:00", 2.5, 0,
                           1_700_000_000, "1970-01-01T00:00:00Z", None, "not a time",
                           dt.datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.UTC),
                           dt.datetime(2026, 3, 4, 5, 6, 7)]
    runs = [{**_llm({"input_tokens": 2, "output_tokens": 1}),
             "events": [{"name": "new_token", "time": a}, {"name": "new_token", "time": b}]}
            for a in times for b in times[:4]]
    runs += [_llm({"input_tokens": 2, "output_tokens": 1}), {"run_type": "chain"},
             {"run_type": "chain", "events": [{"name": "new_token", "time": 0.5}]}]
    seen = set()
    for run in runs:
        got, first_us = derive_usage_us(run)
        assert got == derive_usage(run)
        first = got["first_token_time"]
        assert first_us == (None if first is None else to_micros(first))
        seen.add(first_us is None)
    assert seen == {True, False}
