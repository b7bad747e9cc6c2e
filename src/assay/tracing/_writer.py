"""One background writer per store per process: traced runs reach the store in batches, off the
hot path.

Every ``Client`` of the same store (same database URL and workspace; remote: same server URL and
key), the default client included, shares one writer (``writer_for``): ``@traceable`` writes
through the default client, and a ``flush()`` on the user's own ``Client()`` must wait for those
runs too, or the statistics read right after it are silently partial.

Producers append a run (its start) or ``(PATCH, run)`` (its end) to a deque (atomic, ~25 ns)
and return. The writer thread wakes when a batch is full or every ``interval`` seconds (20 ms: a
fast producer fills batches first anyway; a slow one then leaves little for the final
``flush()`` to store). At a tick it stores what is queued if that is at least ``linger_items``
runs, or once the oldest of them has waited ``linger`` seconds (0.2 s): a trickling producer (an
agent step emits a few runs every few ms) then pays the store's per-batch cost (an append
transaction, a fold transaction) once per ~dozen steps, not once per step, which cost more CPU
than the framework's own step. ``flush()``, a full batch and interpreter exit store at once. It
stores what is queued as one batch: appended to a local store's
journal (one row per batch, a finished run as the tuple of its own attributes, taken in one C
call and serialized by orjson; folded into ``runs`` by the store's background folder as soon
as it is appended, and by any read before it answers, see ``store/_journal.py``), or sent as
LangSmith wire dicts with one
``runs.upsert(posts=..., patches=...)`` to a server. A run that has already finished when its
start is picked up goes out as a single merged post.

Backpressure: the queue is bounded; a producer that finds it full blocks until the writer makes
room (at most ``block_timeout`` seconds, then the run is dropped with a logged warning and
counted in ``dropped`` — never silently). A batch the store rejects is retried run by run so one
bad run does not lose its neighbours; failures are logged and counted in ``failed``.

A writer can be held (``hold``): it stores nothing until an event is set, while producers go on
queueing (an experiment whose project row is still being written: no stored run may name a
project that does not exist yet). Runs of a project that could not be created are dropped
(``drop_session``), never stored under a placeholder.

The thread starts on first use and exits after ``idle_exit`` seconds without work, so idle clients
hold no thread. ``flush()`` waits until everything queued before it is stored; an ``atexit`` hook
flushes every writer; after ``fork`` the child starts with an empty queue.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import hashlib
import logging
import os
import threading
import time
import weakref
from typing import Any

from .._gc import relaxed_gc
from ._pending import SETTLERS
from ._pending import settle as _settle_pending
from ._run_tree import RunTree, rows, take
from ._sampling import drop_unsampled, keep_below
from ._untangle import untangle

__all__ = ["RunWriter", "store_key", "writer_for"]

log = logging.getLogger("assay.tracing")

# The queue holds a run (its post), ``(_PATCH, run)`` (its end) or an Event (a flush's marker)
_POST, _PATCH = 0, 1
_Event = threading.Event
# RunTree._sent: 0 nothing queued or sent, QUEUED its post is queued and not yet taken,
# 1 its post (without the end) sent, 2 sent complete
QUEUED = 3
_HOLD_LIMIT = 120.0  # seconds a hold is waited for at most (see _wait_holds)
RELAX_IDLE = 0.2  # seconds without work after which a burst's relaxed collector is restored
_writers: weakref.WeakSet[RunWriter] = weakref.WeakSet()
# store key -> its writer while any client (or its running thread) holds it
_shared: weakref.WeakValueDictionary[tuple[str, ...], RunWriter] = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()


def store_key(client: Any) -> tuple[str, ...]:
    """What makes two clients write to the same place: a local store's full database URL and
    workspace, or a server's URL and (hashed) API key."""
    if getattr(client, "_remote", False):
        http = client._backend.http
        key = http.client.headers.get("x-api-key") or ""
        return ("remote", http.api_url, hashlib.sha256(key.encode()).hexdigest())
    store = client._store
    url = store.engine.url
    if url.get_backend_name() == "sqlite":
        # one file however it was named (relative, through a symlink)
        return ("sqlite", os.path.realpath(url.database), store.tenant_id)
    return ("local", url.render_as_string(hide_password=False), store.tenant_id)


