"""Runs an integration has recorded but not built yet: built before anyone reads or stores them.

An integration whose hooks fire many times a step (LangChain's callbacks) keeps its events in a
log on the agent's thread and builds the runs from it later (``integrations/_lc_capture.py``).
Whoever needs the runs first builds them, through the ``settle`` function the integration
registered here: the writer at each tick and before storing a batch (``wait=False``: it skips
a log someone else is building, never waiting on it), ``flush()`` and an in-process read of a
run tree (``RunTree.to_run``) before they go on (``wait=True``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SETTLERS", "register", "settle"]

SETTLERS: list[Callable[[bool], None]] = []  # each integration's ``settle(wait)``


def register(settler: Callable[[bool], None]) -> None:
    """Have ``settler(wait)`` called before runs are read or stored (once per settler)."""
    if settler not in SETTLERS:
        SETTLERS.append(settler)


def settle(wait: bool = True) -> None:
    """Build every run the integrations have pending. ``wait``: also those another thread is
    building now (return once they are built); else leave those to that thread."""
    for settler in SETTLERS:
        settler(wait)
