"""The fold's columnar path for evaluate()'s plain scores stores what the general path stores.

Each batch is journaled twice, into two projects: as value lists (``SCORE_COLUMNS``, what
``evaluate()``'s sink journals; the columnar path, ``_fold_scores``) and as the same feedback
in dicts (the general path, item by item through ``FeedbackRepo._row``). Every stored column
but the ids and the project, and every statistic, must be the same.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from assay.evaluation._sink import SCORE_COLUMNS as SINK_COLUMNS
from assay.store import Store
from assay.store._fold_scores import SCORE_COLUMNS, ScoreBatch, score_rows
from assay.store._tables import feedback, feedback_aggregates, feedback_label_counts

from .test_aggregates import _check_all


@pytest.fixture(autouse=True)
def _reads_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads fold what is journaled: no background folder (as in test_journal.py)."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")


def _ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def _stored(store: Store, project: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]],
                                                 list[tuple[Any, ...]]]:
    """The project's feedback rows (every column but id and project, in insert order), its
    feedback statistics and label counts (every column but the project)."""
    store.journal.settle()
    skip = {"id", "session_id", "created_at", "modified_at"}
    cols = [c for c in feedback.columns if c.name not in skip]
    with store.read() as conn:
        rows = conn.execute(select(*cols, feedback.c.created_at, feedback.c.modified_at)
                            .where(feedback.c.session_id == project)
                            .order_by(feedback.c.id)).all()
        aggs = conn.execute(select(*[c for c in feedback_aggregates.columns
                                     if c.name != "session_id"])
                            .where(feedback_aggregates.c.session_id == project)
                            .order_by(feedback_aggregates.c.key)).all()
        labels = conn.execute(select(*[c for c in feedback_label_counts.columns
                                       if c.name != "session_id"])
                              .where(feedback_label_counts.c.session_id == project)
                              .order_by(feedback_label_counts.c.key,
                                        feedback_label_counts.c.label)).all()
    out = []
    for r in rows:
        *values, created, modified = r
        assert created == modified  # the batch's time stands for both
        out.append(tuple(values))
    return out, [tuple(a) for a in aggs], [tuple(a) for a in labels]


def _both(store: Store, values: list[list[Any]], shared: dict[str, Any]) -> tuple[Any, Any]:
    """Journal ``values`` into a fresh project as value lists and into another as dicts;
    return what each stored."""
    out = []
    for kind in ("lists", "dicts"):
        project = str(store.projects.create(name=f"scores-{kind}-{uuid.uuid4()}").id)
        given = {**shared, "session_id": project}
        if kind == "lists":
            store.journal.append_feedback(values, columns=SCORE_COLUMNS, defaults=given)
        else:
            store.journal.append_feedback(
                [{**given, **dict(zip(SCORE_COLUMNS, v, strict=True))} for v in values])
        out.append(_stored(store, project))
    return out[0], out[1]


def test_sink_and_fold_agree_on_the_columns() -> None:
    assert SINK_COLUMNS == SCORE_COLUMNS


def test_plain_scores_fold_columnar_as_the_general_path_stores_them(store: Store) -> None:
    """One key (a literal in the statement), scores of every JSON type, summed per key."""
    runs = _ids(7)
    # every JSON type; summed in another order, the sum of squares would differ in its last bit
    scores: list[Any] = [0.1, 0.2, 0.3, True, False, None, 3]
    values = [[r, r, "correct", s] for r, s in zip(runs, scores, strict=True)]
    shared = {"feedback_source": {"type": "model"}}
    assert isinstance(score_rows(store.feedback, values, SCORE_COLUMNS,
                                 {**shared, "session_id": str(uuid.uuid4())}, 1), ScoreBatch)
    lists, dicts = _both(store, values, shared)
    assert lists == dicts
    rows, aggs, labels = lists
    assert len(rows) == 7 and aggs and not labels
    assert _check_all([store])


def test_several_keys_traces_and_shared_fields_fold_alike(store: Store) -> None:
    """Keys bound per row, a trace of its own or none, and shared fields that are stored as
    literals (quotes), bound (non-ASCII) or counted (a value's label)."""
    runs, traces = _ids(6), _ids(6)
    values = [[runs[0], traces[0], "a", 1], [runs[1], None, "b", 0.5],
              [runs[2], runs[2], "a", False], [runs[3], traces[3], "é-key", 2.5],
              [runs[4], None, "b", None], [runs[5], traces[5], "a", 0.25]]
    shared = {"feedback_source": {"type": "model", "metadata": {"who": "d'Artagnan ü"}},
              "value": "pass", "comment": "it's fine \u00e9", "correction": {"y": [1, 2]},
              "extra": {"k": "v"}}
    project = str(uuid.uuid4())
    assert isinstance(score_rows(store.feedback, values, SCORE_COLUMNS,
                                 {**shared, "session_id": project}, 1), ScoreBatch)
    lists, dicts = _both(store, values, shared)
    assert lists == dicts
    rows, aggs, labels = lists
    assert len(rows) == 6 and len(aggs) == 3 and len(labels) == 3  # a, b, é-key: "pass"
    assert _check_all([store])


@pytest.mark.parametrize("case", ["bad score", "upper-case id", "surrogate key", "empty key",
                                  "short item", "no project"])
def test_batches_the_columnar_path_leaves_fold_as_before(
        store: Store, case: str, caplog: pytest.LogCaptureFixture) -> None:
    """A batch the columnar path does not take goes the general path whole: what is valid is
    stored (ids made canonical, a run's project looked up), what is not is dropped by name
    (the fold goes on)."""
    project = str(store.projects.create(name=f"leave-{uuid.uuid4()}").id)
    runs = _ids(3)
    values: list[list[Any]] = [[r, r, "correct", 1.0] for r in runs]
    shared: dict[str, Any] = {"session_id": project, "feedback_source": {"type": "model"}}
    expect, dropped = 3, 0
    if case == "bad score":
        values[1][3], expect, dropped = "high", 2, 1
    elif case == "upper-case id":
        values[1][0] = values[1][1] = runs[1].upper()
    elif case == "surrogate key":
        values[2][2], expect, dropped = "bad\ud800", 2, 1
    elif case == "empty key":
        values[0][2], expect, dropped = "", 2, 1
    elif case == "short item":
        values[1] = values[1][:3]  # no score: stored without one
    else:  # the runs' project is looked up from the runs, stored first
        store.runs.upsert(posts=[{"id": r, "trace_id": r, "name": "t", "run_type": "chain",
                                  "start_time": "2026-01-01T00:00:00Z",
                                  "session_id": project} for r in runs])
        del shared["session_id"]
    assert score_rows(store.feedback, values, SCORE_COLUMNS, shared, 1) is None
    before = store.journal.dropped
    with caplog.at_level(logging.WARNING, logger="assay.store"):
        store.journal.append_feedback(values, columns=SCORE_COLUMNS, defaults=shared)
        rows, aggs, _ = _stored(store, project)
    assert len(rows) == expect
    assert store.journal.dropped - before == dropped
    assert {r[1] for r in rows} <= set(runs)  # (tenant, run, ...): run ids stored canonical
    assert aggs and aggs[0][3] == expect  # (tenant, level, key, n, ...)
    assert _check_all([store])


def _refuse_key(store: Store, key: str) -> None:
    """A trigger that refuses a feedback row with ``key``: the database itself fails the
    columnar insert of a whole batch, as a constraint would."""
    with store.write() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                "CREATE OR REPLACE FUNCTION assay_test_refuse() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.key = '{key}' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; "
                "END $$ LANGUAGE plpgsql")
            conn.exec_driver_sql("CREATE TRIGGER assay_test_refuse BEFORE INSERT ON feedback "
                                 "FOR EACH ROW EXECUTE FUNCTION assay_test_refuse()")
        else:
            conn.exec_driver_sql(
                "CREATE TRIGGER assay_test_refuse BEFORE INSERT ON feedback "
                f"WHEN NEW.key = '{key}' BEGIN SELECT RAISE(ABORT, 'refused'); END")


