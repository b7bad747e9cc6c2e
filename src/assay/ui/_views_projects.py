"""Pages for any project (tracing projects and experiments alike), human feedback and queues.

A team's day is spent in production traces as much as in experiments: the projects page lists
every project of the workspace with its statistics; a project page lists its traces newest
first (keyset pages, ``store/_browse.py``), filtered by LangSmith's filter language, run type,
errors, time window, feedback and text, with charts over time. Feedback a person gives on a run
page is stored like any other (source ``app``, the person's key name), so statistics include it
at once; annotation queues walk a person through runs one by one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..errors import InvalidInputError
from ..schemas import RUN_TYPES
from ..store._browse import Page, page_runs
from ..store._search import SLICE_RUNS, SearchPage, search_runs
from ..store._series import series
from ._format import num, pct, secs, usd
from ._svg import seconds_tick, series_svg

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["WINDOWS", "add_feedback", "correct_feedback", "event_offset", "feedback_filter",
           "chat_of", "number_field", "review", "project_page", "projects_page", "queue_page",
           "queues_page", "trends"]

TRACES_PER_PAGE = 50
WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7),
           "30d": timedelta(days=30), "all": None}


def projects_page(store: Store) -> dict[str, Any]:
    projects = store.projects.list(include_stats=True)
    projects.sort(key=lambda p: (getattr(p, "last_run_start_time", None) or p.start_time),
                  reverse=True)
    return {"projects": projects}


def feedback_filter(key: str | None, low: float | None, high: float | None) -> str | None:
    """Runs with feedback ``key`` scored in ``[low, high]``, as LangSmith's filter language."""
    if not key:
        return None
    terms = [f"eq(feedback_key, {json.dumps(key)})"]
    if low is not None:
        terms.append(f"gte(feedback_score, {float(low)!r})")
    if high is not None:
        terms.append(f"lte(feedback_score, {float(high)!r})")
    return f"and({', '.join(terms)})"


def _and(*parts: str | None) -> str | None:
    given = [p for p in parts if p]
    if not given:
        return None
    return given[0] if len(given) == 1 else f"and({', '.join(given)})"


def _window(window: str) -> tuple[datetime | None, timedelta | None]:
    if window not in WINDOWS:
        raise InvalidInputError(f"window {window!r}: one of {', '.join(WINDOWS)}")
    span = WINDOWS[window]
    return (datetime.now(UTC) - span if span is not None else None), span


