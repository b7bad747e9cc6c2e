"""New runs made from OTLP spans, from their posts straight to column values, one insert.

``RunRepo._upsert`` takes any wire run: it validates it (``_clean``), merges it with what is
stored, fills the derived columns (``_finish``) and binds each row through a dict per step,
about 80 us a run. The posts ``store/_spans.py`` inserts are new runs the server built itself
from decoded spans (ids canonical, times epoch microseconds, fields of the right types), so
here each goes to its row in one step, with the values ``_clean`` and ``_finish`` would give it
(tokens and costs by the same ``derive_usage``; a test compares every column of both paths),
and the batch's statistics are added as ``RunDeltas`` adds them. The rows go to the database in
one statement, the fold's (``_fold_rows._insert``): SQLite's executemany, PostgreSQL's ``COPY``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .._time import to_micros
from .._usage import derive_usage
from ._aggregates import RunDeltas
from ._fold_rows import _FULL_ORDER, _escaped, _insert, _json_text, apply_new_runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["COLUMNS", "insert_span_rows", "span_row", "span_values"]

COLUMNS = _FULL_ORDER  # every column of runs, in the order the fold's inserts bind them
_VALUES = itemgetter(*COLUMNS)


def span_values(post: Mapping[str, Any]) -> dict[str, Any]:
    """The column values of a new run that do not depend on where it is placed in its trace
    or which project it goes to (``RunRepo``'s ``_clean`` + ``_finish``), its JSON columns as
    the text stored. The server computes them on the request's own thread, before it queues
    for the write lock (``SpanRun.values``): ~7 us a span that no longer holds up the writer,
    whose SQLite work (without the GIL) then overlaps the next requests' Python."""
    start, end, error = post["start_time"], post.get("end_time"), post.get("error")
    if error is not None:
        error = _escaped(error if error.__class__ is str else str(error))
    usage = derive_usage(post)  # its own cheap test first: a chain span pays little
    ft = usage["first_token_time"]
    ft_us = to_micros(ft) if ft is not None else None
    return {
        "id": post["id"], "trace_id": post["trace_id"], "name": _escaped(post.get("name") or ""),
        "run_type": post["run_type"],
        "status": "error" if error else ("success" if end is not None else "pending"),
        "inputs": _json_text(post.get("inputs")), "outputs": _json_text(post.get("outputs")),
        "error": error, "extra": _json_text(post.get("extra")),
        "events": _json_text(post.get("events")), "tags": _json_text(post.get("tags")),
        "serialized": "null", "reference_example_id": None,
        "start_time": start, "end_time": end, "first_token_time": ft_us,
        "latency_us": None if end is None else end - start,
        "first_token_us": ft_us - start if ft_us is not None and start else None,
        "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
        "total_tokens": usage["total_tokens"], "prompt_cost": usage["prompt_cost"],
        "completion_cost": usage["completion_cost"], "total_cost": usage["total_cost"],
    }


def span_row(post: Mapping[str, Any], tenant: str, session_id: str,
             values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every column value of a new run from its (placed) post: ``values`` (``span_values``,
    computed now if not given) with its workspace, project and place in its trace."""
    row = dict(span_values(post) if values is None else values)
    parent = post.get("parent_run_id")
    row["tenant_id"] = tenant
    row["session_id"] = session_id
    row["parent_run_id"] = parent
    row["dotted_order"] = post["dotted_order"]
    row["is_root"] = parent is None
    return row


def insert_span_rows(store: Store, conn: Connection, posts: Sequence[Mapping[str, Any]],
                     default_project: str,
                     values: Sequence[Mapping[str, Any] | None] | None = None) -> int:
    """Insert ``posts`` (new runs, none stored, no id twice; placed: ``parent_run_id`` and
    ``dotted_order`` set) and add them to the statistics; return how many. ``values``: each
    post's ``span_values`` where already computed (None: computed here)."""
    if not posts:
        return 0
    tenant = store.tenant_id
    repo = store.runs
    cache: dict[Any, str] = {}
    sessions: dict[Any, str] = {}
    deltas = RunDeltas()
    posted: dict[str, list[str]] = {}
    rows: list[tuple[Any, ...]] = []
    for i, post in enumerate(posts):
        name = post.get("session_name")
        sid = sessions.get(name)
        if sid is None:
            sid = sessions[name] = repo._session_of(conn, post, cache, default_project)
        row = span_row(post, tenant, sid, None if values is None else values[i])
        deltas.add(row, 1)
        posted.setdefault(sid, []).append(row["id"])
        rows.append(_VALUES(row))
    _insert(conn, rows, COLUMNS)
    apply_new_runs(conn, tenant, deltas, posted)
    return len(rows)
