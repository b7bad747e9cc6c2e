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

__all__ = ["BULK", "YOUNG", "build_many", "relaxed_gc"]

_T = TypeVar("_T")
_R = TypeVar("_R")
BULK = 256  # rows from which ``build_many`` relaxes the collector
# the young generation's threshold inside a block: an experiment keeps ~9 tracked objects an
# example (its run, its row, its example), each walked once by the collection that finds it
# young; fewer collections also walk fewer short-lived objects (at 20,000: 171k instructions an
# example of a no-op experiment and its first read, 168k at 100,000, 165k with no collector)
YOUNG = 100_000

_lock = threading.Lock()
_saved: tuple[int, ...] = (700, 10, 10)
# thread ident -> [blocks, freeze blocks] it is inside: the only count kept, so a forked child,
# which has only the thread that forked, drops the others' blocks (a writer's, a folder's) with
# their entries (``_after_fork``)
_threads: dict[int, list[int]] = {}


def _inside() -> tuple[int, int]:
    """(blocks, freeze blocks) open in this process, all threads (under ``_lock``)."""
    return sum(b for b, _ in _threads.values()), sum(f for _, f in _threads.values())


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
    global _saved
    me = threading.get_ident()
    with _lock:
        depth, frozen = _inside()
        if depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(_saved[0], YOUNG), max(_saved[1], 50), max(_saved[2], 50))
        if freeze and frozen == 0:
            gc.collect()
            gc.freeze()
        mine = _threads.setdefault(me, [0, 0])
        mine[0] += 1
        mine[1] += freeze
    try:
        yield
    finally:
        with _lock:
            mine = _threads[me]
            mine[0] -= 1
            mine[1] -= freeze
            if not mine[0]:
                del _threads[me]
            depth, frozen = _inside()
            if freeze:
                if frozen == 0:
                    gc.unfreeze()
            elif frozen == 0 and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            if depth == 0:
                gc.set_threshold(*_saved)


def _after_fork() -> None:
    """In a forked child: forget the blocks of threads the child does not have (they never
    leave them there), restoring the thresholds when none is left."""
    global _lock
    _lock = threading.Lock()
    mine = _threads.get(threading.get_ident())
    depth, frozen = _inside()
    _threads.clear()
    if mine is not None:
        _threads[threading.get_ident()] = mine
    if (mine or [0, 0])[0] == depth:
        return  # no other thread was inside a block
    if frozen and not (mine or [0, 0])[1]:
        gc.unfreeze()
    if mine is None:
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
