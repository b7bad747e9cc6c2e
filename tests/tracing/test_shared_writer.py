"""One run writer per store per process: ``flush()`` on any client of a store waits for every
run traced toward it (the default client's included), so statistics read after it are whole."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid

import pytest

from assay.client import Client, get_default_client
from assay.client import _client as client_module
from assay.tracing import trace, traceable, tracing_context
from assay.tracing._writer import writer_for

N = 5_000  # root runs (each with one child) per test


@traceable
def child(i: int) -> int:
    return i


@traceable
def root(i: int) -> int:
    return child(i)


@traceable
async def aroot(i: int) -> int:
    await asyncio.sleep(0)
    return child(i)


@pytest.fixture
def default_on(store_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Tracing on, the default client opening the test's database, a project of the test's."""
    project = f"shared-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("ASSAY_TRACING", "true")
    monkeypatch.setenv("ASSAY_PROJECT", project)
    monkeypatch.setenv("ASSAY_DATABASE_URL", store_url)
    monkeypatch.delenv("ASSAY_API_URL", raising=False)
    monkeypatch.setattr(client_module, "_default", None)  # assay's own module-level default
    return project


def _slow_default_writer() -> None:
    """The default client's writer stores nothing on its own (no timer, no full batch): only
    a flush makes it write, so a flush that does not reach it leaves the runs unstored."""
    writer = get_default_client()._tracing_writer()
    writer.interval = 60
    writer.batch_size = 10 * N


def _count(client: Client, project: str) -> int:
    return client.read_project(project_name=project, include_stats=True).run_count


def test_the_readme_pattern_counts_every_run(default_on: str) -> None:
    """``Client()``, ``@traceable`` functions (the default client), ``client.flush()``, then
    the statistics: every root, exactly."""
    client = Client()
    _slow_default_writer()
    for i in range(N):
        root(i)
    client.flush()
    assert client._tracing_writer() is get_default_client()._tracing_writer()
    assert _count(client, default_on) == N
    assert len(list(client.list_runs(project_name=default_on))) == 2 * N


def test_clients_of_one_store_share_a_writer_others_do_not(default_on: str, store_url: str,
                                                           tmp_path: object) -> None:
    a, b, c = Client(), Client(database_url=store_url), Client(database_url=store_url)
    assert a.store is not b.store
    assert a._tracing_writer() is b._tracing_writer() is c._tracing_writer()
    other = Client(database_url=f"sqlite:///{tmp_path}/other.db")
    assert other._tracing_writer() is not a._tracing_writer()
    tenant = Client(store=b.store.for_tenant(str(uuid.uuid4())))  # another workspace
    assert tenant._tracing_writer() is not a._tracing_writer()
    _slow_default_writer()
    per = N // 4
    for i, user in enumerate((a, b, None, c)):  # None: the default client
        with tracing_context(client=user):
            for j in range(per):
                root(i * per + j)
    fresh = Client(database_url=store_url)  # traced nothing itself
    fresh.flush()
    assert _count(fresh, default_on) == 4 * per


def test_remote_clients_share_by_url_and_key() -> None:
    a = Client(api_url="http://127.0.0.1:9", api_key="k1")
    b = Client(api_url="http://127.0.0.1:9/", api_key="k1")
    c = Client(api_url="http://127.0.0.1:9", api_key="k2")
    assert a._tracing_writer() is b._tracing_writer()
    assert c._tracing_writer() is not a._tracing_writer()
    assert writer_for(Client(api_url="http://127.0.0.1:9", api_key="k3"), create=False) is None


def test_threads(default_on: str) -> None:
    client = Client()
    _slow_default_writer()
    per = N // 4

    def work(k: int) -> None:
        for j in range(per):
            root(k * per + j)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.flush()
    assert _count(client, default_on) == 4 * per


def test_asyncio_tasks(default_on: str) -> None:
    client = Client()
    _slow_default_writer()

    async def main() -> None:
        await asyncio.gather(*(aroot(i) for i in range(N)))

    asyncio.run(main())
    client.flush()
    assert _count(client, default_on) == N
    assert len(list(client.list_runs(project_name=default_on))) == 2 * N


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_traces_and_flushes_parents_rows_are_not_doubled(default_on: str) -> None:
    client = Client()
    _slow_default_writer()
    for i in range(100):
        root(i)
    client.flush()
    for i in range(100, 300):  # queued, not stored, when the child is forked
        root(i)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            mine = Client()
            with trace("child-of-fork"):
                for i in range(50):
                    root(i)
            mine.flush()
            # its own runs and what the parent stored before the fork; never the parent's queue
            seen = _count(mine, default_on)
            code = 0 if 100 + 1 <= seen <= 300 + 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    client.flush()
    assert _count(client, default_on) == 300 + 1  # the parent's 300 roots once, the child's one
    runs = list(client.list_runs(project_name=default_on))
    assert len(runs) == len({r.id for r in runs}) == 2 * 300 + 1 + 2 * 50


def test_one_sqlite_file_however_it_is_named(tmp_path: object, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    os.symlink(".", "link")
    a = Client(database_url="sqlite:///data.db")
    b = Client(database_url=f"{tmp_path}/data.db")
    c = Client(database_url="link/data.db")
    assert a._tracing_writer() is b._tracing_writer() is c._tracing_writer()
