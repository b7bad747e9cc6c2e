"""An llm run's usage columns for the fold: tokens, costs and first token, as stored.

Every llm run the fold stores (and any run whose outputs, metadata or events may carry usage)
gets the usage columns of ``_fold_rows._USAGE_ORDER`` beside its own, derived by
``_usage.derive_usage_us`` from what its sender gave. For an admitted post (the server's
ingest: JSON columns journaled as text) only the text ``derive_usage`` reads is decoded
(``usage_view``). ``usage_columns`` does it in C where the C module takes the run
(``_cencode.usage_columns``, ``_cusage.c``): in the fold process of ``assay serve`` this was
about a fifth of the CPU, 8.5 us an llm run against 4.0 in C (decoding its text and pricing
it, called from C, are most of the 4). Whatever C declines (a value of a
type JSON does not make, a count given as text, explicit top-level counts or costs, any
error) goes through the Python, which gives the same values (tests/store/test_fold_usage.py
compares the two on generated runs) and raises what is to be raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _json
from .._compiled import compiled
from .._time import checked_micros
from .._usage import derive_usage_us
from .._usage import price as usage_price

__all__ = ["holds_usage", "names_usage", "usage_columns", "usage_columns_py", "usage_view"]

_from_column = _json.from_json_column


def names_usage(outputs: str) -> bool:
    """Whether a run's outputs, as text, may hold what ``derive_usage`` reads of them (the
    stored text is orjson's, which writes a key's ASCII letters as they are)."""
    return '"usage_metadata"' in outputs or '"llm_output"' in outputs


def holds_usage(outputs: str) -> bool:
    """Whether a run's outputs, as text, hold what ``derive_usage`` reads of them: usage among
    their own keys. A chain run of an agent names ``usage_metadata`` deeper, in the messages
    it passes on, which nothing reads (the per-run loop asks the same of the decoded outputs)."""
    if not names_usage(outputs):
        return False
    found = _from_column(outputs)
    return isinstance(found, dict) and ("usage_metadata" in found or "llm_output" in found)


def usage_view(post: Mapping[str, Any]) -> dict[str, Any]:
    """An admitted post with the JSON text ``derive_usage`` reads decoded (it reads no
    inputs, and of the outputs only their usage: an llm run's outputs, often its largest
    column, are decoded only where their text names usage)."""
    view = dict(post)
    for key in ("outputs", "extra", "events"):
        value = view.get(key)
        if value is not None:
            if key == "outputs" and value.__class__ is str and not names_usage(value):
                view[key] = None  # what derive_usage finds in it: nothing
                continue
            view[key] = _from_column(value)
    return view


def _compiled_usage() -> Any:
    """``_cencode.usage_columns`` set up with the Python it calls; None where the C module is
    not built (``usage_columns`` derives every run in Python)."""
    module = compiled("assay.store._cencode")
    if module is None or not hasattr(module, "usage_columns"):
        return None
    module.usage_setup(_from_column, usage_price, checked_micros)
    return module.usage_columns


_CUSAGE: Any = _compiled_usage()


def usage_columns(run: Mapping[str, Any], start: int | None,
                  texts: bool = False) -> tuple[Any, ...]:
    """The usage columns (``_USAGE_ORDER``) of ``run``'s row, from the values
    ``derive_usage`` reads; ``texts``: an admitted post, whose JSON columns are text (decoded
    as ``usage_view`` does). In C where it takes the run, else in Python; the same values
    either way."""
    if _CUSAGE is not None and run.__class__ is dict:
        got = _CUSAGE(run, texts, start)
        if got is not None:
            return got  # type: ignore[no-any-return]
    return usage_columns_py(usage_view(run) if texts else run, start)


def usage_columns_py(run: Mapping[str, Any], start: int | None) -> tuple[Any, ...]:
    """``usage_columns`` in Python, of a run whose JSON columns are values."""
    got, ft_us = derive_usage_us(run)
    return (ft_us, ft_us - start if ft_us is not None and start else None,
            got["prompt_tokens"], got["completion_tokens"], got["total_tokens"],
            got["prompt_cost"], got["completion_cost"], got["total_cost"])
