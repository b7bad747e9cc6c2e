"""Feedback rows reach the store in batches, written off the event loop.

One transaction per batch (by size, or at least every ``interval`` seconds so a slow experiment
killed midway loses little), never one commit per example. All feedback of one row is added in
one call and so always lands in one batch: a row's feedback is stored entirely or not at all,
which is what resume relies on to tell finished rows from unfinished ones.

``hold``: the experiment's project row being written meanwhile (``Creation``): nothing is
written before it is done, and nothing at all if it failed.

The end: ``detach()`` stops the background writes and hands over what is left, ``finish()``
stores it (blocking, on a thread): an experiment calls it on the thread that then stores its
last runs and its end time, one hop off the event loop instead of several. ``close()`` is the
two in one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._sync import offload
from ..errors import StoreError

if TYPE_CHECKING:
    from ..store import Store
    from ._experiment import Creation

__all__ = ["FeedbackSink"]


class FeedbackSink:
    def __init__(self, store: Store, *, batch_size: int = 2000, interval: float = 1.0,
                 hold: Creation | None = None) -> None:
        self._store = store
        self._hold = hold
        self.batch_size = batch_size
        self.interval = interval
        self._pending: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._detached = False
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self.written = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Queue all feedback of one row (stored together)."""
        if self._error is not None:
            raise StoreError(f"storing feedback failed: {self._error}") from self._error
        self._pending.extend(rows)
        if len(self._pending) >= self.batch_size:
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except TimeoutError:
                pass
            self._wake.clear()
            if self._detached:
                return
            if self._hold is not None:
                if not self._hold.done.is_set():
                    continue  # queued rows wait for the next tick (the end waits in finish)
                if self._hold.failed:
                    self._pending = []  # their experiment does not exist: never stored
            if self._pending:
                rows, self._pending = self._pending, []
                try:
                    await offload(self._write, rows)
                except BaseException as exc:  # surfaced by add(), detach() and close()
                    self._error = exc
                    return

    def _write(self, rows: list[dict[str, Any]]) -> None:
        journal = getattr(self._store, "journal", None)  # a local store: one journal row
        if journal is not None:
            journal.append_feedback(rows)
        else:
            self._store.feedback.create_many(rows, return_records=False)
        self.written += len(rows)

    async def close(self) -> None:
        """Store everything queued; re-raise a failed write."""
        await offload(self.finish, await self.detach())

    async def detach(self) -> list[dict[str, Any]]:
        """Stop storing (a write under way completes) and hand over what is still queued, for
        ``finish``; re-raise a failed write."""
        self._detached = True
        self._wake.set()
        if self._task is not None:
            await self._task
        self._raise()
        rows, self._pending = self._pending, []
        return rows

    def finish(self, rows: list[dict[str, Any]]) -> None:
        """Store the rows ``detach`` handed over (blocking: on a thread). They wait for the
        experiment's row like every other write, and are dropped if it failed."""
        if self._hold is not None:
            self._hold.done.wait()
            if self._hold.failed:
                return
        if rows:
            try:
                self._write(rows)
            except Exception as exc:
                self._error = exc
                self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise StoreError(f"storing feedback failed: {self._error}") from self._error
