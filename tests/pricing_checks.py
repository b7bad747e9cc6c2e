"""Shared by test packages (importable as a top-level module, as ``compiled_paths`` is): an llm
run's stored cost checked against genai-prices' own ``calc_price``."""

from __future__ import annotations

from typing import Any


def check_priced(llm: Any, provider: str, model: str, *, priced_as: str | None = None
                 ) -> dict[str, int]:
    """An llm run names its provider and model, has tokens, and costs what genai-prices asks
    for its usage as stored (as the model ``priced_as`` when a rule of the user's prices it so),
    cache reads and writes (and the hour-long writes) at their own rates; returns the run's
    cache counts (``cache_read``, ``cache_creation``...)."""
    from genai_prices import Usage, calc_price

    from assay._usage import cache_counts

    meta = llm.extra["metadata"]
    assert (meta["ls_provider"], meta["ls_model_name"]) == (provider, model)
    usage = meta["usage_metadata"]
    details = dict(usage.get("input_token_details") or {})
    assert llm.prompt_tokens == usage["input_tokens"] > 0 and llm.completion_tokens > 0
    read, writes, hour = cache_counts(details)  # (its reading of details: tests/test_usage.py)
    want = calc_price(Usage(input_tokens=llm.prompt_tokens, output_tokens=llm.completion_tokens,
                            cache_read_tokens=read or None, cache_write_tokens=writes or None,
                            cache_write_1h_tokens=hour or None),
                      model_ref=priced_as or model, provider_id=provider)
    assert (llm.prompt_cost, llm.completion_cost) == (float(want.input_price),
                                                      float(want.output_price))
    return details
