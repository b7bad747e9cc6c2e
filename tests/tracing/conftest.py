"""Fixtures for tracing tests: a SQLite-backed client, a clean tracing switch, a fake LLM server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assay.client import Client

from .fake_llm_server import FakeLLMServer


@pytest.fixture(autouse=True)
def _tracing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with ASSAY_TRACING / ASSAY_PROJECT unset (tracing off by default)."""
    monkeypatch.delenv("ASSAY_TRACING", raising=False)
    monkeypatch.delenv("ASSAY_PROJECT", raising=False)


@pytest.fixture
def tclient(sqlite_url: str) -> Iterator[Client]:
    """A client on a fresh SQLite file (most tracing behaviour does not depend on the backend)."""
    c = Client(database_url=sqlite_url)
    yield c
    c.close()
    c.store.close()


@pytest.fixture(scope="session")
def llm_server() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture(params=[True, False], ids=["c-wrapper", "python-wrapper"])
def wrapper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each test twice: with the compiled call wrapper, and with the reference one in Python
    (as where the extension is not built). True for the compiled one."""
    if not request.param:
        from assay.tracing import _traceable

        monkeypatch.setattr(_traceable, "SPEEDUPS", None)
        monkeypatch.setattr(_traceable._wrap_sync, "__defaults__", (None,))
    return bool(request.param)
