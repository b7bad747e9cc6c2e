"""Accuracy tests judge through the real openai SDK against the scripted server of tests/llm."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llm.fake_openai import FakeLLMServer


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv
