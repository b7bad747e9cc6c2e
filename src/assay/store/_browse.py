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
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import UnaryExpression

from .._time import to_micros
from ..errors import InvalidInputError
from ._runs import _row_to_run
from ._tables import runs

if TYPE_CHECKING:
    from ..schemas import Run
    from ._base import Store

__all__ = ["keyset", "Page", "browse_conditions", "encode_cursor", "decode_cursor", "page_runs"]


@dataclass
class Page:
    runs: list[Run]
    next_cursor: str | None


def keyset(t: Any, us: int, rid: str, *, newer: bool, inclusive: bool = False) -> Any:
    """Rows of ``t`` past ``(us, rid)`` in (start time, id) order: newer or older than it (or
    it, ``inclusive``). The plain bound on the start time comes first: it is the index range
    (the OR alone would have the planner test every run of the project)."""
    start, rid_col = type_coerce(t.c.start_time, BigInteger), t.c.id
    if newer:
        return and_(start >= us, or_(start > us, and_(
            start == us, rid_col >= rid if inclusive else rid_col > rid)))
    return and_(start <= us, or_(start < us, and_(
        start == us, rid_col <= rid if inclusive else rid_col < rid)))


def encode_cursor(run: Run) -> str:
    return f"{to_micros(run.start_time)}_{run.id}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        us, _, rid = cursor.partition("_")
        return int(us), str(uuid.UUID(rid))
    except ValueError:
        raise InvalidInputError(f"cursor {cursor!r} is not one this page gave") from None


def browse_conditions(store: Store, **filters: Any) -> list[Any]:
    """``RunRepo.conditions`` for a newest-first walk of a project's start-time index.

    Without ANALYZE statistics SQLite prefers the ``(session_id, is_root, latency_us)`` index
    whenever a filter bounds the latency, then sorts every match before returning the first
    page: seconds at 10^6 runs. On SQLite ``is_root`` is therefore tested as ``+is_root``,
    which no index serves, leaving the latency index no better than the start-time one that
    returns rows already in order. (SQLAlchemy renders no ``INDEXED BY`` hint for SQLite.)"""
    is_root = filters.pop("is_root", None)
    conds = store.runs.conditions(**filters)
    if is_root is not None:
        col: Any = runs.c.is_root
        if store.engine.dialect.name == "sqlite":
            col = UnaryExpression(col, operator=operators.custom_op("+"), type_=col.type)
        conds.append(col.is_(bool(is_root)))
    return conds


def page_runs(store: Store, *, cursor: str | None = None, limit: int = 50,
              **filters: Any) -> Page:
    """Runs matching ``filters`` (``RunRepo.list``'s), newest first, ``limit`` at a time after
    ``cursor`` (the ``next_cursor`` of the page before)."""
    conds = browse_conditions(store, **filters)
    if cursor:
        conds.append(keyset(runs, *decode_cursor(cursor), newer=False))
    q = (select(runs).where(*conds).order_by(runs.c.start_time.desc(), runs.c.id.desc())
         .limit(limit + 1))
    store.settle()
    with store.read() as conn:
        found = [_row_to_run(r) for r in conn.execute(q)]
    more = len(found) > limit
    found = found[:limit]
    return Page(found, encode_cursor(found[-1]) if more and found else None)
