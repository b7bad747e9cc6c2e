"""Folding off the readers' path: a thread per local database folds the journal as it grows.

Appending a batch to the journal is cheap and durable, but a run is queryable only once the
fold has written it into ``runs`` and the aggregates. Left to the first read, the fold of a large
experiment or trace burst is paid by whoever reads first (seconds after 100,000 runs). So every
append wakes this process's folder for that database (``appended``): a daemon thread that folds
what is journaled, a few rows per transaction so appends and reads get the write lock between
them, and exits after ``IDLE_EXIT`` seconds without work. A read still settles first
(``Journal.settle``) and so waits only for what is not folded yet, and still sees everything
appended before it asked. Folds stay serialized (SQLite's write lock, PostgreSQL's advisory
lock) and transactional, so a process killed mid-fold leaves its rows for the next folder.

The folder coalesces: it folds once ``COALESCE_ITEMS`` runs and feedback items are waiting, or
``COALESCE_DELAY`` seconds after the first append it has not folded, whichever comes first. A
fold transaction has a fixed cost (the write lock, reading and deleting journal rows, an upsert
of the session's aggregates: about a millisecond of CPU, under the GIL, in the producer's own
process). A bulk writer appends batches of hundreds of runs and crosses the count at once, so
it is folded batch by batch as before; an agent that produces a few runs every 50-200 ms
(issue 21) would otherwise pay that millisecond per step, and now pays it once per delay for
all its steps. Nothing waits on this for correctness: a reader settles what is left first.

The folder also stands back while this process is busy. A thread computing in the same
process (an ``evaluate()`` loop over a fast target, a tracing burst) runs under the same GIL,
and a fold beside it costs more than the same fold after it: every SQLite step hands the GIL
over and back (N = 10,000 no-op examples: evaluate plus the first read 27.5 -> 24 us/example
with the fold after the loop). So when the rest of the process used at least ``BUSY_SHARE``
of a core over the folder's last nap, the folder lets the backlog grow, up to
``DEFER_ITEMS`` items (what a reader arriving then would fold in ~0.25 s) or
``DEFER_SECONDS`` after the first unfolded append, and folds once the process is idle.
An I/O-bound producer (a model call awaited, an agent's trickle) leaves the CPU idle, so the
fold goes on beside it as before.

A server registers its own folder for its engine (``claim``): it paces folding against the
requests it accepts. ``ASSAY_BACKGROUND_FOLD=0`` turns the thread off (reads fold, as before).

``ASSAY_BACKGROUND_FOLD=process`` folds in a process of its own instead (``_fold_process``, as
``assay serve`` does), started at a database file's (or PostgreSQL's) first append and gone
after ``PROCESS_IDLE_EXIT`` seconds without work: the appending process then pays for its
appends alone, and the fold runs on another core, never under its interpreter lock. For an
agent's process (issue 21) that is the fold's share of its CPU. A read still folds what is
left first, so nothing waits on the process for correctness; an in-memory database keeps the
thread.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from ._base import Store
    from ._fold_process import FoldProcess

__all__ = ["appended", "appending", "claim", "fold_transactions", "release", "stop", "wait_idle"]

log = logging.getLogger("assay.store")

IDLE_EXIT = 2.0  # seconds without an append before the thread exits
# per fold transaction: journal rows (a writer's batch of up to 1,000 runs each), and the items
# after which it stops (a bulk writer's batches one by one, so appends get the lock between
# them; a trickle's small batches together)
CHUNK = 64
CHUNK_ITEMS = 1000
# PostgreSQL: a fold transaction holds no lock an append waits for (an advisory lock between
# folders only), so it takes more at once: each transaction's fixed costs (commit, journal
# read and delete, the COPY's start and tail) spread over more runs, and consecutive batches
# fold as one (``_fold_merge``). 100,000 traced runs: the first read after them 1.13-1.26 ->
# 0.73-0.83 s (bench/fold_cost.py). SQLite keeps 1,000: its fold holds the write lock the
# writers' appends wait for, and a larger chunk measured no faster there.
CHUNK_ITEMS_POSTGRESQL = 5000
YIELD_MAX = 0.05  # seconds the folder lets appends of this process go first, at most
COALESCE_ITEMS = 500  # items waiting that start a fold at once
COALESCE_DELAY = 0.5  # seconds after the first unfolded append that start a fold anyway
BUSY_SHARE = 0.5  # of a core, used by the rest of the process over a nap: it is busy
BUSY_NAP = 0.005  # seconds of each look at how busy the process is
DEFER_ITEMS = 25_000  # items a busy process may leave unfolded (~0.25 s for a reader)
DEFER_SECONDS = 2.0  # after the first unfolded append, a busy process's runs are folded anyway

# engine -> its running folder (present only while the thread runs: no engine is kept alive)
_running: dict[Engine, _Folder] = {}
# engine -> what to call instead (a server's own folder), held weakly by engine
_claimed: weakref.WeakKeyDictionary[Engine, Callable[[], None]] = weakref.WeakKeyDictionary()
_guard = threading.Lock()
_stopping = False
# engine -> appends of this process under way: the folder lets them take the write lock first
# (a flush() waits for appends, never for the fold)
_appending: dict[Engine, int] = {}
# engine -> fold transactions this process's folders ran that applied something (tests, benches)
_FOLDS: weakref.WeakKeyDictionary[Engine, int] = weakref.WeakKeyDictionary()


PROCESS_IDLE_EXIT = 30.0  # seconds a fold process (``process`` mode) waits for work
# engine -> its fold process (``process`` mode), while the engine lives
_processes: weakref.WeakKeyDictionary[Engine, FoldProcess] = weakref.WeakKeyDictionary()


def _mode() -> str:
    """``ASSAY_BACKGROUND_FOLD``: ``thread`` (the default), ``process`` or ``off``."""
    value = os.environ.get("ASSAY_BACKGROUND_FOLD", "1").strip().lower()
    if value in ("0", "false", "no", "off"):
        return "off"
    return "process" if value == "process" else "thread"


def _enabled() -> bool:
    return _mode() != "off"


def _ensure_fold_process(engine: Engine) -> None:
    """``process`` mode: have this engine's fold process running (started, or again after it
    left for want of work)."""
    with _guard:
        folder = _processes.get(engine)
        if folder is None:
            from ._fold_process import FoldProcess

            folder = _processes[engine] = FoldProcess(
                engine.url.render_as_string(hide_password=False), idle_exit=PROCESS_IDLE_EXIT)
        folder.ensure()


def claim(engine: Engine, on_append: Callable[[], None] | None = None) -> None:
    """Let ``on_append`` (a server's folder) handle this engine's appends instead; None: they
    are another process's to fold (a server's fold process), so this one does nothing."""
    _claimed[engine] = on_append or _nothing


def _nothing() -> None:
    """An append's hook where another process folds: that one finds the rows itself."""


