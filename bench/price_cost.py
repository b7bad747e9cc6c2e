"""What pricing one llm call costs assay: genai-prices' ``calc_price`` against assay's recipe.

    .venv/bin/python bench/price_cost.py [--n 3000] [--rounds 7]

The fold prices every llm run it stores (``derive_usage`` -> ``_usage.price``), and the server
every OTLP llm span. Alternates, ``--rounds`` times, ``--n`` calls of each way (medians):

- ``calc``: genai-prices' ``calc_price`` behind a 1,024-entry cache keyed by the exact token
  counts (what ``_usage.price`` did before the recipes);
- ``recipe``: ``_usage.price`` as it is (a per-(provider, model) recipe applied in integers
  where the library's Decimal steps are exact, else with its Decimals; not cached).

Each way is timed with varied token counts (every call a miss: real traffic) and with one
count repeated (every call a cache hit: what benchmarks with a scripted model see), for a flat
price (openai gpt-4o-mini), one with cache reads and writes (anthropic claude-sonnet-4-6: a
third of the varied calls write the cache, as prompt caching's first calls do) and a tiered one
(google gemini-2.5-pro). Also ``derive_usage`` of a fold-shaped llm run. Prints figures and
ratios, asserts that both ways give the same prices.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from functools import lru_cache

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from assay import _prices, _usage  # noqa: E402 - after the sys.path set-up
from assay._usage import derive_usage, price  # noqa: E402

MODELS = [("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4-6"),
          ("google", "gemini-2.5-pro")]


def _before(provider: str, model: str, inp: int, out: int, cached: int = 0,
            written: int = 0) -> tuple[float, float] | None:
    """``_usage.price`` as it was: aliases, then calc_price behind an lru_cache."""
    prov = _usage._PROVIDER_ALIASES.get(provider or "", provider) if provider else None
    return _calc_cached(prov, model, int(inp), int(out), int(cached), int(written))


@lru_cache(maxsize=1024)
def _calc_cached(provider: str | None, model: str, inp: int, out: int, cached: int,
                 written: int) -> tuple[float, float] | None:
    return _prices.price_slow(provider, model, inp, out, cached, written)


def _per_call(fn: Callable[..., object], calls: list[tuple[str, str, int, int, int, int]]
              ) -> float:
    start = time.perf_counter()
    for c in calls:
        fn(*c)
    return (time.perf_counter() - start) / len(calls) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000, help="calls per batch")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(7)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds x {args.n} calls")
    print(f"{'model':<30} {'counts':<7} {'calc':>9} {'recipe':>9} {'ratio':>7}")
    for provider, model in MODELS:
        for label in ("varied", "same"):
            times: dict[str, list[float]] = {"calc": [], "recipe": []}
            for _ in range(args.rounds):
                if label == "varied":  # fresh counts each batch: misses for both caches
                    calls = [(provider, model, rng.randint(50, 400_000), rng.randint(1, 4000),
                              rng.choice([0, rng.randint(0, 40)]),
                              rng.choice([0, 0, rng.randint(0, 40)]) if provider == "anthropic"
                              else 0) for _ in range(args.n)]
                else:
                    calls = [(provider, model, 1234, 56, 0, 0)] * args.n
                for c in calls[:50]:
                    assert price(*c) == _before(*c), c
                for way, fn in (("calc", _before), ("recipe", price)):
                    times[way].append(_per_call(fn, calls))
            calc, recipe = (statistics.median(times[w]) for w in ("calc", "recipe"))
            print(f"{provider + ' ' + model:<30} {label:<7} {calc:>7.2f}us {recipe:>7.2f}us "
                  f"{recipe / calc:>7.3f}")
    def fold_run(i: int) -> dict[str, object]:  # as _fold_columns hands it to derive_usage
        meta = {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                "usage_metadata": {"input_tokens": 100 + i, "output_tokens": 45}}
        return {"run_type": "llm", "events": None, "outputs": {"messages": []},
                "extra": {"metadata": meta}}

    runs = [fold_run(i) for i in range(args.n)]
    got = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for r in runs:
            derive_usage(r)
        got.append((time.perf_counter() - start) / len(runs) * 1e6)
    print(f"derive_usage of a fold-shaped llm run (varied counts): {statistics.median(got):.2f}us")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
