"""A real assay server (uvicorn on 127.0.0.1) per backend, shared by the server tests.

One server per backend for the whole run (SQLite file and the run's PostgreSQL database); each
test gets its own workspace through a fresh API key, so tests never see each other's data even
though they share the database.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from assay.server import create_app
from assay.store import Store

# Small enough to test cheaply, large enough for every SDK request the tests make.
TEST_MAX_BODY = 1024 * 1024


@dataclass
class Server:
    backend: str
    url: str  # http://127.0.0.1:PORT
    store_url: str
    store: Store  # the base store the server uses (tests read it to check what was written)

    def new_key(self, workspace: str | None = None) -> tuple[str, Store]:
        """A key for a brand-new workspace, and that workspace's store view."""
        key = self.store.keys.create(tenant=workspace or f"ws-{uuid.uuid4().hex[:12]}")
        return key.key, self.store.for_tenant(key.tenant_id)  # type: ignore[return-value]


def _start(store_url: str, backend: str, host: str = "127.0.0.1") -> Iterator[Server]:
    store = Store.open(store_url)
    app = create_app(store=store, max_body_bytes=TEST_MAX_BODY)
    config = uvicorn.Config(app, host=host, port=0, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True, name=f"assay-server-{backend}")
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Server(backend, f"http://{host}:{port}", store_url, store)
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()


@pytest.fixture(scope="session")
def sqlite_server(sqlite_template: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    target = tmp_path_factory.mktemp("server") / "assay.db"
    shutil.copy(sqlite_template, target)
    yield from _start(f"sqlite:///{target}", "sqlite")


@pytest.fixture(scope="session")
def postgres_server(pg_server_url: str) -> Iterator[Server]:
    yield from _start(pg_server_url, "postgres")


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> Server:
    """The running server on each backend."""
    return request.getfixturevalue(f"{request.param}_server")  # type: ignore[no-any-return]


@dataclass
class Workspace:
    """One test's workspace on the server: its key, an HTTP client with it, its store view."""

    server: Server
    key: str
    store: Store
    http: httpx.Client


@pytest.fixture
def ws(server: Server) -> Iterator[Workspace]:
    key, view = server.new_key()
    with httpx.Client(base_url=server.url, headers={"x-api-key": key}, timeout=30) as http:
        yield Workspace(server, key, view, http)


def sdk_env(server: Server, key: str, **extra: str) -> dict[str, str]:
    """Environment for a subprocess running an official SDK against the server."""
    import os

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "ASSAY_"))}
    env.update(LANGSMITH_ENDPOINT=server.url, LANGSMITH_API_KEY=key, LANGSMITH_TRACING="true",
               **extra)
    return env
