"""Engine creation: one code path for SQLite and PostgreSQL.

SQLite is opened in WAL mode with a busy timeout and foreign keys on. Write transactions start
with ``BEGIN IMMEDIATE`` so two processes queue for the write lock instead of failing with
"database is locked" when a reader tries to upgrade its lock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, make_url

from .. import _json
from ..errors import InvalidInputError
from ._driver import sqlite

__all__ = ["resolve_url", "make_engine", "DEFAULT_DB_PATH", "BUSY_TIMEOUT_S"]

DEFAULT_DB_PATH = Path(".assay") / "assay.db"
BUSY_TIMEOUT_S = 60.0


def resolve_url(url: str | os.PathLike[str] | None = None) -> str:
    """Explicit URL (or file path) > ``ASSAY_DATABASE_URL`` > ``.assay/assay.db`` in the cwd."""
    if url is None:
        url = os.environ.get("ASSAY_DATABASE_URL") or None
    if url is None:
        path = Path.cwd() / DEFAULT_DB_PATH
        return f"sqlite:///{path}"
    text = os.fspath(url)
    if text == ":memory:":  # (sqlite3's name for a database in memory: refused by make_engine)
        return "sqlite:///:memory:"
    if "://" not in text:  # a bare file path
        return f"sqlite:///{Path(text).resolve()}"
    if text.startswith("postgresql://") or text.startswith("postgres://"):
        text = "postgresql+psycopg://" + text.split("://", 1)[1]
    return text


# Run on every new SQLite connection. Measured on OTLP ingest (bench/otlp.py; in-process A/B
# of the store path, interleaved, 10,000 spans a round up to 180,000 runs):
# - ``cache_size``: SQLite's default page cache is 2 MB a connection. ``runs`` and its 7
#   indexes outgrow it at ~20,000 runs; every insert then reads index pages back through a
#   syscall (2 preads a span) and spills dirty pages to the WAL mid-transaction. 64 MB: a third
#   of the preads, store CPU ~10% less at 100,000+ runs. It is an upper bound, filled as pages
#   are read, per connection: a pool's idle connections hold only what they touched.
# - ``wal_autocheckpoint``: the checkpoint (copying the WAL into the database, with an fsync)
#   runs inside whichever commit crosses the limit, holding the write lock. At 4,000 pages
#   (16 MB) instead of 1,000 a hot page (the table's tail, the statistics rows) is copied once
#   per four times as many commits: store CPU a further ~7% less, wall ~20%. Since stop 38 a
#   thread copies the WAL back every ~4 MB of rows (``_checkpoint``), off the writers' path,
#   and this limit (64 MB) is the bound for when it falls behind: a sustained writer leaves it
#   no moment when every frame is copied, which the WAL needs to start over, so a burst grows
#   the WAL until it pauses, or up to this, where a commit copies what is left. At 16 MB that
#   commit's fsyncs came every 16 MB of a burst and the thread gained nothing (40,000 runs
#   folded: wall 1.05x); at 64 MB, 0.88x (bench/fold_cost.py --checkpoint). When the WAL
#   starts over it is truncated to ``journal_size_limit`` (16 MB): a burst's WAL does not
#   stay on disk at its largest.
# - ``page_size``: 16 KB pages for a new database (an existing one keeps its own: SQLite only
#   changes it on VACUUM, never in WAL mode). A row of ``runs`` is ~0.5 KB and each of its
#   indexes takes a ~50-byte entry: fewer, fuller pages split and are written to the WAL less
#   often. Measured: a raw insert into ``runs`` with its indexes 8.0 -> 6.8 us a row, the journal
#   fold ~7% less CPU (bench/fold_cost.py, 100,000 runs). The checkpoint limit is set in bytes
#   (``WAL_CHECKPOINT_BYTES``), whatever the page size.
# ``mmap_size`` (256 MB) measured no better than the page cache (slightly worse); ``temp_store``
# only matters to sorts and temporary tables, which the write path does not use: left default.
PAGE_SIZE = 16384
WAL_CHECKPOINT_BYTES = 64 * 1024 * 1024  # a commit checkpoints the WAL past 64 MB
SQLITE_PRAGMAS: tuple[str, ...] = (
    f"page_size = {PAGE_SIZE}",  # before journal_mode: a new database's first write
    f"busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}",
    "journal_mode = WAL",
    "synchronous = NORMAL",
    "foreign_keys = ON",
    "cache_size = -65536",  # KiB: 64 MB
    f"journal_size_limit = {16 * 1024 * 1024}",  # bytes: the WAL at rest (see above)
)


# A writer waiting for another process's write lock polls for it every ``WRITE_POLL_S`` instead
# of sleeping in SQLite's busy handler, whose sleeps grow 1, 2, 5, 10, 15, 20... ms: such a
# writer (a server worker's append) missed the short gaps between the fold process's
# transactions, and the fold had to pause 20 ms after each to let appends in. Polling, the
# fold pauses 2 ms and indexes ~40% more runs/s for the same accepted runs/s (bench/README,
# "Issue 27"). A wait past ``WRITE_POLL_FAST_S`` (a long transaction elsewhere) polls slower.
# The busy timeout is 0 on a connection while it writes (which, holding the lock, never waits
# again before its commit) and set back when it next reads: a PRAGMA costs ~2 us, so a pooled
# connection that writes again and again pays it once, not twice a transaction.
WRITE_POLL_S = 0.0005
WRITE_POLL_SLOW_S = 0.005
WRITE_POLL_FAST_S = 0.1
_POLLING = "assay_polling"  # in a pooled connection's ``info``: its busy timeout is 0


def _while_locked(cur: Any, sql: str) -> None:
    """Execute ``sql``, trying again while SQLite answers "database is locked", for as long as
    the busy timeout would have waited: every ``WRITE_POLL_S`` (``WRITE_POLL_SLOW_S`` after
    ``WRITE_POLL_FAST_S``), not with the growing sleeps of SQLite's busy handler."""
    start = time.monotonic()
    while True:
        try:
            cur.execute(sql)
            return
        except sqlite.OperationalError as exc:
            waited = time.monotonic() - start
            if "locked" not in str(exc) or waited >= BUSY_TIMEOUT_S:
                raise
            time.sleep(WRITE_POLL_S if waited < WRITE_POLL_FAST_S else WRITE_POLL_SLOW_S)


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # Let SQLAlchemy (our begin hook) control transactions instead of pysqlite's own BEGIN.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    for pragma in SQLITE_PRAGMAS:
        # switching a new database to WAL takes an exclusive lock, and when several processes
        # open it at once SQLite answers "database is locked" at once instead of waiting in its
        # busy handler (an xdist worker lost its runs to it): retried
        _while_locked(cur, f"PRAGMA {pragma}")
    page = cur.execute("PRAGMA page_size").fetchone()[0]  # the database's own, if it had one
    cur.execute(f"PRAGMA wal_autocheckpoint = {max(1000, WAL_CHECKPOINT_BYTES // page)}")
    cur.close()


