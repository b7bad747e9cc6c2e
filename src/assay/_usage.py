"""Token usage, first-token time and cost of a run, derived from its wire fields.

Used wherever a run is stored (local tracing, the server's ingest), so the numbers in
``read_project`` statistics do not depend on which client sent the run.

Cost precedence: explicit costs on the run (``usage_metadata.input_cost`` / ``output_cost`` /
``total_cost``, or top-level ``prompt_cost`` ...) win; otherwise genai-prices prices the tokens
when the run names its provider and model; an unknown model gives no cost, never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from . import _model_prices, _prices
from ._time import checked_micros

__all__ = ["usage_of", "first_token_time", "price", "cache_counts", "derive_usage",
           "derive_usage_us"]


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, answered without the ABC machinery for a dict (the
    fold derives usage for every llm run it stores: these checks were a third of it)."""
    return value.__class__ is dict or isinstance(value, Mapping)


def _num(value: Any) -> float | None:
    cls = value.__class__
    if cls is int or cls is float:
        return value  # an int or a float (Any to mypy)
    if value is None or cls is bool:
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# a run's token count above this is not one (no model call reads or writes a trillion
# tokens): refused as unknown, so that a project's sums of them stay within the 64-bit
# integers the databases keep them in (PostgreSQL refuses a sum past them, which would fail
# every later fold of the project)
_MAX_COUNT = 10**12
_MAX_COST = 1e12  # USD, likewise for the sums of costs


def _int(value: Any) -> int | None:
    """A token count: None when it is not a number, or not one a count can be (negative, or
    past ``_MAX_COUNT``: the fold would fail the run's row, or its project's sums, on it)."""
    if value.__class__ is not int:
        n = _num(value)
        if n is None or not math.isfinite(n):
            return None
        value = int(n)
    return value if 0 <= value < _MAX_COUNT else None


def _cost(value: Any) -> float | None:
    """A cost in USD: a finite number within ``_MAX_COST``, else None (an infinite or NaN
    cost would poison every sum of costs it joins)."""
    n = _num(value)
    return None if n is None or not math.isfinite(n) or abs(n) > _MAX_COST else n


def _text(value: Any) -> str | None:
    """A model or provider name as sent, when it is text (a sender's list or dict is none)."""
    return value if value.__class__ is str and value else None


