"""genai-prices' price of an llm call, without paying ``calc_price``'s ~70 us per call.

``calc_price`` resolves the model's prices, validates them, decomposes the usage into leaf
counts and sums Decimals on every call; the fold prices every llm run it stores (and the server
every OTLP llm span), with token counts that rarely repeat. For the usages assay prices (input,
output, cache-read and cache-write tokens) the answer is, per (provider, model), a fixed
recipe: which price each unit pays (flat or tiered) and which token counts it is charged for.
A ``_Plan`` is that recipe, read once from the library's own data for the ``ModelPrice`` it
selects now, and applied with the same Decimal operations in the same order, so its floats are
exactly ``calc_price``'s;
or, where those operations are all exact (prices >= 0, a per that is a power of ten, sums below
10^27), in integers over one power of ten, whose division rounds to the same float (~1 us a
call, against ~3 for the Decimals).

Anything the recipe does not cover is priced by ``calc_price`` itself: a unit whose count the
library would infer or reject, a price key it would warn about, a usage it would refuse
(negative leaf counts), a constraint of an unknown kind, any exception while reading the data.
A recipe expires when another of the model's dated prices may apply (the day a later price
starts, the time of day an off-peak price begins or ends) and is read again; a new snapshot
(``UpdatePrices``) discards every recipe. ``tests/test_prices.py`` checks the recipe
against ``calc_price`` for every model of every provider in the installed snapshot.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from decimal import Decimal
from typing import Any, TypeVar

__all__ = ["known_provider", "price", "price_slow"]

# The usage keys assay reports, and the count (input, output, cache read, cache write, cache
# write for an hour) each one stands for. Input counts every input token, cached or not (the
# library's convention, and OpenAI's); the cache writes are Anthropic's prompt caching, whose
# hour-long writes (a subset of the writes) cost more than the five-minute ones.
_Counts = tuple[int, int, int, int, int]
_REPORTED: dict[str, _Counts] = {
    "input_tokens": (1, 0, 0, 0, 0), "output_tokens": (0, 1, 0, 0, 0),
    "cache_read_tokens": (0, 0, 1, 0, 0), "cache_write_tokens": (0, 0, 0, 1, 0),
    "cache_write_1h_tokens": (0, 0, 0, 0, 1)}
_NO_COUNT: _Counts = (0, 0, 0, 0, 0)
# What a (provider, model) resolves to besides a Plan: no price at all (no provider knows the
# model), or "ask calc_price every time".
_UNKNOWN = "unknown"
_SLOW = "slow"


# One priced unit with a direction: its price (a Decimal, or ``(base, ((start, price), ...))``
# tiers, highest start first), its ``per``, the token counts it is charged for as coefficients
# of the five counts of ``_REPORTED``, and whether it is an input price. A plain tuple: read in
# the loop below for every llm run priced.
_Term = tuple[Decimal | tuple[Decimal, tuple[tuple[int, Decimal], ...]], int,
              int, int, int, int, int, bool]


# A term as integers: the price per token (a flat one, or tiers as in ``_Term``) as a multiple
# of the plan's common power of ten, the count's coefficients, and whether it is an input price.
_IntTerm = tuple[int | tuple[int, tuple[tuple[int, int], ...]], int, int, int, int, int, bool]
# Below this, every Decimal operation of ``_Plan.decimal_price`` is exact (28 digits of precision)
_EXACT_BELOW = 10**27


_R = TypeVar("_R", int, Decimal)


def _tier_rate(tiered: tuple[_R, tuple[tuple[int, _R], ...]], inp: int) -> _R:
    """The rate tiers give every token: the highest tier whose start the input tokens pass
    (tiers highest start first), else the base rate."""
    base, tiers = tiered
    for start, rate in tiers:
        if inp > start:
            return rate
    return base


@dataclass(frozen=True, slots=True, eq=False)
class _Plan:
    """How genai-prices prices one (provider, model): the terms in the library's own order, and
    the time (epoch seconds) at which another of the model's prices may start to apply.
    ``exact``: the same terms as integers over one power of ten (``_integral``), or None."""

    terms: tuple[_Term, ...]
    expires: float
    exact: tuple[int, tuple[_IntTerm, ...]] | None = None

    def price(self, inp: int, out: int, cached: int, written: int = 0, written_1h: int = 0
              ) -> tuple[float, float] | None:
        """(input_price, output_price) as ``calc_price`` gives them, or None when this usage is
        one the library would refuse (the caller then asks the library).

        In integers where that is exact: with prices >= 0 and a per that is a power of ten,
        every Decimal step of the library's sum is exact while the sum stays below 10^27, and
        its float is then the correctly rounded value of the same rational as ``int / int``
        (Python rounds both correctly). ~4x faster than the Decimals."""
        if inp < 0 or out < 0 or cached < 0 or written_1h < 0 or written_1h > written:
            return None  # (hour-long writes past the writes: refused even where unpriced)
        if self.exact is None:
            return self.decimal_price(inp, out, cached, written, written_1h)
        den, terms = self.exact
        input_num = output_num = 0
        for m, ci, co, cr, cw, ch, is_input in terms:
            count = ci * inp + co * out + cr * cached
            if written:  # (most calls write no cache)
                count += cw * written + ch * written_1h
            if count < 0:  # the library raises: e.g. a cache read larger than the input
                return None
            rate = _tier_rate(m, inp) if isinstance(m, tuple) else m
            if is_input:
                input_num += rate * count
            else:
                output_num += rate * count
        if input_num >= _EXACT_BELOW or output_num >= _EXACT_BELOW:
            return self.decimal_price(inp, out, cached, written, written_1h)
        return input_num / den, output_num / den

    def decimal_price(self, inp: int, out: int, cached: int, written: int = 0,
                      written_1h: int = 0) -> tuple[float, float] | None:
        """``price`` with the library's Decimal operations, in its order."""
        if inp < 0 or out < 0 or cached < 0 or written_1h < 0 or written_1h > written:
            return None
        input_price = Decimal(0)
        output_price = Decimal(0)
        for p, per, ci, co, cr, cw, ch, is_input in self.terms:
            count = ci * inp + co * out + cr * cached + cw * written + ch * written_1h
            if count < 0:  # the library raises: e.g. a cache read larger than the input
                return None
            if isinstance(p, tuple):
                p = _tier_rate(p, inp)
            if is_input:
                input_price += p * Decimal(count) / per
            else:
                output_price += p * Decimal(count) / per
        return float(input_price), float(output_price)


