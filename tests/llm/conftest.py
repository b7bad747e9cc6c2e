"""Judge tests run the real SDKs against a scripted server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_openai import FakeLLMServer


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv
