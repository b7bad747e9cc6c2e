"""SQLite's checkpoints off the writers' path: a thread per database file copies the WAL back.

In WAL mode every commit appends pages to the ``-wal`` file, and a checkpoint copies them
into the database file, with an fsync of each. SQLite runs it inside the commit that takes the
WAL past ``wal_autocheckpoint`` pages, on the committing thread: the fold (the journal into
``runs`` and its indexes, nearly all of what assay writes) waited for every one: without
them it took 0.88x the wall time on a machine with a slow fsync (bench/README, stop 38; what
a checkpoint copies is cheap, its fsyncs are not). So each write transaction
says how many rows it changed (``Store.write`` -> ``wrote``); past ``CHECKPOINT_ROWS`` a daemon
thread of this process runs a ``PASSIVE`` checkpoint on a connection of its own. A passive
checkpoint takes no lock a writer or reader waits for, and runs in SQLite's C code with the
GIL released, so on a second core it overlaps the writers instead of stopping them. The
thread exits after ``IDLE_EXIT`` seconds without a nudge.

The connections' own ``wal_autocheckpoint`` (64 MB, ``_engine``) stays as the bound: a
sustained writer leaves the thread no moment when every frame is copied back, and only then can
the next transaction start the WAL over from its beginning. So a burst grows the WAL until it
pauses (the thread catches up, the WAL starts over, truncated to 16 MB), or up to the bound,
where a commit copies what is left. Checkpoints are SQLite's own crash-safe operation: a
process killed during one loses nothing.

At exit (after the tracing writers' last flush and the folders' stop, whose handlers run
first), the SQLite engines this process made are closed (``track``). The last connection to a
database closes with a checkpoint and removes the WAL, so a store left by a process that ended
is its one file: a process ending with its connections open left everything in the ``-wal``
file beside an empty database, and a copy of ``assay.db`` alone (to share an experiment)
held nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING

from ._driver import sqlite

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["CHECKPOINT_ROWS", "stop", "track", "wrote"]

log = logging.getLogger("assay.store")

# rows changed since the last checkpoint that start one: ~4 MB of WAL for runs with their
# index entries, a sixteenth of the connections' own autocheckpoint (``_engine``)
CHECKPOINT_ROWS = 4000
IDLE_EXIT = 2.0  # seconds without a nudge before the thread exits

_guard = threading.Lock()
# engine -> its checkpointer (present from its first write until the thread exits)
_running: weakref.WeakKeyDictionary[Engine, _Checkpointer] = weakref.WeakKeyDictionary()
# the parent's checkpointers in a forked child: never used, never closed there (SQLite's
# connections must not cross a fork; closing one could release what the parent holds)
_orphans: list[_Checkpointer] = []
_stopping = False
# SQLite file engines this process made, with its pid: closed at exit (a forked child's are
# its parent's, never closed there)
_engines: weakref.WeakKeyDictionary[Engine, int] = weakref.WeakKeyDictionary()


def track(engine: Engine) -> None:
    """Close ``engine`` (a SQLite file's) when this process exits."""
    _engines[engine] = os.getpid()


def wrote(engine: Engine, rows: int) -> None:
    """A transaction on ``engine`` committed ``rows`` rows: checkpoint once enough did."""
    if rows <= 0 or _stopping:
        return
    with _guard:
        cp = _running.get(engine)
        if cp is None:
            path = engine.url.database
            if not path or path == ":memory:" or engine.dialect.name != "sqlite":
                return
            cp = _running[engine] = _Checkpointer(engine, path)
        cp.pending += rows
        if cp.pending >= CHECKPOINT_ROWS:
            cp.pending = 0
            if not cp.started:  # at the first checkpoint, not the first write: a store
                # that writes a few rows (a test's, a script's) never pays for the thread
                # and its connection (~1-2 ms of a new store's first write)
                cp.started = True
                cp.thread.start()
            cp.wake.set()


def stop(engine: Engine, timeout: float = 5.0) -> None:
    """Stop ``engine``'s checkpointer (its store is closing): a checkpoint under way ends."""
    with _guard:
        cp = _running.pop(engine, None)
    if cp is not None:
        cp.halt(timeout)


class _Checkpointer:
    def __init__(self, engine: Engine, path: str) -> None:
        self.engine_ref = weakref.ref(engine)
        self.path = path
        self.pending = 0  # rows written since the last wake (under ``_guard``)
        self.wake = threading.Event()
        self.stopped = False
        self.checkpoints = 0  # run so far (tests, benches)
        self.started = False  # the thread: started at the first checkpoint (``wrote``)
        self.thread = threading.Thread(target=self._run, name="assay-checkpoint", daemon=True)

    def halt(self, timeout: float) -> None:
        self.stopped = True
        self.wake.set()
        if self.started and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def _run(self) -> None:
        conn = None
        try:
            # a connection of its own, outside the engine's pool: it never holds a pooled
            # connection another thread waits for, nor the store's write lock
            conn = sqlite.connect(self.path, isolation_level=None, check_same_thread=False)
            while True:
                if not self.wake.wait(IDLE_EXIT) or self.stopped or _stopping:
                    with _guard:
                        if self.wake.is_set() and not self.stopped and not _stopping:
                            continue  # a nudge came just now
                        engine = self.engine_ref()
                        if engine is not None and _running.get(engine) is self:
                            del _running[engine]
                    return
                self.wake.clear()
                # PASSIVE: as many frames as no reader still needs, waiting for no one
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.checkpoints += 1
        except sqlite.Error as exc:  # the file went away, say: commits checkpoint as before
            log.warning("assay store: background checkpoint failed (%s)", exc)
            with _guard:
                engine = self.engine_ref()
                if engine is not None and _running.get(engine) is self:
                    del _running[engine]
        finally:
            if conn is not None:
                conn.close()


def _stop_at_exit() -> None:
    global _stopping
    _stopping = True
    with _guard:
        running = list(_running.values())
        _running.clear()
    for cp in running:
        cp.halt(5.0)
    # this module is imported before the store's others and the tracing writer (``_base``), so
    # this handler runs after theirs: nothing of this process writes after it
    from ._background import _stop_at_exit as stop_folding

    stop_folding()  # (already run, in the usual import order: a no-op then)
    pid = os.getpid()
    for engine, owner in list(_engines.items()):
        if owner == pid:
            with contextlib.suppress(Exception):  # exiting: a store that fails keeps its WAL
                engine.dispose()


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.Lock()
    _orphans.extend(_running.values())  # their threads do not exist here
    _running.clear()


atexit.register(_stop_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
