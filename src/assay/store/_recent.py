"""The batches this process journaled, kept as the fold will decode them, for its own fold.

A batch appended here is nearly always folded here too (the background folder, or the first
reader after an experiment), and decoding its JSON again (zstd, then pydantic-core) was an
eighth of that first read. So ``_journal`` keeps a plain copy of each batch it appends
(``_cplain.c``: dicts, lists, str, bool, None, 64-bit ints, finite floats; the batch's JSON is
then written from that copy), keyed by the compressed bytes it stores, and the fold takes the
copy for an entry whose payload is the same bytes. The journal's row stays what counts: a
fold in another process, one after a restart, or one retried after a rollback decodes the
bytes as before, and the same bytes always decode to the same batch, so which of the two the
fold gets never changes what it stores. A copy is taken once (the fold changes what it takes:
a retry must start again from the bytes), and the oldest go first past ``MAX_BYTES`` of JSON
(a server folding behind a flood of ingest, a store folded by another process).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .._compiled import compiled

__all__ = ["MAX_BYTES", "keep", "plain", "take"]

# what is kept at most, counted as the batches' JSON (their decoded objects take ~3x that)
MAX_BYTES = 32 * 1024 * 1024

# None where the C module is not built: nothing is kept, every batch is decoded
_PLAIN: Any = getattr(compiled("assay.store._cencode"), "plain_copy", None)

_lock = threading.Lock()
_kept: dict[bytes, tuple[Any, int]] = {}  # compressed payload -> (copy, its JSON's size)
_size = 0


def plain(payload: Any) -> Any:
    """``payload`` copied as its JSON decodes, or None when it is not all plain data (or the C
    module is not built): then nothing is kept for it."""
    return None if _PLAIN is None else _PLAIN(payload)


def keep(packed: bytes, copy: Any, size: int) -> None:
    """Keep ``copy`` (made by ``plain``) for the entry stored as ``packed``; ``size``: its
    JSON's length."""
    global _size
    if size > MAX_BYTES:
        return
    with _lock:
        old = _kept.pop(packed, None)
        if old is not None:
            _size -= old[1]
        _kept[packed] = (copy, size)
        _size += size
        while _size > MAX_BYTES:
            _size -= _kept.pop(next(iter(_kept)))[1]


def take(packed: bytes) -> Any:
    """The copy kept for an entry stored as ``packed`` (no longer kept), or None."""
    global _size
    if not _kept or packed.__class__ is not bytes:  # a driver's memoryview: not kept as such
        return None
    with _lock:
        got = _kept.pop(packed, None)
        if got is None:
            return None
        _size -= got[1]
        return got[0]


def clear() -> None:
    """Forget every copy (a forked child: its lock may have been held by another thread)."""
    global _lock, _size
    _lock = threading.Lock()
    _kept.clear()
    _size = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=clear)
