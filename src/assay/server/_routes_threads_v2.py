"""The SDKs' generated v2 threads API (``client.threads``), over ``store.threads``.

A thread is the turns (root runs) whose metadata names the same ``session_id``, ``thread_id``
or ``conversation_id`` (``assay.store._threads``); nothing is stored for it, so these routes
only shape what ``ThreadRepo`` computes into LangSmith's answers:

- ``POST /api/v2/threads/query`` (``client.threads.query``, JSON body): a project's threads,
  the most recently active first, paged by an opaque cursor. As LangSmith, the start-time window
  is ``[min_start_time, max_start_time)`` with ``max_start_time`` defaulting to now and
  ``min_start_time`` to one day before now; ``filter`` picks the turns that count (a thread is
  listed when one of its turns in the window matches, summarised over those turns).
- ``GET /api/v2/threads/{thread_id}/traces`` (``client.threads.list_traces``, query string,
  ``selects`` repeated): a thread's turns in time order, with only the properties selected
  (``trace_id`` always); ``trace_filter`` is ``filter`` again, a turn being its trace's root.
- ``GET /api/v2/threads/{thread_id}/stats`` (``client.threads.stats``, query string: the
  project is ``session_id``, ``selects`` required): one thread's figures over all its turns
  (those ``filter`` picks); 404 for a thread with none.
- ``POST /api/v2/threads/stats`` (``client.threads.aggregate_stats``, JSON body): figures over
  every turn of the threads the window and ``filter`` select (the trace-level ones as
  ``get_run_stats`` computes them for those root runs).

Refused by name (422), never ignored: a semantic or natural-language search (``sem_filter``,
``ai_search``: a model this server does not run), ``thread_filter``, ``tree_filter`` and the
thread-level ``trace_filter`` (they select threads by other runs than the turns summarised),
``stride`` time buckets. Token and cost breakdowns by category (``*_DETAILS``)
and the legacy numeric ``OP`` code are not kept: selecting them gives null.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import Field

from .._ids import utcnow
from ..schemas import Run
from ..store import Store
from ..store._threads import ThreadSummary, preview
from ._deps import JsonBody, JsonResponse, StoreDep
from ._errors import ApiError
from ._routes_runs_v2 import cursor_offset, next_cursor
from ._wire import Timestamp, _In, validate

__all__ = ["router"]

router = APIRouter()

_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)  # max_start_time is exclusive, ``runs.stats``' bound inclusive
_USAGE = ("PROMPT_TOKENS", "COMPLETION_TOKENS", "TOTAL_TOKENS", "PROMPT_COST",
          "COMPLETION_COST", "TOTAL_COST")
_DETAILS = ("PROMPT_TOKEN_DETAILS", "COMPLETION_TOKEN_DETAILS", "PROMPT_COST_DETAILS",
            "COMPLETION_COST_DETAILS")
TRACE_SELECTS = ("THREAD_ID", "TRACE_ID", "OP", *_USAGE, "START_TIME", "END_TIME", "LATENCY",
                 "FIRST_TOKEN_TIME", "INPUTS_PREVIEW", "OUTPUTS_PREVIEW", "INPUTS", "OUTPUTS",
                 "ERROR", *_DETAILS, "NAME", "ERROR_PREVIEW", "TURN_NUMBER")
STATS_SELECTS = ("TURNS", "FIRST_START_TIME", "LAST_START_TIME", "LAST_END_TIME", "LATENCY_P50",
                 "LATENCY_P99", *_USAGE, *_DETAILS, "FEEDBACK_STATS")
AGGREGATE_SELECTS = ("THREAD_COUNT", "TRACE_COUNT", "TOTAL_TOKENS", "TOTAL_COST", "ERROR_RATE",
                     "STREAMING_RATE", "LATENCY_P50", "LATENCY_P99", "MEDIAN_TOKENS",
                     "FIRST_TOKEN_P50", "FIRST_TOKEN_P99", "PROMPT_TOKENS", "COMPLETION_TOKENS",
                     "PROMPT_COST", "COMPLETION_COST", *_DETAILS, "THREAD_FEEDBACK_STATS")


class _Window(_In):
    filter: str | None = None
    min_start_time: Timestamp | None = None
    max_start_time: Timestamp | None = None
    trace_filter: str | None = None
    tree_filter: str | None = None
    thread_filter: str | None = None


class ThreadQuery(_Window):
    project_id: uuid.UUID | None = None
    cursor: str | None = None
    page_size: int = Field(default=20, ge=1, le=100)
    sem_filter: str | None = None
    ai_search: str | None = None


class AggregateQuery(_Window):
    project_id: uuid.UUID
    select: list[str] = Field(min_length=1)
    stride: dict[str, Any] | None = None


def _refuse(given: dict[str, Any]) -> None:
    for name, value in given.items():
        if value is not None:
            raise ApiError(422, "unsupported", f"'{name}' is not supported by this server")


def _checked(selects: list[str] | None, known: tuple[str, ...], name: str) -> list[str]:
    chosen = list(dict.fromkeys(selects or ()))
    bad = [s for s in chosen if s not in known]
    if bad:
        raise ApiError(422, "invalid_input",
                       f"unknown {name} {bad}: expected some of {', '.join(known)}")
    return chosen


def _window(low: datetime | None, high: datetime | None) -> tuple[datetime, datetime]:
    """``[min_start_time, max_start_time)``, by default from a day before now until now."""
    now = utcnow()
    start, end = low or now - _DAY, high or now
    if start >= end:
        raise ApiError(422, "invalid_input", f"min_start_time ({start.isoformat()}) must be "
                       f"before max_start_time ({end.isoformat()})")
    return start, end


def _both(*parts: str | None) -> str | None:
    given = [p for p in parts if p]
    return None if not given else given[0] if len(given) == 1 else f"and({', '.join(given)})"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _id(value: uuid.UUID | None) -> str | None:
    return str(value) if value is not None else None


def _thread(t: ThreadSummary) -> dict[str, Any]:
    """A summary as LangSmith's ``Thread`` (``start_time``: the latest turn's, ``trace_id``:
    the latest turn, as the row's deep link), with assay's other figures beside (prompt and
    completion tokens and costs, ``last_end_time``: what assay's remote Client reads)."""
    return {**t.model_dump(mode="json"), "start_time": _iso(t.max_start_time),
            "trace_id": _id(t.last_trace_id), "query_metadata": None}


@router.post("/api/v2/threads/query")
def query_threads(store: StoreDep, body: JsonBody) -> JSONResponse:
    q = validate(ThreadQuery, body)
    _refuse({name: getattr(q, name) for name in ("ai_search", "sem_filter", "thread_filter",
                                                 "trace_filter", "tree_filter")})
    if q.project_id is None:
        raise ApiError(422, "invalid_input", "project_id is required: the tracing project")
    start, end = _window(q.min_start_time, q.max_start_time)
    offset = cursor_offset(q.cursor)
    window: dict[str, Any] = {"filter": q.filter, "min_start_time": start, "max_start_time": end}
    found = store.threads.list(q.project_id, **window, offset=offset,
                               limit=q.page_size + 1)  # one more: is there a next page?
    more = len(found) > q.page_size
    return JsonResponse({"items": [_thread(t) for t in found[:q.page_size]],
                         "next_cursor": next_cursor(offset + q.page_size) if more else None})


def _trace(run: Run, chosen: list[str], extra: dict[str, Any]) -> dict[str, Any]:
    usage = extra["usage"].get(str(run.id), {})
    first = extra["first_tokens"].get(str(run.id), {}).get("first_token_time")
    values: dict[str, Any] = {
        "THREAD_ID": lambda: extra["thread_id"], "TRACE_ID": lambda: str(run.trace_id),
        "NAME": lambda: run.name, "START_TIME": lambda: _iso(run.start_time),
        "END_TIME": lambda: _iso(run.end_time),
        "LATENCY": lambda: run.latency.total_seconds() if run.latency is not None else None,
        "INPUTS": lambda: run.inputs, "OUTPUTS": lambda: run.outputs,
        "INPUTS_PREVIEW": lambda: preview(run.inputs),
        "OUTPUTS_PREVIEW": lambda: preview(run.outputs),
        "ERROR": lambda: run.error, "ERROR_PREVIEW": lambda: preview(run.error),
        "FIRST_TOKEN_TIME": lambda: _iso(first or run.first_token_time),
        "TURN_NUMBER": lambda: extra["turns"][str(run.id)],
        **{name: (lambda key: lambda: usage.get(key))(name.lower()) for name in _USAGE},
    }
    out: dict[str, Any] = {"trace_id": str(run.trace_id)}
    out.update({name.lower(): values[name]() if name in values else None for name in chosen})
    return out


def _turn_numbers(store: Store, project_id: uuid.UUID, thread_id: str, page: list[Run],
                  offset: int, filtered: bool) -> dict[str, int]:
    """Each turn's 1-based place in the whole thread (by start time, then id); the page's
    offset gives it unless a filter left turns out."""
    if not filtered:
        return {str(r.id): offset + i + 1 for i, r in enumerate(page)}
    every = store.threads.traces(project_id, thread_id)
    return {str(r.id): i + 1 for i, r in enumerate(every)}


@router.get("/api/v2/threads/{thread_id}/traces")
def thread_traces(store: StoreDep, thread_id: str, project_id: uuid.UUID,
                  cursor: str | None = None, filter: str | None = None,
                  page_size: Annotated[int, Query(ge=1, le=100)] = 20,
                  selects: Annotated[list[str] | None, Query()] = None,
                  trace_filter: str | None = None,
                  tree_filter: str | None = None) -> JSONResponse:
    _refuse({"tree_filter": tree_filter})
    chosen = _checked(selects, TRACE_SELECTS, "selects")
    offset = cursor_offset(cursor)
    where = _both(filter, trace_filter)  # a turn is the root of its trace
    found = store.threads.traces(project_id, thread_id, filter=where, offset=offset,
                                 limit=page_size + 1)
    page = found[:page_size]
    ids = [str(r.id) for r in page]
    extra: dict[str, Any] = {
        "thread_id": thread_id,
        "usage": (store.threads.usage_of(ids)
                  if ids and any(s in _USAGE for s in chosen) else {}),
        "first_tokens": (store.runs.subtree_usage(ids)
                         if ids and "FIRST_TOKEN_TIME" in chosen else {}),
        "turns": (_turn_numbers(store, project_id, thread_id, page, offset, where is not None)
                  if "TURN_NUMBER" in chosen else {})}
    more = len(found) > page_size
    return JsonResponse({"items": [_trace(r, chosen, extra) for r in page],
                         "next_cursor": next_cursor(offset + page_size) if more else None})


def _one_thread(store: Store, project_id: uuid.UUID, thread_id: str,
                filter: str | None) -> ThreadSummary | None:
    """The thread's summary over its turns ``filter`` picks; 404 naming an unknown thread."""
    if filter is not None:
        mine = f"eq(thread_id, {json.dumps(thread_id)})"
        found = store.threads.list(project_id, filter=_both(mine, filter), limit=1)
        if found:
            return found[0]
        if store.threads.count(project_id, filter=mine):
            return None  # the thread is there; none of its turns matches
    whole = store.threads.stats(project_id, thread_id)
    if whole is None:
        raise ApiError(404, "not_found",
                       f"thread {thread_id!r} not found in project {project_id}")
    return whole


@router.get("/api/v2/threads/{thread_id}/stats")
def thread_stats(store: StoreDep, thread_id: str,
                 selects: Annotated[list[str] | None, Query()] = None,
                 session_id: uuid.UUID | None = None, project_id: uuid.UUID | None = None,
                 filter: str | None = None) -> JSONResponse:
    """One thread's figures (``session_id`` names the project; ``project_id`` is taken too)."""
    chosen = _checked(selects, STATS_SELECTS, "selects")
    if not chosen:
        raise ApiError(422, "invalid_input",
                       f"selects is required: some of {', '.join(STATS_SELECTS)}")
    pid = session_id or project_id
    if pid is None:
        raise ApiError(422, "invalid_input", "session_id is required: the tracing project")
    store.settle()
    store.projects.read(project_id=pid, settle=False)  # 404 naming an unknown project
    t = _one_thread(store, pid, thread_id, filter)
    values: dict[str, Any] = {"TURNS": 0, "PROMPT_TOKENS": 0, "COMPLETION_TOKENS": 0,
                              "TOTAL_TOKENS": 0}  # a filter matching no turn
    if t is not None:
        values = {"TURNS": t.count, "FIRST_START_TIME": _iso(t.min_start_time),
                  "LAST_START_TIME": _iso(t.max_start_time),
                  "LAST_END_TIME": _iso(t.last_end_time), "LATENCY_P50": t.latency_p50,
                  "LATENCY_P99": t.latency_p99, "FEEDBACK_STATS": t.feedback_stats,
                  **{name: getattr(t, name.lower()) for name in _USAGE}}
    names = {"LATENCY_P50": "latency_p50_seconds", "LATENCY_P99": "latency_p99_seconds"}
    return JsonResponse({names.get(s, s.lower()): values.get(s) for s in chosen})


@router.post("/api/v2/threads/stats")
def aggregate_thread_stats(store: StoreDep, body: JsonBody) -> JSONResponse:
    """Figures over the turns of the selected threads, as ``get_run_stats`` gives them for
    those root runs (tokens and cost: their traces' llm calls)."""
    q = validate(AggregateQuery, body)
    _refuse({"thread_filter": q.thread_filter, "trace_filter": q.trace_filter,
             "tree_filter": q.tree_filter})
    if q.stride is not None:
        raise ApiError(422, "unsupported", "'stride' is not served by this server: time "
                       "buckets of thread statistics are not computed; omit it for one aggregate")
    chosen = _checked(q.select, AGGREGATE_SELECTS, "select")
    start, end = _window(q.min_start_time, q.max_start_time)
    store.settle()
    store.projects.read(project_id=q.project_id, settle=False)
    stats = store.runs.stats(project_ids=[str(q.project_id)], is_root=True, start_time=start,
                             start_before=end - _TICK,
                             filter=_both("neq(thread_id, null)", q.filter))
    median = stats["median_tokens"]
    values: dict[str, Any] = {
        "TRACE_COUNT": stats["run_count"], "ERROR_RATE": stats["error_rate"],
        "STREAMING_RATE": stats["streaming_rate"], "LATENCY_P50": stats["latency_p50"],
        "LATENCY_P99": stats["latency_p99"], "FIRST_TOKEN_P50": stats["first_token_p50"],
        "FIRST_TOKEN_P99": stats["first_token_p99"],
        "MEDIAN_TOKENS": round(median) if median is not None else None,
        "THREAD_FEEDBACK_STATS": stats["feedback_stats"] or None,
        **{name: stats[name.lower()] for name in _USAGE}}
    if "THREAD_COUNT" in chosen:
        values["THREAD_COUNT"] = store.threads.count(q.project_id, filter=q.filter,
                                               min_start_time=start, max_start_time=end)
    names = {"LATENCY_P50": "latency_p50_seconds", "LATENCY_P99": "latency_p99_seconds",
             "FIRST_TOKEN_P50": "first_token_p50_seconds",
             "FIRST_TOKEN_P99": "first_token_p99_seconds"}
    return JsonResponse({names.get(s, s.lower()): values.get(s) for s in chosen})