def _drop_refusal(store: Store) -> None:
    with store.write() as conn:
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS assay_test_refuse"
                             + (" ON feedback" if conn.dialect.name == "postgresql" else ""))


def test_a_columnar_batch_the_database_refuses_is_applied_score_by_score(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """The columnar path took the batch, the insert failed: each score is retried alone (made
    a dict only then), only the refused one is dropped, by name, and the rest is stored with
    its statistics."""
    project = str(store.projects.create(name=f"refused-{uuid.uuid4()}").id)
    runs = _ids(4)
    values: list[list[Any]] = [[r, r, "correct", 1.0] for r in runs]
    values[2][2] = "refused-key"
    shared = {"session_id": project, "feedback_source": {"type": "model"}}
    assert isinstance(score_rows(store.feedback, values, SCORE_COLUMNS, shared, 1), ScoreBatch)
    _refuse_key(store, "refused-key")
    try:
        before = store.journal.dropped
        with caplog.at_level(logging.WARNING, logger="assay.store"):
            store.journal.append_feedback(values, columns=SCORE_COLUMNS, defaults=shared)
            rows, aggs, _ = _stored(store, project)
    finally:
        _drop_refusal(store)
    assert sorted(r[1] for r in rows) == sorted(runs[:2] + runs[3:])
    assert store.journal.dropped - before == 1
    assert "applying them one by one" in caplog.text
    assert aggs and aggs[0][3] == 3  # (tenant, level, key, n, ...): the three stored
    assert _check_all([store])
