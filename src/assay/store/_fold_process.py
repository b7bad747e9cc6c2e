"""A fold in a process of its own: appending and indexing on separate cores.

A worker that accepts requests and also folds them (``_folder.Folder``, a thread) spends one
interpreter lock on both: every run it indexes is CPU its requests do not get, so on two cores
the server indexed about 60% of what it accepted (bench/README.md, ingest). ``assay serve``
therefore starts this process beside its workers (``--fold process``, what ``auto``, the
default, picks; PostgreSQL indexed 40-55% more runs/s than with a fold thread, SQLite 35-45%):
it folds the journal the workers append to, in its own interpreter, while they only accept.
The workers then leave the journal to it (``create_app(fold="process")``: no folder thread,
and the store's own background folder kept off their engine). With SQLite the workers append
to the database's queue file (``_queue``) and the fold holds the database's write lock, so
neither waits for the other (before stop 49 both took the database's one lock, and the fold
paused after each transaction for the appends); the process still decodes its entries and
builds their rows before it takes the lock (``_fold_ready.prepare``), so its transaction only
writes and the database's other writers (a request that creates a project) get the lock
meanwhile.

The process knows nothing of the workers' requests, so it watches the journal: while rows
wait it folds them, a dozen or so journal rows per transaction; when the journal is empty it
probes it again after ``interval`` seconds (one indexed read). Folds stay serialized and
transactional
(``Journal.fold_some``), so a fold process killed midway leaves its rows for the next fold, and
reads still fold what is left before they answer: nothing waits on this for correctness.

It exits when asked (SIGTERM, SIGINT: after the transaction under way) or when the process
that started it is gone (a server killed with SIGKILL leaves no folder behind); one that dies
while the server runs is started again (``FoldProcess``).

An embedded store can have one too (``ASSAY_BACKGROUND_FOLD=process``, ``_background``): an
agent's process then journals its runs and another process indexes them, so the agent's own
process pays its hooks and the tracing writer only (issue 21; bench/README.md, stop 48). That
one leaves after ``idle_exit`` seconds with nothing to fold, and the next append starts
another. The database's URL reaches the process in its environment (``ASSAY_FOLD_URL``), not on
its command line, where any user of the machine could read a password in it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType

__all__ = ["FoldProcess", "fold_loop", "main"]

log = logging.getLogger("assay.store")

INTERVAL = 0.05  # seconds between probes of an empty journal
URL_ENV = "ASSAY_FOLD_URL"  # the database's URL, for the process (not on its command line)
# journal rows (a request's batch each) per fold transaction on SQLite. The workers append to
# the queue file (``_queue``), whose write lock the fold does not hold, so a longer transaction
# keeps no request waiting: 12 against 6 (stop 42's figure, when appends waited for the fold),
# with no pause after a full transaction, 4 senders, 3 rounds of 15,000 runs each, 3 tries:
# indexed 27.9-38.3k runs/s against 22.1-32.0k (6 rows) and 23.9-26.6k (6 rows, the 2 ms
# pause the appends needed then); 20 and 32 rows did no better (bench/README.md, stop 49)
ROWS_SQLITE = 12
ROWS_POSTGRESQL = 20
# seconds after a SQLite fold transaction that took fewer journal rows than ROWS_SQLITE: the
# fold keeps up with the appends, and each transaction's fixed cost (its begin, commit, delete,
# statistics, the read that prepares it) was a quarter of the fold's CPU while most folded
# one or two rows; waiting lets the next take more. After a full one the next starts at once:
# the database's other writers (a request that creates a project) get the lock while the
# next batch is prepared, outside it
GATHER_SQLITE = 0.01


def fold_loop(url: str, stop: threading.Event, parent: int | None = None,
              interval: float = INTERVAL, idle_exit: float | None = None) -> None:
    """Fold ``url``'s journal until ``stop`` is set, ``parent`` (a pid) is gone, or (with
    ``idle_exit``) the journal stayed empty that many seconds."""
    from . import Store, _background
    from ._fold_ready import prepare

    with Store.open(url, migrate=False) as store:  # the process that starts it migrated it
        # this process's own folds only: never the store's background thread as well
        _background.claim(store.engine)
        postgres = store.engine.dialect.name == "postgresql"
        rows = ROWS_POSTGRESQL if postgres else ROWS_SQLITE
        journal = store.journal
        # the repositories a fold falls back on, imported now: with them come the schemas and
        # pydantic (0.23 s here), which the first fold of runs had paid, late, while the
        # appends it was started for piled up (bench/README.md, stop 50)
        store.runs, store.feedback  # noqa: B018
        more = False  # PostgreSQL: the last transaction was full, so rows may wait
        worked = time.monotonic()  # when the journal last held something
        while not stop.is_set():
            if parent is not None and os.getppid() != parent:
                return  # the process that started it is gone
            if idle_exit is not None and time.monotonic() - worked > idle_exit:
                return  # nothing to fold for a while: the next append starts another
            try:
                if postgres:  # its fold blocks no append: no pause, no preparing ahead
                    if not more and journal.backlog(1) == 0:
                        stop.wait(interval)
                        continue
                    worked = time.monotonic()
                    more = journal.fold_some(rows)[1]
                    continue
                # SQLite: decode and build before taking the write lock, and fold what was
                # prepared; the read that prepares is the probe of an empty journal
                ready = prepare(journal, rows)
                if ready is None:
                    stop.wait(interval)
                    continue
                worked = time.monotonic()
                full = journal.fold_some(ready.count, ready=ready)[1] and ready.count == rows
                if not full:  # a pause after a part-full one, so that the next folds more
                    stop.wait(GATHER_SQLITE)
            except Exception:  # e.g. the database is gone for a while: reads fold meanwhile
                more = False
                log.exception("assay: the fold process failed to fold; retrying")
                stop.wait(1.0)


def main(argv: list[str] | None = None) -> None:
    """``ASSAY_FOLD_URL=URL python -m assay.store._fold_process PARENT_PID [IDLE_EXIT]``."""
    args = sys.argv[1:] if argv is None else argv
    url = os.environ.get(URL_ENV)
    if not url:
        sys.exit(f"assay fold: no database URL ({URL_ENV} is not set)")
    parent = int(args[0])
    idle_exit = float(args[1]) if len(args) > 1 else None
    logging.basicConfig(level=logging.WARNING, format="assay fold: %(levelname)s %(message)s")
    stop = threading.Event()

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    fold_loop(url, stop, parent, idle_exit=idle_exit)


class FoldProcess:
    """A fold process. ``start``: a server's, started before the appends it folds, stopped
    after them, and started again when it dies meanwhile (after ``restart_delay`` seconds,
    doubling up to a minute while it keeps dying; reads fold in the meantime). ``ensure``: an
    embedded store's (``idle_exit`` set), started at an append when it is not running: it
    left for want of work, or it died, after which the next waits as long as a server's
    would."""

    def __init__(self, url: str, *, restart_delay: float = 1.0,
                 idle_exit: float | None = None) -> None:
        self.url = url
        self.restart_delay = restart_delay
        self.idle_exit = idle_exit
        self.restarts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._watch: threading.Thread | None = None
        self._delay = restart_delay  # the wait after the next crash (``_backoff``)
        self._started = 0.0  # (ensure) when the process was started
        self._not_before = 0.0  # (ensure) no start before then: it crashed

    def start(self) -> None:
        self._stopping.clear()
        self.proc = self._spawn()
        self._watch = threading.Thread(target=self._supervise, name="assay-fold-watch",
                                       daemon=True)
        self._watch.start()

    def ensure(self) -> None:
        """Running, or started now (an embedded store's, at its appends; no watching thread).
        After a crash (a non-zero exit) not before the restart delay."""
        proc, now = self.proc, time.monotonic()
        if proc is not None:
            code = proc.poll()
            if code is None:
                return
            if code != 0 and not self._not_before:  # a crash, seen now: wait before the next
                self._not_before = now + self._backoff(code, now - self._started)
            if now < self._not_before:
                return
            self.restarts += 1
        self._stopping.clear()
        self._not_before = 0.0
        self._started = now
        self.proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "assay.store._fold_process", str(os.getpid())]
        if self.idle_exit is not None:
            argv.append(str(self.idle_exit))
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                env={**os.environ, URL_ENV: self.url})

    def _backoff(self, code: int, ran: float) -> float:
        """Seconds to wait before the next start after a process exited with ``code`` after
        ``ran`` seconds: the restart delay, doubling up to a minute while it keeps dying."""
        if ran > 60:
            self._delay = self.restart_delay  # it had been running fine: not a crash loop
        delay, self._delay = self._delay, min(self._delay * 2, 60.0)
        log.warning("assay: the fold process exited (%s); starting another in %.0f s "
                    "(reads fold meanwhile)", code, delay)
        return delay

    def _supervise(self) -> None:
        while True:
            proc = self.proc
            if proc is None:
                return
            started = time.monotonic()
            code = proc.wait()
            if self._stopping.is_set():
                return
            if self._stopping.wait(self._backoff(code, time.monotonic() - started)):
                return
            self.proc = self._spawn()
            self.restarts += 1
            if self._stopping.is_set():  # stop() came while it was being started
                self.proc.terminate()
                self.proc.wait()
                return

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()  # the transaction under way ends first
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._watch is not None:
            self._watch.join(timeout)
            self._watch = None

    def forget(self) -> None:
        """In a forked child: the process is its parent's. Dropped without a wait, and without
        the warning Popen gives when a handle of a running child goes (a forked child that
        warns as errors, as pytest -W error does, failed on it)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            proc.returncode = 0  # not this process's child: nothing to wait for here

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


if __name__ == "__main__":
    main()
