"""``POST /api/v2/runs/query``: the run query of the SDKs' generated clients
(``client.runs.query(...)`` in Python, which ``list_runs`` gives way to).

Differences from ``/runs/query`` that a client sees: a start-time window (by default the last
day, or from the first experiment on a dataset when ``reference_dataset_id`` is given), the
properties named in ``selects`` (only ``id`` by default) with LangSmith's names (``STATUS`` is
upper-case, ``LATENCY_SECONDS`` a number, ``METADATA`` the run's metadata), an opaque cursor,
and ``include_subtree_usage``, which gives a chain the tokens and cost of the llm calls under
it. ``GET /api/v2/runs/{id}`` (``client.runs.retrieve``) gives one run's selects. A semantic or
natural-language search (``sem_filter``, ``ai_search``) is refused: it needs
a model this server does not run.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from .._ids import utcnow
from ..schemas import Run
from ..store import Store
from ._attachments import attachment_links
from ._deps import JsonBody, JsonResponse, StoreDep
from ._errors import ApiError
from ._wire import RunQueryV2, RunSelect, validate

__all__ = ["checked_selects", "cursor_offset", "next_cursor", "router", "select_items"]

router = APIRouter()

_USAGE = ("PROMPT_TOKENS", "COMPLETION_TOKENS", "TOTAL_TOKENS", "PROMPT_COST", "COMPLETION_COST",
          "TOTAL_COST", "FIRST_TOKEN_TIME")
_PREVIEW = 200  # characters of an error, inputs or outputs preview
_THREAD_KEYS = ("thread_id", "session_id", "conversation_id")  # LangSmith's thread metadata


def cursor_offset(text: str | None) -> int:
    if text is None:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(text.encode()))["offset"]
        if isinstance(offset, int) and offset >= 0:
            return offset
    except (ValueError, TypeError, KeyError):
        pass
    raise ApiError(422, "invalid_input", f"cursor {text[:60]!r} is not one this server issued")


def next_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def _sessions(store: Store, q: RunQueryV2) -> tuple[list[str], datetime | None]:
    """The projects to search, and the earliest start of their runs' window (dataset case)."""
    if (q.project_ids is None) == (q.reference_dataset_id is None):
        raise ApiError(422, "invalid_input",
                       "give exactly one of project_ids and reference_dataset_id")
    if q.project_ids is not None:
        if not q.project_ids:
            raise ApiError(422, "invalid_input", "project_ids must not be empty")
        return [str(store.projects.read(project_id=p, settle=False).id)
                for p in q.project_ids], None
    store.datasets.read(dataset_id=q.reference_dataset_id)  # 404 for an unknown dataset
    found = store.projects.list(reference_dataset_id=q.reference_dataset_id)
    return [str(p.id) for p in found], min((p.start_time for p in found), default=None)