def _integral(terms: tuple[_Term, ...]) -> tuple[int, tuple[_IntTerm, ...]] | None:
    """``terms``' prices per token as integers over one power of ten (its value first), or None
    where that would not be exact: a price below zero or not finite, a per that is not a power
    of ten."""
    scaled: list[tuple[int, int]] = []  # each price per token as (coefficient, exponent)

    def per_token(d: Decimal, digits: int) -> int:
        if not d.is_finite() or d < 0:
            raise ValueError(d)
        _, coefficient, exponent = d.as_tuple()
        scaled.append((int("".join(map(str, coefficient))), int(exponent) - digits))
        return len(scaled) - 1

    shapes = []
    try:
        for p, per, ci, co, cr, cw, ch, is_input in terms:
            digits = len(str(per)) - 1
            if per != 10**digits:
                return None
            if isinstance(p, tuple):
                shape: Any = (per_token(p[0], digits),
                              tuple((start, per_token(tp, digits)) for start, tp in p[1]))
            else:
                shape = per_token(p, digits)
            shapes.append((shape, (ci, co, cr, cw, ch), is_input))
    except ValueError:
        return None
    low = min([0, *(e for _, e in scaled)])
    ints = [c * 10 ** (e - low) for c, e in scaled]
    out: list[_IntTerm] = []
    for shape, (ci, co, cr, cw, ch), is_input in shapes:
        m = (ints[shape[0]], tuple((start, ints[i]) for start, i in shape[1])) \
            if isinstance(shape, tuple) else ints[shape]
        out.append((m, ci, co, cr, cw, ch, is_input))
    return 10**-low, tuple(out)


_plans: dict[tuple[str | None, str], _Plan | str] = {}
_MAX_PLANS = 4096
_snapshot: list[Any] = [None]  # the snapshot _plans were read from


def price(provider: str | None, model: str, inp: int, out: int, cached: int,
          written: int = 0, written_1h: int = 0) -> tuple[float, float] | None:
    """(input_price, output_price) in USD exactly as :func:`price_slow` gives them, or None when
    no provider knows the model; from the model's recipe when it has one."""
    plan = _plan(provider, model)
    if isinstance(plan, _Plan):
        got = plan.price(inp, out, cached, written, written_1h)
        if got is not None:
            return got
    elif plan is _UNKNOWN:
        return None
    return price_slow(provider, model, inp, out, cached, written, written_1h)


@functools.lru_cache(maxsize=256)
def known_provider(name: str) -> bool:
    """Whether genai-prices knows a provider by this name (an id of its, or a name its rules
    match: ``gemini``, ``vertex_ai`` and ``bedrock`` are Google's and AWS's)."""
    try:
        _get_snapshot().find_provider(None, name, None)
    except Exception:  # noqa: BLE001 - LookupError, or data of a shape it cannot read
        return False
    return True


def _get_snapshot() -> Any:
    """genai-prices' current data (imported on first use: the package's data is large)."""
    global _get_snapshot
    from genai_prices.data_snapshot import get_snapshot

    _get_snapshot = get_snapshot
    return get_snapshot()


def _plan(provider: str | None, model: str) -> _Plan | str:
    snapshot = _get_snapshot()
    if snapshot is not _snapshot[0]:  # UpdatePrices installed new data: read it again
        _plans.clear()
        _snapshot[0] = snapshot
    key = (provider, model)
    plan = _plans.get(key)
    if plan is None or (isinstance(plan, _Plan) and time.time() >= plan.expires):
        if len(_plans) >= _MAX_PLANS:  # model names come from senders: keep memory bounded
            _plans.clear()
        plan = _plans[key] = _plan_for(snapshot, provider, model)
    return plan


