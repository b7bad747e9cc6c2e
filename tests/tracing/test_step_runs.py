"""``tracing._context.STEP_RUNS``: a run started inside a framework's step nests under it.

The lookups here stand in for a framework's (the framework tests run the real ones): each has
a gate, a context variable, and is asked only where the gate holds something.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.client import Client
from assay.tracing import RunTree, get_current_run_tree, trace, traceable, tracing_context
from assay.tracing._context import STEP_RUNS, add_step_lookup

GATE: contextvars.ContextVar[Any] = contextvars.ContextVar("test_step_gate", default=None)
STEP: contextvars.ContextVar[RunTree | None] = contextvars.ContextVar("test_step", default=None)
asked: list[int] = []


def step_run() -> RunTree | None:
    asked.append(1)
    return STEP.get()


@pytest.fixture
def lookup() -> Iterator[None]:
    add_step_lookup(step_run, GATE)
    add_step_lookup(step_run, GATE)  # (once per lookup)
    asked.clear()
    yield
    STEP_RUNS[:] = [pair for pair in STEP_RUNS if pair[1] is not step_run]


@traceable(name="sync_leaf")
def sync_leaf(x: int) -> int:  # the C traced call where built
    return x


@traceable(name="async_leaf")
async def async_leaf(x: int) -> int:  # the Python wrapper
    return x


def test_a_lookup_is_asked_only_where_its_gate_holds_something(lookup: None,
                                                               tmp_path: Path) -> None:
    assert sum(1 for _, fn in STEP_RUNS if fn is step_run) == 1
    client = Client(database_url=tmp_path / "s.db")
    with tracing_context(enabled=True, client=client, project_name="p"):
        with trace("root") as root:
            sync_leaf(1)
            asyncio.run(async_leaf(2))
            assert get_current_run_tree() is root
            assert asked == []  # gate empty: never called
            step = RunTree("framework step", "tool", {}, parent=root)
            GATE.set("in a step")
            STEP.set(step)
            sync_leaf(3)
            asyncio.run(async_leaf(4))
            assert get_current_run_tree() is step
            with trace("block"):
                pass
            GATE.set(None)
            STEP.set(None)
            step.end()
            step.patch()
    client.flush()
    runs = {r.name: r for r in client.list_runs(project_name="p", trace_id=root.id)}
    by_id = {r.id: r.name for r in runs.values()}
    assert by_id[runs["framework step"].parent_run_id] == "root"
    assert by_id[runs["block"].parent_run_id] == "framework step"
    parents = sorted((r.inputs["x"], by_id[r.parent_run_id])
                     for r in client.list_runs(project_name="p", trace_id=root.id)
                     if r.name in ("sync_leaf", "async_leaf"))
    assert parents == [(1, "root"), (2, "root"), (3, "framework step"), (4, "framework step")]
    assert len(asked) >= 3


def test_a_step_outside_the_current_run_is_not_its_parent(lookup: None,
                                                          tmp_path: Path) -> None:
    """A step of another trace (or above the current run) does not take its runs: only one
    below the current run does, or any where no run is current."""
    client = Client(database_url=tmp_path / "s.db")
    with tracing_context(enabled=True, client=client, project_name="p"):
        with trace("elsewhere") as other:
            pass
        with trace("root") as root:
            GATE.set(1)
            STEP.set(other)
            assert get_current_run_tree() is root
            STEP.set(root)  # the current run itself
            assert get_current_run_tree() is root
            GATE.set(None)
        with trace("outer") as outer:
            step = RunTree("step", "tool", {}, parent=outer)
            with trace("inner") as inner:  # a run below the step: stays current
                GATE.set(1)
                STEP.set(step)
                assert get_current_run_tree() is inner
                GATE.set(None)
    GATE.set(1)
    STEP.set(step)
    assert get_current_run_tree() is step  # no run current: the step's
    GATE.set(None)
    STEP.set(None)


def test_a_failing_lookup_is_logged_and_the_call_goes_on(tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> RunTree | None:
        raise RuntimeError("a framework changed")

    add_step_lookup(broken)  # no gate: asked at every run started
    try:
        client = Client(database_url=tmp_path / "s.db")
        with caplog.at_level(logging.WARNING, logger="assay.tracing"), \
                tracing_context(enabled=True, client=client, project_name="p"), \
                trace("root") as root:
            assert sync_leaf(5) == 5
            assert asyncio.run(async_leaf(6)) == 6
        client.flush()
        assert sorted(r.name for r in client.list_runs(project_name="p", trace_id=root.id)) \
            == ["async_leaf", "root", "sync_leaf"]
        assert "could not tell which framework step is running" in caplog.text
    finally:
        STEP_RUNS[:] = [pair for pair in STEP_RUNS if pair[1] is not broken]
