"""Shared fixtures: a real store on SQLite and on PostgreSQL for every store test.

PostgreSQL: ``ASSAY_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``)
names a server; the suite creates a fresh database for the run and drops it at the end. With
``CI=true`` an unreachable server fails the run; elsewhere those tests skip, saying how to enable
them. Each test gets its own workspace (tenant) in that database, so tests never see each
other's rows.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.store import Store

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _pg_admin_url() -> str:
    return os.environ.get("ASSAY_TEST_POSTGRES_URL", PG_DEFAULT)


def _fresh_pg_database(role: str) -> Iterator[str]:
    """A new, migrated PostgreSQL database (dropped afterwards); skips or fails as documented."""
    import psycopg

    admin = _pg_admin_url()
    try:
        conn = psycopg.connect(admin, autocommit=True, connect_timeout=5)
    except Exception as exc:
        msg = (f"PostgreSQL not reachable at {admin} ({exc.__class__.__name__}). "
               "Start PostgreSQL on 127.0.0.1:5432 or set ASSAY_TEST_POSTGRES_URL to enable "
               "the PostgreSQL store tests.")
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    name = f"assay_test_{role}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin.rpartition("/")
    url = f"{base}/{name}"
    store = Store.open(url)  # migrate once for the run
    store.close()
    try:
        yield url
    finally:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run (dropped afterwards)."""
    yield from _fresh_pg_database("run")


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """The session-long test server's own database. Its folder folds every workspace of the
    database it serves, at any time while it runs; in ``pg_url`` it folded the journal entries
    of store tests that count on folding them themselves (CI: a prepared fold found its
    entries already folded)."""
    yield from _fresh_pg_database("server")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file; each test copies it instead of migrating again."""
    path = tmp_path_factory.mktemp("template") / "assay.db"
    store = Store.open(path)
    with store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    target = tmp_path / "assay.db"
    shutil.copy(sqlite_template, target)
    return f"sqlite:///{target}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A store URL on each backend (PostgreSQL: shared database, see ``store``)."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store on each backend, scoped to a workspace of its own."""
    base = Store.open(store_url)
    yield base.for_tenant(str(uuid.uuid4()))
    base.close()


@pytest.fixture
def client(store: Store):  # type: ignore[no-untyped-def]
    from assay.client import Client

    return Client(store=store)


@pytest.fixture(autouse=True)
def _no_folder_of_an_earlier_test() -> None:
    """Each test starts with no background folder running in this process. A store an earlier
    test left open keeps its folder for a while, and that folder folds every workspace of its
    database: on PostgreSQL (one database per test process) it folded the journal entries of
    the next test, which tests of the journal's internals count on as their own (a drop counted
    in another engine's journal, a backlog already folded: seen under load)."""
    from assay.store import _background

    for engine in list(_background._running):
        _background.stop(engine)
