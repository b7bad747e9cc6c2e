"""The server's background fold: ingest journals batches; this indexes them soon after.

It stands in for the store's own background folder (``store/_background.py``) for the
server's engine. Reads fold the journal themselves (``Store.settle``), so correctness never
waits for this thread; it keeps the journal short while nobody reads, so the first page of
the web UI after a
burst of ingest does not pay for the whole burst.

Folding and accepting compete for one write lock and one interpreter lock, so the folder works
in the gaps: it sleeps until this process journals something (the ``claim`` hook of
``store/_background.py`` calls ``ingested``), then folds once no request has been journaled for
``idle`` seconds, in larger transactions. Under sustained load it folds anyway once
``max_backlog`` journal rows wait, a few rows per transaction with a pause between them, so the
backlog stays bounded. It does not poll: while requests come it wakes once per ``idle`` gap
check (no query) or when its count of appends reaches ``max_backlog`` (then one indexed probe);
every ``interval`` seconds without appends it probes once, for batches journaled by other
processes (a worker that stopped before folding).
"""

from __future__ import annotations

import logging
import threading
import time

from ..store import Store, _background

__all__ = ["Folder"]

log = logging.getLogger("assay.server")


class Folder:
    def __init__(self, store: Store, *, interval: float = 1.0, idle: float = 0.1,
                 chunk: int = 2, max_backlog: int = 200) -> None:
        self.store = store
        self.interval = interval  # fallback probe while nothing is appended in this process
        self.idle = idle
        self.chunk = chunk
        self.max_backlog = max_backlog  # journal rows (a request's batch each)
        self._last_ingest = 0.0
        self._pending = 0  # appends since the last probe: an estimate of the backlog
        self._sleeping = False  # waiting for an append (not for a gap)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # this engine's appends are this folder's to fold, paced against requests, not the
        # store's own background folder's (``store/_background.py``)
        _background.claim(store.engine, self.ingested)

    def start(self) -> None:
        _background.claim(self.store.engine, self.ingested)
        if self._thread is None:
            self._stop.clear()
            self._wake.set()  # look once at start: a backlog left by an earlier server
            self._thread = threading.Thread(target=self._run, name="assay-fold", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        _background.release(self.store.engine)
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            self._wake.set()
            thread.join(timeout)

    def ingested(self) -> None:
        """A request was journaled just now: wake the folder if it sleeps (it then waits for
        a gap), or if the backlog may have reached ``max_backlog``. Runs in the request: cheap."""
        self._last_ingest = time.monotonic()
        self._pending += 1
        if self._sleeping or self._pending >= self.max_backlog:
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sleeping = True
            if self._pending == 0:  # appended since the last look: no sleep
                self._wake.wait(self.interval)
            self._sleeping = False
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._fold_when_due()
            except Exception:  # e.g. the database went away: reads fold instead
                log.exception("assay server: background fold failed; reads will fold instead")

    def _fold_when_due(self) -> None:
        """Wait for a gap in requests (or a full backlog) and fold, until the journal is empty."""
        journal_ = self.store.journal
        while not self._stop.is_set():
            now = time.monotonic()
            gap_at = self._last_ingest + self.idle
            busy = now < gap_at
            if busy and self._pending < self.max_backlog:
                self._wake.wait(gap_at - now)  # set early only by a full backlog or stop
                self._wake.clear()
                continue
            counted = self._pending
            waiting = journal_.backlog(self.max_backlog)
            self._pending = waiting + (self._pending - counted)  # appends during the probe
            if waiting == 0:
                return
            if busy and waiting < self.max_backlog:
                continue  # the estimate ran ahead (several workers): wait for the gap
            # while requests come, few rows per transaction and a pause between them,
            # so a waiting request gets the lock; in a gap, larger transactions
            if not journal_.fold_some(self.chunk if busy else 10 * self.chunk)[1]:
                continue  # all folded, unless appended meanwhile: the probe says
            if busy:
                self._stop.wait(0.001)
