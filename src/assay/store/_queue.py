"""A SQLite file's journal in a file of its own: appends and folds on separate write locks.

SQLite has one write lock per database file. With the journal inside the database, every
append (the server's ingest of a request, the tracing writer's batch) waited for the fold
transaction under way, and the fold paused after each for them: on 2 cores the server indexed
19-21k runs/s with a third of the CPU idle, its requests queued on the lock (bench/README.md,
stop 49). So a SQLite file keeps its journal in ``<file>-queue``, a SQLite database of its own
(in WAL mode too): appends take that file's lock, folds the database's, and neither waits for
the other.

Two files commit apart, so a fold cannot delete the entries it applied in the transaction that
writes their rows. It records instead, in that transaction, the last entry it applied
(``journal_mark``: the queue's ``epoch`` and the entry's ``seq``), and deletes the entries up to
it from the queue after the commit. A fold killed between the two leaves entries that the next
fold skips (they are at or below the mark) and deletes. Entry numbers never go back
(``AUTOINCREMENT``: a deleted entry's number is not given again), which the mark relies on; a
queue file made anew (deleted, or a database copied without it) has another epoch, and the
mark of the old one does not apply to it.

The queue belongs to one database: before a process first appends to it, it makes sure the
database has a mark (``claimed``), and a database without one gets it past whatever the queue
holds then. Entries there are not its own (no process appended to it through the queue): a
database deleted and made anew at the same path does not fold what its predecessor left.

A database file alone still holds everything once its processes end (a copy of ``assay.db`` is
an experiment to share, ``_checkpoint``): closing a store, and this process's exit after its
tracing writers' last flush, move the queue's entries into the database's own ``journal``
table (``spill``: their compressed batches copied, with the mark, in one transaction), where
any reader folds them.

PostgreSQL (whose fold blocks no append) and in-memory databases keep the journal in the
database. Entries a SQLite file holds in its own ``journal`` table (spilled there, or written
by an earlier version of assay) are folded from there first.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    insert,
    select,
)
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.schema import CreateTable

from ._tables import journal

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from ._base import Store

__all__ = ["AFTER", "ENTRIES", "SUFFIX", "append", "claim", "claimed", "close", "mark",
           "queue_path", "queue_store", "set_mark", "spill", "trim"]

log = logging.getLogger("assay.store")

SUFFIX = "-queue"  # beside the database file (SQLite's own are -wal, -shm and -journal)

# The queue's schema: the journal's columns, with numbers that never go back, and its epoch.
# Statements built on ``_tables.journal`` (the same name and columns) run on it as they are.
_schema = MetaData()
_entries = Table(
    "journal", _schema,
    Column("seq", Integer, primary_key=True),
    Column("tenant_id", String(36), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("items", BigInteger, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    sqlite_autoincrement=True,
)
_epoch = Table("queue_epoch", _schema, Column("id", Integer, primary_key=True),
               Column("epoch", String(36), nullable=False))

# A new store's first append makes its queue file and claims it, and every fold reads and sets
# the mark: these statements go to the driver as SQL text, which SQLAlchemy would otherwise
# compile anew for every engine (each store's, each queue's) and which a first append paid
# with its DDL (12 ms a new store's first append, 6 without: bench/README.md, stop 51)
_MARK = "SELECT epoch, seq FROM journal_mark WHERE id = 1"
_SET_MARK = ("INSERT INTO journal_mark (id, epoch, seq) VALUES (1, ?, ?) "
             "ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq")
_LAST = "SELECT max(seq) FROM journal"
_EPOCH = "SELECT epoch FROM queue_epoch WHERE id = 1"
_NEW_EPOCH = "INSERT INTO queue_epoch (id, epoch) VALUES (?, ?) ON CONFLICT (id) DO NOTHING"
_INSERT = ("INSERT INTO journal (tenant_id, kind, items, payload, created_at) "
           "VALUES (?, ?, ?, ?, ?)")
_TRIM = "DELETE FROM journal WHERE seq <= ?"
# the queue's entries after a mark, oldest first, at most ``rows`` (-1: all): what a fold takes
# next (``_journal.next_entries``) and what a spill moves; ``created_at`` in microseconds
ENTRIES = "SELECT seq, tenant_id, kind, items, payload, created_at FROM journal"
AFTER = f"{ENTRIES} WHERE seq > ? ORDER BY seq LIMIT ?"
_ANY = select(journal.c.seq).limit(1)

# a database's engine -> its queue's store, while the engine lives; a queue's engine -> its epoch
_queues: weakref.WeakKeyDictionary[Engine, Store] = weakref.WeakKeyDictionary()
_epochs: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()
_claimed: weakref.WeakSet[Engine] = weakref.WeakSet()  # databases this process made sure of
_guard = threading.Lock()


def queue_path(database: str) -> str:
    """The queue file of the SQLite database file ``database``."""
    return database + SUFFIX


def _split(engine: Engine) -> bool:
    url = engine.url
    return engine.dialect.name == "sqlite" and bool(url.database) and \
        url.database != ":memory:"


def _opened(store: Store) -> Store:
    """The queue of ``store``'s database file, its tables made if new (its epoch noted)."""
    from ._base import Store as _Store
    from ._engine import make_engine

    assert store.engine.url.database is not None
    engine = make_engine(f"sqlite:///{queue_path(store.engine.url.database)}")
    queue = _Store(engine, store.tenant_id)
    with queue.write() as conn:  # IF NOT EXISTS: several processes may open it at once
        for ddl in _ddl():
            conn.exec_driver_sql(ddl)
        conn.exec_driver_sql(_NEW_EPOCH, (1, str(uuid.uuid4())))
        _epochs[engine] = str(conn.exec_driver_sql(_EPOCH).scalar_one())
    return queue