def price_slow(provider: str | None, model: str, inp: int, out: int, cached: int,
               written: int = 0, written_1h: int = 0) -> tuple[float, float] | None:
    """genai-prices' ``calc_price``: the named provider first, then whichever provider the
    library matches the model to; None when neither knows it (no price rather than a wrong
    one)."""
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached or None,
                  cache_write_tokens=written or None, cache_write_1h_tokens=written_1h or None)
    for provider_id in ([provider] if provider else []) + [None]:
        try:
            pr = calc_price(usage, model_ref=model, provider_id=provider_id)
        except Exception:  # unknown model/provider or a usage it refuses: try the next
            continue
        return float(pr.input_price), float(pr.output_price)
    return None


def _plan_for(snapshot: Any, provider: str | None, model: str) -> _Plan | str:
    """The recipe for (provider, model) in ``snapshot``, resolved the way :func:`price_slow`
    resolves it: the first provider that knows the model decides."""
    for provider_id in ([provider] if provider else []) + [None]:
        try:
            prov, info = snapshot.find_provider_model(model, None, provider_id, None)
        except Exception:  # this provider does not know the model: as calc_price, try the next
            continue
        try:
            return _build(prov, info) or _SLOW
        except Exception:  # data of a shape this module does not know: the library decides
            return _SLOW
    return _UNKNOWN


def _expiry(info: Any, now: datetime) -> float | None:
    """Until when (epoch seconds) the price ``ModelInfo.get_prices`` selects at ``now`` stands:
    the next day a later price starts, the next time of day an off-peak price begins or ends."""
    from genai_prices.types import ModelPrice, StartDateConstraint, TimeOfDateConstraint

    if isinstance(info.prices, ModelPrice):
        return math.inf
    expires = math.inf
    for conditional in info.prices:
        constraint = conditional.constraint
        if constraint is None:
            continue
        if isinstance(constraint, StartDateConstraint):
            starts = datetime.combine(constraint.start_date, dtime(0), UTC)
            if starts > now:
                expires = min(expires, starts.timestamp())
        elif isinstance(constraint, TimeOfDateConstraint):
            for moment in (constraint.start_time, constraint.end_time):
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=UTC)
                at = datetime.combine(now.date(), moment).astimezone(UTC)
                while at <= now:
                    at += timedelta(days=1)
                expires = min(expires, at.timestamp())
        else:  # a constraint this module does not know: the library decides every call
            return None
    return expires


def _build(prov: Any, info: Any) -> _Plan | None:
    """Read the recipe from the library's data, or None when its shape is not one this module
    prices exactly (the library's own calculation then prices every call)."""
    from genai_prices import types as gp_types
    from genai_prices.units import _get_registry

    if prov.id == "groq" and info.id.startswith("whisper"):  # the library adjusts usage there
        return None
    now = datetime.now(tz=UTC)
    expires = _expiry(info, now)
    if expires is None:
        return None
    model_price = info.get_prices(now)  # the library's own choice among dated prices
    registry = _get_registry()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown price key warns: leave it to the library
        try:
            resolved = gp_types._collect_resolved_model_prices(model_price, registry)
        except Warning:
            return None
    units = [unit for unit, _ in resolved]
    # validate_priced_units raises the same way for every usage: such a model prices nothing
    from genai_prices.validation import validate_priced_units
    validate_priced_units(tuple(units), registry)

    def descends(ancestor: Any, unit: Any) -> bool:
        return bool(ancestor.dimensions.items() <= unit.dimensions.items())

    reported = [registry.units[key] for key in _REPORTED]
    for unit in units:
        if unit.usage_key in _REPORTED:
            continue
        # an unreported key whose count the library infers from a reported one: not handled
        if any(descends(unit, r) for r in reported):
            return None
    # leaf counts as decompose.compute_leaf_values: a unit's count less its priced descendants'
    leaves: dict[str, _Counts] = {}
    token_units = [u for u in units if u.usage_key != "requests"]
    for unit in sorted(token_units, key=lambda u: (-len(u.dimensions), u.usage_key)):
        leaf = _REPORTED.get(unit.usage_key, _NO_COUNT)
        for other in token_units:
            if other is not unit and descends(unit, other):
                o = leaves[other.usage_key]
                leaf = (leaf[0] - o[0], leaf[1] - o[1], leaf[2] - o[2], leaf[3] - o[3],
                        leaf[4] - o[4])
        leaves[unit.usage_key] = leaf
    terms: list[_Term] = []
    for unit, value in resolved:
        direction = unit.dimensions.get("direction")
        if unit.usage_key == "requests":
            if direction is not None:
                return None
            continue
        if direction not in ("input", "output"):
            if leaves[unit.usage_key] != _NO_COUNT:  # a count the library could find negative
                return None
            continue  # counted in the total only, which assay does not use
        if isinstance(value, gp_types.TieredPrices):
            price: Any = (value.base, tuple((t.start, t.price) for t in reversed(value.tiers)))
        elif isinstance(value, Decimal):
            price = value
        else:
            return None
        terms.append((price, int(unit.per), *leaves[unit.usage_key], direction == "input"))
    return _Plan(tuple(terms), expires, _integral(tuple(terms)))
