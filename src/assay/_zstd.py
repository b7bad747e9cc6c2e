"""zstandard's compressor and decompressor, one of each per thread.

Its objects are not for two threads at once, and making one costs ~9 us, about three times
compressing a small batch with one already made: the journal's appends and reads and the
server's request bodies take them from here instead of making one per call.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["compressor", "decompressor"]

_local = threading.local()


def compressor() -> Any:
    """This thread's ``ZstdCompressor`` (level 1: the journal's batches, written once)."""
    made = getattr(_local, "compressor", None)
    if made is None:
        import zstandard

        made = _local.compressor = zstandard.ZstdCompressor(level=1)
    return made


def decompressor() -> Any:
    """This thread's ``ZstdDecompressor``."""
    made = getattr(_local, "decompressor", None)
    if made is None:
        import zstandard

        made = _local.decompressor = zstandard.ZstdDecompressor()
    return made
