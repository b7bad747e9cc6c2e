"""assay's fast price path gives exactly genai-prices' ``calc_price`` figures, or leaves the call
to it: checked against the library for every model of every provider in the installed data."""

from __future__ import annotations

import random
import warnings
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price
from genai_prices.data_snapshot import DataSnapshot, get_snapshot, set_custom_snapshot
from genai_prices.types import (
    ClauseEquals,
    ConditionalPrice,
    ModelInfo,
    ModelPrice,
    Provider,
    StartDateConstraint,
    Tier,
    TieredPrices,
    TimeOfDateConstraint,
)

from assay import _prices
from assay._usage import price

SEED = 20261125


Counts = tuple[int, int, int, int, int]


def _counts(rng: random.Random, tier_starts: list[int], n: int) -> list[Counts]:
    """(input, output, cache read, cache write, hour-long cache write) token counts: zeros, the
    edges of the model's own tiers and of the cache counts (reads and writes filling the input,
    one past it; hour-long writes all the writes, one past them), and ``n`` random ones up to
    10^12."""
    out: list[Counts] = [
        (0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (0, 1, 0, 0, 0), (1, 1, 1, 0, 0), (1, 1, 0, 1, 0),
        (1, 1, 0, 1, 1), (1000, 500, 1000, 0, 0), (1000, 500, 1001, 0, 0),
        (1000, 500, 400, 600, 0), (1000, 500, 400, 601, 0), (1000, 500, 0, 600, 600),
        (1000, 500, 0, 600, 601), (1000, 500, 0, 0, 1), (10**12, 10**9, 10**11, 10**10, 10**9)]
    for start in tier_starts:
        out += [(start, 7, 0, 0, 0), (start + 1, 7, 0, 0, 0), (start + 1, 7, start + 1, 0, 0),
                (start - 1, 3, 5, 0, 0), (start + 1, 7, 0, start + 1, 9)]
    for _ in range(n):
        inp = rng.choice([rng.randint(0, 5_000), rng.randint(0, 400_000),
                          rng.randint(0, 10**7), rng.randint(0, 10**12)])
        cached = rng.choice([0, 0, rng.randint(0, inp), inp, inp + rng.randint(1, 100)])
        room = max(inp - cached, 0)
        written = rng.choice([0, 0, rng.randint(0, room), room, room + rng.randint(1, 100)])
        hour = rng.choice([0, 0, rng.randint(0, written), written, written + 1])
        out.append((inp, rng.choice([0, rng.randint(0, 4_000), rng.randint(0, 10**8)]), cached,
                    written, hour))
    return out


def _tier_starts(info: ModelInfo) -> list[int]:
    prices = [info.prices] if isinstance(info.prices, ModelPrice) else [
        c.prices for c in info.prices]
    return sorted({t.start for mp in prices for v in mp.__dict__.values()
                   if isinstance(v, TieredPrices) for t in v.tiers})


def _shape(info: ModelInfo) -> tuple[object, ...]:
    """What decides the recipe's code path: the price keys, tiered or not, and the constraints."""
    prices = [info.prices] if isinstance(info.prices, ModelPrice) else [
        c.prices for c in info.prices]
    keys = tuple(sorted({(k, isinstance(v, TieredPrices)) for mp in prices
                         for k, v in mp.__dict__.items() if v is not None}))
    kinds = () if isinstance(info.prices, ModelPrice) else tuple(
        type(c.constraint).__name__ for c in info.prices)
    return keys, kinds


def test_recipe_equals_calc_price_for_every_model() -> None:
    """Every model of every provider: each recipe's (input, output) price equals
    ``calc_price``'s bit for bit for edge and random counts (a few hundred for one model of
    each price shape), or the recipe declines and the library prices the call."""
    snapshot = get_snapshot()
    rng = random.Random(SEED)
    seen_shapes: set[tuple[object, ...]] = set()
    kinds = {"recipe": 0, "slow": 0, "unknown": 0}
    compared = declined = 0
    for provider in snapshot.providers:
        for info in provider.models:
            plan = _prices._plan_for(snapshot, provider.id, info.id)
            shape = _shape(info)
            many = shape not in seen_shapes
            seen_shapes.add(shape)
            counts = _counts(rng, _tier_starts(info), 300 if many else 12)
            if plan == _prices._UNKNOWN:
                kinds["unknown"] += 1
                assert _prices.price_slow(provider.id, info.id, 1000, 10, 0) is None
                continue
            if not isinstance(plan, _prices._Plan):
                kinds["slow"] += 1
                continue
            kinds["recipe"] += 1
            for usage in counts:
                fast = plan.price(*usage)
                if fast is None:
                    declined += 1
                    continue
                slow = _prices.price_slow(provider.id, info.id, *usage)
                assert fast == slow, (provider.id, info.id, usage)
                compared += 1
    total = sum(kinds.values())
    print(f"{total} models: {kinds}; {compared} usages compared, {declined} left to the "
          f"library; {len(seen_shapes)} price shapes")
    assert total > 1000
    # the fast path must cover the models, not quietly leave them all to the library
    assert kinds["recipe"] >= 0.9 * (kinds["recipe"] + kinds["slow"])
    assert compared > 20 * total


def test_the_integer_path_gives_the_decimals_floats() -> None:
    """Every recipe with integer terms: its integer sums give the floats of its Decimal
    operations for edge and random counts, past 10^27 included (there it uses the Decimals)."""
    snapshot = get_snapshot()
    rng = random.Random(SEED + 1)
    integral = 0
    for provider in snapshot.providers:
        for info in provider.models:
            plan = _prices._plan_for(snapshot, provider.id, info.id)
            if not isinstance(plan, _prices._Plan) or plan.exact is None:
                continue
            integral += 1
            for usage in _counts(rng, _tier_starts(info), 20) + [
                    (10**25, 10**25, 0, 0, 0), (10**30, 1, 10**29, 0, 0), (3, 10**31, 0, 0, 0),
                    (10**30, 1, 0, 10**29, 10**28)]:
                assert plan.price(*usage) == plan.decimal_price(*usage), (
                    provider.id, info.id, usage)
    assert integral > 1000  # nearly every model's prices are integers over a power of ten


def test_prices_the_integer_path_does_not_take() -> None:
    """A negative price and a per that is not a power of ten stay with the Decimals."""
    assert _prices._integral(((Decimal("0.15"), 1_000_000, 1, 0, 0, 0, 0, True),)) is not None
    assert _prices._integral(((Decimal("-0.15"), 1_000_000, 1, 0, 0, 0, 0, True),)) is None
    assert _prices._integral(((Decimal("0.15"), 3_600, 1, 0, 0, 0, 0, True),)) is None
    assert _prices._integral(((Decimal("NaN"), 1_000_000, 1, 0, 0, 0, 0, True),)) is None
    den, terms = _prices._integral(((Decimal("1E+2"), 1, 1, 0, 0, 0, 0, True),
                                    (Decimal("0.075"), 1_000, 0, 1, 0, 0, 0, False)))  # type: ignore[misc]
    assert den == 10**6 and [t[0] for t in terms] == [100 * 10**6, 75]


def test_tiers_and_cache_reads_priced_like_the_library() -> None:
    """A tiered model (its rate for all tokens set by the input count) with cache reads, just
    below, at and above its threshold, through assay's public price."""
    snapshot = get_snapshot()
    for provider in snapshot.providers:
        for info in provider.models:
            starts = _tier_starts(info)
            if starts and isinstance(_prices._plan_for(snapshot, provider.id, info.id),
                                     _prices._Plan):
                break
        else:
            continue
        break
    else:
        pytest.fail("no tiered model with a recipe in the installed genai-prices data")
    start = starts[0]
    for inp in (start - 1, start, start + 1, 3 * start):
        got = price(provider.id, info.id, inp, 321, inp // 3)
        usage = Usage(input_tokens=inp, output_tokens=321, cache_read_tokens=inp // 3 or None)
        want = calc_price(usage, info.id, provider_id=provider.id)
        assert got == (float(want.input_price), float(want.output_price))
    assert price(provider.id, info.id, start + 1, 1, 0) != price(provider.id, info.id, start, 1, 0)


def test_refused_and_unknown_usages() -> None:
    """A cache read larger than the input (the library refuses it for a model that prices
    cache reads, and tries any other provider) and negative counts (refused by name) go to the
    library; an unknown model has no price; provider aliases and no provider as before."""
    assert price("openai", "gpt-4o-mini", 10, 5, 11) == _prices.price_slow(
        "openai", "gpt-4o-mini", 10, 5, 11)
    with pytest.raises(ValueError, match="input_tokens"):  # as calc_price: named, not priced
        price("openai", "gpt-4o-mini", -1, 5, 0)
    assert price("openai", "no-such-model-anywhere-xyz", 10, 5, 0) is None
    assert price(None, "gpt-4o-mini", 10, 5, 0) == _prices.price_slow(None, "gpt-4o-mini", 10, 5, 0)
    assert price("azure_openai", "gpt-4o-mini", 10, 5, 0) == _prices.price_slow(
        "azure", "gpt-4o-mini", 10, 5, 0)


def test_recipes_of_sender_named_models_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Model names come from what senders post (OTLP spans, runs): a stream of made-up names
    does not grow the recipes without bound, and known models still price right after."""
    monkeypatch.setattr(_prices, "_MAX_PLANS", 50)
    for i in range(200):
        assert price("openai", f"made-up-model-{i}", 10, 5, 0) is None
        assert len(_prices._plans) <= 50
    assert price("openai", "gpt-4o-mini", 10, 5, 0) == _prices.price_slow(
        "openai", "gpt-4o-mini", 10, 5, 0)


def _provider(models: list[ModelInfo]) -> Provider:
    return Provider(id="acme", name="Acme", api_pattern=r"https://acme\.test", models=models)


def _model(model_id: str, prices: ModelPrice | list[ConditionalPrice]) -> ModelInfo:
    return ModelInfo(id=model_id, match=ClauseEquals(equals=model_id), prices=prices)


def test_dated_prices_expire_when_the_next_price_starts() -> None:
    """A recipe stands until the day a later price starts (then the library's new choice is
    read), and until the next edge of an off-peak window; both price as calc_price does."""
    now = datetime.now(UTC)
    tomorrow = (now + timedelta(days=1)).date()
    dated = _model("dated", [
        ConditionalPrice(prices=ModelPrice(input_mtok=Decimal("1"), output_mtok=Decimal("2"))),
        ConditionalPrice(constraint=StartDateConstraint(start_date=date(2020, 1, 1)),
                         prices=ModelPrice(input_mtok=Decimal("3"), output_mtok=Decimal("4"))),
        ConditionalPrice(constraint=StartDateConstraint(start_date=tomorrow),
                         prices=ModelPrice(input_mtok=Decimal("5"), output_mtok=Decimal("6"))),
    ])
    edge = (now + timedelta(hours=2)).time().replace(microsecond=0, tzinfo=UTC)
    offpeak = _model("offpeak", [
        ConditionalPrice(prices=ModelPrice(input_mtok=Decimal("1"), output_mtok=Decimal("2"))),
        ConditionalPrice(constraint=TimeOfDateConstraint(start_time=edge, end_time=time(
            (edge.hour + 4) % 24, edge.minute, tzinfo=UTC)),
            prices=ModelPrice(input_mtok=Decimal("0.5"), output_mtok=Decimal("1"))),
    ])
    tiered = _model("tiered", ModelPrice(
        input_mtok=TieredPrices(base=Decimal("1.25"), tiers=[Tier(start=200_000,
                                                                  price=Decimal("2.5"))]),
        output_mtok=Decimal("10"), cache_read_mtok=Decimal("0.3125")))
    snapshot = DataSnapshot(providers=[_provider([dated, offpeak, tiered])],
                            from_auto_update=False)
    plan = _prices._plan_for(snapshot, "acme", "dated")
    assert isinstance(plan, _prices._Plan)
    assert plan.expires == datetime.combine(tomorrow, time(0), UTC).timestamp()
    assert plan.price(1_000_000, 1_000_000, 0) == (3.0, 4.0)
    plan = _prices._plan_for(snapshot, "acme", "offpeak")
    assert isinstance(plan, _prices._Plan)
    assert 0 < plan.expires - now.timestamp() <= 2 * 3600
    set_custom_snapshot(snapshot)  # the library's own way to install other data
    try:
        for model in ("dated", "offpeak", "tiered"):
            for inp, cached in ((1_000, 0), (199_999, 10), (200_001, 200_001), (10**9, 7)):
                usage = Usage(input_tokens=inp, output_tokens=77, cache_read_tokens=cached or None)
                want = calc_price(usage, model, provider_id="acme")
                assert price("acme", model, inp, 77, cached) == (
                    float(want.input_price), float(want.output_price)), (model, inp)
    finally:
        set_custom_snapshot(None)
    # the bundled data again: the recipes read from the custom snapshot are gone with it
    assert price("acme", "tiered", 1000, 1, 0) is None


def test_unhandled_shapes_are_left_to_the_library() -> None:
    """No recipe, the library prices every call, for: a price key the library does not know
    (it warns), prices its validation refuses (a cache-read price with no input price: no
    price at all), and groq's whisper models (the library adjusts their usage). A price per
    request (no direction) and an audio price beside the text ones do get a recipe."""
    odd = _model("odd", ModelPrice(input_mtok=Decimal("1"), output_mtok=Decimal("2"),
                                   bogus_mtok=Decimal("9")))
    invalid = _model("invalid", ModelPrice(cache_read_mtok=Decimal("1"),
                                           output_mtok=Decimal("2")))
    requests = _model("requests", ModelPrice(input_mtok=Decimal("1"), output_mtok=Decimal("2"),
                                             requests_kcount=Decimal("5")))
    audio = _model("audio", ModelPrice(input_mtok=Decimal("1"), output_mtok=Decimal("2"),
                                       input_audio_mtok=Decimal("40")))
    snapshot = DataSnapshot(providers=[_provider([odd, invalid, requests, audio])],
                            from_auto_update=False)
    assert _prices._plan_for(snapshot, "acme", "odd") == _prices._SLOW
    assert _prices._plan_for(snapshot, "acme", "invalid") == _prices._SLOW
    assert isinstance(_prices._plan_for(snapshot, "acme", "requests"), _prices._Plan)
    assert isinstance(_prices._plan_for(snapshot, "acme", "audio"), _prices._Plan)
    assert _prices._plan_for(get_snapshot(), "groq", "whisper-large-v3") == _prices._SLOW
    set_custom_snapshot(snapshot)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the library's warning about bogus_mtok
            for model, cached in (("odd", 34), ("requests", 34), ("audio", 0)):
                usage = Usage(input_tokens=1234, output_tokens=56, cache_read_tokens=cached or None)
                want = calc_price(usage, model, provider_id="acme")
                assert price("acme", model, 1234, 56, cached) == (float(want.input_price),
                                                              float(want.output_price))
        assert price("acme", "invalid", 1234, 56, 0) is None
    finally:
        set_custom_snapshot(None)
