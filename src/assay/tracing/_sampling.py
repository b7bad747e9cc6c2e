"""Trace sampling: ``ASSAY_TRACING_SAMPLING_RATE`` keeps that share of production traces.

A service traced in production (``ASSAY_TRACING=true``, frameworks' calls as roots of their
own) may make more traces than anyone reads; LangSmith's ``LANGSMITH_TRACING_SAMPLING_RATE``
keeps a share of them, and so does this. The decision is the trace's: every run of a trace is
kept or dropped with its root, by a hash of the trace id (a UUIDv7's random tail), so it takes
no state, holds across threads and processes (a trace continued elsewhere from its headers is
kept or dropped there too), and costs nothing when the variable is unset. The writer drops the
runs of a trace left out before they are encoded or stored (``RunWriter._drain``).

``Client(tracing_sampling_rate=...)`` (LangSmith's keyword) sets a rate for the runs traced with
that client, over the environment's. An experiment is never sampled: its examples' traces
(stored under the experiment's id) and its evaluators' (the ``evaluators`` project) are all
kept, or its statistics would be partial.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InvalidInputError
from ._run_tree import RunTree

__all__ = ["ENV_SAMPLING", "EVALUATORS_PROJECT", "below_of", "drop_unsampled", "keep_below"]

ENV_SAMPLING = "ASSAY_TRACING_SAMPLING_RATE"
ENV_SAMPLING_LANGSMITH = "LANGSMITH_TRACING_SAMPLING_RATE"  # read when assay's is unset
EVALUATORS_PROJECT = "evaluators"  # where evaluate() traces its evaluators (never sampled)
_SPAN = 1 << 32  # the hash's range: a trace id's last 8 hex digits


def below_of(rate: Any, name: str = "tracing_sampling_rate") -> int | None:
    """The hash value under which a trace is kept at ``rate`` (None: 1, keep every trace)."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
        raise InvalidInputError(
            f"{name} must be a number from 0 to 1 (the share of traces kept), got {rate!r}")
    return None if rate >= 1.0 else int(rate * _SPAN)


def keep_below() -> int | None:
    """The hash value under which a trace is kept, from ``ASSAY_TRACING_SAMPLING_RATE``, else
    ``LANGSMITH_TRACING_SAMPLING_RATE`` (None: both unset or 1, keep every trace). Read when a
    process first traces toward a store."""
    name = ENV_SAMPLING
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        name = ENV_SAMPLING_LANGSMITH
        raw = os.environ.get(name)
        if raw is None or not raw.strip():
            return None
    try:
        rate = float(raw)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise InvalidInputError(
            f"{name} must be a number from 0 to 1 (the share of traces kept), "
            f"got {raw!r}")
    return below_of(rate, name)


def _kept(run: Any, below: int) -> bool:
    if run.session_id is not None or run.session_name == EVALUATORS_PROJECT:
        return True  # an experiment's
    return int(run._trace[-8:], 16) < below


def drop_unsampled(items: list[Any], below: int | None) -> list[Any]:
    """``items`` (the writer's queue entries: a run, ``(op, run)``, or a marker) without the
    runs of traces left out; a run dropped is marked sent, so its later end is dropped too.
    ``below``: the process's rate (the environment's); a run traced with a client given a
    rate of its own (``Client(tracing_sampling_rate=...)``) goes by that one."""
    out = []
    for item in items:
        cls = item.__class__
        run = item[1] if cls is tuple else item
        if isinstance(run, RunTree):
            client = run._client
            at = below if client is None else getattr(client, "_sampling_below", below)
            if at is not None and not _kept(run, at):
                run._sent = 2
                continue
        out.append(item)
    return out
