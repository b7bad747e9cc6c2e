"""Every stored column of a workspace's runs, comparable across workspaces (test helper)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from assay.store import Store
from assay.store._tables import runs, sessions


def stored_runs(store: Store, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The workspace's runs in start order, every column but the workspace: each id of
    ``labels`` replaced by its label wherever it appears in a text column, the project by its
    name, so two workspaces that stored the same runs compare equal."""
    with store.read() as conn:
        names = dict(conn.execute(select(sessions.c.id, sessions.c.name).where(
            sessions.c.tenant_id == store.tenant_id)).all())
        got = [dict(r._mapping) for r in conn.execute(
            select(runs).where(runs.c.tenant_id == store.tenant_id).order_by(runs.c.start_time))]
    out = []
    for row in got:
        row.pop("tenant_id")
        row["session_id"] = names[row["session_id"]]
        for key, value in row.items():
            if isinstance(value, str):
                for rid, label in labels.items():
                    value = value.replace(rid, label)
                row[key] = value
        out.append(row)
    return out


# The start of a script a test runs in a process of its own (``python -c``): a client of the
# store at ``sys.argv[1]`` and ``trace(project, n)``, n traced roots with a child each.
TRACING_SCRIPT = r"""
import os, sys
from assay.client import Client
from assay.tracing import traceable, tracing_context
client = Client(database_url=sys.argv[1])

@traceable
def child(i):
    return i

@traceable
def root(i):
    return child(i)

def trace(project, n):
    with tracing_context(enabled=True, client=client, project_name=project):
        for i in range(n):
            root(i)
"""


def journal_place(store: Store) -> Store:
    """Where ``store``'s journal entries are written: a SQLite file's queue file, else the
    database itself (``store/_queue.py``)."""
    from assay.store._queue import queue_store

    return queue_store(store) or store
