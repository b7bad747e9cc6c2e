"""The experiment page's rows from SQL, a page at a time (``store/_experiment_page.py`` and
``ui/_views_experiment.py``), against ``analysis.load_experiment`` reading the whole
experiment: same rows, same order, same numbers, same filters, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from assay_factory import T0, Outcome, add_experiment, make_dataset  # type: ignore[import-not-found]  # tests/analysis, put on sys.path by tests/ui/conftest.py

from assay.analysis import load_experiment
from assay.errors import InvalidInputError
from assay.store import Store
from assay.store._experiment_page import chart_sample, experiment_rows
from assay.ui._views_experiment import experiment_page


def _outcome(i: int, ex: Any, rep: int) -> Outcome:
    return Outcome(latency=1.0 + 0.1 * i + 0.05 * rep, prompt_tokens=100 + i, cost=0.001 * i,
                   scores={"acc": float((i + rep) % 3 == 0), "help": 0.2 + 0.05 * i},
                   labels={"verdict": "bad" if i % 4 == 0 else "good"},
                   error="Boom: <b>x</b>" if (i, rep) in ((2, 1), (9, 0)) else None)


@pytest.fixture
def experiment(store: Store) -> dict[str, Any]:
    """13 examples run twice each, plus a root that names no example (a row of its own)."""
    ds, examples = make_dataset(store, "paged", 13)
    exp = add_experiment(store, ds.id, examples, "paged-exp", _outcome, repetitions=2)
    loose = str(uuid.uuid4())
    t = T0 + timedelta(days=1)
    store.runs.upsert(posts=[{"id": loose, "trace_id": loose, "name": "adhoc",
                              "run_type": "chain", "session_id": str(exp.id),
                              "start_time": t.isoformat(),
                              "end_time": (t + timedelta(seconds=3)).isoformat(),
                              "inputs": {"question": "no example"}, "outputs": {"a": 1}}])
    return {"id": str(exp.id), "data": load_experiment(store, exp.id)}


def _walk(store: Store, pid: str, limit: int, **kw: Any) -> tuple[list[Any], list[dict]]:
    rows: list[Any] = []
    pages: list[dict] = []
    cursor = None
    while True:
        ctx = experiment_page(store, pid, cursor=cursor, limit=limit, **kw)
        pages.append(ctx)
        rows += ctx["rows"]
        nxt = ctx["pager"]["next_url"]
        if not nxt:
            return rows, pages
        cursor = nxt.split("cursor=")[1].split("&")[0].replace("%2F", "/")
        assert len(pages) < 100


DEFAULT: dict[str, Any] = {"failing": None, "errors": False, "threshold": 0.5, "where": None}


def _same(got: Any, want: Any) -> None:
    g, w = got.model_dump(), want.model_dump()
    for k in ("latency", "tokens", "cost"):
        assert g.pop(k) == pytest.approx(w.pop(k)), k
    g_scores, w_scores = g.pop("scores"), w.pop("scores")
    assert g_scores == pytest.approx(w_scores)
    assert g == w


@pytest.mark.parametrize("limit", [1, 4, 200])
def test_rows_pages_and_numbers_match_the_whole_experiment(
        store: Store, experiment: dict[str, Any], limit: int) -> None:
    data = experiment["data"]
    rows, pages = _walk(store, experiment["id"], limit, **DEFAULT)
    assert len(data.rows) == 14
    assert [r.number for r in rows] == list(range(1, 15))
    for got, want in zip(rows, data.rows, strict=True):
        _same(got.result, want)
    assert all(p["total"] == 14 and p["matching"] == 14 for p in pages)
    assert [p["pager"]["first"] for p in pages] == list(range(1, 15, limit))
    assert pages[0]["data"].score_keys == data.score_keys == ["acc", "help"]
    assert pages[0]["data"].label_keys == data.label_keys


@pytest.mark.parametrize("kw", [
    {"errors": True},
    {"failing": "acc"},
    {"failing": "any", "threshold": 0.45},
    {"failing": "help", "errors": True},
    {"where": 'gt(latency, "1.75s")'},
    {"where": 'gt(latency, "1.75s")', "failing": "acc"},
    {"where": 'and(eq(feedback_key, "acc"), eq(feedback_score, 1))'},
])
def test_filters_keep_the_rows_the_whole_experiment_keeps(
        store: Store, experiment: dict[str, Any], kw: dict[str, Any]) -> None:
    data = experiment["data"]
    opts: dict[str, Any] = {**DEFAULT, **kw}
    threshold, failing = opts["threshold"], opts["failing"]
    matched = None
    if opts["where"]:
        matched = {r.id for r in store.runs.list(project_ids=[experiment["id"]], is_root=True,
                                                 filter=opts["where"])}
    want = []
    for n, r in enumerate(data.rows, 1):
        low = [k for k, v in r.scores.items() if v < threshold]
        picked = not (failing or opts["errors"]) or (opts["errors"] and r.error) or (
            failing and (low if failing == "any" else failing in low))
        if picked and (matched is None or any(i in matched for i in r.run_ids)):
            want.append((n, r))
    assert 0 < len(want) < len(data.rows)
    for limit in (2, 200):
        rows, pages = _walk(store, experiment["id"], limit, **opts)
        assert [r.number for r in rows] == [n for n, _ in want]  # positions kept
        for got, (_, r) in zip(rows, want, strict=True):
            _same(got.result, r)
        assert pages[0]["matching"] == len(want) and pages[0]["total"] == 14


def test_counts_stop_at_the_cap(store: Store, experiment: dict[str, Any]) -> None:
    page = experiment_rows(store, experiment["id"], limit=3, count_cap=5)
    assert page.total is None and page.matching is None and len(page.heads) == 3
    page = experiment_rows(store, experiment["id"], limit=3, count_cap=14, errors=True)
    assert page.total == 14 and page.matching == 2


def test_charts_read_a_bounded_sample(store: Store, experiment: dict[str, Any]) -> None:
    lat, scores, n = chart_sample(store, experiment["id"], limit=5)
    assert n == 5 and len(lat) == 5 and len(scores["acc"]) == 5
    ctx = experiment_page(store, experiment["id"], **DEFAULT, limit=3)
    titles = [str(c) for c in ctx["charts"]]
    assert len(titles) == 3 and all("27 runs" not in t for t in titles)  # all 27 roots read


def test_bad_input(store: Store, experiment: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match="cursor"):
        experiment_rows(store, experiment["id"], cursor="1_2")
    with pytest.raises(InvalidInputError, match="no feedback key 'nope'"):
        experiment_page(store, experiment["id"], **{**DEFAULT, "failing": "nope"})
