"""``POST /runs/stats``: statistics over the runs a query matches (``Client.get_run_stats``).

The body is ``/runs/query``'s filters (``session`` for the projects, the filter language in
``filter``/``trace_filter``/``tree_filter``) plus ``end_time``, the latest start time; the
answer is LangSmith's run-stats object (see ``assay.store._run_stats`` for each figure).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ._deps import JsonBody, StoreDep, ok
from ._wire import IdList, Timestamp, _In, validate

__all__ = ["RunStatsQuery", "router", "stats_filters"]

router = APIRouter()


class RunStatsQuery(_In):
    """The SDK's ``get_run_stats`` body; ``data_source_type`` picks a LangSmith storage tier
    and changes nothing here."""

    session: IdList | None = None
    id: IdList | None = None
    trace: uuid.UUID | None = None
    parent_run: uuid.UUID | None = None
    run_type: str | None = None
    reference_example: IdList | None = None
    start_time: Timestamp | None = None
    end_time: Timestamp | None = None
    error: bool | None = None
    is_root: bool | None = None
    query: str | None = None
    filter: str | None = None
    trace_filter: str | None = None
    tree_filter: str | None = None
    data_source_type: str | None = None


def stats_filters(q: RunStatsQuery) -> dict[str, Any]:
    """``RunRepo.stats`` keywords of a stats query."""
    return {
        "project_ids": [str(s) for s in q.session] if q.session is not None else None,
        "run_ids": q.id, "trace_id": q.trace, "parent_run_id": q.parent_run,
        "run_type": q.run_type, "reference_example_ids": q.reference_example,
        "start_time": q.start_time, "start_before": q.end_time, "error": q.error,
        "is_root": q.is_root, "query": q.query, "filter": q.filter,
        "trace_filter": q.trace_filter, "tree_filter": q.tree_filter,
    }


def wire_stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in stats.items()}


@router.post("/runs/stats")
def run_stats(store: StoreDep, body: JsonBody) -> JSONResponse:
    q = validate(RunStatsQuery, body)
    for sid in q.session or ():
        store.projects.read(project_id=sid, settle=False)  # 404 naming an unknown project
    return ok(wire_stats(store.runs.stats(**stats_filters(q))))
