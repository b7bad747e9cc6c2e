"""The fold's fast paths (``_fold_columns``, ``_fold_rows``) store exactly what the general
path stores.

The same runs go into several workspaces of one database: as the tracing writer journals them
(value lists, their inputs and outputs as JSON text, folded by the columnar path where they
qualify), straight through the columnar path (``insert_rows``: every new run, llm ones with
their usage included), as the previous writer version journaled them (the values themselves:
the columnar path too), in another column order (an older writer: the post-dict path), through
``Journal.admit`` (the server's cleaned posts), and as direct ``runs.upsert`` calls (the general
path). Every column of every run, its stored JSON text, and the statistics come out the same.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest
from sqlalchemy import select

from assay import _json
from assay._ids import dotted_segment_us
from assay.store import Store
from assay.store._fold_columns import (
    JSON_COLUMNS,
    WRITER_COLUMNS,
    column_text,
    encoded_rows,
    fill_orders,
    insert_rows,
)
from assay.store._fold_rows import TEXT_KEYS, _json_text, from_text, insert_new
from assay.store._journal import RUNS, _pack, _payload, _row_posts, _unpack
from assay.store._tables import journal, session_aggregates
from assay.tracing import RunTree

from ._stored import journal_place, stored_runs
from .test_aggregates import _check_all

T0 = 1_700_000_000_000_000
COLUMNS = RunTree.ROW_COLUMNS
EXTRA = RunTree.ROW_EXTRA
N = 24  # runs _rows makes


def _ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def _rows(ids: list[str]) -> list[list[Any]]:
    """Runs of every kind the fold meets, as the tracing writer journals them (value lists in
    ``RunTree.ROW_COLUMNS`` order; roots' dotted orders left to the store)."""
    r = ids

    def row(i: int, *, parent: int | None = None, trace: int | None = None, name: str = "run",
            run_type: str = "chain", start: int = 0, end: int | None = 10, inputs: Any = None,
            extra: Any = None, meta: Any = None, tags: Any = None, events: Any = None,
            project: str = "fast", ref: str | None = None, outputs: Any = None,
            error: str | None = None) -> list[Any]:
        values = {"id": r[i], "trace_id": r[trace if trace is not None else i],
                  "parent_run_id": None if parent is None else r[parent], "dotted_order": None,
                  "name": name, "run_type": run_type, "start_time": T0 + start,
                  "inputs": {"i": i} if inputs is None else inputs, "extra": extra,
                  "metadata": meta, "tags": tags, "events": events, "session_id": None,
                  "session_name": project, "reference_example_id": ref,
                  "end_time": None if end is None else T0 + start + end,
                  "outputs": {"o": i} if outputs is None and end is not None else outputs,
                  "error": error}
        if parent is not None:  # a child's order as the writer or the fold derives it
            up = orders[parent]
            values["dotted_order"] = orders[i] = f"{up}.{dotted_segment_us(T0 + start, r[i])}"
        else:  # a root's is left to the store (fold or _finish) on every path
            orders[i] = dotted_segment_us(T0 + start, r[i])
        return [values[c] for c in COLUMNS]

    orders: dict[int, str] = {}

    example = "0191e6c4-2d36-77c8-aafa-a8703ff50d9e"  # the same in every workspace
    return [
        row(0, start=0, end=100),
        row(1, parent=0, trace=0, start=1, end=5, name="child"),
        row(2, parent=1, trace=0, start=2, end=1, run_type="tool", name="grandchild"),
        row(3, start=10, error="ValueError: boom", outputs=None),
        row(4, start=20, end=None),  # not finished: pending
        row(5, start=30, name="nul\x00name", error="caf\u00e9 \ud800 failed"),
        row(6, start=40, name="h\u00e9llo", meta={"k": 1, "example": "x"},
            extra={"invocation_params": {"model": "m"}}, tags=["a", "b"], ref=example),
        row(7, parent=0, trace=0, start=50, run_type="llm", name="llm",
            meta={"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"},
            outputs={"usage_metadata": {"input_tokens": 30, "output_tokens": 12,
                                        "total_tokens": 42}}),
        row(8, parent=0, trace=0, start=60, run_type="llm", name="streamed",
            events=[{"name": "new_token", "time": "2023-11-14T22:13:20.000300+00:00"}]),
        row(9, start=70, outputs={}, inputs={}, project="other"),
        row(10, start=80, tags=[], meta={}, extra={}),
        row(11, start=90, end=0),  # zero latency
        row(12, parent=0, trace=0, start=91, run_type="llm", name="meta usage",
            meta={"usage_metadata": {"input_tokens": 7, "output_tokens": 3,
                                     "input_cost": 0.5, "output_cost": 0.25}}),
        row(13, parent=0, trace=0, start=92, run_type="llm", name="llm_output",
            extra={"invocation_params": {"model": "gpt-4o"}}, meta={"ls_provider": "openai"},
            outputs={"llm_output": {"token_usage": {"prompt_tokens": 100,
                                                    "completion_tokens": 20}}}),
        row(14, start=93, run_type="llm", name="llm root, failed", error="RateLimitError",
            outputs=None, meta={"ls_provider": "openai", "ls_model_name": "unknown-model"}),
        row(15, start=94, name="chain with events",
            events=[{"name": "start", "time": "2023-11-14T22:13:20+00:00"}]),
        row(16, parent=0, trace=0, start=95, run_type="llm", name="no usage at all"),
        row(17, parent=0, trace=0, start=96, run_type="llm", name="streamed, priced",
            meta={"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"},
            events=[{"name": "new_token", "time": T0 + 96 + 4}],
            outputs={"usage_metadata": {"input_tokens": 9, "output_tokens": 1,
                                        "input_token_details": {"cache_read": 4}}}),
        # stored escaped: NUL, U+FDD0, a lone surrogate (what orjson refuses), and text
        row(18, start=97, inputs={"s": "nul\x00 esc\ufdd0 caf\u00e9", "n": [1.5, -0.0, 1e300]},
            outputs={"s": "lone \ud800", "big": 2**70}),
        # names usage only as a value or deeper down (no usage): the columnar path leaves it
        # to the dict path, which looks at the keys
        row(19, parent=18, trace=18, start=98,
            outputs={"text": "usage_metadata", "deeper": {"llm_output": 1}},
            meta={"\u00fc": "\U0001f600"}, tags=["x"]),
        row(20, start=99, inputs={"q": "'quote' \"dq\" \\ \n\t\u2028"}, extra={"a": 1}),
        row(21, parent=20, trace=20, start=100, outputs={}, meta={"deep": {"k": [None, True]}}),
        # usage on a chain (tokens stored, no statistics: not an llm run), and an llm root
        # streamed (two first tokens, one ISO with Z, one epoch) with usage and a price
        row(22, parent=20, trace=20, start=101, name="chain with usage",
            outputs={"usage_metadata": {"input_tokens": 5, "output_tokens": 6,
                                        "total_cost": 0.01}}),
        row(23, start=102, run_type="llm", name="llm root, streamed",
            meta={"ls_provider": "anthropic", "ls_model_name": "claude-3-5-haiku-latest"},
            events=[{"name": "new_token", "time": "2023-11-14T22:13:20.000109Z"},
                    {"name": "new_token", "time": T0 + 102 + 5, "kwargs": {"token": "h"}}],
            outputs={"usage_metadata": {"input_tokens": 1000, "output_tokens": 200},
                     "text": "caf\u00e9"}),
    ]


def _normalized(store: Store, ids: list[str]) -> list[dict[str, Any]]:
    """Every stored column of the workspace's runs, ids replaced by their position and the
    project by its name, so two workspaces compare."""
    return stored_runs(store, {rid: f"<{n}>" for n, rid in enumerate(ids)})


def _patch(rid: str) -> dict[str, Any]:
    return {"id": rid, "end_time": T0 + 20 + 7, "outputs": {"done": True}}


def _previous_format(st: Store, rows: list[list[Any]], patches: list[dict[str, Any]],
                     columns: tuple[str, ...] = COLUMNS) -> None:
    """A batch as the previous writer version journaled it: values, not JSON text."""
    payload = {"posts": rows, "patches": patches, "default_project": "default",
               "columns": list(columns), "extra": dict(EXTRA)}
    st.journal._append([(RUNS, payload)])


def _stored_text(store: Store, ids: list[str]) -> list[tuple[Any, ...]]:
    """The JSON columns' stored text, run by run (PostgreSQL: jsonb's text)."""
    cast = "::text" if store.engine.dialect.name == "postgresql" else ""
    cols = ", ".join(f"{c}{cast}" for c in ("inputs", "outputs", "extra", "tags", "events"))
    mark = "%s" if store.engine.dialect.name == "postgresql" else "?"
    with store.read() as conn:
        got = {r[0]: r[1:] for r in conn.exec_driver_sql(
            f"SELECT id, {cols} FROM runs WHERE tenant_id = {mark}", (store.tenant_id,))}
    return [got[rid] for rid in ids]


def _as_earlier_versions_admitted(st: Store) -> None:
    """Rewrite the workspace's journaled admits as versions before the JSON text wrote them:
    the posts' JSON columns as values, no ``json`` in the batch."""
    with journal_place(st).write() as conn:
        for seq, raw in conn.execute(select(journal.c.seq, journal.c.payload).where(
                journal.c.tenant_id == st.tenant_id)).all():
            payload = _payload(_unpack(raw))
            named = payload.pop("json")
            payload["posts"] = [from_text(p, named) for p in payload["posts"]]
            conn.execute(journal.update().where(journal.c.seq == seq).values(
                payload=_pack(_json.dumpb(payload))))


def test_the_fast_path_stores_what_the_general_path_stores(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")  # journal entries read before the fold
    base = store
    kinds = ("writer", "columns", "previous", "reordered", "admit", "admit values", "direct")
    results, texts, used = [], [], []
    for kind in kinds:
        st = base.for_tenant(str(uuid.uuid4()))
        used.append(st)
        ids = _ids(N)
        rows = _rows(ids)
        first, second = rows[:8], rows[8:]
        as_posts = _row_posts([list(r) for r in rows], COLUMNS, EXTRA)
        again = list(rows[0])  # run 0 posted again (already stored)
        again[COLUMNS.index("name")] = "renamed"
        if kind == "writer":
            st.journal.append_runs(first, columns=COLUMNS, extra=EXTRA)
            # a later batch: the rest, run 4's end, and run 0 again
            st.journal.append_runs([*second, again], [_patch(ids[4])], columns=COLUMNS,
                                   extra=EXTRA)
        elif kind == "columns":  # straight through the columnar path: it takes every run
            items = encoded_rows(rows)
            with st.write() as conn:
                fill_orders(conn, st.tenant_id, items)
                done, rest = insert_rows(st.runs, conn, items, set(), "default", EXTRA,
                                         encoded=True)
            assert (done, rest) == (N, [])  # llm runs, events, usage of every shape included
            st.journal.append_runs([again], [_patch(ids[4])], columns=COLUMNS, extra=EXTRA)
        elif kind == "previous":  # journaled by the previous version: still folds the same
            _previous_format(st, first, [])
            _previous_format(st, [*second, again], [_patch(ids[4])])
        elif kind == "reordered":  # another column order: the post-dict path
            order = tuple(reversed(COLUMNS))
            at = [COLUMNS.index(c) for c in order]
            _previous_format(st, [[r[i] for i in at] for r in first], [], order)
            _previous_format(st, [[r[i] for i in at] for r in [*second, again]],
                             [_patch(ids[4])], order)
        elif kind == "admit":  # JSON columns journaled as the text to store
            st.journal.admit(as_posts[:8])
            again = dict(as_posts[0], name="renamed")
            st.journal.admit([*as_posts[8:], again], [_patch(ids[4])])
            assert [p.get("json") for p in _journaled_payloads(st)] == [list(TEXT_KEYS)] * 2
        elif kind == "admit values":  # as earlier versions' admit journaled them: values
            st.journal.admit(as_posts[:8])
            again = dict(as_posts[0], name="renamed")
            st.journal.admit([*as_posts[8:], again], [_patch(ids[4])])
            _as_earlier_versions_admitted(st)
        else:
            st.runs.upsert(posts=as_posts[:8])
            again = dict(as_posts[0], name="renamed")
            st.runs.upsert(posts=[*as_posts[8:], again], patches=[_patch(ids[4])])
        st.settle()
        results.append(_normalized(st, ids))
        texts.append(_stored_text(st, ids))
    *fast, general = results
    assert len(general) == N
    tokens = {r["name"]: (r["total_tokens"], r["total_cost"], r["first_token_us"])
              for r in general}
    assert tokens["llm"][0] == 42 and tokens["llm"][1] > 0  # priced by genai-prices
    assert tokens["meta usage"][:2] == (10, 0.75)  # its own costs win
    assert tokens["llm_output"][0] == 120 and tokens["llm_output"][1] > 0
    assert tokens["streamed, priced"][2] == 4 and tokens["no usage at all"] == (None,) * 3
    assert tokens["chain with usage"][:2] == (11, 0.01)
    assert tokens["llm root, streamed"][0] == 1200 and tokens["llm root, streamed"][2] == 5
    assert general[18]["inputs"]["s"] == "nul\x00 esc\ufdd0 caf\u00e9"
    assert general[18]["outputs"] == {"s": "lone \ud800", "big": 2**70}
    for kind, got, text in zip(kinds, fast, texts, strict=False):
        for a, b in zip(got, general, strict=True):
            assert a == b, kind
        assert text == texts[-1], kind  # the very JSON text (SQLite), jsonb's (PostgreSQL)
    assert _check_all(used) == 2 * len(kinds)  # two projects each


def test_llm_runs_and_runs_with_events_take_the_fast_path(store: Store) -> None:
    ids = _ids(N)
    posts = _row_posts(_rows(ids), COLUMNS, EXTRA)
    with store.write() as conn:
        done, rest = insert_new(store.runs, conn, posts, set(), "default", clean=False)
    assert done == N and rest == []
    got = {str(r.id): r for r in store.runs.list()}
    assert got[ids[7]].total_tokens == 42 and got[ids[8]].first_token_time is not None
    assert _check_all([store]) >= 1


def test_insert_new_takes_only_new_plain_runs(store: Store) -> None:
    ids = _ids(N)
    posts = _row_posts(_rows(ids), COLUMNS, EXTRA)
    stored = posts[11]
    store.runs.upsert(posts=[stored])  # already stored: left to the general path
    with store.write() as conn:
        done, rest = insert_new(store.runs, conn, posts, {ids[3]}, "default", clean=False)
        left = {p["id"] for p in rest}
        # run 3 has a patch in the batch; run 11 is stored
        assert left == {ids[3], ids[11]}
        assert done == N - 2
        store.runs._apply(conn, rest, [], "default")
    assert len(store.runs.list()) == N
    assert _check_all([store]) >= 1


def test_a_run_stored_meanwhile_goes_to_the_general_path(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """A journaled run stored already (by another writer, or posted twice): the fold's first
    try, which looks up no ids, fails on the duplicate key; the batch is tried again whole
    with the look-up (not item by item), and the run is completed, not lost or doubled."""
    ids = _ids(N)
    rows = _rows(ids)
    store.journal.append_runs(rows[:3], columns=COLUMNS, extra=EXTRA)
    store.runs.upsert(posts=[dict(_row_posts([list(rows[1])], COLUMNS, EXTRA)[0],
                                  dotted_order=None, end_time=None, outputs=None)])
    with caplog.at_level(logging.WARNING, logger="assay"):
        store.settle()
    assert not [r for r in caplog.records if "one by one" in r.getMessage()]
    got = {str(r.id): r for r in store.runs.list()}
    assert set(got) == set(ids[:3])
    assert got[ids[1]].status == "success"  # the journaled end completed it
    assert _check_all([store]) >= 1


def test_statistics_of_a_rolled_back_batch_are_not_written(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """The fast path stages a batch's statistics, written once for the whole fold
    transaction. A batch whose runs went in but whose rest failed (a run the general path
    refuses) is rolled back and applied item by item: what it staged goes with it, so the
    sessions count every stored run once, and the other batches' statistics stay."""
    ids = _ids(3 * N)
    good, mixed, later = _rows(ids[:N]), _rows(ids[N:2 * N]), _rows(ids[2 * N:])
    at = COLUMNS.index("session_name")
    for row in (*mixed, *later):  # a project the failed batch creates first (rolled back)
        row[at] = "fresh"
    bad = list(mixed[0])
    bad[COLUMNS.index("start_time")] = "not a time"  # left to the general path, refused
    store.journal.append_runs(good, columns=COLUMNS, extra=EXTRA)
    store.journal.append_runs([*mixed[1:], bad], columns=COLUMNS, extra=EXTRA)
    store.journal.append_runs(later, columns=COLUMNS, extra=EXTRA)  # same transaction
    with caplog.at_level(logging.WARNING, logger="assay"):
        store.settle()
    assert [r for r in caplog.records if "one by one" in r.getMessage()]  # it did fail whole
    stored = {str(r.id): r for r in store.runs.list()}
    assert set(stored) == set(ids) - {ids[N]}
    fresh = store.projects.read(project_name="fresh").id
    assert {stored[i].session_id for i in ids[N + 1:]} == {fresh}  # not the rolled-back one
    assert _check_all([store]) >= 2  # sums, latest start and hours equal a recount


def test_one_fold_of_many_batches_writes_what_folding_them_one_by_one_does(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Statistics staged by up to 20 journal batches of a transaction, merged and written
    once (llm runs with usage and streamed first tokens among them), equal those written
    batch by batch (a fold per batch)."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    together, alone = store.for_tenant(str(uuid.uuid4())), store.for_tenant(str(uuid.uuid4()))
    for st, settle_each in ((together, False), (alone, True)):
        for _ in range(6):
            st.journal.append_runs(_rows(_ids(N)), columns=COLUMNS, extra=EXTRA)
            if settle_each:
                st.settle()
        st.settle()
    assert _check_all([together, alone]) >= 2
    with store.read() as conn:
        def sums(st: Store) -> list[Any]:
            return sorted(tuple(v for k, v in row._mapping.items()
                                if k not in ("session_id", "tenant_id"))
                          for row in conn.execute(select(session_aggregates).where(
                              session_aggregates.c.tenant_id == st.tenant_id)))
        got, want = sums(together), sums(alone)
        assert len(got) == len(want) > 0
        for a, b in zip(got, want, strict=True):  # costs: float sums, added in another order
            for x, y in zip(a, b, strict=True):
                assert x == (pytest.approx(y, rel=1e-12) if isinstance(y, float) else y)


def _plain_rows(ids: list[str], *, roots_only: bool, errors: bool = True) -> list[list[Any]]:
    """Plain runs of the shapes ``_fold_batch`` takes a whole batch of: no llm run, events,
    usage or ``extra`` of their own; metadata equal as values but not as JSON (1, true, 1.0),
    past orjson's integers, escaped names and errors, pending runs, tags, references, two
    projects; with children (traces named, or left to the fold for roots) unless
    ``roots_only``; some failed if ``errors``."""
    metas: list[Any] = [None, {}, {"repetition": 0}, {"repetition": 0}, {"v": 1}, {"v": True},
                        {"v": 1.0}, {"v": 2**70}, {"deep": {"k": [None, True]}, "\u00fc": "x"}]
    example = "0191e6c4-2d36-77c8-aafa-a8703ff50d9e"
    orders: dict[str, str] = {}  # each run's dotted order, for its children's
    out = []
    for i, rid in enumerate(ids):
        parent = None if roots_only or i % 3 == 0 else ids[i - i % 3]
        values = {"id": rid, "trace_id": parent or (rid if i % 2 else None),
                  "parent_run_id": parent, "dotted_order": None,
                  "name": ("nul\x00 caf\u00e9", "plain", "h\u00e9llo")[i % 3],
                  "run_type": ("chain", "tool", "retriever")[i % 3], "start_time": T0 + 10 * i,
                  "inputs": {"i": i, "s": "nul\x00" if i % 7 == 0 else "x"},
                  "metadata": metas[i % len(metas)], "tags": (None, [], ["a", "b"])[i % 3],
                  "events": [] if i % 4 == 0 else None,
                  "session_name": "plain" if i % 5 else "other",
                  "reference_example_id": example if i % 2 else None}
        if i % 6 != 5:  # every sixth pending
            values["end_time"] = T0 + 10 * i + i % 4
            values["outputs"] = {"o": i, "text": "usage"}
        if errors and i % 8 == 7:
            values["error"] = "caf\u00e9 \ud800 failed" if i % 16 == 15 else ""
        if parent is not None:
            values["dotted_order"] = f"{orders[parent]}.{dotted_segment_us(T0 + 10 * i, rid)}"
        orders[rid] = values["dotted_order"] or dotted_segment_us(T0 + 10 * i, rid)
        out.append([values.get(c) for c in COLUMNS])
    return out



def _counted_lane(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """Reads fold (no background folder), batch by batch (not streamed), and the list that
    gets what each call of the lane's ``insert_batch`` returned."""
    from assay.store import _fold_columns, _journal

    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    monkeypatch.setattr(_journal, "STREAM", False)
    lane = _fold_columns.insert_batch
    took: list[int | None] = []

    def counted(*args: Any) -> int | None:
        took.append(lane(*args))
        return took[-1]

    monkeypatch.setattr(_fold_columns, "insert_batch", counted)
    return took


def _lane_loop_general(store: Store, monkeypatch: pytest.MonkeyPatch,
                       make: Any) -> tuple[list[int | None], list[Any], list[Any], list[Store]]:
    """The runs ``make()`` gives (rows, their ids; fresh each time: ids are global keys)
    journaled in batches of 20 and folded with the batch lane on, then off, then upserted
    one by one, each in a workspace of its own: what the lane's ``insert_batch`` returned with
    the lane on, and each workspace's runs, stored JSON text and store. The fold as merged
    batches (``_fold_stream``'s tests cover the streamed one)."""
    from assay.store import _fold_columns

    took = _counted_lane(monkeypatch)
    results, texts, used, took_on = [], [], [], []
    for mode in ("lane", "loop", "general"):
        st = store.for_tenant(str(uuid.uuid4()))
        used.append(st)
        rows, ids = make()
        monkeypatch.setattr(_fold_columns, "BATCH", mode == "lane")
        if mode == "general":
            st.runs.upsert(posts=_row_posts([list(r) for r in rows], COLUMNS, EXTRA))
        else:
            for i in range(0, len(rows), 20):
                st.journal.append_runs(rows[i:i + 20], columns=COLUMNS, extra=EXTRA)
        st.settle()
        results.append(_normalized(st, ids))
        texts.append(_stored_text(st, ids))
        if mode == "lane":
            took_on = list(took)
    return took_on, results, texts, used


@pytest.mark.parametrize(("roots_only", "errors"), [(True, True), (False, True), (True, False)])
def test_the_batch_lane_stores_what_the_loop_and_the_general_path_store(
        store: Store, monkeypatch: pytest.MonkeyPatch, roots_only: bool, errors: bool) -> None:
    """Whole batches of plain runs folded column by column (``_fold_batch``), run by run
    (the lane off), and upserted one by one: every column, its JSON text, the statistics."""
    n = 60

    def plain() -> tuple[list[list[Any]], list[str]]:
        ids = _ids(n)
        return _plain_rows(ids, roots_only=roots_only, errors=errors), ids

    took, results, texts, used = _lane_loop_general(store, monkeypatch, plain)
    assert took == [n]  # the three batches, merged, taken whole
    lane_got, loop_got, general = results
    assert len(general) == n
    pending = [i for i in range(n) if i % 6 == 5 and not (errors and i % 16 == 15)]
    assert [r["status"] for r in general].count("pending") == len(pending)
    assert sum(r["error"] is not None for r in general) == (7 if errors else 0)
    for got in (lane_got, loop_got):
        for a, b in zip(got, general, strict=True):
            assert a == b
    assert texts[0] == texts[1] == texts[2]  # the very JSON text (SQLite), jsonb's (PG)
    extras = [t[2] for t in texts[0][4:7]]  # {"v": 1}, {"v": true}, {"v": 1.0}
    assert len(set(extras)) == 3
    assert _check_all(used) == 2 * 3


@pytest.mark.parametrize("own_key", [False, True])
def test_the_lane_takes_runs_naming_usage_only_inside_their_messages(
        store: Store, monkeypatch: pytest.MonkeyPatch, own_key: bool) -> None:
    """An agent's chain runs pass an llm's message on, its ``usage_metadata`` inside: nothing
    reads usage there, so the lane takes such a batch whole and stores what the loop and the
    general path store. One run with usage among its outputs' own keys (``own_key``) is a run
    to derive usage for: the lane leaves the batch to the loop, with the same result."""
    n = 60
    at = COLUMNS.index("outputs")
    message = {"type": "ai", "content": "Paris", "response_metadata": {"llm_output": None},
               "usage_metadata": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}}

    def agentish() -> tuple[list[list[Any]], list[str]]:
        ids = _ids(n)
        rows = _plain_rows(ids, roots_only=False)
        for i, row in enumerate(rows):
            if row[at] is not None and i % 2 == 0:
                row[at] = {"messages": [message], "i": i}
        if own_key:
            done = next(row for row in rows if row[at] is not None)
            done[at] = {"usage_metadata": message["usage_metadata"]}
        return rows, ids

    took, results, texts, used = _lane_loop_general(store, monkeypatch, agentish)
    assert took == ([None] if own_key else [n])
    lane_got, loop_got, general = results
    assert sum('"usage_metadata"' in (t[1] or "") for t in texts[2]) >= n // 3
    assert lane_got == loop_got == general
    assert texts[0] == texts[1] == texts[2]
    assert _check_all(used) == 2 * 3


def test_the_lane_takes_the_value_lists_of_a_batch_with_a_post_beside_them(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch holding a post beside the writer's value lists (a long run's start journaled as
    a post, say): the lane takes the lists' plain runs, the post goes its own way, and every
    run is stored as without the lane."""
    from assay.store import _fold_columns

    took = _counted_lane(monkeypatch)
    got = []
    for mode in ("lane", "loop"):
        st = store.for_tenant(str(uuid.uuid4()))
        monkeypatch.setattr(_fold_columns, "BATCH", mode == "lane")
        ids = _ids(31)
        rows = _plain_rows(ids[:30], roots_only=True)
        post = {"id": ids[30], "trace_id": ids[30], "name": "started", "run_type": "chain",
                "start_time": T0 + 5, "inputs": {"q": 1}, "session_name": "plain"}
        st.journal.append_runs([*rows[:15], post, *rows[15:]], columns=COLUMNS, extra=EXTRA)
        st.settle()
        got.append(_normalized(st, ids))
    assert took == [30]
    assert len(got[0]) == 31 and got[0] == got[1]


def _agent_rows(ids: list[str], llm_ids: list[str]) -> list[list[Any]]:
    """An agent's trace as the writer journals it: ``_plain_rows`` (chain, tool and retriever
    runs, roots and children) with an llm child after each root, with usage and a price to
    derive (every other one streamed: events)."""
    plain = _plain_rows(ids, roots_only=False)
    at = {c: COLUMNS.index(c) for c in COLUMNS}
    out: list[list[Any]] = []
    made = iter(llm_ids)
    for i, row in enumerate(plain):
        out.append(row)
        if row[at["parent_run_id"]] is not None:
            continue
        rid, start = next(made), T0 + 10 * i + 3
        up = dotted_segment_us(row[at["start_time"]], row[at["id"]])
        values = {"id": rid, "trace_id": row[at["id"]], "parent_run_id": row[at["id"]],
                  "dotted_order": f"{up}.{dotted_segment_us(start, rid)}", "name": "model",
                  "run_type": "llm", "start_time": start, "end_time": start + 5,
                  "inputs": {"messages": [{"role": "user", "content": f"q{i}"}]},
                  "metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"},
                  "events": ([{"name": "new_token", "time": start + 2}] if i % 2 else None),
                  "session_name": row[at["session_name"]],
                  "outputs": {"usage_metadata": {"input_tokens": 10 + i, "output_tokens": 3,
                                                 "total_tokens": 13 + i}}}
        out.append([values.get(c) for c in COLUMNS])
    return out


def test_an_agent_s_batch_folds_its_plain_runs_through_the_lane(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch with llm runs among chain and tool runs (an agent's trace): the lane takes
    its plain runs, the loop the llm runs; stored as the loop alone and the general path
    store them (every column, its JSON text, the statistics)."""
    n = 60

    def agent() -> tuple[list[list[Any]], list[str]]:
        ids, llm_ids = _ids(n), _ids(n // 3)
        return _agent_rows(ids, llm_ids), ids + llm_ids

    took, results, texts, used = _lane_loop_general(store, monkeypatch, agent)
    assert took == [None, n]  # the whole batch refused, then its plain runs taken
    split, loop, general = results
    assert len(general) == n + n // 3
    priced = [r for r in general if r["run_type"] == "llm"]
    assert len(priced) == n // 3 and all(r["total_cost"] > 0 for r in priced)
    assert sum(r["first_token_us"] == 2 for r in priced) == n // 6
    for got in (split, loop):
        for a, b in zip(got, general, strict=True):
            assert a == b
    assert texts[0] == texts[1] == texts[2]
    assert _check_all(used) == 2 * 3


def test_the_batch_lane_leaves_a_batch_with_anything_else_to_the_loop(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """One run of another shape (an llm run, events, an ``extra`` of its own, a start that is
    not an int...) and the whole batch goes run by run; nothing is written twice."""
    from assay.store import _fold_batch

    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    changes: list[tuple[str, Any]] = [
        ("run_type", "llm"), ("events", [{"name": "new_token", "time": T0}]),
        ("extra", {"a": 1}), ("metadata", {"usage_metadata": {"input_tokens": 1}}),
        ("start_time", float(T0)), ("name", None), ("tags", "x"), ("parent_run_id", "nope"),
        ("reference_example_id", "NOT-A-UUID"), ("outputs", '{"usage_metadata": {}}')]
    sid = str(store.projects.create("plain").id)
    sessions = {(None, "plain"): sid, (None, "other"): sid}
    for column, value in [(None, None), *changes]:
        ids = _ids(6)
        rows = encoded_rows(_plain_rows(ids, roots_only=True))
        if column is not None:
            rows[3][COLUMNS.index(column)] = value
        with store.write() as conn:
            fill_orders(conn, store.tenant_id, rows)
            got = _fold_batch.insert_batch(conn, rows, sessions, store.tenant_id, {},
                                           '{"metadata":{}}', None)
        if column is None:
            assert got == 6  # the batch as it was: taken
            continue
        assert got is None, column
        assert not store.runs.list(run_ids=ids), column  # nothing written


@pytest.mark.parametrize("n", [1, 999, 1001])
def test_batches_of_any_size(store: Store, n: int) -> None:
    posts = []
    for i in range(n):
        rid = str(uuid.uuid4())
        posts.append([rid if c in ("id", "trace_id") else
                      {"start_time": T0 + i, "end_time": T0 + i + 3, "name": "r",
                       "run_type": "chain", "session_name": "sizes", "inputs": {"i": i},
                       "outputs": {"o": i}}.get(c) for c in COLUMNS])
    store.journal.append_runs(posts, columns=COLUMNS, extra=EXTRA)
    project = store.projects.read(project_name="sizes", include_stats=True)
    assert project.run_count == n
    assert len(store.runs.list(project_ids=[project.id])) == n


def _feedback_of(store: Store, ids: list[str]) -> list[dict[str, Any]]:
    from assay.store._tables import feedback

    with store.read() as conn:
        got = [dict(r._mapping) for r in conn.execute(select(feedback).where(
            feedback.c.tenant_id == store.tenant_id))]
    out = []
    for row in got:
        for key in ("id", "tenant_id", "created_at", "modified_at"):
            row.pop(key)
        row["session_id"] = row["session_id"] is not None  # each workspace's own project
        row["run_id"] = ids.index(row["run_id"]) if row["run_id"] in ids else row["run_id"]
        row["trace_id"] = ids.index(row["trace_id"]) if row["trace_id"] in ids else None
        out.append(row)
    return sorted(out, key=lambda r: (-1 if r["run_id"] is None else r["run_id"], r["key"]))


def _scores_both_ways(store: Store, values_of: Any, source: dict[str, Any]
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """The scores ``values_of(ids)`` gives (value lists) on the runs of ``_rows``, journaled
    as evaluate() journals them and as dicts: both workspaces' feedback, and the statistics of
    each (checked against their recomputation)."""
    results, stats = [], []
    for as_lists in (True, False):
        st = store.for_tenant(str(uuid.uuid4()))
        ids = _ids(N)
        project = st.projects.create(f"scores-{as_lists}")
        st.journal.append_runs(_rows(ids), columns=COLUMNS, extra=EXTRA)
        defaults = {"session_id": str(project.id), "feedback_source": source}
        values = values_of(ids)
        if as_lists:
            st.journal.append_feedback(values, columns=("run_id", "trace_id", "key", "score"),
                                       defaults=defaults)
        else:
            st.journal.append_feedback([{**defaults, "run_id": r, "trace_id": t, "key": k,
                                         "score": v} for r, t, k, v in values])
        st.settle()
        results.append(_feedback_of(st, ids))
        stats.append(st.projects.read(project_id=project.id, include_stats=True).feedback_stats)
        assert _check_all([st]) >= 1
    return results[0], results[1], stats


def test_plain_scores_as_value_lists_fold_like_the_dicts(store: Store) -> None:
    """evaluate()'s scores (value lists, the rest as the batch's defaults) are made into rows
    once per batch; every column equals what the general path makes of each dict."""
    def values_of(ids: list[str]) -> list[list[Any]]:
        values = [[ids[i], ids[0], key, score] for i in range(12)
                  for key, score in (("correct", i % 2 == 0), ("score", i / 7), ("none", None))]
        return [*values, [None, None, "session-level", 3]]  # no run: the experiment's own

    fast, general, stats = _scores_both_ways(store, values_of,
                                             {"type": "model", "metadata": {"e": 1}})
    for got in stats:
        assert got["correct"].n == 12 and got["correct"].avg == pytest.approx(0.5)
    assert len(fast) == 37 and fast == general


@pytest.mark.parametrize("kind", ["bools", "floats and None", "ints and bools"])
def test_a_batch_of_scores_of_one_kind_folds_like_the_dicts(store: Store, kind: str) -> None:
    """evaluate()'s usual batch, every score on a stored root run (the batch path), with the
    scores all bools, all floats or None, or of mixed kinds: the same rows and statistics as
    the general path makes of each dict."""
    scores: list[Any] = {
        "bools": [i % 3 == 0 for i in range(N)],
        "floats and None": [None if i % 5 == 0 else i / 7 for i in range(N)],
        "ints and bools": [i if i % 2 else True for i in range(N)]}[kind]

    def values_of(ids: list[str]) -> list[list[Any]]:
        return [[rid, rid, "k", score] for rid, score in zip(ids, scores, strict=True)]

    fast, general, stats = _scores_both_ways(store, values_of, {"type": "model"})
    assert all(got["k"].n == N for got in stats)
    assert len(fast) == N and fast == general


def test_values_a_whole_batch_shares_are_stored_as_bound_ones(store: Store) -> None:
    """SQLite's insert writes a column with one value in every row of the batch into the
    statement (``_fold_rows._insert``): quotes, non-ASCII text and NULLs come out as the
    general path stores them."""
    example = "0191e6c4-2d36-77c8-aafa-a8703ff50d9e"
    results = []
    for kind in ("writer", "admit", "direct"):
        st = store.for_tenant(str(uuid.uuid4()))
        ids = _ids(6)
        rows = []
        for i, rid in enumerate(ids):
            values = {"id": rid, "trace_id": rid, "name": f"r{i}", "run_type": "chain",
                      "start_time": T0 + i, "end_time": T0 + 9, "inputs": {"i": i},
                      "outputs": {"same": "o'k"}, "error": "o'brien; -- it's 'bad'",
                      "tags": ["\u00fc"],
                      "metadata": {"q": "'"}, "session_name": "quo'te",
                      "reference_example_id": example}
            rows.append([values.get(c) for c in COLUMNS])
        if kind == "writer":
            st.journal.append_runs(rows, columns=COLUMNS, extra=EXTRA)
        else:
            posts = _row_posts([list(r) for r in rows], COLUMNS, EXTRA)
            if kind == "admit":
                st.journal.admit(posts)
            else:
                st.runs.upsert(posts=posts)
        st.settle()
        results.append(_normalized(st, ids))
    assert len(results[2]) == 6 and results[2][0]["error"] == "o'brien; -- it's 'bad'"
    assert results[0] == results[2] and results[1] == results[2]


def test_the_writer_columns_are_the_tracing_writers() -> None:
    """The columnar path knows the writer's column order and the table's; a change in either
    must reach it (until then the writer's batches take the slower post-dict path)."""
    from assay.store import _fold_columns

    assert WRITER_COLUMNS == RunTree.ROW_COLUMNS
    assert _fold_columns.ENABLED  # it writes the runs table's columns, in their order


@dataclasses.dataclass
class _Point:
    x: int
    label: str


class _Model(pydantic.BaseModel):
    when: datetime
    tags: list[str]


def test_column_text_is_what_the_fold_stored_before() -> None:
    """The writer's JSON text of a value (stored as it is) is what the fold made of the value
    before: the batch's encoder, decoded, then ``_json_text``; for every kind of value a traced
    function may take or return."""
    import random

    rnd = random.Random(7)
    values: list[Any] = [
        {}, {"a": 1}, {"s": "caf\u00e9 \U0001f600 \u2028 \x1f \x7f \"q\" \\ /"},
        {"nul": "a\x00b"}, {"esc": "\ufdd0"}, {"lone": "\ud800"}, {"\ud801key": 1},
        {"k\x00": "v"}, {"big": 2**64 - 1, "bigger": 2**70, "neg": -(2**63)},
        {1: "int key"}, {"f": [0.1, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308]},
        {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
        {"when": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "naive": datetime(2026, 1, 2)},
        {"id": uuid.UUID(int=5), "set": {3}, "tuple": (1, "a"), "bytes": b"raw"},
        {"point": _Point(1, "p"), "model": _Model(when=datetime(2026, 1, 1), tags=["t"])},
        {"deep": [[[{"x": [None, True, False]}]]]}, [1, 2], "text", 3, None,
        {"f": [rnd.uniform(-1e6, 1e6) * 10.0 ** rnd.randint(-300, 300) for _ in range(500)]},
    ]
    for value in values:
        before = _json_text(_payload(_json.dumpb(value)))
        assert column_text(value) == before, value


def _journaled_payloads(store: Store) -> list[dict[str, Any]]:
    with journal_place(store).read() as conn:
        return [_payload(_unpack(p)) for p in conn.execute(select(journal.c.payload).where(
            journal.c.tenant_id == store.tenant_id).order_by(journal.c.seq)).scalars()]


def test_the_writer_s_rows_are_journaled_with_their_json_as_text(store: Store) -> None:
    """Inputs and outputs travel as the text the fold stores, the batch says so (``json``), and
    they read back as the values."""
    ids = _ids(N)
    rows = _rows(ids)
    store.journal.append_runs(rows, columns=COLUMNS, extra=EXTRA)
    (payload,) = _journaled_payloads(store)
    assert payload["json"] == list(JSON_COLUMNS)
    i, o = COLUMNS.index("inputs"), COLUMNS.index("outputs")
    assert payload["posts"][0][i] == '{"i":0}' and payload["posts"][4][o] is None
    assert rows[0][i] == {"i": 0}  # the caller's rows are left alone
    store.settle()
    got = {str(r.id): r for r in store.runs.list()}
    assert got[ids[18]].inputs["s"] == "nul\x00 esc\ufdd0 caf\u00e9"
    assert got[ids[0]].outputs == {"o": 0} and got[ids[9]].inputs == {}


def test_admitted_posts_are_journaled_with_their_json_as_text(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's cleaned posts travel as the text the fold stores (``json`` names the
    columns); the caller's dicts are left alone, patches keep their values."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")  # the entry read before any fold
    ids = _ids(N)
    posts = _row_posts(_rows(ids), COLUMNS, EXTRA)
    store.journal.admit(posts, [_patch(ids[4])])
    (payload,) = _journaled_payloads(store)
    assert payload["json"] == list(TEXT_KEYS)
    first = payload["posts"][0]
    assert first["inputs"] == '{"i":0}' and first["outputs"] == '{"o":0}'
    assert payload["patches"][0]["outputs"] == {"done": True}
    assert posts[0]["inputs"] == {"i": 0}
    store.settle()
    got = {str(r.id): r for r in store.runs.list()}
    assert got[ids[18]].inputs["s"] == "nul\x00 esc\ufdd0 caf\u00e9"
    assert got[ids[18]].outputs == {"s": "lone \ud800", "big": 2**70}
    assert got[ids[4]].outputs == {"done": True} and got[ids[9]].inputs == {}


@pytest.mark.parametrize("usage", [True, False])
def test_the_columnar_path_leaves_what_needs_a_closer_look(store: Store, usage: bool) -> None:
    """A stored or patched run and dict posts go on to the post-dict path, in their order.
    Runs with usage to derive (llm, events, usage named in the outputs' text) are taken, with
    their usage; with ``USAGE`` off (the previous route, kept for the benchmark's A/B) they go
    on too."""
    from assay.store import _fold_columns

    ids = _ids(N)
    rows = encoded_rows(_rows(ids))
    store.runs.upsert(posts=_row_posts([list(_rows(ids)[11])], COLUMNS, EXTRA))
    dict_post = {"id": str(uuid.uuid4()), "name": "d", "run_type": "chain", "start_time": T0}
    items = [*rows, dict_post]
    saved, _fold_columns.USAGE = _fold_columns.USAGE, usage
    try:
        with store.write() as conn:
            fill_orders(conn, store.tenant_id, items)
            done, rest = insert_rows(store.runs, conn, items, {ids[3]}, "default", EXTRA,
                                     encoded=True)
    finally:
        _fold_columns.USAGE = saved
    left = [ids.index(r[0]) if r.__class__ is list else "dict" for r in rest]
    if usage:  # run 19 names usage only as a value: decoded, no usage key, a plain run
        assert left == [3, 11, "dict"]
    else:
        assert left == [3, 7, 8, 11, 12, 13, 14, 15, 16, 17, 19, 22, 23, "dict"]
    assert done == N + 1 - len(left)
    got = {str(r.id): r for r in store.runs.list() if str(r.id) in ids}
    assert len(got) == done + 1  # and run 11, stored before
    if usage:
        assert got[ids[7]].total_tokens == 42 and got[ids[8]].first_token_time is not None


def test_a_bad_row_in_a_writer_batch_is_dropped_alone(store: Store) -> None:
    """A batch that fails is applied row by row: the JSON text is decoded afresh for each try
    (never twice), the bad row dropped, the others stored as they were traced."""
    ids = _ids(N)
    rows = _rows(ids)[:4]
    bad = list(rows[3])
    bad[COLUMNS.index("start_time")] = None  # the general path refuses it by name
    bad[COLUMNS.index("run_type")] = "llm"
    before = store.journal.dropped
    store.journal.append_runs([*rows[:3], bad], columns=COLUMNS, extra=EXTRA)
    store.settle()
    assert store.journal.dropped == before + 1
    got = {str(r.id): r for r in store.runs.list()}
    assert set(got) == set(ids[:3])
    assert got[ids[1]].inputs == {"i": 1} and got[ids[0]].outputs == {"o": 0}
    assert got[ids[2]].dotted_order.startswith(got[ids[0]].dotted_order)


def test_malformed_value_lists_never_block_the_fold(store: Store) -> None:
    """A short list, an unhashable project name, a trace id that is not text: each goes to the
    general path, which drops it by name; the batch's good rows are stored."""
    ids = _ids(N)
    rows = _rows(ids)[:3]
    short = list(_rows(_ids(N))[0])[:5]
    odd_project = list(_rows(_ids(N))[0])
    odd_project[COLUMNS.index("session_name")] = {"not": "a name"}
    odd_trace = list(_rows(_ids(N))[0])
    odd_trace[COLUMNS.index("trace_id")] = {"not": "an id"}
    before = store.journal.dropped
    store.journal.append_runs([short, *rows, odd_project, odd_trace], columns=COLUMNS,
                              extra=EXTRA)
    store.settle()
    assert store.journal.pending() == 0
    assert {str(r.id) for r in store.runs.list()} == set(ids[:3])
    assert store.journal.dropped == before + 3


def test_consecutive_batches_of_runs_of_one_workspace_are_grouped() -> None:
    """Entries fold together only when they are runs of one workspace whose batches differ in
    nothing but their runs, and only consecutive ones (journal order is kept)."""
    from types import SimpleNamespace

    from assay.store._fold_merge import coalesced, merged

    def entry(kind: str, tenant: str = "t1") -> Any:
        return SimpleNamespace(kind=kind, tenant_id=tenant)

    def batch(posts: list[int], project: str = "p", patches: Any = None) -> dict[str, Any]:
        return {"posts": posts, "patches": patches or [], "default_project": project,
                "clean": True}

    pairs = [(entry(RUNS), batch([1, 2])), (entry(RUNS), batch([3], patches=[1])),
             (entry(RUNS, "t2"), batch([4])),  # another workspace
             (entry(RUNS), batch([5])), (entry(RUNS), batch([6], project="q")),  # another project
             (entry("feedback"), {"items": [1]}), (entry(RUNS), batch([7])),
             (entry(RUNS), None),  # not JSON: alone
             (entry(RUNS), batch([8])), (entry(RUNS), batch([9]))]
    groups = coalesced(pairs, RUNS)
    assert [[p.get("posts", p.get("items")) if p else None for _, p in g] for g in groups] == [
        [[1, 2], [3]], [[4]], [[5]], [[6]], [[1]], [[7]], [None], [[8], [9]]]
    assert merged(groups[0]) == {"posts": [1, 2, 3], "patches": [1], "default_project": "p",
                                 "clean": True}


def test_the_driver_s_executemany_fails_as_sqlalchemy_would(sqlite_url: str) -> None:
    """The fold's SQLite inserts go to the driver with rows made as they are bound; a
    duplicate key still surfaces as SQLAlchemy's ``IntegrityError`` (what the fold's retry and
    ``_duplicate_key`` look for), and the transaction goes on after a savepoint's rollback.
    (SQLite's path only: PostgreSQL's fold writes with COPY.)"""
    import sqlalchemy.exc

    from assay.store._fold_rows import executemany

    with Store.open(sqlite_url) as store, store.write() as conn:
        conn.exec_driver_sql("CREATE TEMP TABLE t (id TEXT PRIMARY KEY, n INTEGER)")
        executemany(conn, "INSERT INTO t VALUES (?, ?)", iter([("a", 1), ("b", 2)]))
        conn.exec_driver_sql("SAVEPOINT s")
        with pytest.raises(sqlalchemy.exc.IntegrityError):
            executemany(conn, "INSERT INTO t VALUES (?, ?)", iter([("c", 3), ("a", 4)]))
        conn.exec_driver_sql("ROLLBACK TO SAVEPOINT s")
        conn.exec_driver_sql("RELEASE SAVEPOINT s")
        assert conn.exec_driver_sql("SELECT id, n FROM t ORDER BY id").all() == [
            ("a", 1), ("b", 2)]
