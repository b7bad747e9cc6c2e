"""Garbage-collector settings for the stretches where assay allocates the most.

An experiment, a journal fold and a server ingesting runs make tens of container objects per run
that all survive the young generations, so at CPython's default thresholds the collector rescans
them over and over: a third of the per-example cost of a no-op target, and more than the
validation itself on the server. Raising the thresholds only spaces collections out; nothing is
left uncollected.

The settings are process-wide, so blocks that overlap (threads, nesting) share them: the first
to enter saves the process's own thresholds and the last to leave restores them.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["BULK", "build_many", "relaxed_gc"]

_T = TypeVar("_T")
_R = TypeVar("_R")
BULK = 256  # rows from which ``build_many`` relaxes the collector

_lock = threading.Lock()
_depth = 0  # blocks inside relaxed_gc, all threads
_frozen = 0  # of which freeze=True
_saved: tuple[int, ...] = (700, 10, 10)
# thread ident -> (blocks, freeze blocks) it is inside: a forked child has only the thread that
# forked, so the blocks of the others (a writer's, a folder's) are left for it (``_after_fork``)
_threads: dict[int, tuple[int, int]] = {}


@contextlib.contextmanager
def relaxed_gc(*, freeze: bool = False) -> Iterator[None]:
    """Collect less often inside the block.

    ``freeze``: also move every object alive now (imports, the application) to the permanent
    generation while the block lasts, so full collections stop rescanning them; for a
    long-lived server, whose start-up objects stay alive anyway. Garbage cycles go first.

    On leaving, what survived moves to the oldest generation unscanned (``gc.freeze()`` then
    ``gc.unfreeze()``): otherwise the first collection at the restored thresholds scans every
    object the block kept (50 ms after a 10,000-example experiment) only to promote it. Skipped
    while objects are frozen by a ``freeze`` block or by the process itself.
    """
    global _depth, _frozen, _saved
    me = threading.get_ident()
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(_saved[0], 20_000), max(_saved[1], 50), max(_saved[2], 50))
        _depth += 1
        if freeze:
            if _frozen == 0:
                gc.collect()
                gc.freeze()
            _frozen += 1
        blocks, frozen = _threads.get(me, (0, 0))
        _threads[me] = (blocks + 1, frozen + freeze)
    try:
        yield
    finally:
        with _lock:
            blocks, frozen = _threads.pop(me, (1, int(freeze)))
            if blocks > 1:
                _threads[me] = (blocks - 1, frozen - freeze)
            if freeze:
                _frozen -= 1
                if _frozen == 0:
                    gc.unfreeze()
            elif _frozen == 0 and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)


def _after_fork() -> None:
    """In a forked child: forget the blocks of threads the child does not have (they never
    leave them there), restoring the thresholds when none is left."""
    global _lock, _depth, _frozen
    _lock = threading.Lock()
    me = threading.get_ident()
    gone = [(b, f) for ident, (b, f) in _threads.items() if ident != me]
    mine = _threads.get(me)
    _threads.clear()
    if mine is not None:
        _threads[me] = mine
    if not gone:
        return
    _depth -= sum(b for b, _ in gone)
    was_frozen = _frozen
    _frozen -= sum(f for _, f in gone)
    if was_frozen and _frozen == 0:
        gc.unfreeze()
    if _depth == 0:
        gc.set_threshold(*_saved)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def build_many(build: Callable[[_T], _R], rows: Sequence[_T]) -> list[_R]:
    """``[build(row) for row in rows]``, with the collector relaxed when there are many.

    A read turns each row into a few container objects that all stay alive, and at the default
    thresholds every few thousand of them start a full collection over the whole heap (20-40 ms
    once the store and its libraries are loaded): ``list_runs`` of 20,000 runs took 40-47 us a
    run, 25-28 relaxed; ``list_examples`` of 10,000, 11.5-15 us an example, 6.7 relaxed."""
    if len(rows) < BULK:
        return [build(row) for row in rows]
    with relaxed_gc():
        return [build(row) for row in rows]
