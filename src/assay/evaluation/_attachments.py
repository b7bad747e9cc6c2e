"""Targets and evaluators that ask for an example's ``attachments``, as in LangSmith.

LangSmith's ``evaluate()`` calls a target whose positional parameters are named from
``inputs``, ``attachments`` and ``metadata`` with those of the example, and hands
``attachments`` to an evaluator that names it. Only then are the files read (the dataset is
listed with ``include_attachments=True``); a target of the inputs alone costs nothing more.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["EXAMPLE_ARGS", "example_args", "fresh_attachments", "wants_attachments", "wrap_target"]

EXAMPLE_ARGS = ("inputs", "attachments", "metadata")


def _positional(fn: Any) -> list[str] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.default is p.empty]


def example_args(fn: Any) -> tuple[str, ...] | None:
    """The example fields a target takes, when it takes more than its inputs (``(inputs,
    attachments)``, ``(attachments, metadata)``, ...); None for a target of the inputs alone."""
    names = _positional(fn)
    if not names or "attachments" not in names and "metadata" not in names[1:]:
        return None
    if len(names) > 1 and not all(n in EXAMPLE_ARGS for n in names):
        return None  # some other convention: called with the inputs, as before
    return tuple(names)


def fresh_attachments(example: Any) -> dict[str, Any]:
    """The example's attachments, each reader rewound (target and evaluators share them)."""
    found = getattr(example, "attachments", None)
    if not isinstance(found, dict):  # a StoredExample (no files asked for) or a foreign object
        return {}
    for info in (found or {}).values():
        reader = info.get("reader") if isinstance(info, dict) else None
        if reader is not None and hasattr(reader, "seek"):
            reader.seek(0)
    return found


def wrap_target(fn: Callable[..., Any], names: tuple[str, ...], is_async: bool
                ) -> Callable[[Any], Any]:
    """``fn`` as a function of the whole example (the runner passes it the example)."""
    def args(ex: Any) -> list[Any]:
        values = {"inputs": ex.inputs, "metadata": getattr(ex, "metadata", None) or {}}
        return [fresh_attachments(ex) if n == "attachments" else values[n] for n in names]

    if is_async:
        async def call_async(ex: Any) -> Any:
            return await fn(*args(ex))
        return call_async

    def call(ex: Any) -> Any:
        return fn(*args(ex))
    return call


def wants_attachments(target: Any, evaluators: Sequence[Any] | None) -> bool:
    """Whether the experiment must read its examples' files: a target or an evaluator asks."""
    names = example_args(target) if callable(target) else None
    if names and "attachments" in names:
        return True
    for ev in evaluators or ():
        params = _positional(ev) or []
        try:
            params += list(inspect.signature(ev).parameters)
        except (TypeError, ValueError):
            pass
        if "attachments" in params:
            return True
    return False
