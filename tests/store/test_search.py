"""The project page's bounded text search (``store/_search.py``), on SQLite and PostgreSQL:
walked slice by slice it finds every match once, newest first, whatever the slice and page
sizes; ``%`` and ``_`` are literal; other filters apply."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay.errors import InvalidInputError
from assay.store import Store
from assay.store._search import search_runs

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
N = 40


def _text(i: int) -> str:
    if i % 5 == 0:
        return f"refund request {i}"
    if i % 7 == 0:
        return f"REFUND in caps {i}"
    if i == 11:
        return "100% off_sale"  # the only one holding "0% off_s" literally
    if i == 13:
        return "1000 offXsale"  # would match "0% off_s" if % and _ were wildcards
    return f"hello {i}"


@pytest.fixture
def project(store: Store) -> dict[str, Any]:
    """N roots (several pairs sharing a start time, to test the id tiebreak), each with a
    child; a few errors."""
    posts = []
    for i in range(N):
        rid = str(uuid.uuid4())
        t = T0 + timedelta(seconds=i // 2)  # two roots per start time
        posts.append({"id": rid, "trace_id": rid, "name": "agent", "run_type": "chain",
                      "start_time": t, "end_time": t + timedelta(seconds=1),
                      "session_name": "search", "inputs": {"q": _text(i)},
                      "outputs": {"a": "ok"}, "error": "boom" if i % 10 == 0 else None})
        cid = str(uuid.uuid4())
        posts.append({"id": cid, "trace_id": rid, "parent_run_id": rid, "name": "llm",
                      "run_type": "llm", "start_time": t, "end_time": t + timedelta(seconds=1),
                      "session_name": "search", "inputs": {"q": "refund (child)"}})
    store.runs.upsert(posts=posts)
    roots = [p for p in posts if "parent_run_id" not in p]
    sid = str(store.projects.read(project_name="search").id)
    return {"sid": sid, "roots": roots}


def _walk(store: Store, sid: str, text: str, *, limit: int, slice_runs: int,
          **filters: Any) -> tuple[list[str], int]:
    """Every page from the newest to the end; the ids in page order and the request count."""
    out: list[str] = []
    cursor = None
    requests = 0
    while True:
        page = search_runs(store, text, project_id=sid, cursor=cursor, limit=limit,
                           slice_runs=slice_runs, **filters)
        requests += 1
        assert len(page.runs) <= limit
        out += [str(r.id) for r in page.runs]
        if page.complete:
            return out, requests
        assert page.next_cursor != cursor  # always moves on
        cursor = page.next_cursor
        assert requests < 500


def _newest_first(roots: list[dict], keep: Any) -> list[str]:
    chosen = [r for r in roots if keep(r)]
    chosen.sort(key=lambda r: (r["start_time"], r["id"]), reverse=True)
    return [r["id"] for r in chosen]


@pytest.mark.parametrize(("limit", "slice_runs"), [(3, 7), (50, 5), (2, 1000), (1, 1)])
def test_every_match_found_once_newest_first(store: Store, project: dict[str, Any],
                                             limit: int, slice_runs: int) -> None:
    want = _newest_first(project["roots"], lambda r: "refund" in r["inputs"]["q"].lower())
    got, requests = _walk(store, project["sid"], "Refund", limit=limit, slice_runs=slice_runs,
                          is_root=True)
    assert got == want  # none lost, none doubled, in order across slices and pages
    assert len(want) == 12
    # each request tests at most slice_runs runs (roots and children: 2 per root)
    assert requests >= (2 * N) // slice_runs


def test_a_slice_without_matches_still_moves_on(store: Store, project: dict[str, Any]) -> None:
    sid = project["sid"]
    newest = search_runs(store, "0% off_s", project_id=sid, limit=5, slice_runs=10,
                         is_root=True)
    assert newest.runs == [] and not newest.full and not newest.complete
    assert newest.searched_from is None  # from the newest run
    assert newest.searched_to is not None and newest.searched_to < T0 + timedelta(seconds=20)
    older = search_runs(store, "0% off_s", project_id=sid, cursor=newest.next_cursor,
                        limit=5, slice_runs=10, is_root=True)
    assert older.searched_from == newest.searched_to


def test_percent_and_underscore_are_literal(store: Store, project: dict[str, Any]) -> None:
    got, _ = _walk(store, project["sid"], "0% off_s", limit=10, slice_runs=1000, is_root=True)
    roots = project["roots"]
    assert got == [roots[11]["id"]]
    got, _ = _walk(store, project["sid"], "_", limit=10, slice_runs=1000, is_root=True)
    assert got == [roots[11]["id"]]


def test_other_filters_apply_inside_the_slices(store: Store, project: dict[str, Any]) -> None:
    roots = project["roots"]
    want = _newest_first(roots, lambda r: "refund" in r["inputs"]["q"].lower()
                         and r["error"] is not None)
    got, _ = _walk(store, project["sid"], "refund", limit=2, slice_runs=6, is_root=True,
                   error=True)
    assert got == want and len(want) == 4
    # children too (run_type llm): every child's input holds "refund"
    got, _ = _walk(store, project["sid"], "REFUND (child", limit=7, slice_runs=9,
                   run_type="llm")
    assert len(got) == len(set(got)) == N


def test_a_whole_page_continues_right_after_its_last_match(store: Store,
                                                           project: dict[str, Any]) -> None:
    page = search_runs(store, "refund", project_id=project["sid"], limit=3, slice_runs=1000,
                       is_root=True)
    assert page.full and len(page.runs) == 3 and page.searched_to == page.runs[-1].start_time


def test_bad_requests_are_refused(store: Store, project: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match="cursor"):
        search_runs(store, "x", project_id=project["sid"], cursor="nonsense")
    with pytest.raises(InvalidInputError, match="text"):
        search_runs(store, "  ", project_id=project["sid"])
    with pytest.raises(InvalidInputError, match="at least 1"):
        search_runs(store, "x", project_id=project["sid"], slice_runs=0)


def test_a_time_window_ends_the_search(store: Store, project: dict[str, Any]) -> None:
    since = T0 + timedelta(seconds=15)  # the newest 10 roots (2 per second)
    want = _newest_first(project["roots"], lambda r: r["start_time"] >= since
                         and "refund" in r["inputs"]["q"].lower())
    got, requests = _walk(store, project["sid"], "refund", limit=50, slice_runs=8,
                          is_root=True, start_time=since)
    assert got == want and len(want) == 2 and requests == 3  # 20 runs: 3 slices of 8
