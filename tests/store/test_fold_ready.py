"""A fold prepared before its transaction (``_fold_ready``) stores what a fold without it
stores, and never what the journal no longer holds: entries folded meanwhile by another fold,
or (SQLite) later entries given a folded one's ``seq``."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from assay.store import Store
from assay.store._fold_ready import prepare
from assay.store._fold_rows import _AT
from assay.store._journal import _row_posts
from assay.store._queue import queue_store
from assay.store._tables import runs

from ._stored import stored_runs
from .test_aggregates import _check_all
from .test_fold_fast import COLUMNS, EXTRA, N, _ids, _patch, _rows

_NAME = _AT["name"]


@pytest.fixture(autouse=True)
def _no_background_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")  # the folds here are the test's own


def _admit(st: Store, ids: list[str], *, repeats: bool = True) -> None:
    """The runs of every kind, as the server journals them: two requests, the second (with
    ``repeats``) with a patch of a run of the first and a run of the first posted again."""
    posts = _row_posts(_rows(ids), COLUMNS, EXTRA)
    st.journal.admit(posts[:8])
    if repeats:
        st.journal.admit([*posts[8:], dict(posts[0], name="renamed")], [_patch(ids[4])])
    else:
        st.journal.admit(posts[8:])


def _fold_all(st: Store, *, prepared: bool) -> None:
    while True:
        ready = prepare(st.journal, 20) if prepared else None
        if not st.journal.fold_some(20, ready=ready)[1]:
            return


def test_a_prepared_fold_stores_what_an_unprepared_one_stores(store: Store) -> None:
    got = []
    for prepared in (False, True):
        st = store.for_tenant(str(uuid.uuid4()))
        ids = _ids(N)
        _admit(st, ids)
        if prepared:
            ready = prepare(st.journal, 20)
            assert ready is not None and len(ready.entries) == 2
            assert len(ready.rows) == N + 1  # every admitted post's row, the repeated one too
        _fold_all(st, prepared=prepared)
        got.append(stored_runs(st, {rid: f"run {i}" for i, rid in enumerate(ids)}))
        assert st.journal.pending() == 0
    assert len(got[0]) == N and got[1] == got[0]
    assert _check_all([store]) >= 0  # the statistics agree with the runs (all workspaces)


def test_the_fold_stores_the_rows_it_prepared(store: Store) -> None:
    ids = _ids(N)
    _admit(store, ids, repeats=False)
    ready = prepare(store.journal, 20)
    assert ready is not None and len(ready.rows) == N
    for row in ready.rows.values():
        row[_NAME] = "prepared"  # what only a prepared row can carry
    store.journal.fold_some(20, ready=ready)
    names = {str(r.id): r.name for r in store.runs.list()}
    assert len(names) == N and set(names.values()) == {"prepared"}


def test_entries_folded_meanwhile_are_not_folded_again(store: Store) -> None:
    """Prepared, then folded by someone else, then the journal holds new entries (in a
    database's own journal on SQLite, under the same ``seq``s; a queue file never gives a
    number again): the prepared fold stores the new runs, once, from their own entries, and
    none of its stale rows."""
    first = _ids(N)
    _admit(store, first)
    stale = prepare(store.journal, 20)
    assert stale is not None
    seqs = set(stale.entries)
    for row in stale.rows.values():
        row[_NAME] = "stale"
    _fold_all(store, prepared=False)  # another folder took them
    second = _ids(N)
    _admit(store, second)
    again = prepare(store.journal, 20)
    assert again is not None
    if queue_store(store) is not None:  # a queue file: numbers never given again
        assert not set(again.entries) & seqs
    elif store.engine.dialect.name == "sqlite":  # the journal emptied: its seqs start over
        assert set(again.entries) == seqs
    store.journal.fold_some(20, ready=stale)
    runs = {str(r.id): r for r in store.runs.list()}
    assert set(runs) == set(first) | set(second)  # each once (a run id is the primary key)
    assert "stale" not in {r.name for r in runs.values()}
    assert store.journal.pending() == 0


def test_a_prepared_fold_folds_the_entries_it_prepared_not_later_ones(store: Store) -> None:
    """``Ready.count``: the entries read ahead. Folding that many leaves the entries appended
    since for the next prepared fold (the fold process would build their rows under the
    write lock otherwise); every run is stored once all the same."""
    first, later = _ids(N), _ids(N)
    _admit(store, first, repeats=False)
    ready = prepare(store.journal, 20)
    assert ready is not None and ready.count == len(ready.entries) == 2
    _admit(store, later, repeats=False)
    for row in ready.rows.values():
        row[_NAME] = "prepared"
    store.journal.fold_some(ready.count, ready=ready)
    assert store.journal.backlog(10) == 2  # the later requests' entries, untouched
    with store.read() as conn:  # the table itself: a read through the API folds the rest
        stored = {str(i) for i in conn.execute(select(runs.c.id)).scalars()}
    assert set(first) <= stored and not set(later) & stored
    _fold_all(store, prepared=True)
    names = {str(r.id): r.name for r in store.runs.list()}
    assert set(first) | set(later) <= set(names)
    assert {names[rid] for rid in first} == {"prepared"}  # first's rows as prepared
    assert "prepared" not in {names[rid] for rid in later}


def test_the_fold_loop_folds_what_is_appended_while_it_runs(sqlite_url: str) -> None:
    """``assay serve``'s fold process loop on SQLite: no separate probe of the journal, and
    what arrives during its pauses is folded by the next transaction."""
    import threading
    import time

    from assay.store._fold_process import fold_loop

    with Store.open(sqlite_url) as st:
        stop = threading.Event()
        loop = threading.Thread(target=fold_loop, args=(sqlite_url, stop), kwargs={
            "interval": 0.01})
        loop.start()
        try:
            ids = []
            for _ in range(5):
                batch = _ids(N)
                ids += batch
                _admit(st, batch, repeats=False)
                time.sleep(0.005)
            deadline = time.monotonic() + 30
            while st.journal.pending() and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            stop.set()
            loop.join(10)
        assert not loop.is_alive()
        assert st.journal.pending() == 0
        assert set(ids) <= {str(r.id) for r in st.runs.list(limit=10 * len(ids))}
