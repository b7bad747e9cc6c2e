"""Garbage-collector settings for the stretches where assay allocates the most.

An experiment, and a server ingesting runs, make tens of container objects per run that all
survive the young generations, so at CPython's default thresholds the collector rescans them
over and over: a third of the per-example cost of a no-op target, and more than the validation
itself on the server. Raising the thresholds only spaces collections out; nothing is left
uncollected. The settings are restored afterwards, so an embedding process keeps its own.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["relaxed_gc"]


@contextlib.contextmanager
def relaxed_gc(*, freeze: bool = False) -> Iterator[None]:
    """Collect less often inside the block.

    ``freeze``: also move every object alive now (imports, the application) to the permanent
    generation for the block, so full collections stop rescanning them; for a long-lived server,
    whose start-up objects stay alive anyway. Garbage cycles are collected first.
    """
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 20_000), max(before[1], 50), max(before[2], 50))
    if freeze:
        gc.collect()
        gc.freeze()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
        elif gc.get_freeze_count() == 0:
            # What survived the block moves to the oldest generation unscanned (freeze, then
            # unfreeze into generation 2). Otherwise the first collection at the restored
            # thresholds scans every object the block kept (50 ms after 10,000 examples)
            # only to promote them. Skipped when the process froze objects of its own.
            gc.freeze()
            gc.unfreeze()
        gc.set_threshold(*before)