def _charts(store: Store, project: Any, since: datetime | None) -> list[Any]:
    now = datetime.now(UTC)
    start = since or project.start_time or now - timedelta(days=1)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    span = max(now - start, timedelta(minutes=1))
    bucket = 3600 if span <= timedelta(days=3) else 86400
    if span <= timedelta(hours=3):
        bucket = 300
    start = datetime.fromtimestamp(start.timestamp() // bucket * bucket, tz=UTC)
    buckets = series(store, str(project.id), start=start, end=now + timedelta(seconds=1),
                     bucket_seconds=bucket)
    fmt = "%H:%M" if bucket < 86400 else "%m-%d"
    labels = [b.start.strftime(fmt) for b in buckets]
    per = "hour" if bucket == 3600 else ("day" if bucket == 86400 else "5 min")
    return [
        series_svg(labels, {"runs": [b.runs for b in buckets]}, title=f"traces per {per}",
                   bars=True, fmt=lambda v: f"{v:,.0f}"),
        series_svg(labels, {"error rate": [b.error_rate for b in buckets]},
                   title="error rate", fmt=lambda v: f"{v:.0%}"),
        series_svg(labels, {"p50": [b.latency(0.5) for b in buckets],
                            "p99": [b.latency(0.99) for b in buckets]},
                   title="latency (s)", fmt=seconds_tick),
        series_svg(labels, {"tokens": [b.tokens for b in buckets]}, title=f"tokens per {per}",
                   bars=True, fmt=lambda v: f"{v:,.0f}"),
        series_svg(labels, {"cost": [b.cost for b in buckets]}, title=f"cost per {per} (USD)",
                   bars=True, fmt=lambda v: f"${v:.4f}"),
    ]


def _check_filters(run_type: str | None, feedback_key: str | None, score_min: float | None,
                   score_max: float | None) -> None:
    if run_type and run_type not in RUN_TYPES:
        raise InvalidInputError(f"run_type {run_type!r}: one of {', '.join(RUN_TYPES)}")
    if not feedback_key and (score_min is not None or score_max is not None):
        raise InvalidInputError("score ≥ / ≤ need a feedback key to compare")


def project_page(store: Store, project_id: str, *, where: str | None = None,
                 run_type: str | None = None, errors: bool = False, window: str = "all",
                 feedback_key: str | None = None, score_min: float | None = None,
                 score_max: float | None = None, q: str | None = None,
                 cursor: str | None = None, slice_runs: int = SLICE_RUNS) -> dict[str, Any]:
    """``q`` searches ``slice_runs`` runs of the project per request (``store/_search.py``).
    A filter that cannot be applied is named above the (empty) table; the page, its filter
    box included, stays, so the filter can be mended in place."""
    project = store.projects.read(project_id=project_id, include_stats=True)
    where = (where or "").strip() or None
    query = (q or "").strip() or None
    searched: SearchPage | None = None
    page, since, filter_error = Page([], None), None, None
    try:
        _check_filters(run_type, feedback_key, score_min, score_max)
        since, _ = _window(window)
        combined = _and(where, feedback_filter(feedback_key, score_min, score_max))
        filters: dict[str, Any] = {"is_root": None if run_type else True,
                                   "run_type": run_type or None,
                                   "error": True if errors else None,
                                   "start_time": since, "filter": combined}
        if query:  # bounded: a slice of the project per request (``store/_search.py``)
            searched = search_runs(store, query, project_id=str(project.id),
                                   cursor=cursor or None, limit=TRACES_PER_PAGE,
                                   slice_runs=slice_runs, **filters)
            page = Page(searched.runs, searched.next_cursor)
        else:
            page = page_runs(store, project_ids=[str(project.id)], cursor=cursor or None,
                             limit=TRACES_PER_PAGE, **filters)
    except InvalidInputError as exc:
        filter_error = str(exc)
    params = {"where": where, "run_type": run_type, "errors": "true" if errors else None,
              "window": window if window != "all" else None, "feedback_key": feedback_key,
              "score_min": score_min, "score_max": score_max, "q": query}
    keep = {k: v for k, v in params.items() if v not in (None, "")}
    next_url = ("?" + urlencode({**keep, "cursor": page.next_cursor})
                if page.next_cursor else None)
    first_url = ("?" + urlencode(keep)) if cursor else None
    feedback = (store.feedback.list(run_ids=[r.id for r in page.runs], pairwise=False)
                if page.runs else [])
    usage = store.runs.subtree_usage([r.id for r in page.runs]) if page.runs else {}
    by_run: dict[Any, list[Any]] = {}
    for fb in feedback:
        by_run.setdefault(fb.run_id, []).append(fb)
    return {"project": project, "runs": page.runs, "feedback": by_run, "next_url": next_url,
            "usage": usage, "searched": searched, "slice_runs": slice_runs,
            "first_url": first_url, "where": where or "", "run_type": run_type or "",
            "errors": errors, "window": window, "windows": list(WINDOWS), "run_types": RUN_TYPES,
            "feedback_key": feedback_key or "", "score_min": score_min, "score_max": score_max,
            "q": query or "", "charts": _charts(store, project, since),
            "feedback_keys": sorted((getattr(project, "feedback_stats", None) or {}).keys()),
            "filter_error": filter_error, "status": 400 if filter_error else 200,
            "filtered": bool(where or run_type or errors or window != "all" or feedback_key
                             or query or filter_error)}


def trends(experiments: list[Any]) -> list[Any]:
    """Each feedback key, latency and cost across a dataset's experiments in time order, each
    point a link to its experiment."""
    ordered = sorted(experiments, key=lambda p: p.start_time)
    if not ordered:
        return []
    labels = [p.name for p in ordered]
    links = [f"/ui/experiments/{p.id}" for p in ordered]
    keys = sorted({k for p in ordered for k, st in (p.feedback_stats or {}).items()
                   if getattr(st, "avg", None) is not None})

    def avg(p: Any, key: str) -> float | None:
        stat = (p.feedback_stats or {}).get(key)
        return getattr(stat, "avg", None)

    charts = [series_svg(labels, {k: [avg(p, k) for p in ordered]}, title=f"{k} (average)",
                         links=links) for k in keys]
    charts.append(series_svg(labels, {"p50": [p.latency_p50 for p in ordered],
                                      "p99": [p.latency_p99 for p in ordered]},
                             title="latency (s)", fmt=seconds_tick, links=links))
    charts.append(series_svg(labels, {"cost": [p.total_cost for p in ordered]},
                             title="cost (USD)", fmt=lambda v: f"${v:.4f}", links=links))
    return charts


def project_cards(p: Any) -> list[tuple[str, str]]:
    return [("traces", num(p.run_count)), ("error rate", pct(p.error_rate)),
            ("latency p50", secs(p.latency_p50)), ("latency p99", secs(p.latency_p99)),
            ("tokens", num(p.total_tokens)), ("cost", usd(p.total_cost))]


def queues_page(store: Store) -> dict[str, Any]:
    queues = store.queues.list()
    return {"queues": [(q, store.queues.size(q.id, status=None),
                        store.queues.size(q.id)) for q in queues]}


def queue_page(store: Store, queue_id: str) -> dict[str, Any]:
    """The next run of the queue to review, with the queue's rubric."""
    queue = store.queues.read(queue_id)
    run = store.queues.next_run(queue.id)
    full = store.runs.read(run.id, load_child_runs=True) if run is not None else None
    return {"queue": queue, "run": full, "left": store.queues.size(queue.id),
            "total": store.queues.size(queue.id, status=None),
            "rubric": _rubric(store, queue),
            "feedback": store.feedback.list(run_ids=[full.id]) if full is not None else []}


def _g(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _rubric(store: Store, queue: Any) -> list[dict[str, Any]]:
    """The queue's feedback keys with their options: the item's own ``value_descriptions``,
    else the key's categorical feedback config (each option stores its category's value as the
    score and its label as the value); scores described by ``score_descriptions``, or the
    bounds of a continuous config."""
    items = [i for i in getattr(queue, "rubric_items", None) or [] if i.get("feedback_key")]
    configs = {c.feedback_key: c.feedback_config for c in store.feedback_configs.list(
        feedback_keys=[i["feedback_key"] for i in items])} if items else {}
    out = []
    for item in items:
        key = item["feedback_key"]
        config = configs.get(key) or {}
        values = item.get("value_descriptions") or {}
        options = [{"label": k, "help": v, "score": None} for k, v in values.items()]
        if not options and config.get("type") == "categorical":
            options = [{"label": c.get("label") or _g(c["value"]), "help": "",
                        "score": c["value"]} for c in config.get("categories") or []]
        scores = [{"score": k, "help": v}
                  for k, v in (item.get("score_descriptions") or {}).items()]
        if not scores and config.get("type") == "continuous" and (
                config.get("min") is not None or config.get("max") is not None):
            scores = [{"score": f"{_g(config.get('min'))}..{_g(config.get('max'))}",
                       "help": "the key's range"}]
        out.append({"key": key, "description": item.get("description") or "",
                    "options": options, "scores": scores})
    return out


def chat_of(run: Any) -> Any:
    """A run's conversation (for any run whose inputs hold messages), or None."""
    from .._chat import chat_turns

    return chat_turns(run.inputs, run.outputs)


def number_field(text: str, what: str) -> float | None:
    """A form's number field: empty is None; anything else must be a finite number."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InvalidInputError(f"{what} must be a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidInputError(f"{what} must be a finite number, got {text!r}")
    return value


def event_offset(run: Any, event: Any) -> float | None:
    """Seconds from a run's start to one of its events (``new_token`` and the like)."""
    raw = event.get("time") if isinstance(event, dict) else None
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    start = run.start_time
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return (at - start).total_seconds()


def add_feedback(store: Store, run_id: str, *, key: str, score: float | None, value: str,
                 comment: str, user: str) -> Any:
    """A person's score or label on a run (source ``app``, signed with their key's name)."""
    key = key.strip()
    if not key:
        raise InvalidInputError("feedback needs a key")
    value_or_none = value.strip() or None
    if score is None and value_or_none is None:
        raise InvalidInputError(f"feedback {key!r} needs a score or a value")
    run = store.runs.read(run_id)
    return store.feedback.create(
        run_id=str(run.id), key=key, score=score, value=value_or_none,
        comment=comment.strip() or None,
        feedback_source={"type": "app", "metadata": {"user": user}})


def correct_feedback(store: Store, feedback_id: str, *, score: float | None, value: str,
                     comment: str, user: str) -> Any:
    """Correct a feedback in place (an empty field clears it); statistics follow at once."""
    value_or_none = value.strip() or None
    if score is None and value_or_none is None:
        raise InvalidInputError("a corrected feedback keeps a score or a value")
    note = comment.strip() or None
    return store.feedback.update(feedback_id, score=score, value=value_or_none,
                                 comment=note, correction={"by": user})


def review(store: Store, queue_id: str, run_id: str, fields: dict[str, str], *,
           user: str) -> int:
    """A reviewer's answers to the queue's rubric on one run, then the run is done; returns
    how many feedback were stored. Fields: ``score:<key>``, ``value:<key>``,
    ``comment:<key>``; ``skip`` leaves the run undone and moves it to the back."""
    queue = store.queues.read(queue_id)
    run = store.runs.read(run_id)
    if fields.get("skip"):
        store.queues.update_run(queue.id, run.id, added_at=datetime.now(UTC))
        return 0
    stored = 0
    rubric = _rubric(store, queue)
    keys = [item["key"] for item in rubric]
    extra = fields.get("key:extra", "").strip()
    if extra:
        keys.append(extra)
    # a category picked stores its value as the score, its label as the value (LangSmith's)
    picked = {(item["key"], o["label"]): o["score"] for item in rubric for o in item["options"]
              if o["score"] is not None}
    for key in keys:
        slot = "extra" if key == extra and extra else key
        score = number_field(fields.get(f"score:{slot}", ""), f"score of {key!r}")
        value = fields.get(f"value:{slot}", "")
        if score is None and (key, value) in picked:
            score = picked[key, value]
            value = "" if value == _g(score) else value  # a category without a label
        if score is None and not value.strip():
            continue
        add_feedback(store, str(run.id), key=key, score=score, value=value,
                     comment=fields.get(f"comment:{slot}", ""), user=user)
        stored += 1
    store.queues.mark_done(queue.id, run.id)
    return stored