def usage_of(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's usage_metadata: extra.metadata, then outputs (JS SDK), then LangChain
    llm_output."""
    found = _usage_map(run)
    return None if found is None else dict(found)


def _usage_map(run: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """:func:`usage_of`, the run's own mapping where it has one (read, never changed)."""
    extra = run.get("extra") or {}
    meta = extra.get("metadata") if _is_map(extra) else None
    for holder in (meta, run.get("outputs"), run):
        if _is_map(holder):
            found = holder.get("usage_metadata")
            if _is_map(found):
                return found
    outputs = run.get("outputs")
    if _is_map(outputs):
        llm_output = outputs.get("llm_output")
        if _is_map(llm_output) and _is_map(llm_output.get("token_usage")):
            tu = llm_output["token_usage"]
            return {
                "input_tokens": tu.get("prompt_tokens"),
                "output_tokens": tu.get("completion_tokens"),
                "total_tokens": tu.get("total_tokens"),
            }
    return None


def first_token_time(events: Any) -> Any:
    """Time of the first ``new_token`` event, as sent (ISO string, epoch or datetime); None
    when there is none or one of them is not a time."""
    return _first_token(events)[0]


def _first_token(events: Any) -> tuple[Any, int | None]:
    """``first_token_time`` and its epoch microseconds, parsed once (the fold stores both)."""
    if not isinstance(events, list):
        return None, None
    first, first_us = None, 0
    for e in events:  # one pass, no key function: a streamed llm run has one such event
        if _is_map(e) and e.get("name") == "new_token":
            t = e.get("time")
            if t is None:
                continue
            try:
                us = checked_micros(t) or 0
            except (TypeError, ValueError):
                return None, None
            if first is None or us < first_us:
                first, first_us = t, us
    return (first, first_us) if first is not None else (None, None)


_PROVIDER_ALIASES = {"azure_openai": "azure", "google_genai": "google", "google_vertexai": "google",
                     "amazon_bedrock": "aws", "bedrock": "aws", "mistralai": "mistral"}


def price(provider: str | None, model: str | None, input_tokens: int, output_tokens: int,
          cache_read_tokens: int = 0, cache_write_tokens: int = 0,
          cache_write_1h_tokens: int = 0) -> tuple[float, float] | None:
    """(prompt_cost, completion_cost) in USD from genai-prices, or None when the model is
    unknown (exactly ``calc_price``'s figures, at a few us a call: see ``_prices``); a rule of
    the user's own (``ASSAY_MODEL_PRICES``, ``_model_prices``) first.
    ``input_tokens`` counts the cached ones too (read and written)."""
    if not model:
        return None
    prov = _PROVIDER_ALIASES.get(provider, provider) if provider else None
    rules = _model_prices.RULES  # (None until read: the first call reads the environment)
    rule = (_model_prices.rule_for(prov, model)
            if rules is None or rules or _model_prices.BATCH_RULES.get() else None)
    if rule is not None:  # the user's own price (ASSAY_MODEL_PRICES)
        if rule.price_as is None:
            return rule.cost(int(input_tokens), int(output_tokens), int(cache_read_tokens),
                             int(cache_write_tokens))
        model = rule.price_as
    got = _prices.price(prov, model, int(input_tokens), int(output_tokens),
                        int(cache_read_tokens), int(cache_write_tokens),
                        int(cache_write_1h_tokens))
    if got is None and "/" in model:
        # a gateway's name for another provider's model (OpenRouter's, LiteLLM's
        # "anthropic/claude-..." through an OpenAI-compatible client): that provider's price
        head, _, rest = model.partition("/")
        if rest and _prices.known_provider(head):
            got = _prices.price(head, rest, int(input_tokens), int(output_tokens),
                                int(cache_read_tokens), int(cache_write_tokens),
                                int(cache_write_1h_tokens))
    return got


def cache_counts(details: Mapping[str, Any]) -> tuple[int, int, int]:
    """(read, written, written for an hour) from a usage's ``input_token_details``.

    LangSmith's convention names the reads ``cache_read`` and the writes ``cache_creation``;
    LangChain's ``ChatAnthropic`` gives Anthropic's split of the writes by lifetime
    (``ephemeral_5m_input_tokens``, ``ephemeral_1h_input_tokens``) and then a ``cache_creation``
    of 0, assay's own wrappers both (the total and the hour-long part): the writes are the
    larger of the total and the split's sum."""
    get = details.get
    read, total, five, hour = (get("cache_read"), get("cache_creation"),
                               get("ephemeral_5m_input_tokens"),
                               get("ephemeral_1h_input_tokens"))
    read = 0 if read is None else (_int(read) or 0)
    if total is None and five is None and hour is None:  # (reads only: the usual details)
        return read, 0, 0
    total = 0 if total is None else (_int(total) or 0)
    hour = 0 if hour is None else (_int(hour) or 0)
    split = (0 if five is None else (_int(five) or 0)) + hour
    return read, max(total, split), hour


_NONE = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None,
         "prompt_cost": None, "completion_cost": None, "total_cost": None,
         "first_token_time": None}
_ABSENT = object()
_EMPTY: Mapping[str, Any] = {}  # read, never written


_EXPLICIT = ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_cost",
             "completion_cost", "total_cost")


def _any_explicit(get: Any) -> bool:
    """Whether the run gives any of ``_EXPLICIT`` (a loop: ``any()`` over a generator cost
    ~3x this on every llm run the fold stores)."""
    for key in _EXPLICIT:
        if get(key) is not None:
            return True
    return False


