"""The fold's fast path (``_fold_rows``) stores exactly what the general path stores.

The same runs go into three workspaces of one database: as the tracing writer journals them
(value lists, folded through the fast path where they qualify), through ``Journal.admit`` (the
server's cleaned posts, the fast path too), and as direct ``runs.upsert`` calls (the general
path). Every column of every run, and the statistics, must come out the same.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select

from assay._ids import dotted_segment_us
from assay.store import Store
from assay.store._fold_rows import insert_new
from assay.store._journal import _row_posts
from assay.tracing import RunTree

from ._stored import stored_runs
from .test_aggregates import _check_all

T0 = 1_700_000_000_000_000
COLUMNS = RunTree.ROW_COLUMNS
EXTRA = RunTree.ROW_EXTRA


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
    ]


def _normalized(store: Store, ids: list[str]) -> list[dict[str, Any]]:
    """Every stored column of the workspace's runs, ids replaced by their position and the
    project by its name, so two workspaces compare."""
    return stored_runs(store, {rid: f"<{n}>" for n, rid in enumerate(ids)})


def _patch(rid: str) -> dict[str, Any]:
    return {"id": rid, "end_time": T0 + 20 + 7, "outputs": {"done": True}}


def test_the_fast_path_stores_what_the_general_path_stores(store: Store) -> None:
    base = store
    writer, admitted, direct = (base.for_tenant(str(uuid.uuid4())) for _ in range(3))
    results = []
    for kind, st in (("writer", writer), ("admit", admitted), ("direct", direct)):
        ids = _ids(18)
        rows = _rows(ids)
        first, second = rows[:8], rows[8:]
        as_posts = _row_posts([list(r) for r in rows], COLUMNS, EXTRA)
        if kind == "writer":
            st.journal.append_runs(first, columns=COLUMNS, extra=EXTRA)
            # a later batch: the rest, run 4's end, and run 0 posted again (already stored)
            again = list(rows[0])
            again[COLUMNS.index("name")] = "renamed"
            st.journal.append_runs([*second, again], [_patch(ids[4])], columns=COLUMNS,
                                   extra=EXTRA)
        elif kind == "admit":
            st.journal.admit(as_posts[:8])
            again = dict(as_posts[0], name="renamed")
            st.journal.admit([*as_posts[8:], again], [_patch(ids[4])])
        else:
            st.runs.upsert(posts=as_posts[:8])
            again = dict(as_posts[0], name="renamed")
            st.runs.upsert(posts=[*as_posts[8:], again], patches=[_patch(ids[4])])
        st.settle()
        results.append(_normalized(st, ids))
    fast_writer, fast_admit, general = results
    assert len(general) == 18
    tokens = {r["name"]: (r["total_tokens"], r["total_cost"], r["first_token_us"])
              for r in general}
    assert tokens["llm"][0] == 42 and tokens["llm"][1] > 0  # priced by genai-prices
    assert tokens["meta usage"][:2] == (10, 0.75)  # its own costs win
    assert tokens["llm_output"][0] == 120 and tokens["llm_output"][1] > 0
    assert tokens["streamed, priced"][2] == 4 and tokens["no usage at all"] == (None,) * 3
    for got in (fast_writer, fast_admit):
        for a, b in zip(got, general, strict=True):
            assert a == b
    assert _check_all([writer, admitted, direct]) == 6  # two projects each


def test_llm_runs_and_runs_with_events_take_the_fast_path(store: Store) -> None:
    ids = _ids(18)
    posts = _row_posts(_rows(ids), COLUMNS, EXTRA)
    with store.write() as conn:
        done, rest = insert_new(store.runs, conn, posts, set(), "default", clean=False)
    assert done == 18 and rest == []
    got = {str(r.id): r for r in store.runs.list()}
    assert got[ids[7]].total_tokens == 42 and got[ids[8]].first_token_time is not None
    assert _check_all([store]) >= 1


def test_insert_new_takes_only_new_plain_runs(store: Store) -> None:
    ids = _ids(18)
    posts = _row_posts(_rows(ids), COLUMNS, EXTRA)
    stored = posts[11]
    store.runs.upsert(posts=[stored])  # already stored: left to the general path
    with store.write() as conn:
        done, rest = insert_new(store.runs, conn, posts, {ids[3]}, "default", clean=False)
        left = {p["id"] for p in rest}
        # run 3 has a patch in the batch; run 11 is stored
        assert left == {ids[3], ids[11]}
        assert done == 16
        store.runs._apply(conn, rest, [], "default")
    assert len(store.runs.list()) == 18
    assert _check_all([store]) >= 1


def test_a_run_stored_meanwhile_goes_to_the_general_path(store: Store) -> None:
    """An id another writer stored between the fold's look-up and its insert: the batch is
    applied item by item, and the run is completed, not lost or doubled."""
    ids = _ids(18)
    rows = _rows(ids)
    store.journal.append_runs(rows[:3], columns=COLUMNS, extra=EXTRA)
    store.runs.upsert(posts=[dict(_row_posts([list(rows[1])], COLUMNS, EXTRA)[0],
                                  dotted_order=None, end_time=None, outputs=None)])
    store.settle()
    got = {str(r.id): r for r in store.runs.list()}
    assert set(got) == set(ids[:3])
    assert got[ids[1]].status == "success"  # the journaled end completed it
    assert _check_all([store]) >= 1


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


def test_plain_scores_as_value_lists_fold_like_the_dicts(store: Store) -> None:
    """evaluate()'s scores (value lists, the rest as the batch's defaults) are made into rows
    once per batch; every column equals what the general path makes of each dict."""
    results = []
    for as_lists in (True, False):
        st = store.for_tenant(str(uuid.uuid4()))
        ids = _ids(18)
        project = st.projects.create(f"scores-{as_lists}")
        st.journal.append_runs(_rows(ids), columns=COLUMNS, extra=EXTRA)
        defaults = {"session_id": str(project.id),
                    "feedback_source": {"type": "model", "metadata": {"e": 1}}}
        values = [[ids[i], ids[0], key, score] for i in range(12)
                  for key, score in (("correct", i % 2 == 0), ("score", i / 7), ("none", None))]
        values.append([None, None, "session-level", 3])  # no run: the experiment's own
        if as_lists:
            st.journal.append_feedback(values, columns=("run_id", "trace_id", "key", "score"),
                                       defaults=defaults)
        else:
            st.journal.append_feedback([{**defaults, "run_id": r, "trace_id": t, "key": k,
                                         "score": s} for r, t, k, s in values])
        st.settle()
        results.append(_feedback_of(st, ids))
        stats = st.projects.read(project_id=project.id, include_stats=True).feedback_stats
        assert stats["correct"].n == 12 and stats["correct"].avg == pytest.approx(0.5)
        assert _check_all([st]) >= 1
    fast, general = results
    assert len(fast) == 37 and fast == general


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
            values = {"id": rid, "trace_id": rid, "name": f"r{i}", "run_type": "o'brien; --",
                      "start_time": T0 + i, "end_time": T0 + 9, "inputs": {"i": i},
                      "outputs": {"same": "o'k"}, "error": "it's 'bad'", "tags": ["\u00fc"],
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
    assert len(results[2]) == 6 and results[2][0]["run_type"] == "o'brien; --"
    assert results[0] == results[2] and results[1] == results[2]
