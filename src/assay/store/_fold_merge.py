"""Consecutive journal batches of runs, folded as one batch.

A fold transaction takes up to 20 journal entries. The server journals every request on its
own (the SDKs send ~100 runs a request), so folding entry by entry paid each entry's fixed
costs (a savepoint, a ``COPY`` or ``executemany`` begun and waited for, the fast path's set-up)
for a hundred runs; on PostgreSQL those were most of the fold. Entries of one workspace whose
batches differ only in their runs (the same format, project, shared extra) are concatenated in
journal order and applied as one batch: a run posted in one and patched in the next meets its
patch as a direct write of both would. When that batch fails as a whole, its entries are
applied one by one as before (``UnmergedBatch``), so a bad item still costs only itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["UnmergedBatch", "coalesced", "merged"]

_RUNS_KEYS = ("posts", "patches")


class UnmergedBatch(Exception):
    """A merged batch failed as a whole: apply its entries one by one."""


def _signature(payload: Any) -> Any:
    """What must be equal for two batches to fold as one: everything but their runs."""
    if not isinstance(payload, dict):
        return None
    return {k: v for k, v in payload.items() if k not in _RUNS_KEYS}


def coalesced(decoded: Sequence[tuple[Any, Any]], kind: str) -> list[list[tuple[Any, Any]]]:
    """``(entry, payload)`` pairs in journal order, grouped: consecutive ``kind`` entries of
    one workspace with the same signature together, every other entry alone."""
    groups: list[list[tuple[Any, Any]]] = []
    last: Any = None
    for entry, payload in decoded:
        key = None
        if entry.kind == kind and payload is not None:
            sig = _signature(payload)
            if sig is not None:
                key = (entry.tenant_id, sig)
        if key is not None and groups and key == last:
            groups[-1].append((entry, payload))
        else:
            groups.append([(entry, payload)])
        last = key
    return groups


def merged(group: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    """One batch of a group's runs: the common fields, the posts and patches in order."""
    out: dict[str, Any] = dict(_signature(group[0][1]))
    for name in _RUNS_KEYS:
        out[name] = [item for _, payload in group for item in payload.get(name) or ()]
    return out
