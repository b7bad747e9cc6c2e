"""``assay prices``: what a model's calls cost, and where the price comes from.

A check of ``ASSAY_MODEL_PRICES`` (``assay._model_prices``) before runs are stored with it:
each model's price per million tokens as the store will charge it (input, output, cache read,
cache write) and its source: a rule of yours (which one), genai-prices, or none (unpriced).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from ._common import JsonOption, console, emit_json, handle_errors

# priced on a thousand tokens, times a thousand: a million at once would cross a long-context
# tier (Claude's, Gemini's above 200k input tokens) that a call of ordinary size does not
_PER, _SCALE = 1000, 1000


def price_row(provider: str | None, model: str) -> dict[str, Any]:
    """One model's prices per million tokens (None: unpriced) and their source."""
    from .. import _model_prices
    from .._usage import price

    def per_million(*counts: int, part: int = 0) -> float | None:
        got = price(provider, model, *counts)
        return None if got is None else float(f"{got[part] * _SCALE:.9g}")

    rule = _model_prices.rule_for(provider, model)
    input_ = per_million(_PER, 0)
    if rule is not None:
        source = f"ASSAY_MODEL_PRICES rule {(_model_prices.RULES or ()).index(rule)}"
        source += f" (as {rule.price_as})" if rule.price_as else ""
    else:
        source = "genai-prices" if input_ is not None else "none: unpriced"
    return {"model": model, "provider": provider, "source": source, "input": input_,
            "output": per_million(0, _PER, part=1), "cache_read": per_million(_PER, 0, _PER),
            "cache_write": per_million(_PER, 0, 0, _PER)}


def prices(
    models: Annotated[list[str], typer.Argument(help="Model names, as llm runs carry them.")],
    provider: Annotated[str | None, typer.Option(
        help="The provider the runs name (openai, anthropic, azure...).")] = None,
    json_out: JsonOption = False,
) -> None:
    """Show what each model's calls cost per million tokens, and whether the price is one of
    your ASSAY_MODEL_PRICES rules, genai-prices' or none."""
    from .._model_prices import check_environment

    with handle_errors():
        check_environment()  # a bad rule named here (stored runs' pricing ignores it)
        rows = [price_row(provider, model) for model in models]
    if json_out:
        emit_json(rows)
        return
    table = Table("model", "source", "input $/M", "output $/M", "cache read $/M",
                  "cache write $/M")
    for row in rows:
        table.add_row(row["model"], row["source"], *(
            "-" if row[k] is None else f"{row[k]:.4g}"
            for k in ("input", "output", "cache_read", "cache_write")))
    console.print(table)
