"""Finished traces taken apart once stored, so reference counting frees them at once.

A parent and its children form reference cycles (``parent._kids`` holds each child, each
child's ``parent`` its parent), which only the cyclic garbage collector frees. Tracing makes a
few container objects per run, so at CPython's default thresholds full collections come often,
and each one finalizes every trace that became garbage since the last: with root + child traces
(``bench/fold_cost.py``'s ``@traceable`` pattern, background fold off) the full collections took
4.8-5.1 us a span of 9.6-9.9, and 2.0-2.3 with no cycles to free.

The writer calls ``untangle`` on each batch after storing it. A trace is taken apart (every
``_kids`` list dropped) only when nothing outside can reach any of its runs: each run's
reference count is exactly what the trace itself, the batch and this function hold, and no weak
reference to it exists. A trace anything else holds (a variable of the user's, a context a task
copied, an evaluator, an integration's table) stays whole, for the collector as before; so the
change cannot be seen from any code, only in the time the collector no longer spends.

In C where built (``_cuntangle.c``: the same decisions; this walk in Python cost the writer
~0.5 us a run on traces of many runs, about what the rest of its work on such a run costs).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from ._run_tree import SPEEDUPS, RunTree

__all__ = ["untangle", "untangle_py"]

_refs = sys.getrefcount
_weakrefs = weakref.getweakrefcount
# references a trace's run has from this function when it is counted: the ``trace`` list, the
# loop's variable and ``getrefcount``'s own argument
_OURS = 3


def untangle_py(items: list[Any]) -> None:
    """Take apart the stored traces among ``items`` (a writer's batch: runs, ``(op, run)``
    tuples, flush markers) that nothing else holds."""
    held: dict[int, int] = {}  # id(run) -> references from the batch (the list or a tuple)
    roots: list[RunTree] = []
    for item in items:
        run = item[1] if item.__class__ is tuple else item
        if not isinstance(run, RunTree):
            continue
        key = id(run)
        seen = held.get(key)
        held[key] = 1 if seen is None else seen + 1
        if seen is None and run.parent is None and run._kids and run._sent == 2:
            roots.append(run)
    item = run = None  # the loop's variables hold no run from here on
    while roots:
        _free(roots.pop(), held)


def _free(root: RunTree, held: dict[int, int]) -> bool:
    """Drop every ``_kids`` of ``root``'s trace if no outside reference reaches it."""
    trace: list[RunTree] = [root]
    i = 0
    while i < len(trace):
        more = trace[i]._kids
        if more:
            trace.extend(more)
        i += 1
    for run in trace:
        if not run._closed or run._sent != 2 or _weakrefs(run):
            return False  # still running or being sent, or reachable through a weak reference
        kids: list[RunTree] = run._kids or []
        for kid in kids:
            if kid.parent is not run:
                return False
        kid = None  # type: ignore[assignment]  # holds no run while the others are counted
        # the root: this function's parameter (popped from the caller's list, nothing else of
        # the caller's holds it); any other run: its parent's list of children
        expected = _OURS + 1 + held.get(id(run), 0) + len(kids)
        if _refs(run) != expected:
            return False
    for run in trace:
        run._kids = None
    return True


untangle = SPEEDUPS.untangle if SPEEDUPS is not None else untangle_py
