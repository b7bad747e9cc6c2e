"""Browsing a project's traces: keyset pages, fast at a million runs.

The web UI's project page lists a project's traces newest first. OFFSET paging reads and throws
away every row before the page, so page 1,000 of a million runs costs a thousand pages; a keyset
page continues after the last row shown (its start time and id) through the
``(session_id, start_time)`` index and costs the same wherever it is. The charts beside the
pages are ``_series``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, and_, or_, select, type_coerce

from .._time import to_micros
from ..errors import InvalidInputError
from ._runs import _row_to_run
from ._tables import runs

if TYPE_CHECKING:
    from ..schemas import Run
    from ._base import Store

__all__ = ["Page", "encode_cursor", "decode_cursor", "page_runs"]


@dataclass
class Page:
    runs: list[Run]
    next_cursor: str | None


def encode_cursor(run: Run) -> str:
    return f"{to_micros(run.start_time)}_{run.id}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        us, _, rid = cursor.partition("_")
        return int(us), str(uuid.UUID(rid))
    except ValueError:
        raise InvalidInputError(f"cursor {cursor!r} is not one this page gave") from None


def page_runs(store: Store, *, cursor: str | None = None, limit: int = 50,
              **filters: Any) -> Page:
    """Runs matching ``filters`` (``RunRepo.list``'s), newest first, ``limit`` at a time after
    ``cursor`` (the ``next_cursor`` of the page before)."""
    conds = store.runs.conditions(**filters)
    start = type_coerce(runs.c.start_time, BigInteger)
    if cursor:
        us, rid = decode_cursor(cursor)
        conds.append(or_(start < us, and_(start == us, runs.c.id < rid)))
    q = (select(runs).where(*conds).order_by(runs.c.start_time.desc(), runs.c.id.desc())
         .limit(limit + 1))
    if filters.get("project_ids") and not filters.get("trace_id"):
        # Newest first, a page at a time: walk the project's start-time index and stop after
        # the page. Without ANALYZE statistics SQLite may pick another index a filter names
        # (latency) and sort every match first: seconds at 10^6 runs.
        q = q.with_hint(runs, "INDEXED BY ix_runs_session_start", "sqlite")
    store.settle()
    with store.read() as conn:
        found = [_row_to_run(r) for r in conn.execute(q)]
    more = len(found) > limit
    found = found[:limit]
    return Page(found, encode_cursor(found[-1]) if more and found else None)