def _sqlite_begin(conn: Any) -> None:
    """A transaction's ``BEGIN``, sent to the driver directly (through SQLAlchemy's
    ``exec_driver_sql`` a read's ``BEGIN DEFERRED`` cost ~15 us more, at every read)."""
    pooled = conn.connection
    raw = pooled.driver_connection
    write = bool(conn.get_execution_options().get("assay_write"))
    sql = "BEGIN IMMEDIATE" if write else "BEGIN DEFERRED"
    try:
        if write:
            if not pooled.info.get(_POLLING):
                raw.execute("PRAGMA busy_timeout = 0")
                pooled.info[_POLLING] = True
            _while_locked(raw, sql)  # polling: its busy timeout is 0
            return
        if pooled.info.get(_POLLING):  # readers wait in SQLite's busy handler, as configured
            raw.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            pooled.info[_POLLING] = False
        raw.execute(sql)
    except sqlite.Error as exc:  # as SQLAlchemy would have raised it (this hook runs outside
        # its own wrapping): the store turns it into a StoreError
        raise sa_exc.OperationalError(sql, None, exc) from exc


# statements each SQLite connection keeps prepared (the driver's default: 100 in pysqlite3,
# its least used dropped first; 128 in Python's sqlite3): a fold's inserts of many rows are
# dear to prepare (~1.5M instructions for 64 rows) and run once a fold, so among the ~120
# statements a store's connection runs they were the ones dropped, and every fold of an
# agent's runs prepared them again (a sixth of its instructions: bench/README.md, stop 53)
CACHED_STATEMENTS = 512


def make_engine(url: str, *, pool_size: int = 5) -> Engine:
    """Create an engine for a resolved URL."""
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy.exc.ArgumentError
        raise InvalidInputError(f"invalid database URL {url!r}: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        db = parsed.database
        if not db or db == ":memory:" or parsed.query.get("mode") == "memory":
            raise InvalidInputError(
                f"{url!r} is a SQLite database in memory: assay's store needs a file (each of "
                "its connections, the writer's and the fold's among them, would see an empty "
                "database of its own); give a file path, e.g. one in tempfile.mkdtemp()")
        Path(db).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            parsed,
            module=sqlite,  # the bundled SQLite where installed (``_driver``)
            json_serializer=_json.dumps_column,
            json_deserializer=_json.loads_column,
            connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False,
                          "cached_statements": CACHED_STATEMENTS},
        )
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        from . import _checkpoint

        _checkpoint.track(engine)  # closed at exit: the WAL copied back and removed
        return engine
    if backend == "postgresql":
        from ..errors import require

        require("psycopg", "postgres", "A PostgreSQL store")
        return create_engine(
            parsed,
            json_serializer=_json.dumps_column,
            json_deserializer=_json.loads_column,
            pool_size=pool_size,
            max_overflow=10,
            pool_pre_ping=True,
            # No server-side prepared statements: psycopg prepares a statement on its fifth
            # use, and PostgreSQL may then keep a generic plan made while a table was small
            # (a sequential scan), so the fold's id probes into a growing ``runs`` went from
            # 1 ms to 200 ms each (fold of 40,000 runs: 366 -> 33 us/run wall).
            connect_args={"prepare_threshold": None},
        )
    raise InvalidInputError(
        f"unsupported database URL {url!r}: use sqlite:///path or postgresql://..."
    )
