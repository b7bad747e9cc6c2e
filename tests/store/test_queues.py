"""``store.queues`` (annotation queues) and ``store.feedback_configs`` on SQLite and
PostgreSQL: the review flow the UI builds on, all-or-nothing writes, workspaces kept apart."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from assay.errors import ConflictError, InvalidInputError, NotFoundError
from assay.store import Store


def _runs(store: Store, n: int) -> list[str]:
    start = datetime.now(UTC)
    ids = [str(uuid.uuid4()) for _ in range(n)]
    store.runs.upsert(posts=[
        {"id": rid, "trace_id": rid, "name": f"r{i}", "run_type": "chain",
         "start_time": (start + timedelta(milliseconds=i)).isoformat(),
         "dotted_order": (start + timedelta(milliseconds=i)).strftime("%Y%m%dT%H%M%S%fZ") + rid,
         "session_name": "p", "inputs": {"i": i}} for i, rid in enumerate(ids)])
    return ids


def test_review_flow(store: Store) -> None:
    q = store.queues.create("review", rubric_items=[{"feedback_key": "ok"}])
    ids = _runs(store, 3)
    assert store.queues.add_runs(q.id, ids) == 3
    assert store.queues.add_runs(q.id, ids[:1]) == 0  # already queued: stays where it is
    assert store.queues.size(q.id) == 3
    seen = []
    while (nxt := store.queues.next_run(q.id)) is not None:
        seen.append(str(nxt.id))
        store.queues.mark_done(q.id, nxt.id)
    assert seen == ids
    assert store.queues.size(q.id) == 0 and store.queues.size(q.id, status="completed") == 3
    done = store.queues.list_runs(q.id, status="completed")
    assert all(r.completed_at and r.last_reviewed_time for r in done)
    store.queues.mark_done(q.id, ids[1], done=False)  # back to review
    assert str(store.queues.get_run(q.id, 0).id) == ids[1]
    assert store.queues.list_runs(q.id, status="needs_others_review") == []
    store.queues.remove_run(q.id, ids[1])
    assert store.queues.size(q.id, status=None) == 2
    with pytest.raises(NotFoundError, match="not in annotation queue"):
        store.queues.remove_run(q.id, ids[1])
    with pytest.raises(InvalidInputError, match="status must be one of"):
        store.queues.size(q.id, status="archived")


def test_writes_are_all_or_nothing(store: Store) -> None:
    q = store.queues.create("q")
    ids = _runs(store, 2)
    missing = str(uuid.uuid4())
    with pytest.raises(NotFoundError, match=missing):
        store.queues.add_runs(q.id, [ids[0], missing, ids[1]])
    assert store.queues.size(q.id, status=None) == 0
    for bad, words in (
        ([{"description": "no key"}], "feedback_key must be a non-empty string"),
        ([{"feedback_key": "a"}, {"feedback_key": "a"}], "appears twice"),
        ([{"feedback_key": "a", "colour": "red"}], "unknown field"),
        ("not a list", "must be a list"),
    ):
        with pytest.raises(InvalidInputError, match=words):
            store.queues.update(q.id, name="renamed", rubric_items=bad)  # type: ignore[arg-type]
    assert store.queues.read(q.id).name == "q"
    with pytest.raises(InvalidInputError, match="non-empty name"):
        store.queues.create(" ")
    store.queues.add_runs(q.id, ids)
    store.queues.delete(q.id)
    with pytest.raises(NotFoundError):
        store.queues.list_runs(q.id)
    assert store.queues.list() == []


def test_workspaces_are_apart(store: Store) -> None:
    other = store.for_tenant(str(uuid.uuid4()))
    q = store.queues.create("mine")
    ids = _runs(store, 1)
    with pytest.raises(NotFoundError):
        other.queues.read(q.id)
    theirs = other.queues.create("theirs")
    with pytest.raises(NotFoundError):  # another workspace's run cannot be queued
        other.queues.add_runs(theirs.id, ids)
    assert [x.name for x in other.queues.list()] == ["theirs"]
    store.feedback_configs.create("k", {"type": "freeform"})
    assert other.feedback_configs.list() == []
    other.feedback_configs.create("k", {"type": "continuous", "min": 0, "max": 1})
    assert store.feedback_configs.read("k").feedback_config == {"type": "freeform"}


def test_feedback_configs(store: Store) -> None:
    cats = {"type": "categorical", "categories": [{"value": 0, "label": "no"},
                                                  {"value": 1, "label": "yes"}]}
    made = store.feedback_configs.create("ok", cats)
    assert made.feedback_config["allows_multiple_categories"] is False
    assert store.feedback_configs.create("ok", cats).id == made.id
    with pytest.raises(ConflictError):
        store.feedback_configs.create("ok", {"type": "freeform"})
    with pytest.raises(InvalidInputError, match="is_enforced"):
        store.feedback_configs.create("e", {"type": "freeform"}, is_enforced=True)
    with pytest.raises(InvalidInputError, match="fewer|at least 2"):
        store.feedback_configs.update("ok", remove_categories=[0])
    with pytest.raises(InvalidInputError, match="duplicate category label"):
        store.feedback_configs.update("ok", add_categories=[{"value": 2, "label": "yes"}])
    with pytest.raises(InvalidInputError, match="no category with value"):
        store.feedback_configs.update("ok", remove_categories=[7])
    assert store.feedback_configs.read("ok").feedback_config == made.feedback_config
    store.feedback_configs.delete("ok")
    with pytest.raises(NotFoundError):
        store.feedback_configs.delete("ok")
    with pytest.raises(NotFoundError):
        store.feedback_configs.read("ok")
    assert [c.is_deleted for c in store.feedback_configs.list(include_all_configs=True)] == [
        True]
    # a rubric item whose key has no config reads with feedback_config None
    q = store.queues.create("q", rubric_items=[{"feedback_key": "ok"}])
    assert store.queues.read(q.id).rubric_items == [{"feedback_key": "ok",
                                                     "feedback_config": None}]
