"""Accepted means kept: whatever ``Journal.admit`` (the server's 202) takes, the fold stores
and every read reads back; whatever it refuses, it refuses as bad input, keeping nothing.

Runs with odd values in their fields, a few at a time, at random (seeded): each of the cases
that broke this before (a name that is a list, a dotted order that is a dict or holds a lone
surrogate, an event that is not an object, a count past 64 bits, a time past a float...)
made the fold raise on the run and drop it after admit had accepted it, or stored a run that
no read could turn back into a ``Run``.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from assay.errors import ConflictError, InvalidInputError, NotFoundError
from assay.store import Store

ODD: list[Any] = [None, 0, -1, 1.5, 2**70, -(2**70), 1e308, float("nan"), True, "", "x",
                  "\x00", "\ud800", "ééé", [], [1], {}, {"a": 1}, [{"a": None}],
                  {"k": [1, {"z": 2**64}]}, "2026-01-01T00:00:00Z", 10**19, "\ufdd0"]
FIELDS = ["inputs", "outputs", "extra", "events", "tags", "serialized", "error", "name",
          "status", "dotted_order", "reference_example_id", "session_id", "parent_run_id",
          "trace_id", "start_time", "end_time"]
TOP_LEVEL_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens", "total_cost")


def _odd_value(rng: random.Random, field: str) -> Any:
    v = rng.choice(ODD)
    if field == "extra":
        return rng.choice([{"metadata": v}, {"metadata": {"usage_metadata": v}},
                           {"metadata": {"usage_metadata": {"input_tokens": v,
                                                            "output_tokens": 1},
                                         "ls_model_name": v, "ls_provider": "openai"}},
                           {"invocation_params": v}, {"runtime": v}])
    if field == "events":
        return rng.choice([[{"name": "new_token", "time": v}], [v], v])
    if field == "outputs":
        return rng.choice([{"usage_metadata": v}, {"llm_output": {"token_usage": v}},
                           {"o": v}, v])
    return v


def test_what_admit_accepts_the_fold_stores_and_reads_give_back(store: Store) -> None:
    rng = random.Random(20261129)
    project = f"hostile-{uuid.uuid4().hex[:8]}"
    accepted: list[str] = []
    refused = 0
    for _ in range(250):
        rid = str(uuid.uuid4())
        post: dict[str, Any] = {"id": rid, "name": "r",
                                "run_type": rng.choice(["llm", "chain", "tool"]),
                                "start_time": "2026-01-01T00:00:00Z",
                                "end_time": "2026-01-01T00:00:01Z", "session_name": project}
        for field in rng.sample(FIELDS, rng.randint(1, 3)):
            post[field] = _odd_value(rng, field)
        for field in TOP_LEVEL_USAGE:
            if rng.random() < 0.1:
                post[field] = rng.choice(ODD)
        before = store.journal.pending()
        try:
            store.journal.admit([post])
        except (InvalidInputError, NotFoundError, ConflictError):
            refused += 1
            assert store.journal.pending() == before  # refused: nothing kept
            continue
        accepted.append(rid)
        assert store.runs.read(rid).id == uuid.UUID(rid)  # folded, stored, readable
    assert store.journal.dropped == 0
    assert len(accepted) >= 30 and refused >= 30  # the cases cover both outcomes
    (found,) = store.projects.list(name=project)
    listed = {str(r.id) for r in store.runs.list(project_ids=[str(found.id)], limit=1000)}
    assert listed == set(accepted)
    stats = store.projects.read(project_id=found.id, include_stats=True)
    assert stats.run_count == len(accepted)


FEEDBACK_FIELDS = ["score", "value", "comment", "correction", "created_at", "modified_at",
                   "key", "feedback_source", "extra", "trace_id", "session_id"]


def test_feedback_admit_accepts_is_stored_and_listed(store: Store) -> None:
    """The same for feedback: before, an ``extra`` that is not an object or a comment that is
    not text was stored and then failed every list of its run's feedback, and a
    ``created_at`` that is not a time was dropped at the fold."""
    rng = random.Random(1129)
    rid = str(uuid.uuid4())
    store.journal.admit([{"id": rid, "name": "r", "run_type": "chain",
                          "start_time": "2026-01-01T00:00:00Z", "session_name": "fb-hostile"}])
    accepted: set[str] = set()
    refused = 0
    for _ in range(250):
        fid = str(uuid.uuid4())
        item: dict[str, Any] = {"id": fid, "run_id": rid, "key": "k"}
        for field in rng.sample(FEEDBACK_FIELDS, rng.randint(1, 3)):
            item[field] = rng.choice(ODD + [float("inf")])
        before = store.journal.pending()
        try:
            store.journal.admit([], [], [item])
        except (InvalidInputError, NotFoundError, ConflictError):
            refused += 1
            assert store.journal.pending() == before
            continue
        accepted.add(fid)
        listed = {str(f.id) for f in store.feedback.list(run_ids=[rid])}
        assert fid in listed  # folded and readable, and so is every item before it
    assert store.journal.dropped == 0
    assert len(accepted) >= 30 and refused >= 30
