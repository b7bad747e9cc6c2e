"""The server's background fold: ingest journals batches; this indexes them soon after.

It stands in for the store's own background folder (``store/_background.py``) for the
server's engine. Reads fold the journal themselves (``Store.settle``), so correctness never
waits for this thread; it keeps the journal short while nobody reads, so the first page of
the web UI after a
burst of ingest does not pay for the whole burst.

Folding and accepting compete for one write lock and one interpreter lock, so the folder works
in the gaps: every ``interval`` seconds it looks (one indexed probe; batches journaled by other
worker processes count too) and folds once no request has been journaled for ``idle`` seconds,
in larger transactions. Under sustained load it folds anyway once ``max_backlog`` journal rows
wait, a few rows per transaction with a pause between them, so the backlog stays bounded.
"""

from __future__ import annotations

import logging
import threading
import time

from ..store import Store, _background

__all__ = ["Folder"]

log = logging.getLogger("assay.server")


class Folder:
    def __init__(self, store: Store, *, interval: float = 0.05, idle: float = 0.1,
                 chunk: int = 2, max_backlog: int = 200) -> None:
        self.store = store
        self.interval = interval
        self.idle = idle
        self.chunk = chunk
        self.max_backlog = max_backlog  # journal rows (a request's batch each)
        self._last_ingest = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # this engine's appends are this folder's to fold, paced against requests, not the
        # store's own background folder's (``store/_background.py``)
        _background.claim(store.engine, self.ingested)

    def start(self) -> None:
        _background.claim(self.store.engine, self.ingested)
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="assay-fold", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        _background.release(self.store.engine)
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(timeout)

    def ingested(self) -> None:
        """A request was journaled just now: wait for a gap before folding."""
        self._last_ingest = time.monotonic()

    def _run(self) -> None:
        journal_ = self.store.journal
        while not self._stop.wait(self.interval):
            try:
                while not self._stop.is_set():
                    busy = time.monotonic() - self._last_ingest < self.idle
                    waiting = journal_.backlog(self.max_backlog)
                    if waiting == 0 or (busy and waiting < self.max_backlog):
                        break
                    # while requests come, few rows per transaction and a pause between them,
                    # so a waiting request gets the lock; in a gap, larger transactions
                    if not journal_.fold_some(self.chunk if busy else 10 * self.chunk)[1]:
                        break
                    if busy:
                        self._stop.wait(0.001)
            except Exception:  # e.g. the database went away: reads fold instead
                log.exception("assay server: background fold failed; reads will fold instead")