def _preview(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _parents(run: Run) -> list[str]:
    """Ancestor ids from the trace's root down to the parent, read off the dotted order."""
    if not run.dotted_order:
        return [str(run.parent_run_id)] if run.parent_run_id else []
    return [segment[-36:] for segment in run.dotted_order.split(".")[:-1]]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _thread(run: Run) -> str | None:
    meta = run.metadata
    return next((str(meta[k]) for k in _THREAD_KEYS if meta.get(k)), None)


def _id(value: Any) -> str | None:
    return str(value) if value is not None else None


# select -> its value from (run, what the page looked up); only the selected ones are computed
_FIELDS: dict[str, Any] = {
    "ID": lambda r, x: str(r.id), "NAME": lambda r, x: r.name,
    "RUN_TYPE": lambda r, x: r.run_type,
    "STATUS": lambda r, x: (r.status or "pending").upper(),
    "START_TIME": lambda r, x: _iso(r.start_time), "END_TIME": lambda r, x: _iso(r.end_time),
    "LATENCY_SECONDS": lambda r, x: r.latency.total_seconds() if r.latency is not None else None,
    "FIRST_TOKEN_TIME": lambda r, x: _iso(x["usage"].get("first_token_time",
                                                         r.first_token_time)),
    "ERROR": lambda r, x: r.error, "ERROR_PREVIEW": lambda r, x: _preview(r.error),
    "EXTRA": lambda r, x: r.extra, "METADATA": lambda r, x: r.metadata,
    "EVENTS": lambda r, x: r.events, "INPUTS": lambda r, x: r.inputs,
    "INPUTS_PREVIEW": lambda r, x: _preview(r.inputs), "OUTPUTS": lambda r, x: r.outputs,
    "OUTPUTS_PREVIEW": lambda r, x: _preview(r.outputs), "MANIFEST": lambda r, x: r.serialized,
    "PARENT_RUN_IDS": lambda r, x: _parents(r), "PROJECT_ID": lambda r, x: _id(r.session_id),
    "TRACE_ID": lambda r, x: str(r.trace_id), "THREAD_ID": lambda r, x: _thread(r),
    "DOTTED_ORDER": lambda r, x: r.dotted_order, "IS_ROOT": lambda r, x: r.parent_run_id is None,
    "REFERENCE_EXAMPLE_ID": lambda r, x: _id(r.reference_example_id),
    "REFERENCE_DATASET_ID": lambda r, x: x["dataset_id"],
    "TAGS": lambda r, x: r.tags or [], "ATTACHMENTS": lambda r, x: x["attachments"],
    "IS_IN_DATASET": lambda r, x: r.reference_example_id is not None,
    "FEEDBACK_STATS": lambda r, x: x["feedback_stats"], "SHARE_URL": lambda r, x: x["share_url"],
    **{name: (lambda field: lambda r, x: x["usage"].get(field, getattr(r, field)))(name.lower())
       for name in _USAGE[:-1]},
}


def _item(run: Run, selects: list[str], extra: dict[str, Any]) -> dict[str, Any]:
    """The selected properties of ``run``, by their lower-case names (null where this server
    keeps nothing of the kind: token details, price model, ...)."""
    return {name.lower(): (_FIELDS[name](run, extra) if name in _FIELDS else None)
            for name in selects}


def select_items(request: Request, store: Store, page: list[Run], selects: list[str], *,
                 subtree_usage: bool = False,
                 comparative_experiment_id: Any = None) -> list[dict[str, Any]]:
    """The ``selects`` of each run of ``page`` (what the v2 run, trace and experiment-run
    queries return), looking up only what the selects need (``ATTACHMENTS``: each file's
    download URL by name, as v1's ``s3_urls`` gives them)."""
    ids = [str(r.id) for r in page]
    files = store.attachments.of_runs(ids) if "ATTACHMENTS" in selects and ids else {}
    usage = (store.runs.subtree_usage([str(r.id) for r in page if r.run_type != "llm"])
             if subtree_usage and any(s in _USAGE for s in selects) else {})
    stats = (store.runs.feedback_stats(ids, comparative_experiment_id=comparative_experiment_id)
             if "FEEDBACK_STATS" in selects and ids else {})
    datasets: dict[str, str | None] = {}
    if "REFERENCE_DATASET_ID" in selects:
        examples = {str(r.reference_example_id) for r in page if r.reference_example_id}
        if examples:
            datasets = {str(e.id): str(e.dataset_id)
                        for e in store.examples.list(example_ids=sorted(examples))}
    shared = (store.shares.tokens_of_traces({str(r.trace_id) for r in page})
              if "SHARE_URL" in selects and ids else {})
    base = str(request.base_url).rstrip("/")
    return [_item(r, selects, {
        "usage": usage.get(str(r.id), {}), "feedback_stats": stats.get(str(r.id), {}),
        "dataset_id": datasets.get(str(r.reference_example_id)),
        "share_url": (f"{base}/public/{shared[str(r.trace_id)]}/r"
                      if str(r.trace_id) in shared else None),
        "attachments": attachment_links(request, store, files.get(str(r.id)))}) for r in page]


@router.post("/api/v2/runs/query")
def query_runs_v2(request: Request, store: StoreDep, body: JsonBody) -> JSONResponse:
    q = validate(RunQueryV2, body)
    for name in ("ai_search", "sem_filter", "min_feedback_modified_at",
                 "max_feedback_modified_at"):
        if getattr(q, name) is not None:
            raise ApiError(422, "unsupported", f"'{name}' is not supported by this server")
    store.settle()
    sessions, first = _sessions(store, q)
    end = q.max_start_time or utcnow()
    start = q.min_start_time or first or end - timedelta(days=1)
    offset = cursor_offset(q.cursor)
    found = store.runs.list(
        project_ids=sessions, run_type=q.run_type, trace_id=q.trace_id, is_root=q.is_root,
        error=q.has_error, reference_example_ids=q.reference_examples, run_ids=q.ids,
        start_time=start, start_before=end, filter=q.filter, trace_filter=q.trace_filter,
        tree_filter=q.tree_filter, order="desc", offset=offset,
        limit=q.page_size + 1) if sessions else []
    page = found[: q.page_size]
    items = select_items(request, store, page, list(dict.fromkeys(q.selects or ["ID"])),
                         subtree_usage=q.include_subtree_usage)
    more = len(found) > q.page_size
    return JsonResponse({"items": items,
                         "next_cursor": next_cursor(offset + q.page_size) if more else None})


_SELECTS = get_args(RunSelect)


def checked_selects(selects: Any) -> list[str]:
    """The ``selects`` asked for, once each (only ``ID`` when none); 422 naming unknown ones."""
    if selects is not None and not isinstance(selects, list):
        raise ApiError(422, "invalid_input", "selects must be a list of run properties")
    chosen = list(dict.fromkeys(selects or ["ID"]))
    bad = [s for s in chosen if s not in _SELECTS]
    if bad:
        raise ApiError(422, "invalid_input",
                       f"unknown selects {bad}: expected some of {', '.join(_SELECTS)}")
    return chosen


@router.get("/api/v2/runs/{run_id}")
def retrieve_run_v2(request: Request, store: StoreDep, run_id: uuid.UUID, project_id: uuid.UUID,
                    selects: Annotated[list[str] | None, Query()] = None,
                    start_time: str | None = None) -> JSONResponse:
    """One run of a project (``client.runs.retrieve``, which replaces ``read_run``): the
    ``selects`` named (only ``id`` by default), as ``/api/v2/runs/query`` gives them.
    ``start_time`` narrows LangSmith's scan; here the id finds the run anyway."""
    del start_time
    chosen = checked_selects(selects)
    run = store.runs.read(run_id)
    if run.session_id != project_id:
        raise ApiError(404, "not_found", f"run {run_id} not found in project {project_id}")
    return JsonResponse(select_items(request, store, [run], chosen)[0])


@router.get("/api/v2/runs/{run_id}/url")
def run_url_v2(request: Request, store: StoreDep, run_id: uuid.UUID, project_id: uuid.UUID,
               trace_id: uuid.UUID, start_time: str | None = None) -> JSONResponse:
    """The run's page in this server's web UI (``client.runs.get_url``, which replaces
    ``get_run_url``): ``{"url": ...}``, the run checked to be in that project and trace."""
    del start_time
    run = store.runs.read(run_id)
    if run.session_id != project_id or run.trace_id != trace_id:
        raise ApiError(404, "not_found",
                       f"run {run_id} not found in project {project_id}, trace {trace_id}")
    return JsonResponse({"url": f"{str(request.base_url).rstrip('/')}/ui/runs/{run_id}"})
