"""The Store: an engine, a workspace, and the repositories that hold all SQL of assay."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from ..errors import AssayError, StoreError
from . import _checkpoint, _migrate, _queue
from ._engine import BUSY_TIMEOUT_S, make_engine, resolve_url
from ._journal import Journal  # every bulk write goes through it: not imported on first write
from ._tables import DEFAULT_TENANT_ID

if TYPE_CHECKING:
    from ._attachments import AttachmentRepo
    from ._comparative import ComparativeRepo
    from ._datasets import DatasetRepo
    from ._examples import ExampleRepo
    from ._feedback import FeedbackRepo
    from ._feedback_configs import FeedbackConfigRepo
    from ._feedback_tokens import FeedbackTokenRepo
    from ._keys import KeyRepo
    from ._projects import ProjectRepo
    from ._queues import QueueRepo
    from ._runs import RunRepo
    from ._shares import ShareRepo
    from ._threads import ThreadRepo

__all__ = ["Store", "open_store"]

# The connection of the ``Store.transaction()`` block running in this context, with its engine.
_ACTIVE: ContextVar[tuple[Engine, Connection] | None] = ContextVar("assay_store_tx", default=None)

# One SQLite writer per process at a time. Threads that all ``BEGIN IMMEDIATE`` at once wait in
# SQLite's busy handler, which sleeps in steps of up to 100 ms and so leaves the database idle
# long after the holder committed; a thread lock hands it over at once (server handler threads,
# the server's background fold, a tracing writer beside evaluate()). Other processes still
# queue through the busy handler. PostgreSQL takes concurrent writers as they come.
_SQLITE_WRITE_LOCKS: weakref.WeakKeyDictionary[Engine, threading.RLock] = (
    weakref.WeakKeyDictionary())
_LOCKS_GUARD = threading.Lock()


@contextmanager
def _write_lock(engine: Engine) -> Iterator[None]:
    with _LOCKS_GUARD:
        lock = _SQLITE_WRITE_LOCKS.get(engine)
        if lock is None:
            lock = _SQLITE_WRITE_LOCKS[engine] = threading.RLock()
    # bounded like SQLite's own wait: a writer that never lets go (say, one waiting on a thread
    # that wants to write) ends in SQLite's "database is locked", not in a silent hang
    held = lock.acquire(timeout=BUSY_TIMEOUT_S)
    try:
        yield
    finally:
        if held:
            lock.release()


class Store:
    """Everything assay persists, scoped to one workspace (``tenant_id``).

    Repositories (``datasets``, ``examples``, ``projects``, ``runs``, ``feedback``, ``keys``) are
    the only code that writes SQL. ``for_tenant`` gives a view of the same engine for another
    workspace; the server uses one view per API key.
    """

    def __init__(self, engine: Engine, tenant_id: str = DEFAULT_TENANT_ID) -> None:
        self.engine = engine
        self.tenant_id = str(tenant_id)

    @classmethod
    def open(cls, url: str | os.PathLike[str] | None = None, *, migrate: bool = True) -> Store:
        """Open (and by default migrate) the store at ``url``; see ``resolve_url``.

        A database that cannot be reached or opened is a StoreError naming it (password
        hidden) and the driver's reason, not the driver's exception with its traceback.
        """
        engine = make_engine(resolve_url(url))
        if migrate:
            with _opening(engine):
                _migrate.upgrade(engine)
        return cls(engine)

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def for_tenant(self, tenant_id: str) -> Store:
        return Store(self.engine, str(tenant_id))

    def schema_version(self) -> str | None:
        with _opening(self.engine), self.engine.connect() as conn:
            return _migrate.current_revision(conn)

    def upgrade(self, revision: str = "head") -> str:
        with _opening(self.engine):  # (``open(migrate=False)`` has not connected yet)
            return _migrate.upgrade(self.engine, revision)

    def _active(self) -> Connection | None:
        active = _ACTIVE.get()
        return active[1] if active is not None and active[0] is self.engine else None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        active = self._active()
        if active is not None:  # inside transaction(): see its own uncommitted writes
            with _translate_errors():
                yield active
            return
        with _translate_errors(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction (committed on success, rolled back on any error)."""
        active = self._active()
        if active is not None:  # joins the enclosing transaction()
            with _translate_errors():
                yield active
            return
        if self.engine.dialect.name != "sqlite":
            with _translate_errors():
                with self.engine.connect().execution_options(assay_write=True) as conn:
                    with conn.begin():
                        yield conn
            return
        with _write_lock(self.engine), _translate_errors():
            with self.engine.connect().execution_options(assay_write=True) as conn:
                raw: Any = conn.connection.driver_connection
                before = raw.total_changes
                with conn.begin():
                    yield conn
                # the rows it wrote reach the WAL: a thread copies them back (``_checkpoint``)
                _checkpoint.wrote(self.engine, raw.total_changes - before)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Make every repository call in the block share one write transaction: all or nothing.

        The server ingests runs and feedback of one request this way, so a bad item anywhere
        leaves nothing behind. Views from ``for_tenant`` share it (same engine).
        """
        if self._active() is not None:
            with self.write() as conn:
                yield conn
            return
        with self.write() as conn:
            token = _ACTIVE.set((self.engine, conn))
            try:
                yield conn
            finally:
                _ACTIVE.reset(token)

    def close(self) -> None:
        from ._background import stop

        stop(self.engine)  # its folder would reopen connections to a database being closed
        _queue.close(self)
        _checkpoint.stop(self.engine)
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- repositories -----------------------------------------------------------------------
    @cached_property
    def datasets(self) -> DatasetRepo:
        from ._datasets import DatasetRepo

        return DatasetRepo(self)

    @cached_property
    def examples(self) -> ExampleRepo:
        from ._examples import ExampleRepo

        return ExampleRepo(self)

    @cached_property
    def projects(self) -> ProjectRepo:
        from ._projects import ProjectRepo

        return ProjectRepo(self)

    @cached_property
    def runs(self) -> RunRepo:
        from ._runs import RunRepo

        return RunRepo(self)

    @cached_property
    def feedback(self) -> FeedbackRepo:
        from ._feedback import FeedbackRepo

        return FeedbackRepo(self)

    @cached_property
    def comparative(self) -> ComparativeRepo:
        from ._comparative import ComparativeRepo

        return ComparativeRepo(self)

    @cached_property
    def journal(self) -> Journal:
        return Journal(self)

    def settle(self) -> int:
        """Fold journaled writes into runs and feedback (a no-op when there are none)."""
        return self.journal.settle()

    @cached_property
    def keys(self) -> KeyRepo:
        from ._keys import KeyRepo

        return KeyRepo(self)

    @cached_property
    def queues(self) -> QueueRepo:
        from ._queues import QueueRepo

        return QueueRepo(self)

    @cached_property
    def feedback_configs(self) -> FeedbackConfigRepo:
        from ._feedback_configs import FeedbackConfigRepo

        return FeedbackConfigRepo(self)

    @cached_property
    def feedback_tokens(self) -> FeedbackTokenRepo:
        from ._feedback_tokens import FeedbackTokenRepo

        return FeedbackTokenRepo(self)

    @cached_property
    def shares(self) -> ShareRepo:
        from ._shares import ShareRepo

        return ShareRepo(self)

    @cached_property
    def threads(self) -> ThreadRepo:
        """Conversation threads: root runs grouped by their metadata's thread id."""
        from ._threads import ThreadRepo

        return ThreadRepo(self)

    @cached_property
    def attachments(self) -> AttachmentRepo:
        from ._attachments import AttachmentRepo

        return AttachmentRepo(self)


@contextmanager
def _translate_errors() -> Iterator[None]:
    """Database failures surface as StoreError; assay's own errors pass through unchanged."""
    try:
        yield
    except AssayError:
        raise
    except sa_exc.SQLAlchemyError as exc:
        raise StoreError(f"database error: {exc.__class__.__name__}: {exc}") from exc


@contextmanager
def _opening(engine: Engine) -> Iterator[None]:
    """The driver's failure to connect (refused, unknown host or database, bad password, not a
    database file) as a one-line StoreError: the store's URL and the driver's own words."""
    try:
        yield
    except sa_exc.DBAPIError as exc:
        url = engine.url.render_as_string(hide_password=True)
        reason = " ".join(str(exc.orig if exc.orig is not None else exc).split())
        raise StoreError(f"cannot open the store at {url}: {reason}") from exc


def open_store(url: str | os.PathLike[str] | None = None, *, migrate: bool = True) -> Store:
    return Store.open(url, migrate=migrate)