def _has_no_usage(run: Mapping[str, Any]) -> bool:
    """Cheap test for the common case (chains, tools): nothing here to derive."""
    if run.get("run_type") == "llm" or run.get("events") or "usage_metadata" in run:
        return False
    for key in _EXPLICIT:
        if run.get(key) is not None:
            return False
    extra = run.get("extra")
    meta = extra.get("metadata") if _is_map(extra) else None
    if _is_map(meta) and "usage_metadata" in meta:
        return False
    outputs = run.get("outputs")
    return not (_is_map(outputs)
                and ("usage_metadata" in outputs or "llm_output" in outputs))


def derive_usage(run: Mapping[str, Any]) -> dict[str, Any]:
    """Tokens, costs and first-token time to store beside a run (missing values are None)."""
    return derive_usage_us(run)[0]


def derive_usage_us(run: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """``derive_usage``, and the first token's time in epoch microseconds (the fold's column:
    the time parsed once, not again from the value as sent)."""
    if _has_no_usage(run):
        return dict(_NONE), None
    get = run.get
    events = get("events")
    # LangSmith's explicit top-level counts and costs win; runs rarely carry them (the fold's
    # never), so they are converted only when one is there
    p: int | None = None
    c: int | None = None
    total: int | None = None
    prompt_cost: float | None = None
    completion_cost: float | None = None
    total_cost: float | None = None
    if _any_explicit(get):
        p, c, total = (_int(get(key)) for key in _EXPLICIT[:3])
        prompt_cost, completion_cost, total_cost = (_cost(get(key)) for key in _EXPLICIT[3:])
    usage = _usage_map(run)
    if usage:
        uget = usage.get
        # (each value's usual case inline: this runs for every llm run a fold stores)
        if p is None:
            v = uget("input_tokens", _ABSENT)
            if v is _ABSENT:
                v = uget("prompt_tokens")
            p = v if v.__class__ is int and 0 <= v < _MAX_COUNT else _int(v)
        if c is None:
            v = uget("output_tokens", _ABSENT)
            if v is _ABSENT:
                v = uget("completion_tokens")
            c = v if v.__class__ is int and 0 <= v < _MAX_COUNT else _int(v)
        if total is None:
            v = uget("total_tokens")
            total = v if v.__class__ is int and 0 <= v < _MAX_COUNT else _int(v)
        if prompt_cost is None and (v := uget("input_cost")) is not None:
            prompt_cost = _cost(v)
        if completion_cost is None and (v := uget("output_cost")) is not None:
            completion_cost = _cost(v)
        if total_cost is None and (v := uget("total_cost")) is not None:
            total_cost = _cost(v)
    if total is None and (p is not None or c is not None):
        total = _int((p or 0) + (c or 0))
    if (prompt_cost is None and completion_cost is None and total_cost is None
            and (p or c) and get("run_type") == "llm"):
        extra = get("extra")
        meta = invocation = None
        if extra.__class__ is dict or _is_map(extra):
            meta = extra.get("metadata")
            invocation = extra.get("invocation_params")
        if not (meta.__class__ is dict or _is_map(meta)):
            meta = _EMPTY
        if not (invocation.__class__ is dict or _is_map(invocation)):
            invocation = _EMPTY
        model = (_text(meta.get("ls_model_name")) or _text(invocation.get("model"))
                 or _text(invocation.get("model_name")))
        provider = _text(meta.get("ls_provider"))
        details = (usage or _EMPTY).get("input_token_details")
        if details and _is_map(details):
            read, written, written_1h = cache_counts(details)
        else:
            read = written = written_1h = 0
        priced = price(provider, model, p or 0, c or 0, read, written, written_1h)
        if priced is not None:
            prompt_cost, completion_cost = priced
    if total_cost is None and (prompt_cost is not None or completion_cost is not None):
        total_cost = _cost((prompt_cost or 0.0) + (completion_cost or 0.0))
    first, first_us = (None, None) if events is None else _first_token(events)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": total,
            "prompt_cost": prompt_cost, "completion_cost": completion_cost,
            "total_cost": total_cost, "first_token_time": first}, first_us