def writer_for(client: Any, *, create: bool = True) -> RunWriter | None:
    """The process's writer toward ``client``'s store (made for it when ``create``)."""
    key = store_key(client)
    with _shared_lock:
        writer = _shared.get(key)
        if writer is None and create:
            writer = _shared[key] = RunWriter(client)
    return writer


class RunWriter:
    def __init__(
        self,
        client: Any,
        *,
        batch_size: int = 1000,
        max_queue: int = 50_000,
        interval: float = 0.02,
        linger: float = 0.2,
        linger_items: int = 200,
        idle_exit: float = 2.0,
        block_timeout: float = 30.0,
    ) -> None:
        self._client = client
        self.batch_size = batch_size
        self.max_queue = max_queue
        self.interval = interval
        self.linger = linger  # seconds a small batch may wait for company (see the docstring)
        self.linger_items = linger_items  # a batch this big goes at the next tick
        self.idle_exit = idle_exit
        self.block_timeout = block_timeout
        self._q: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._room = threading.Condition(threading.Lock())
        self._waiting = 0
        self._holds: list[threading.Event] = []
        self._dropped_sessions: set[str] = set()
        # ASSAY_TRACING_SAMPLING_RATE: the runs of traces left out are dropped here (_drain)
        self._keep_below = keep_below()
        self.sampled_clients = False  # a client with a sampling rate of its own writes here
        self._running = False
        self._thread: threading.Thread | None = None
        # relaxed_gc's block while a burst is being written (see _relax), or None
        self._relaxed: contextlib.AbstractContextManager[None] | None = None
        self.stored = 0   # runs handed to the store (posts + patches that were sent)
        self.batches = 0  # upsert calls
        self.failed = 0   # runs the store rejected
        self.dropped = 0  # runs given up on because the queue stayed full
        _writers.add(self)

    # -- producer side (any thread) -----------------------------------------------------------
    def post(self, run: RunTree) -> None:
        if run._sent == 0:
            run._sent = QUEUED
        self._put(run)

    def patch(self, run: RunTree) -> None:
        """Queue the end of a closed run, unless its post is still queued: the writer sees
        ``_closed`` when it takes the post and sends both as one (see ``_sort``)."""
        if run._sent != QUEUED:
            self._put((_PATCH, run))

    def _put(self, item: Any) -> None:
        q = self._q
        if len(q) >= self.max_queue and not self._wait_for_room():
            self.dropped += 1
            log.warning("assay tracing queue stayed full for %.0fs: dropped run %s",
                        self.block_timeout, getattr(item, "_id", None) or item[1]._id)
            return
        q.append(item)
        if not self._running:
            self._ensure_running()
        elif len(q) >= self.batch_size and not self._wake.is_set():
            self._wake.set()

    def _wait_for_room(self) -> bool:
        """Block until the writer drains below the bound (False after ``block_timeout``)."""
        if self._on_writer_thread():
            return True  # the writer itself never waits on its own queue
        self._ensure_running()
        self._wake.set()
        with self._room:
            self._waiting += 1
            try:
                return self._room.wait_for(lambda: len(self._q) < self.max_queue,
                                           timeout=self.block_timeout)
            finally:
                self._waiting -= 1

    def _on_writer_thread(self) -> bool:
        t = self._thread
        return t is not None and t.ident == threading.get_ident()

    def _ensure_running(self) -> None:
        with self._lock:
            if self._running:
                return
            self._running = True
        thread = threading.Thread(target=self._loop, name="assay-run-writer", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # interpreter shutting down: store inline instead
            with self._lock:
                self._running = False
            self._drain()
            return
        self._thread = thread

    # -- holding ------------------------------------------------------------------------------
    def hold(self, until: threading.Event) -> None:
        """Store nothing until ``until`` is set (runs queued meanwhile wait, in order)."""
        self._holds.append(until)

    def drop_session(self, session_id: str) -> None:
        """From now on, discard runs of this project instead of storing them."""
        self._dropped_sessions.add(session_id)

    def _wait_holds(self) -> None:
        while self._holds:
            until = self._holds[0]
            # whoever holds always releases; the bound only keeps a writer draining inline at
            # interpreter exit from waiting on a thread that is gone. It is longer than the
            # store's busy timeout (60 s): a project row waiting for a locked database is
            # waited for, never overtaken by its own runs.
            until.wait(_HOLD_LIMIT)
            try:
                self._holds.remove(until)
            except ValueError:
                pass

    # -- flushing -----------------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every run queued before this call is stored (journaled: every read
        sees it); False on timeout. Every client of the store shares this writer, so this
        covers the runs they all traced (and the runs integrations have pending, built first)."""
        if SETTLERS:  # (on the writer's thread: never waiting for a thread that waits on it)
            _settle_pending(not self._on_writer_thread())
        if not self._q and not self._running:
            return True
        if self._on_writer_thread():
            self._drain()
            return True
        marker = threading.Event()
        self._q.append(marker)
        self._ensure_running()
        self._wake.set()
        if not self._running:  # drained inline by _ensure_running
            return True
        return marker.wait(timeout)

    def close(self, timeout: float | None = None) -> bool:
        return self.flush(timeout)

    def barrier(self) -> threading.Event:
        """An event set once every run queued before this call is stored, at the writer's own
        pace (``flush`` hurries it). What must never be stored before those runs waits on it:
        an experiment's feedback, which a crash in between would leave pointing at no run."""
        marker = threading.Event()
        if not self._q and not self._running:  # nothing queued or being stored
            marker.set()
            return marker
        self._q.append(marker)
        if not self._running:
            self._ensure_running()
        return marker

    def wake(self) -> None:
        """Store what is queued now rather than at the next tick (someone waits on it)."""
        self._wake.set()

    # -- writer thread ------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            self._serve()
        except BaseException:  # pragma: no cover - a bug here must not hang flush() forever
            log.exception("assay tracing: the run writer stopped unexpectedly")
            with self._lock:
                self._running = False
                self._thread = None
            for item in list(self._q):
                if isinstance(item, threading.Event):
                    item.set()
            raise

    def _serve(self) -> None:
        try:
            self._serve_queue()
        finally:
            self._relax(False)

    def _relax(self, on: bool) -> None:
        """The collector's thresholds raised (``relaxed_gc``) while a burst is written.

        A producer tracing in a tight loop (a bulk job, a traced batch) makes a few container
        objects a run, all alive until this thread stores them: at CPython's default thresholds
        every few thousand runs start a full collection over the whole heap (30-90 ms with a
        framework and its data loaded), and those took more than half of what tracing cost
        (bench/fold_cost.py's pattern, background fold off: 5.8-6.6 us a span against 2.9-3.3
        relaxed). On from the first drain of a backlog of ``linger_items`` runs; off after
        ``RELAX_IDLE`` seconds without work, and when the thread ends: a trickle (an agent's few
        runs a step) never turns it on. Process-wide, like ``evaluate()``'s own block."""
        if on and self._relaxed is None:
            self._relaxed = relaxed_gc()
            self._relaxed.__enter__()
        elif not on and self._relaxed is not None:
            relaxed, self._relaxed = self._relaxed, None
            relaxed.__exit__(None, None, None)

    def _serve_queue(self) -> None:
        idle = 0.0
        since = 0.0  # when this round's first queued item was seen (0: none seen yet)
        while True:
            woke = self._wake.wait(self.interval)
            self._wake.clear()
            if SETTLERS:  # integrations' pending runs built on this thread, off the agent's
                _settle_pending(False)
            q = self._q
            if q:
                idle = 0.0
                if len(q) >= self.linger_items:
                    self._relax(True)
                # woken (a flush, a full batch) or enough for a batch of its own: store now;
                # else a few runs wait for more, up to ``linger`` (see the module docstring)
                if not woke and len(q) < self.linger_items and self.linger > 0:
                    now = time.monotonic()
                    if not since:
                        since = now
                    if now - since < self.linger:
                        continue
                since = 0.0
                self._drain()
                continue
            idle += 0 if woke else self.interval
            if idle >= RELAX_IDLE:
                self._relax(False)
            if idle >= self.idle_exit:
                with self._lock:
                    # Say "stopped" before the last look: a producer appending after that look
                    # then sees _running False and starts a new thread itself.
                    self._running = False
                    if self._q:
                        self._running = True
                        continue
                    self._thread = None
                    return

    def _drain(self) -> None:
        """Store everything queued when called, ``batch_size`` items per upsert.

        Runs queued meanwhile wait for the next round (a full batch, a flush, or the interval),
        not for another small transaction right away: while examples finish one by one, a
        drain that chased them stored a dozen transactions of a few runs each, competing with
        the event loop for the interpreter at the moment it was busiest."""
        if self._holds:
            self._wait_holds()
        if SETTLERS:  # stored with this batch (a trace's root after its steps)
            _settle_pending(False)
        q = self._q
        local = self._journal() is not None  # the local store: finished runs as rows
        todo = len(q)
        while todo > 0:
            count = min(todo, self.batch_size)
            todo -= count
            try:
                items = [q.popleft() for _ in range(count)]
            except IndexError:  # cleared meanwhile (a fork)
                return
            if self._keep_below is not None or self.sampled_clients:
                items = drop_unsampled(items, self._keep_below)
            posts: list[Any] = []
            patches: list[dict[str, Any]] = []
            markers: list[threading.Event] = []
            try:
                if take is not None and local and not self._dropped_sessions:
                    posts.extend(self._take(items, posts, patches, markers))
                else:
                    self._sort_rows(items, posts, patches, markers, local)
            except BaseException:  # a bug: the writer stops (_loop), its flushes must not hang
                for item in items:
                    if item.__class__ is _Event:
                        item.set()
                raise
            if posts or patches:
                self._send(posts, patches)
            untangle(items)  # stored traces nothing else holds: freed now, not by the collector
            if self._waiting:
                with self._room:
                    self._room.notify_all()
            for m in markers:
                m.set()

    def _sort_rows(self, items: list[Any], posts: list[Any], patches: list[dict[str, Any]],
                   markers: list[threading.Event], local: bool) -> None:
        """``_sort``, the runs that go whole added to ``posts`` as rows (a tuple of its slots
        per run, no dict); the list of them is gone on return, so ``untangle`` counts no
        reference of it."""
        whole: list[RunTree] = []
        self._sort(items, posts, patches, whole, markers, local)
        if whole:
            posts.extend(rows(whole))

    def _take(self, items: list[Any], posts: list[Any], patches: list[dict[str, Any]],
              markers: list[threading.Event]) -> list[tuple[Any, ...]]:
        """``_sort`` then ``rows`` for the local store, in one C pass over the items (``take``):
        a run finished before its post was taken becomes its row there; every other item goes
        through ``_sort`` as before, one at a time."""
        whole: list[RunTree] = []

        def slow(item: Any) -> RunTree | None:
            self._sort([item], posts, patches, whole, markers, True)
            return whole.pop() if whole else None

        assert take is not None  # called only where the C part is built
        return take(items, QUEUED, slow)

    def _sort(self, items: list[Any], posts: list[Any], patches: list[dict[str, Any]],
              whole: list[RunTree], markers: list[threading.Event], local: bool) -> None:
        """Queued items -> what to send: ``posts`` and ``patches`` as wire dicts, and runs that
        go whole (finished when their post was taken, or never posted) into ``whole`` when the
        local store takes them as rows. One loop with the per-run steps inlined: with no-op
        spans the writer's Python per run is what tracing costs beyond the caller's."""
        dropped = self._dropped_sessions
        for item in items:
            cls = item.__class__
            if cls is tuple:
                op, run = item
            elif cls is _Event:
                markers.append(item)
                continue
            else:
                op, run = _POST, item
            try:
                if dropped and run.session_id in dropped:
                    run._sent = 2
                    continue
                sent = run._sent
                if op == _POST:
                    if sent == 1 or sent == 2:
                        continue
                    # Claim the post before looking at _closed: a run closed from here on sees
                    # _sent != QUEUED and queues its own patch; one closed before goes whole.
                    run._sent = 1
                    if not run._closed:
                        posts.append(run._wire(False, local))
                        continue
                elif sent == 2:
                    continue
                elif sent != 0:  # its post went out without the end: the rest as a patch
                    wire = run._wire(True, local)
                    del wire["inputs"]
                    patches.append(wire)
                    run._sent = 2
                    continue
                run._sent = 2  # whole: finished before its post was taken, or never posted
                if not local:
                    posts.append(run._wire(True))
                elif isinstance(run, RunTree):  # (rows reads a subclass's slots too)
                    # Its dotted order is the fold's to derive (store/_journal.py), from its
                    # parent's, when that parent was taken before it (so is stored first)
                    if run._dotted is None and run._parent_id is not None:
                        parent = run.parent
                        if parent is None or parent._sent == 0 or parent._sent == QUEUED:
                            run._dotted = run.dotted_order
                    whole.append(run)
                else:
                    posts.append(run._row())  # a run in another form (e.g. from a Ray worker)
            except Exception:  # a run that cannot even be described: report, keep the rest
                self.failed += 1
                log.exception("assay tracing: could not serialize run %s",
                              getattr(run, "_id", "?"))

    def _journal(self) -> Any:
        """The local store's journal, or None when runs go to a server."""
        return getattr(getattr(self._client, "_backend", None), "journal", None)

    def _send(self, posts: list[Any], patches: list[dict[str, Any]]) -> None:
        journal = self._journal()
        try:
            if journal is not None:  # finished runs as rows (ROW_COLUMNS; see _run_tree.rows)
                journal.append_runs(posts, patches, columns=RunTree.ROW_COLUMNS,
                                    extra=RunTree.ROW_EXTRA)
            else:
                self._client._backend.runs.upsert(posts=posts, patches=patches)
            self.batches += 1
            self.stored += len(posts) + len(patches)
            return
        except Exception as exc:
            if len(posts) + len(patches) == 1:
                self.failed += 1
                run = (posts or patches)[0]
                log.warning("assay tracing: the store rejected run %s: %s",
                            run.get("id") if isinstance(run, dict) else run[0], exc)
                return
            log.warning("assay tracing: a batch of %d runs failed (%s); retrying one by one",
                        len(posts) + len(patches), exc)
        for post in posts:
            self._send([post], [])
        for patch in patches:
            self._send([], [patch])


def flush_all(timeout: float | None = 30.0) -> None:
    """Flush every live writer (run at interpreter exit)."""
    for writer in list(_writers):
        try:
            writer.flush(timeout)
        except Exception:  # pragma: no cover - never fail interpreter exit
            log.exception("assay tracing: flush at exit failed")


def _after_fork_in_child() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()
    for writer in list(_writers):
        engine = getattr(getattr(writer._client, "_store", None), "engine", None)
        if engine is not None and hasattr(engine, "dispose"):
            # the parent's pooled connections stay the parent's: a SQLite handle or a
            # PostgreSQL socket used from both sides of a fork corrupts both
            engine.dispose(close=False)
        writer._q.clear()  # the parent stores these; storing them again would duplicate
        writer._lock = threading.Lock()
        writer._room = threading.Condition(threading.Lock())
        writer._wake = threading.Event()
        writer._waiting = 0
        writer._holds = []
        writer._running = False
        writer._thread = None
        writer._relaxed = None  # the parent's thread's block: _gc forgets it in the child


atexit.register(flush_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
