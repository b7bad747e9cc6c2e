"""Text search over a project's traces, bounded per request: newest first, a slice at a time.

A substring search of inputs and outputs (``text_search``: name, error, inputs, outputs,
case-insensitive, ``%`` and ``_`` taken literally) has no index to use: it reads every run it
tests. Over a whole project that is ~0.5 s at 10^5 roots and seconds at 10^6 on either
database, and it grows with the project, so no page built on it stays under its goal.

Why not a full-text index (SQLite FTS5, PostgreSQL ``pg_trgm``/``tsvector``)? It must be
maintained on every write, over every run's inputs and outputs - several times the fold's
whole budget of ~10 us per run - and FTS5/tsvector match words, not the substrings LangSmith's
``search()`` and the page's box promise (``"refund_id"`` or part of an id would stop matching).

So a search request walks the project's ``(session_id, start_time)`` index newest first from
its cursor and tests at most ``slice_runs`` runs (of the project, in that order): it returns
the matches found there, up to ``limit``, and a cursor to go on. When the page filled up, the
cursor follows its last match; when the slice ran out first, the cursor is the slice's oldest
run and the page says which time range it searched ("search older" goes on from there). Every
run between two consecutive cursors is tested by exactly one request, so continuing never
loses or repeats a match, and every request costs the same whatever the project's size.
Users search recent traces first almost always; an older one is a few clicks away.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, select, type_coerce

from .._time import from_micros, to_micros
from ..errors import InvalidInputError
from ._browse import browse_conditions, decode_cursor, encode_cursor, keyset
from ._run_filter import text_search
from ._runs import _row_to_run
from ._tables import runs

if TYPE_CHECKING:
    from ..schemas import Run
    from ._base import Store

__all__ = ["SLICE_RUNS", "SearchPage", "search_runs"]

SLICE_RUNS = 10_000  # runs of the project one request tests at most (~60 ms at 10^5)


@dataclass
class SearchPage:
    runs: list[Run]
    next_cursor: str | None  # where the next request goes on (None: searched to the start)
    searched_from: datetime | None  # the newest start time this request could test
    searched_to: datetime | None  # the oldest start time it tested (None: the project's start)
    full: bool  # the page filled up (more matches may follow right after it)

    @property
    def complete(self) -> bool:
        """Searched all the way to the project's first run."""
        return self.next_cursor is None


def search_runs(store: Store, text: str, *, project_id: str, cursor: str | None = None,
                limit: int = 50, slice_runs: int = SLICE_RUNS, **filters: Any) -> SearchPage:
    """Runs of ``project_id`` matching ``text`` and ``filters`` (``RunRepo.conditions``'),
    newest first after ``cursor``, testing at most ``slice_runs`` runs of the project."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("a search needs some text")
    if limit < 1 or slice_runs < 1:
        raise InvalidInputError("limit and slice_runs must be at least 1")
    start = type_coerce(runs.c.start_time, BigInteger)
    in_project = [runs.c.tenant_id == store.tenant_id, runs.c.session_id == str(project_id)]
    after: list[Any] = []
    top: int | None = None
    if cursor:
        top, rid = decode_cursor(cursor)
        after.append(keyset(runs, top, rid, newer=False))
    order = (runs.c.start_time.desc(), runs.c.id.desc())
    # the slice's oldest run: the ``slice_runs``-th of the project after the cursor (an index
    # walk, no run's text read), and the next one if any; the slice reaches the project's
    # first run when no next one exists
    edge_q = (select(start, runs.c.id).where(*in_project, *after).order_by(*order)
              .offset(slice_runs - 1).limit(2))
    conds = browse_conditions(store, project_ids=[str(project_id)], **filters)
    conds += after
    conds.append(text_search(text, runs, store.engine.dialect.name))
    store.settle()
    with store.read() as conn:
        got = conn.execute(edge_q).all()
        edge = got[0] if len(got) == 2 else None  # None: the slice goes to the start
        since = to_micros(filters.get("start_time"))
        if edge is not None and since is not None and int(edge[0]) < since:
            edge = None  # the slice reaches past the time window: nothing older can match
        if edge is not None:
            edge_us, edge_id = int(edge[0]), str(edge[1])
            conds.append(keyset(runs, edge_us, edge_id, newer=True, inclusive=True))
        q = select(runs).where(*conds).order_by(*order).limit(limit + 1)
        found = [_row_to_run(r) for r in conn.execute(q)]
    full = len(found) > limit
    found = found[:limit]
    searched_to: datetime | None
    if full:
        next_cursor: str | None = encode_cursor(found[-1])
        searched_to = found[-1].start_time
    elif edge is not None:
        next_cursor = f"{edge_us}_{edge_id}"
        searched_to = from_micros(edge_us)
    else:
        next_cursor, searched_to = None, None
    return SearchPage(found, next_cursor, from_micros(top) if top is not None else None,
                      searched_to, full)
