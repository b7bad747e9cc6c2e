"""The SDKs' generated v2 queries over traces and experiments:

- ``POST /api/v2/traces/query`` (``client.traces.query``): the root runs of one project in a
  start-time window (by default the last day; ``max_start_time`` exclusive), newest first, each
  as ``{"root_run": {selects}, "trace_aggregates": {...}}``. ``TOTAL_TOKENS``, ``TOTAL_COST``
  and ``FIRST_TOKEN_TIME`` are trace-wide (every llm run of the trace) and go under
  ``trace_aggregates``; the other selects describe the root run, as in ``/api/v2/runs/query``.
- ``GET /api/v2/traces/{trace_id}/runs`` (``client.traces.list_runs``): a trace's runs.
- ``POST /api/v2/datasets/{id}/experiment-runs`` (``client.datasets.experiment_runs.query``):
  the dataset's examples, each with the root runs the experiments made on it, paged by an
  opaque cursor (``/datasets/{id}/runs`` is the v1 form, paged by offset).

A natural-language or semantic search (``ai_search``, ``sem_filter``) needs a model this server
does not run, and feedback-time bounds are not kept: all are refused by name (422), never
ignored. Experiment runs sort by one experiment's feedback score (``sort={"by":
"feedback.<key>", "order": "ASC"|"DESC"}``, unscored examples last); any other sort is refused
by name.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from .._ids import utcnow
from ._deps import JsonBody, JsonResponse, StoreDep, dump
from ._errors import ApiError
from ._routes_runs_v2 import cursor_offset, next_cursor, select_items
from ._wire import IdList, RunSelect, Timestamp, _In, validate

__all__ = ["ExperimentRunsQuery", "TraceQuery", "router"]

router = APIRouter()

_AGGREGATES = ("TOTAL_TOKENS", "TOTAL_COST", "FIRST_TOKEN_TIME")
_TICK = timedelta(microseconds=1)  # max_start_time is exclusive, ``list``'s bound inclusive


class TraceQuery(_In):
    project_id: uuid.UUID
    min_start_time: Timestamp | None = None
    max_start_time: Timestamp | None = None
    page_size: int = Field(default=20, ge=1, le=100)
    selects: list[RunSelect] | None = None
    trace_filter: str | None = None
    tree_filter: str | None = None
    trace_ids: IdList | None = None
    cursor: str | None = None
    ai_search: str | None = None
    sem_filter: str | None = None
    min_feedback_modified_at: Timestamp | None = None
    max_feedback_modified_at: Timestamp | None = None


class ExperimentRunsQuery(_In):
    experiment_ids: list[uuid.UUID] = Field(min_length=1, max_length=50)
    example_ids: list[uuid.UUID] | None = Field(default=None, max_length=1000)
    filters: dict[uuid.UUID, list[str]] | None = None
    page_size: int = Field(default=20, ge=1, le=100)
    selects: list[RunSelect] | None = None
    cursor: str | None = None
    comparative_experiment_id: uuid.UUID | None = None  # FEEDBACK_STATS: that comparison's
    sort: dict[str, Any] | None = None


_NOT_FEEDBACK = ("inputs", "outputs", "metadata", "extra", "run", "example", "tags")


def _sort(sort: dict[str, Any]) -> tuple[str, bool]:
    """``(feedback key, descending)`` of the SDK's ``sort``: ``by`` is ``feedback.<key>`` (the
    prefix optional), ``order`` ``ASC`` or ``DESC``; anything else is refused by name."""
    unknown = sorted(set(sort) - {"by", "order"})
    if unknown:
        raise ApiError(422, "invalid_input",
                       f"sort fields {unknown} are not supported: give 'by' and 'order'")
    by, order = sort.get("by"), sort.get("order", "DESC")
    if not isinstance(by, str) or not by.strip():
        raise ApiError(422, "invalid_input",
                       f"sort.by must name a feedback key (feedback.<key>), got {by!r}")
    prefix, dot, rest = by.partition(".")
    if dot and prefix in _NOT_FEEDBACK or by in ("latency", "start_time", "name", "status"):
        raise ApiError(422, "unsupported", f"sort by {by!r} is not supported: experiment runs "
                       "sort by a feedback score only (feedback.<key>)")
    if not isinstance(order, str) or order.upper() not in ("ASC", "DESC"):
        raise ApiError(422, "invalid_input", f"sort.order must be 'ASC' or 'DESC', got {order!r}")
    key = rest if dot and prefix == "feedback" else by
    return key, order.upper() == "DESC"


def _refuse(q: Any, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(q, name) is not None:
            raise ApiError(422, "unsupported", f"'{name}' is not supported by this server")


@router.post("/api/v2/traces/query")
def query_traces(request: Request, store: StoreDep, body: JsonBody) -> JSONResponse:
    q = validate(TraceQuery, body)
    _refuse(q, ("ai_search", "sem_filter", "min_feedback_modified_at",
                "max_feedback_modified_at"))
    store.settle()
    project = store.projects.read(project_id=q.project_id, settle=False)  # 404 if unknown
    end = q.max_start_time or utcnow()
    start = q.min_start_time or end - timedelta(days=1)
    offset = cursor_offset(q.cursor)
    found = store.runs.list(
        project_ids=[str(project.id)], is_root=True, run_ids=q.trace_ids, start_time=start,
        start_before=end - _TICK, filter=q.trace_filter, tree_filter=q.tree_filter,
        order="desc", offset=offset, limit=q.page_size + 1)
    page = found[: q.page_size]
    selects = list(dict.fromkeys(q.selects or ["ID"]))
    root_selects = [s for s in selects if s not in _AGGREGATES] or ["ID"]
    aggregates = [s for s in selects if s in _AGGREGATES]
    roots = select_items(request, store, page, root_selects)
    usage = store.runs.subtree_usage([str(r.id) for r in page]) if aggregates and page else {}
    items = []
    for run, root in zip(page, roots, strict=True):
        item: dict[str, Any] = {"root_run": root, "query_metadata": None}
        if aggregates:
            got = usage.get(str(run.id), {})
            first = got.get("first_token_time")
            item["trace_aggregates"] = {
                name.lower(): (first.isoformat() if first is not None else None)
                if name == "FIRST_TOKEN_TIME" else got.get(name.lower())
                for name in aggregates}
        items.append(item)
    more = len(found) > q.page_size
    return JsonResponse({"items": items,
                         "next_cursor": next_cursor(offset + q.page_size) if more else None})


@router.get("/api/v2/traces/{trace_id}/runs")
def trace_runs(request: Request, store: StoreDep, trace_id: uuid.UUID, project_id: uuid.UUID,
               filter: str | None = None, min_start_time: str | None = None,
               max_start_time: str | None = None,
               selects: Annotated[list[str] | None, Query()] = None) -> JSONResponse:
    """The runs of one trace in execution order (``client.traces.list_runs``); the start-time
    bounds apply only when given (a trace is already a narrow scan)."""
    chosen = list(dict.fromkeys(selects or ["ID"]))
    bad = [s for s in chosen if s not in _SELECTS]
    if bad:
        raise ApiError(422, "invalid_input", f"unknown selects {bad}: expected some of "
                       + ", ".join(_SELECTS))
    store.settle()
    project = store.projects.read(project_id=project_id, settle=False)
    bounds = {name: validate(_Window, {"at": value}, name).at
              for name, value in (("min_start_time", min_start_time),
                                  ("max_start_time", max_start_time)) if value is not None}
    end = bounds.get("max_start_time")
    found = store.runs.list(project_ids=[str(project.id)], trace_id=trace_id, filter=filter,
                            start_time=bounds.get("min_start_time"),
                            start_before=end - _TICK if end is not None else None)
    return JsonResponse({"items": select_items(request, store, found, chosen)})


class _Window(_In):
    at: Timestamp


_SELECTS = get_args(RunSelect)


def _filter_text(parts: list[str]) -> str | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else f"and({', '.join(parts)})"


@router.post("/api/v2/datasets/{dataset_id}/experiment-runs")
def query_experiment_runs(request: Request, store: StoreDep, dataset_id: uuid.UUID,
                          body: JsonBody) -> JSONResponse:
    q = validate(ExperimentRunsQuery, body)
    sort = _sort(q.sort) if q.sort is not None else None
    if sort is not None and len(q.experiment_ids) != 1:
        raise ApiError(422, "invalid_input", "sort orders the examples by one experiment's "
                       f"feedback: give a single experiment id, not {len(q.experiment_ids)}")
    store.datasets.read(dataset_id=dataset_id)  # 404 for an unknown dataset
    sessions = [store.projects.read(project_id=sid) for sid in q.experiment_ids]
    for s in sessions:
        if s.reference_dataset_id != dataset_id:
            raise ApiError(422, "invalid_input",
                           f"experiment {s.id} did not run on dataset {dataset_id}")
    unknown = set(q.filters or {}) - set(q.experiment_ids)
    if unknown:
        raise ApiError(422, "invalid_input", "filters name experiments not in experiment_ids: "
                       + ", ".join(sorted(map(str, unknown))))
    offset = cursor_offset(q.cursor)
    version = (sessions[0].metadata or {}).get("dataset_version")
    chosen = [str(e) for e in q.example_ids] if q.example_ids is not None else None
    if sort is None:
        examples = store.examples.list(dataset_id=dataset_id, as_of=version, offset=offset,
                                       limit=q.page_size + 1, example_ids=chosen)
    else:  # every example ranked by its score (a grouped query), then the page cut
        key, descending = sort
        scores = store.feedback.example_scores(q.experiment_ids[0], key)
        ranked = store.examples.list(dataset_id=dataset_id, as_of=version, example_ids=chosen)
        ranked.sort(key=lambda e: (str(e.id) not in scores,  # unscored last, either way
                                   -scores.get(str(e.id), 0.0) if descending
                                   else scores.get(str(e.id), 0.0)))  # ties: dataset order
        examples = ranked[offset:offset + q.page_size + 1]
    page = examples[: q.page_size]
    ids = [str(e.id) for e in page]
    by_example: dict[str, list[Any]] = {i: [] for i in ids}
    if ids:
        for sid in q.experiment_ids:
            for run in store.runs.list(project_ids=[str(sid)], is_root=True,
                                       reference_example_ids=ids,
                                       filter=_filter_text((q.filters or {}).get(sid) or [])):
                by_example[str(run.reference_example_id)].append(run)
    selects = list(dict.fromkeys(q.selects or ["ID"]))
    items = []
    for ex in page:
        item = dump(ex)
        item.pop("split", None)
        item["name"] = None
        item["runs"] = select_items(request, store, by_example[str(ex.id)], selects,
                                    comparative_experiment_id=q.comparative_experiment_id)
        items.append(item)
    more = len(examples) > q.page_size
    return JsonResponse({"items": items,
                         "next_cursor": next_cursor(offset + q.page_size) if more else None})
