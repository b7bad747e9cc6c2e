"""``langsmith_extra``: LangSmith's per-call tracing options, so code written for
``langsmith.traceable`` runs unchanged under ``assay.traceable``.

``fn(x, langsmith_extra={"metadata": {"thread_id": "t-1"}, "run_id": rid, "on_end": keep})``
traces that one call with those options; the function never sees the keyword (as with
LangSmith's decorator). Read: ``name``, ``metadata`` and ``tags`` (added to the decorator's),
``project_name``, ``client``, ``run_id``, ``reference_example_id``, ``run_extra``, ``parent`` or
``run_tree`` (a ``RunTree`` to nest under, or another process's ``to_headers()``; sync and
async functions) and ``on_end`` (called with the finished ``RunTree``). Other keys are logged
once and left out: the call still runs.

Only calls that pass the keyword come here (the wrappers test ``kwargs`` first): the usual call
pays nothing for it. Each such call builds its own wrapper (tens of microseconds).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any

from ..errors import InvalidInputError
from ._context import _Config, _remote, tracing_context
from ._run_tree import RunTree
from ._traceable import (
    EXTRA,
    _new_run,
    _Options,
    _PerCall,
    _wrap_async,
    _wrap_async_gen,
    _wrap_gen,
    _wrap_sync,
)
from ._writer import QUEUED

__all__ = ["with_extra"]

_READ = frozenset({"name", "metadata", "tags", "project_name", "client", "run_id",
                   "reference_example_id", "run_extra", "parent", "run_tree", "on_end"})
_warned: set[str] = set()
log = logging.getLogger("assay.tracing")


class _OneCall(_Options, _PerCall):
    """A decorator's options with one call's ``langsmith_extra`` applied; keeps the run."""

    __slots__ = ("run_id", "reference_example_id", "run_extra", "run")
    run_id: Any
    reference_example_id: Any
    run_extra: Mapping[str, Any] | None
    run: RunTree | None

    def start(self, parent: RunTree | None, cfg: _Config | None,
              inputs: dict[str, Any]) -> RunTree:
        run = _new_run(self.name, self.run_type, self.processed(inputs), parent, cfg,
                       client=self.client, project_name=self.project_name,
                       metadata=self.metadata, tags=self.tags,
                       reference_example_id=self.reference_example_id, run_id=self.run_id,
                       extra=self.run_extra)
        writer = run._writer or run._get_writer()
        run._sent = QUEUED
        writer._put(run)
        self.run = run
        return run


def _options(o: _Options, extra: Mapping[str, Any]) -> _OneCall:
    for key in extra:
        if key not in _READ and key not in _warned:
            _warned.add(key)
            log.warning("langsmith_extra[%r] is not read by assay's traceable; the call is "
                        "traced without it", key)
    metadata = extra.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInputError(f"langsmith_extra['metadata'] must be a mapping, got "
                                f"{metadata!r}")
    tags = extra.get("tags")
    if isinstance(tags, str):
        raise InvalidInputError("langsmith_extra['tags'] must be a list of strings, not one "
                                "string")
    one = _OneCall(extra.get("name") or o.name, o.run_type,
                   {**(o.metadata or {}), **(metadata or {})} or None,
                   [*(o.tags or ()), *[t for t in tags or () if t not in (o.tags or ())]] or None,
                   extra.get("project_name") or o.project_name, extra.get("client") or o.client,
                   o.process_inputs, o.process_outputs, o.reduce_fn, o.enabled)
    one.run_id = extra.get("run_id")
    one.reference_example_id = extra.get("reference_example_id")
    one.run_extra = extra.get("run_extra")
    one.run = None
    return one


def _parent(extra: Mapping[str, Any]) -> RunTree | None:
    """The run to nest under: a ``RunTree``, or another process's from its headers (a mapping
    with ``langsmith-trace``, as ``run.to_headers()`` made them; None without it) or that
    header's dotted order, in the project its baggage names else this call's."""
    parent = extra.get("run_tree") or extra.get("parent")
    if parent is None or isinstance(parent, RunTree):
        return parent
    if isinstance(parent, Mapping | str):
        return _remote(parent, extra.get("client"), extra.get("project_name"))
    raise InvalidInputError(f"langsmith_extra['parent'] must be an assay RunTree, "
                            f"distributed-tracing headers (a mapping) or a dotted order, got "
                            f"{type(parent).__name__}")


def _ended(one: _OneCall, on_end: Callable[[RunTree], Any] | None) -> None:
    if on_end is not None and one.run is not None:
        on_end(one.run)


def with_extra(fn: Callable[..., Any], o: _Options, kind: str, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """Call ``fn`` traced with ``kwargs[EXTRA]`` applied (a coroutine, generator or async
    generator for those ``kind``s: ``"async"``, ``"gen"``, ``"agen"``)."""
    kwargs = dict(kwargs)
    extra = kwargs.pop(EXTRA) or {}
    if not isinstance(extra, Mapping):
        raise InvalidInputError(f"langsmith_extra must be a mapping, got {extra!r}")
    one = _options(o, extra)
    parent = _parent(extra)
    if parent is not None and parent._remote:  # its project (baggage, else this call's)
        one.project_name = None
    on_end = extra.get("on_end")
    if kind == "sync":
        with tracing_context(parent=parent) if parent is not None else nullcontext():
            result = _wrap_sync(fn, one, None)(*args, **kwargs)
        _ended(one, on_end)
        return result
    if kind == "async":
        async def call() -> Any:
            with tracing_context(parent=parent) if parent is not None else nullcontext():
                result = await _wrap_async(fn, one)(*args, **kwargs)
            _ended(one, on_end)
            return result
        return call()
    if parent is not None:
        log.warning("langsmith_extra['parent'] is read for functions and coroutines, not for "
                    "generators: %s is traced where it is called", one.name)
    if kind == "gen":
        def gen() -> Any:
            result = yield from _wrap_gen(fn, one)(*args, **kwargs)
            _ended(one, on_end)
            return result
        return gen()

    async def agen() -> Any:
        async for item in _wrap_async_gen(fn, one)(*args, **kwargs):
            yield item
        _ended(one, on_end)
    return agen()
