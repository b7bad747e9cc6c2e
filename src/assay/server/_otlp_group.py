"""Group commit for OTLP exports: concurrent requests' spans stored in one transaction.

Every export is stored in a write transaction, and on SQLite writes take turns (one write
lock): a transaction's fixed costs (the project look-up, the statistics statement, the commit
writing the indexes' pages to the WAL) were paid per request while the other exporters waited.
Here a request that has to wait for the writer leaves its spans in a queue; whichever request
gets to write next takes every queued batch and stores them together, and the requests whose
spans it stored answer at once. With one exporter nothing changes: its batch is alone.

Nothing is half written and a bad batch harms nobody else: if the combined transaction fails,
it is rolled back and each batch is stored again alone, so each request gets its own outcome.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import StoreError
from ..store._engine import BUSY_TIMEOUT_S
from ..store._spans import SpanRun, store_spans

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["store_grouped"]

MAX_GROUP_SPANS = 2_000  # spans per combined transaction (more queued wait for the next one)


@dataclass
class _Job:
    items: Sequence[SpanRun]
    done: bool = False
    error: BaseException | None = None


@dataclass
class _Group:
    queue: list[_Job] = field(default_factory=list)
    writer: threading.Lock = field(default_factory=threading.Lock)


_groups: dict[tuple[int, str], _Group] = {}
_guard = threading.Lock()


def _group(store: Store) -> _Group:
    key = (id(store.engine), store.tenant_id)
    with _guard:
        group = _groups.get(key)
        if group is None:
            group = _groups[key] = _Group()
        return group


def _take(group: _Group) -> list[_Job]:
    """The queued batches, up to ``MAX_GROUP_SPANS`` spans (at least one batch)."""
    with _guard:
        taken: list[_Job] = []
        n = 0
        while group.queue and (not taken or n + len(group.queue[0].items) <= MAX_GROUP_SPANS):
            job = group.queue.pop(0)
            taken.append(job)
            n += len(job.items)
        return taken


def _store(store: Store, jobs: list[_Job]) -> None:
    if len(jobs) > 1:
        try:
            store_spans(store, [it for job in jobs for it in job.items])
        except Exception:  # noqa: BLE001 - rolled back: each batch again alone, below
            pass
        else:
            for job in jobs:
                job.done = True
            return
    for job in jobs:
        try:
            store_spans(store, job.items)
        except BaseException as exc:  # noqa: BLE001 - this request's own outcome
            job.error = exc
        job.done = True


def store_grouped(store: Store, items: Sequence[SpanRun]) -> None:
    """Store ``items`` (one request's spans), with whatever other requests of the workspace
    queued meanwhile; raises what storing this request's spans raised."""
    group = _group(store)
    job = _Job(items)
    with _guard:
        group.queue.append(job)
    while not job.done:
        if group.writer.acquire(timeout=BUSY_TIMEOUT_S):
            try:
                if not job.done:
                    _store(store, _take(group))
            finally:
                group.writer.release()
            continue
        with _guard:  # a writer that never lets go: give up as SQLite's own wait does
            if job in group.queue:
                group.queue.remove(job)
                raise StoreError("database is locked: no OTLP export was stored for "
                                 f"{BUSY_TIMEOUT_S:.0f} s")
        # else a writer took this batch and is storing it: its outcome comes
    if job.error is not None:
        raise job.error