def folds_here(engine: Engine) -> bool:
    """Whether this process's folds usually take what it appends to ``engine``: not where a
    fold process of its own does (``process`` mode, a server's workers), so that what the
    journal keeps for the fold of its process (``_recent``) is not copied for nothing."""
    if _claimed.get(engine) is _nothing:
        return False
    return _mode() != "process"


def release(engine: Engine) -> None:
    _claimed.pop(engine, None)


@contextlib.contextmanager
def appending(store: Store) -> Iterator[None]:
    """Around an append: the background folder of this database waits for it to finish
    before its next fold transaction."""
    engine = store.engine
    _appending[engine] = _appending.get(engine, 0) + 1
    try:
        yield
    finally:
        left = _appending.get(engine, 1) - 1
        if left > 0:
            _appending[engine] = left
        else:
            _appending.pop(engine, None)


def fold_transactions(store: Store) -> int:
    """Fold transactions that applied something, run by this process's background folders
    for ``store``'s database."""
    return _FOLDS.get(store.engine, 0)


def appended(store: Store, items: int = 1) -> None:
    """A batch of ``items`` runs and feedback items was just committed to ``store``'s journal:
    have it folded soon (see the module docstring: at once when enough wait)."""
    engine = store.engine
    hook = _claimed.get(engine)
    if hook is not None:
        hook()
        return
    mode = _mode()
    if _stopping or mode == "off":
        return
    if mode == "process":
        _ensure_fold_process(engine)
        return
    with _guard:
        folder = _running.get(engine)
        if folder is None:
            from ._base import Store as _Store

            folder = _running[engine] = _Folder(_Store(engine))
            folder.note(items)
            try:
                folder.start()
            except RuntimeError:  # interpreter shutting down: the next read folds
                del _running[engine]
            return
        folder.note(items)


def stop(engine: Engine, timeout: float = 5.0) -> None:
    """Stop this process's folder for ``engine`` (its store is closing): a fold under way
    finishes, nothing new starts; what is journaled stays for the next reader (or folder)."""
    with _guard:
        folder = _running.pop(engine, None)
        process = _processes.pop(engine, None)
    if process is not None:
        process.stop(timeout)  # after the transaction under way, if one is
    if folder is None:
        return
    folder.stopped = True
    folder.wake.set()
    folder.full.set()
    if folder.thread is not threading.current_thread():
        folder.thread.join(timeout)


def wait_idle(store: Store, timeout: float = 30.0) -> bool:
    """Wait until this process's folder for ``store``'s database has nothing left (tests,
    benchmarks); True when it is idle or not running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        folder = _running.get(store.engine)
        if folder is None or (not folder.busy and not folder.wake.is_set()):
            return True
        time.sleep(0.005)
    return False


class _Folder:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.wake = threading.Event()  # something was appended
        self.full = threading.Event()  # COALESCE_ITEMS wait: fold now
        self.busy = False
        self.stopped = False  # its store closed (``stop``)
        self.waiting = 0  # items appended since the folder last took the journal (_guard)
        self.taken = 0  # what was waiting when it last took the journal
        self.first = 0.0  # when the first of them was appended
        self.thread = threading.Thread(target=self._run, name="assay-fold", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def note(self, items: int) -> None:
        """Count an append (under ``_guard``)."""
        if not self.waiting:
            self.first = time.monotonic()
        self.waiting += max(items, 1)
        if self.waiting >= COALESCE_ITEMS:
            self.full.set()
        self.wake.set()

    def _coalesce(self) -> bool:
        """Wait until enough is appended, or the first append is ``COALESCE_DELAY`` old; False
        when nothing was appended since the last round took the journal (its fold saw it all:
        an append is counted after its commit)."""
        with _guard:
            if not self.waiting:
                return False
            first = self.first
        left = first + COALESCE_DELAY - time.monotonic()
        if left > 0 and not _stopping and not self.stopped:
            self.full.wait(left)
        while (not _stopping and not self.stopped and self.waiting < DEFER_ITEMS
               and time.monotonic() - first < DEFER_SECONDS
               and (_others_busy() or _others_busy())):
            pass  # the process computes: fold after it (bounded), not beside it; idle is
            # two naps in a row (one may fall in a pause of a busy thread the OS gave away)
        with _guard:  # what is appended from now on waits for the next round
            self.taken = self.waiting
            self.waiting = 0
            self.full.clear()
        return True

    def _stand_back(self, folded: int) -> bool:
        """Between chunks of a round: end the round (what comes after waits for the next
        one) once it folded what it took, when more was appended since and the process is
        busy; what is left is folded in the next round, which a busy process starts later."""
        return folded >= self.taken and 0 < self.waiting < DEFER_ITEMS and _others_busy()

    def _run(self) -> None:
        from .._gc import relaxed_gc

        journal = self.store.journal
        engine = self.store.engine
        items = CHUNK_ITEMS_POSTGRESQL if engine.dialect.name == "postgresql" else CHUNK_ITEMS
        while True:
            if not self.wake.wait(IDLE_EXIT) or _stopping or self.stopped:
                with _guard:
                    if self.wake.is_set() and not _stopping and not self.stopped:
                        continue  # an append came just now
                    if _running.get(engine) is self:
                        del _running[engine]
                    return
            self.busy = True  # before the clear: wait_idle never sees neither
            self.wake.clear()
            try:
                if not self._coalesce() or self.stopped:
                    continue  # the last round folded it, or closed (finally: no longer busy)
                folded = 0
                with relaxed_gc():
                    while not _stopping and not self.stopped and _enabled():  # off: stop now
                        # appends first (bounded, so a steady writer does not starve this)
                        deadline = time.monotonic() + YIELD_MAX
                        while _appending.get(engine) and time.monotonic() < deadline:
                            time.sleep(0.0005)
                        done, more = journal.fold_some(CHUNK, items)
                        if done:
                            _FOLDS[engine] = _FOLDS.get(engine, 0) + 1
                        folded += done
                        if not more or self._stand_back(folded):
                            break
                        # a writer or reader waiting for the write lock gets it now
                        time.sleep(0.0005)
            except Exception as exc:  # noqa: BLE001 - the database went away, say: reads fold
                log.warning("assay store: background fold failed (%s); reads will fold", exc)
            finally:
                self.busy = False


def _others_busy(nap: float | None = None) -> bool:
    """Nap ``nap`` seconds (``BUSY_NAP``); whether the rest of the process used
    ``BUSY_SHARE`` of a core meanwhile (its CPU time, less this thread's)."""
    cpu, mine, wall = time.process_time(), time.thread_time(), time.perf_counter()
    time.sleep(BUSY_NAP if nap is None else nap)
    others = (time.process_time() - cpu) - (time.thread_time() - mine)
    return others >= BUSY_SHARE * (time.perf_counter() - wall)


def _stop_at_exit() -> None:
    """Stop folding at exit (after the tracing writers' last flush, registered earlier): what
    is left stays journaled, durable, for the next reader; a fold in progress finishes."""
    global _stopping
    _stopping = True
    for process in list(_processes.values()):
        process.stop(5.0)
    for folder in list(_running.values()):
        folder.wake.set()
        folder.full.set()
        folder.thread.join(5.0)


_held_at_fork: list[threading.RLock] = []


def _before_fork() -> None:
    """Fork with no SQLite write transaction open in this process: SQLite keeps its locks'
    state in process memory, which the child inherits with the lock of a transaction its
    parent's thread (this folder, a tracing writer) had open, and then waits on forever.
    So the forking thread takes every database's write lock first (bounded: never a hang)."""
    from . import _base, _engine

    with _base._LOCKS_GUARD:
        locks = list(_base._SQLITE_WRITE_LOCKS.values())
    for lock in locks:
        if lock.acquire(timeout=_engine.BUSY_TIMEOUT_S):
            _held_at_fork.append(lock)


def _after_fork_in_parent() -> None:
    while _held_at_fork:
        _held_at_fork.pop().release()


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.Lock()
    _running.clear()  # the parent's threads do not exist here
    for process in _processes.values():  # the parent's fold processes: the child starts its own
        process.forget()
    _processes.clear()
    _held_at_fork.clear()
    # the write locks the fork was made holding (``_before_fork``) are the parent's: the
    # child starts with locks of its own (its connections are its own too, see the tracing
    # writer's fork hook)
    from . import _base

    _base._SQLITE_WRITE_LOCKS = weakref.WeakKeyDictionary()
    _base._LOCKS_GUARD = threading.Lock()


atexit.register(_stop_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
