"""Prices of your own, for models genai-prices does not know or that you pay otherwise for.

genai-prices knows the public models by their public names. A model served under a name of
your own (an Azure deployment called ``prod-chat``), a self-hosted model, or one you pay a
negotiated rate for gets no cost, or the list price. ``ASSAY_MODEL_PRICES``
gives rules, tried in order before genai-prices; the first whose model (and provider, when the
rule names one) matches prices the call:

    [{"model": "prod-chat", "price_as": "gpt-4o"},
     {"match": "^acme-tuned-", "input": 0.30, "output": 1.20, "cache_read": 0.15},
     {"model": "llama-3.3-70b", "provider": "groq", "input": 0.59, "output": 0.79}]

``model`` is the exact name, ``match`` a regular expression searched in it; ``price_as`` prices
the call as another model (genai-prices', so its cache prices too), else ``input``/``output``
(and optionally ``cache_read``/``cache_write``, default: the input price) are USD per million
tokens, as providers list them. The variable holds the JSON itself or a file's path, read
once by a process (at its first priced call); ``set_model_prices`` sets it in this process and
for the processes it starts (a fold process, ``assay serve``'s workers). Costs are computed
when runs are stored: rules apply to runs stored after they are set.

A batch of runs is journaled with the rules in force in the process that traced it
(``journaled``), and folded with those (``batch_rules``), whichever process folds it: a batch
left by a process that exited before its fold, or folded by another process's fold (a store's
reader, ``assay serve``), is priced as the process that made it would have priced it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InvalidInputError

if TYPE_CHECKING:
    from ._price_rules import PriceRule

__all__ = ["BATCH_RULES", "ENV", "RULES", "batch_rules", "check_environment", "journaled",
           "rule_for", "set_model_prices"]

ENV = "ASSAY_MODEL_PRICES"
log = logging.getLogger("assay")


# the rules in force (None: the environment not read yet: it is read once, at the first call,
# as reading it costs ~0.7 us, a third of a priced call)
RULES: tuple[PriceRule, ...] | None = None


def _parse(value: str) -> tuple[PriceRule, ...]:
    from pydantic import ValidationError  # (only with rules: pydantic costs an import ~0.4 s)

    from ._price_rules import PriceRule

    text = value.strip()
    where = ENV
    if not text.startswith("["):
        path = Path(text).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInputError(f"{where}: cannot read the price file {path}: {exc}"
                                    ) from None
        where = f"{where} ({path})"
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"{where}: not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise InvalidInputError(f"{where}: expected a list of rules, got {type(raw).__name__}")
    parsed = []
    for i, item in enumerate(raw):
        try:
            parsed.append(PriceRule.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                (f"{'.'.join(str(p) for p in e['loc'])}: " if e["loc"] else "")
                + e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise InvalidInputError(f"{where}: rule {i}: {problems}") from None
    return tuple(parsed)


class _Matcher:
    """Rules and the first of them that prices each (provider, model), remembered (a rule's
    regex costs a search each call). False when there are no rules."""

    __slots__ = ("_json", "match", "rules")

    def __init__(self, rules: tuple[PriceRule, ...]) -> None:
        self.rules = rules
        self.match = functools.lru_cache(maxsize=10_000)(self._first)
        self._json: list[dict[str, Any]] | None = None

    def as_json(self) -> list[dict[str, Any]]:
        """The rules as JSON values (as a batch journals them), made once."""
        if self._json is None:
            self._json = [r.model_dump(mode="json", exclude_none=True) for r in self.rules]
        return self._json

    def _first(self, provider: str | None, model: str) -> PriceRule | None:
        return next((r for r in self.rules if r.matches(provider, model)), None)

    def __bool__(self) -> bool:
        return bool(self.rules)


_PROCESS = _Matcher(())  # this process's rules (``RULES``)


def _install(rules: tuple[PriceRule, ...]) -> tuple[PriceRule, ...]:
    global RULES, _PROCESS
    RULES, _PROCESS = rules, _Matcher(rules)
    return rules


def check_environment() -> tuple[PriceRule, ...]:
    """The rules of ``ASSAY_MODEL_PRICES`` as it is now, put in force (kept until
    ``set_model_prices``); a bad rule raises ``InvalidInputError`` naming it (what ``assay
    serve`` and ``assay prices`` ask first, to refuse it at once)."""
    value = os.environ.get(ENV)
    return _install(_parse(value) if value else ())


def _load() -> tuple[PriceRule, ...]:
    """The rules read at the first priced call. Pricing happens as runs are stored (the fold):
    a bad rule there would fail every fold, and leave every run unreadable, for a typo, so it
    is logged and the rules ignored (genai-prices alone prices)."""
    try:
        return check_environment()
    except InvalidInputError as exc:
        log.error("%s: no rule of ASSAY_MODEL_PRICES applies (genai-prices alone prices)", exc)
        return _install(())


def rule_for(provider: str | None, model: str) -> PriceRule | None:
    """The first rule that prices ``model`` from ``provider``, or None (genai-prices then):
    the rules of the batch being folded (``batch_rules``), else this process's."""
    folding = BATCH_RULES.get()
    if folding is None:
        if RULES is None:
            _load()
        folding = _PROCESS
    return folding.match(provider, model) if folding else None


# the rules of the batch being folded (``batch_rules``; false without rules); None: this
# process's own (``price`` asks it before calling ``rule_for``: most calls have no rules)
BATCH_RULES: ContextVar[_Matcher | None] = ContextVar("assay_batch_prices", default=None)
_NO_RULES = _Matcher(())


def journaled() -> list[dict[str, Any]] | None:
    """The rules in force in this process as a batch of runs journals them (JSON values), or
    None when there are none (the batch then carries nothing, and is priced by genai-prices
    alone)."""
    if RULES is None:
        _load()
    return _PROCESS.as_json() if _PROCESS else None


@functools.lru_cache(maxsize=64)
def _journaled_matcher(text: str) -> _Matcher:
    """The matcher of a journaled batch's rules (by their JSON text: one per set of rules)."""
    try:
        return _Matcher(_parse(text))
    except InvalidInputError as exc:  # (journaled by assay, checked then: not expected)
        log.error("%s: a journaled batch is priced by genai-prices alone", exc)
        return _NO_RULES


@contextlib.contextmanager
def batch_rules(payload: Any) -> Iterator[None]:
    """Price the runs built inside with the rules a journaled batch carries (``journaled``;
    none: genai-prices alone), not this process's."""
    value = payload.get("prices") if payload.__class__ is dict else None
    token = BATCH_RULES.set(_journaled_matcher(json.dumps(value))
                         if isinstance(value, list) and value else _NO_RULES)
    try:
        yield
    finally:
        BATCH_RULES.reset(token)


def set_model_prices(rules: str | os.PathLike[str] | list[dict[str, Any]] | None) -> None:
    """Price models with rules of your own (see the module's doc): a list of rules, a JSON
    file's path, or None to go back to genai-prices alone. Checked at once (a bad rule raises
    ``InvalidInputError`` naming it); set as ``ASSAY_MODEL_PRICES`` for this process and the
    processes it starts."""
    if rules is None:
        os.environ.pop(ENV, None)
        _install(())
        return
    value = json.dumps(rules) if isinstance(rules, list) else os.fspath(rules)
    parsed = _parse(value)  # a bad rule refused before anything is set
    os.environ[ENV] = value
    _install(parsed)
