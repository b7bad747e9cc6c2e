"""Posted runs admitted in one pass: the server's ingest checks and readies each run in C.

A run the server receives is checked by ``server._wire.plain_run`` (its wire form), then by
``Journal.admit``: ``_runs._clean`` (the fields the store keeps, checked again) and
``_journal_admit._as_text`` (its JSON columns as the text the fold stores). Three walks over the
same fields in Python were the largest part of a worker's CPU per ingested run (bench/README,
stop 42). ``_cencode.admitted_post`` does all three in one pass for a run in the usual form
and gives an ``AdmittedPost``, which ``Journal.admit`` takes as it is; any other run gets
None and goes the Python way, which stays the reference and words every error (a test
compares both on thousands of mutated runs).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from .. import _json
from .._compiled import compiled
from ._fold_columns import column_text

__all__ = ["AdmittedPost", "admission"]


class AdmittedPost(dict):  # type: ignore[type-arg]  # a run as _clean and _as_text make it
    """A posted run checked and made ready by ``admitted_post``: the keys ``_clean`` keeps, the
    JSON columns as text. ``raw`` is the run as the sender sent it (its project is resolved
    from there). Made only here: ``Journal.admit`` trusts it."""

    __slots__ = ("raw",)

    raw: dict[str, Any]


def admission(micros: Callable[[Any], Any], not_plain: object
              ) -> Callable[[Any, str | None], AdmittedPost | None] | None:
    """``admit(raw, run_id)``: ``raw`` (a posted run's dict, its ``id`` ``run_id`` when given)
    as an ``AdmittedPost``, or None where the C pass does not take it; None where the C
    module is not built. ``micros`` reads a sender's time the C pass does not read itself
    (``server._wire._micros``; ``not_plain``: its refusal)."""
    module = compiled("assay.store._cencode")
    if module is None:
        return None
    return partial(module.admitted_post, AdmittedPost, micros, not_plain, _json.escape_text,
                   orjson.dumps, _json.jsonable, column_text, _json._ESC_UTF8)
