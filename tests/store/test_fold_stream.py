"""PostgreSQL's fold of the tracing writer's batches as one stream (``_fold_stream``), against
the fold batch by batch (``_journal.STREAM`` off): the same runs, columns, JSON text and
statistics; anything it does not take (another kind of entry, a run stored already, a child
whose parent never comes) rolled back and folded as before. SQLite never streams.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from assay.store import Store, _fold_stream, _journal
from assay.store._fold_columns import WRITER_COLUMNS

from .test_aggregates import _check_all
from .test_fold_fast import (
    COLUMNS,
    EXTRA,
    _agent_rows,
    _ids,
    _normalized,
    _previous_format,
    _row_posts,
    _stored_text,
)

_PARENT, _DOTTED, _NAME, _START = (WRITER_COLUMNS.index(k) for k in (
    "parent_run_id", "dotted_order", "name", "start_time"))


def _streamed(store: Store) -> int:
    return _fold_stream.STREAMED.get(store.engine, 0)


def _both_ways(store: Store, monkeypatch: pytest.MonkeyPatch,
               journal_them: Any) -> tuple[list[Any], list[Any], int]:
    """Fold what ``journal_them(store)`` journals (fresh runs each time, ids being unique
    across workspaces: it returns them, then any other ids they name), streamed and not, each
    in a workspace of its own; return both workspaces' runs (their stored text compared
    here) and the transactions streamed."""
    got, texts, used, streamed = [], [], [], 0
    for stream in (True, False):
        monkeypatch.setattr(_journal, "STREAM", stream)
        st = store.for_tenant(str(uuid.uuid4()))
        used.append(st)
        ids, *named = journal_them(st)  # the runs, then other ids the runs name
        before = _streamed(st)
        st.settle()
        if stream:
            streamed = _streamed(st) - before
        got.append(_normalized(st, [*ids, *named]))
        texts.append(_stored_text(st, ids))
    assert texts[0] == texts[1]  # the very JSON text
    assert _check_all(used) >= 2
    return got[0], got[1], streamed


def _agent_batches(n: int = 60, *, parents_first: bool = False, orders: bool = False
                   ) -> tuple[list[list[Any]], list[str]]:
    """An agent's trace in batches of 7, each child's order left to the fold, as the writer
    journals it (``parents_first``: it leaves a child's order to the fold only when the
    parent went first), or with each root after its children, so that some children come one
    batch before their parent (the batch-by-batch fold gives them their orders when the two
    batches are in one transaction). ``orders``: every run keeps its order, as the SDKs'
    batches send them (a server's requests)."""
    ids, llm_ids = _ids(n), _ids(n // 3)
    rows = _agent_rows(ids, llm_ids)
    for row in rows:
        if row[_PARENT] is not None and not orders:
            row[_DOTTED] = None
    if parents_first:
        return [rows[i:i + 7] for i in range(0, len(rows), 7)], ids + llm_ids
    # each root after its children: batches of 7 split some of them from their children
    ordered: list[list[Any]] = []
    pending_root: list[Any] | None = None
    for row in rows:
        if row[_PARENT] is None:
            if pending_root is not None:
                ordered.append(pending_root)
            pending_root = row
        else:
            ordered.append(row)
    assert pending_root is not None
    ordered.append(pending_root)
    return [ordered[i:i + 7] for i in range(0, len(ordered), 7)], ids + llm_ids


def test_the_writer_s_batches_fold_as_one_stream(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")

    def journal_them(st: Store) -> tuple[list[str]]:
        batches, ids = _agent_batches()
        for batch in batches:
            st.journal.append_runs(batch, columns=COLUMNS, extra=EXTRA)
        return (ids,)

    streamed_runs, as_before, streamed = _both_ways(store, monkeypatch, journal_them)
    assert len(as_before) == 80
    assert all(r["dotted_order"] for r in as_before)
    assert sum(r["total_cost"] is not None for r in as_before) == 20
    for a, b in zip(streamed_runs, as_before, strict=True):
        assert a == b
    # 12 entries: one transaction on PostgreSQL (a reader's fold takes 20); SQLite never
    assert streamed == (1 if store.engine.dialect.name == "postgresql" else 0)


def test_a_run_stored_already_is_folded_as_before(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream never looks up which runs are stored: a run posted again fails its COPY,
    and the transaction folds as before (the run renamed, as the batch-by-batch fold does)."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")

    def journal_them(st: Store) -> tuple[list[str]]:
        batches, ids = _agent_batches(30)
        st.journal.append_runs(batches[0], columns=COLUMNS, extra=EXTRA)
        st.settle()
        again = list(batches[0][0])
        again[_NAME] = "posted again"
        for batch in [*batches[1:-1], [*batches[-1], again]]:
            st.journal.append_runs(batch, columns=COLUMNS, extra=EXTRA)
        return (ids,)

    streamed_runs, as_before, streamed = _both_ways(store, monkeypatch, journal_them)
    assert len(as_before) == 40  # posted again: one run still
    for a, b in zip(streamed_runs, as_before, strict=True):
        assert a == b
    assert streamed == 0  # the second transaction's stream failed and was rolled back


def test_other_entries_and_orphans_are_folded_as_before(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A feedback entry among the batches (as evaluate() journals them) is folded in its turn
    as before; a child whose parent is in no batch has it looked up at the end, and is kept
    without an order, as before."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")

    def journal_them(st: Store) -> tuple[list[str]]:
        # an SDK's batches carry every run's dotted order (a child posted without one, by the
        # single-run API, is folded as before: the store derives its order from its parent)
        batches, ids = _agent_batches(30, parents_first=True, orders=True)
        for k, batch in enumerate(batches):
            st.journal.append_runs(batch, columns=COLUMNS, extra=EXTRA)
            if k == 1:
                st.journal.append_feedback([{"run_id": ids[0], "key": "k", "score": 1.0}])
        return (ids,)

    streamed_runs, as_before, streamed = _both_ways(store, monkeypatch, journal_them)
    for a, b in zip(streamed_runs, as_before, strict=True):
        assert a == b
    # the feedback entry folded in its turn, in the same transaction
    assert streamed == (1 if store.engine.dialect.name == "postgresql" else 0)

    def with_orphan(st: Store) -> tuple[list[str], str]:
        batches, ids = _agent_batches(30)
        orphan = list(batches[0][0])
        orphan[0] = str(uuid.uuid4())  # a child of a run no batch holds
        orphan[_PARENT] = str(uuid.uuid4())
        orphan[_START] += 10_000  # stored last
        for batch in batches:
            st.journal.append_runs(batch, columns=COLUMNS, extra=EXTRA)
        st.journal.append_runs([orphan], columns=COLUMNS, extra=EXTRA)
        return [*ids, orphan[0]], orphan[_PARENT]

    streamed_runs, as_before, streamed = _both_ways(store, monkeypatch, with_orphan)
    assert [r["dotted_order"] for r in as_before].count(None) == 1  # the orphan, as before
    for a, b in zip(streamed_runs, as_before, strict=True):
        assert a == b
    assert streamed == (1 if store.engine.dialect.name == "postgresql" else 0)


def test_a_server_s_journal_is_not_tried_at_every_transaction(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A transaction whose first entry is of a format the stream does not take (an older
    writer's) skips the stream for the next ``STREAM_SKIP`` transactions."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    journal = store.journal
    # the journal is the database's, shared by every workspace: what an earlier test of this
    # process left in it (PostgreSQL: one database a process) is folded first, not counted
    journal.settle()
    monkeypatch.setattr(_journal, "STREAM", True)
    rows, _ = _agent_batches(3, parents_first=True)
    order = tuple(reversed(COLUMNS))  # another writer's columns
    at = [COLUMNS.index(c) for c in order]
    _previous_format(store, [[r[i] for i in at] for r in rows[0]], [], order)
    assert journal.fold_some(20)[0] == len(rows[0])
    postgres = store.engine.dialect.name == "postgresql"
    assert journal.stream_skip == (_fold_stream.STREAM_SKIP if postgres else 0)
    if postgres:
        rows, _ = _agent_batches(3, parents_first=True)
        journal.append_runs(rows[0], columns=COLUMNS, extra=EXTRA)
        before = _streamed(store)
        journal.fold_some(20)  # a writer's batch, not tried
        assert journal.stream_skip == _fold_stream.STREAM_SKIP - 1
        assert _streamed(store) == before


def test_runs_posted_at_their_start_and_ended_by_a_patch(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A root posted when it starts and ended by a patch in a later batch (a long run), its
    children between, their orders left to the fold: the batches with patches are folded as
    before inside the stream, the rest streamed; the same is stored either way."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    from .test_fold_fast import _patch

    ends = WRITER_COLUMNS.index("end_time"), WRITER_COLUMNS.index("outputs")

    def journal_them(st: Store) -> tuple[list[str]]:
        # an SDK's batches carry every run's dotted order (a child posted without one, by the
        # single-run API, is folded as before: the store derives its order from its parent)
        batches, ids = _agent_batches(30, parents_first=True, orders=True)
        roots = [r for r in batches[0] if r[_PARENT] is None]
        for root in roots:  # posted at its start
            root[ends[0]] = root[ends[1]] = None
        st.journal.append_runs(batches[0], columns=COLUMNS, extra=EXTRA)
        st.journal.append_runs(batches[1], [_patch(r[0]) for r in roots], columns=COLUMNS,
                               extra=EXTRA)
        for batch in batches[2:]:
            st.journal.append_runs(batch, columns=COLUMNS, extra=EXTRA)
        return (ids,)

    streamed_runs, as_before, streamed = _both_ways(store, monkeypatch, journal_them)
    assert all(r["dotted_order"] for r in as_before)
    assert all(r["end_time"] is not None for r in as_before if r["parent_run_id"] is None)
    for a, b in zip(streamed_runs, as_before, strict=True):
        assert a == b
    assert streamed == (1 if store.engine.dialect.name == "postgresql" else 0)


def test_a_server_s_requests_stream_too(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches ``Journal.admit`` journaled (a server's requests: cleaned posts, their JSON as
    text) stream through ``insert_new``'s fast path; one with patches is folded as before in
    its turn."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    from .test_fold_fast import _patch

    def journal_them(st: Store) -> tuple[list[str]]:
        # an SDK's batches carry every run's dotted order (a child posted without one, by the
        # single-run API, is folded as before: the store derives its order from its parent)
        batches, ids = _agent_batches(30, parents_first=True, orders=True)
        posts = [_row_posts([list(r) for r in batch], COLUMNS, EXTRA) for batch in batches]
        roots = [p for p in posts[0] if p.get("parent_run_id") is None]
        for k, batch in enumerate(posts):
            st.journal.admit(batch, [_patch(r["id"]) for r in roots] if k == 2 else [])
        return (ids,)

    streamed_runs, as_before, streamed = _both_ways(store, monkeypatch, journal_them)
    assert len(as_before) == 40
    for a, b in zip(streamed_runs, as_before, strict=True):
        assert a == b
    assert streamed == (1 if store.engine.dialect.name == "postgresql" else 0)


def test_what_a_fallen_back_stream_dropped_is_counted_once(
        store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A feedback item the fold drops, folded inside a stream that then falls back (a run
    posted again, last): the fold as before drops it again, and it is counted once, as
    without the stream."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    counts = []
    for stream in (True, False):
        monkeypatch.setattr(_journal, "STREAM", stream)
        st = store.for_tenant(str(uuid.uuid4()))
        batches, ids = _agent_batches(30, parents_first=True)
        st.journal.append_runs(batches[0], columns=COLUMNS, extra=EXTRA)
        st.settle()
        before = st.journal.dropped
        st.journal.append_runs(batches[1], columns=COLUMNS, extra=EXTRA)
        st.journal.append_feedback([{"run_id": ids[0], "key": "k", "score": 1.0},
                                    {"run_id": ids[0], "key": ["not", "text"]}])
        for batch in batches[2:-1]:
            st.journal.append_runs(batch, columns=COLUMNS, extra=EXTRA)
        st.journal.append_runs([*batches[-1], batches[0][0]], columns=COLUMNS, extra=EXTRA)
        st.settle()
        counts.append(st.journal.dropped - before)
        assert len(st.runs.list(run_ids=ids)) == len(ids)
        assert [f.key for f in st.feedback.list(run_ids=[ids[0]])] == ["k"]
    assert counts == [1, 1]