@functools.cache
def _ddl() -> tuple[str, ...]:
    """The queue's ``CREATE TABLE IF NOT EXISTS`` statements, compiled once a process (at the
    first queue made, not at import)."""
    dialect = sqlite_dialect.dialect()
    return tuple(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect))
                 for table in (_entries, _epoch))


def append(queue: Store, rows: list[dict[str, Any]]) -> None:
    """Journal ``rows`` (the journal's columns but ``seq``) in the queue, in one transaction of
    its own write lock (no fold waits for it, nor it for a fold)."""
    with queue.write() as conn:
        conn.exec_driver_sql(_INSERT, [(r["tenant_id"], r["kind"], r["items"], r["payload"],
                                        r["created_at"]) for r in rows])


def claimed(store: Store, queue: Store) -> None:
    """Before this process's first append to ``queue``: the database has a mark (see the
    module's docstring), made now if need be (a write of the database, once a process)."""
    if store.engine in _claimed:
        return
    with store.write() as conn:
        if mark(conn, queue)[1] is None:
            claim(conn, queue)
    _claimed.add(store.engine)


def claim(conn: Connection, queue: Store) -> int:
    """In a write transaction of a database without a mark: its mark past every entry the
    queue holds now (none of them its own); that entry's number."""
    with queue.read() as reading:
        last = int(reading.exec_driver_sql(_LAST).scalar() or 0)
    set_mark(conn, _epochs[queue.engine], last)
    return last


def queue_store(store: Store, *, create: bool = True) -> Store | None:
    """The store whose database holds ``store``'s journal, when that is a queue file of its
    own (a SQLite database file); None when the journal is the database's own table.

    ``create=False`` (a read's look, a fold): None while the queue file does not exist, as
    nothing waits in it, instead of making it. Making one is a write (its engine, WAL and
    tables: 5-15 ms), which every new store's first read had paid, an experiment's set-up
    among them (before its first example: bench/README.md, stop 50)."""
    engine = store.engine
    queue = _queues.get(engine)
    if queue is None:
        if not _split(engine):
            return None
        if not create and not os.path.exists(queue_path(str(engine.url.database))):
            return None  # an append made after this look makes it and is seen by the next
        with _guard:
            queue = _queues.get(engine)
            if queue is None:
                queue = _queues[engine] = _opened(store)
    return queue  # (its workspace is no matter: an entry names its own)


def mark(conn: Connection, queue: Store) -> tuple[str, int | None]:
    """(the epoch of ``queue``, the last of its entries folded) as the database's transaction
    ``conn`` sees it: entries after it wait to be folded (0: all of them, the queue being
    another than the mark's); None: the database has no mark, so nothing in the queue is
    its own (``claimed``)."""
    epoch = _epochs[queue.engine]
    row = conn.exec_driver_sql(_MARK).first()
    if row is None:
        return epoch, None
    return epoch, int(row.seq) if row.epoch == epoch else 0


def set_mark(conn: Connection, epoch: str, seq: int) -> None:
    """Record, in the fold's transaction ``conn``, that the queue's entries up to ``seq`` are
    applied."""
    conn.exec_driver_sql(_SET_MARK, (epoch, seq))


def trim(queue: Store, upto: int) -> None:
    """Delete the queue's entries up to ``upto`` (folded: their mark is committed)."""
    with queue.write() as conn:
        conn.exec_driver_sql(_TRIM, (upto,))


def spill(store: Store) -> int:
    """Move the entries waiting in ``store``'s queue into the database's own journal (one
    transaction, with the mark), so that the database file alone holds them; the entries
    moved."""
    queue = _queues.get(store.engine)
    if queue is None:
        return 0
    with queue.read() as reading:  # the usual case at exit: folded, nothing to move
        if reading.execute(_ANY).first() is None:
            return 0
    with store.write() as conn:
        epoch, after = mark(conn, queue)
        if after is None:  # nothing in the queue is this database's
            return 0
        with queue.read() as reading:
            entries = reading.exec_driver_sql(AFTER, (after, -1)).all()
        if entries:
            conn.execute(insert(journal), [
                {"tenant_id": e.tenant_id, "kind": e.kind, "items": e.items,
                 "payload": e.payload, "created_at": e.created_at} for e in entries])
            set_mark(conn, epoch, entries[-1].seq)
    if entries:
        trim(queue, entries[-1].seq)
    return len(entries)


def close(store: Store) -> None:
    """Close the queue of ``store``'s database (the store closes), its entries spilled."""
    if store.engine not in _queues:
        return
    try:
        spill(store)
    finally:
        with _guard:
            queue = _queues.pop(store.engine, None)
        if queue is not None:
            queue.close()


def _spill_at_exit() -> None:
    """At exit (after the tracing writers' last flush and the folders' stop, whose handlers
    run first: see ``_checkpoint``), every queue of this process spilled."""
    from ._base import Store as _Store

    for engine in list(_queues):
        if not os.path.exists(str(engine.url.database)):  # deleted meanwhile: not made anew
            continue
        try:
            spill(_Store(engine))
        except Exception:  # exiting: the entries stay in the queue file, folded from there
            log.warning("assay: could not move the journal's queue into %s at exit",
                        engine.url.database, exc_info=True)


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.Lock()
    for queue in list(_queues.values()):
        # the parent's pooled connections stay the parent's (see the tracing writer's hook)
        queue.engine.dispose(close=False)


atexit.register(_spill_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
