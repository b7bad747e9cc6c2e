"""Projects, feedback and statistics computed by the store."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from assay.client import Client
from assay.errors import ConflictError, InvalidInputError, NotFoundError
from assay.store import Store


def test_project_crud_and_null_means_unchanged(client: Client) -> None:
    ds = client.create_dataset("d")
    p = client.create_project("exp", description="first", metadata={"a": 1},
                              reference_dataset_id=ds.id)
    assert client.read_project(project_name="exp").id == p.id
    with pytest.raises(ConflictError, match="'exp'"):
        client.create_project("exp")
    assert client.create_project("exp", upsert=True).id == p.id
    u = client.update_project(p.id, name=None, description=None, metadata=None, end_time=None)
    assert (u.name, u.description, u.metadata) == ("exp", "first", {"a": 1})
    end = datetime(2030, 1, 1, tzinfo=UTC)
    u = client.update_project(p.id, metadata={"b": 2}, end_time=end)
    assert u.metadata == {"b": 2} and u.end_time == end
    assert [x.name for x in client.list_projects(reference_dataset_id=ds.id)] == ["exp"]
    assert [x.name for x in client.list_projects(reference_free=True)] == []
    client.delete_project(project_name="exp")
    with pytest.raises(NotFoundError, match="'exp'"):
        client.read_project(project_name="exp")


def test_create_returns_what_a_read_gives(client: Client) -> None:
    """create() builds its answer from the row it wrote: it must equal a read of that row."""
    ds = client.create_dataset("d")
    start = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    p = client._backend.projects.create("p", description="x", metadata={"a": [1, {"b": None}]},
                                        reference_dataset_id=str(ds.id), start_time=start)
    assert p == client.read_project(project_id=p.id)
    assert p.start_time == start and p.start_time.utcoffset() == timedelta(0)
    bare = client.create_project("bare")
    assert bare == client.read_project(project_id=bare.id)
    with pytest.raises(ConflictError, match=str(p.id)):
        client._backend.projects.create("another", id=p.id)  # the id clash, not a name clash
    with pytest.raises(ConflictError, match="'p'"):
        client._backend.projects.create("p", id=p.id)  # both: the name is named


def test_end_sets_the_end_time_of_this_workspace_s_project_only(client: Client) -> None:
    p = client.create_project("ending")
    end = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    client.store.projects.end(p.id, end)
    assert client.read_project(project_id=p.id).end_time == end
    with pytest.raises(NotFoundError, match="not found"):
        client.store.projects.end(uuid.uuid4(), end)
    other = client.store.for_tenant(str(uuid.uuid4()))
    with pytest.raises(NotFoundError, match="not found"):
        other.projects.end(p.id, datetime(2040, 1, 1, tzinfo=UTC))
    assert client.read_project(project_id=p.id).end_time == end


def test_runs_and_feedback_die_with_their_project(client: Client) -> None:
    p = client.create_project("gone")
    rid = uuid.uuid4()
    client.create_run("r", {"x": 1}, "chain", project_name="gone", id=rid)
    client.create_feedback(rid, "k", score=1)
    client.delete_project(project_id=p.id)
    assert list(client.list_feedback(run_ids=[rid])) == []
    with pytest.raises(NotFoundError):
        client.read_run(rid)


def test_feedback_validation_and_listing(client: Client) -> None:
    rid = uuid.uuid4()
    client.create_run("r", {}, "chain", project_name="p", id=rid)
    fb = client.create_feedback(rid, "correct", score=True, value="CORRECT", comment="ok")
    assert fb.score == 1.0 and fb.value == "CORRECT" and fb.session_id is not None
    assert [f.key for f in client.list_feedback(run_ids=[rid])] == ["correct"]
    with pytest.raises(InvalidInputError, match="score must be a number"):
        client.create_feedback(rid, "bad", score="high")
    with pytest.raises(InvalidInputError, match="'key' must be a non-empty string"):
        client.create_feedback(rid, "")


def test_a_score_that_is_not_finite_is_stored_as_no_score_on_every_path(client: Client,
                                                                        store: Store) -> None:
    """NaN, infinite or past a float: no score, kept with the rest of the item, whether it is
    written directly or journaled (whose JSON already wrote such a score as null)."""
    rid = uuid.uuid4()
    client.create_run("r", {}, "chain", project_name="p", id=rid)
    bad = (float("nan"), float("inf"), -float("inf"), 10**400)
    for i, score in enumerate(bad):
        fb = client.create_feedback(rid, f"direct-{i}", score=score, comment="kept")
        assert fb.score is None and fb.comment == "kept"
    store.journal.append_feedback([{"run_id": str(rid), "key": f"journal-{i}", "score": s}
                                   for i, s in enumerate(bad)])
    got = {f.key: f.score for f in client.list_feedback(run_ids=[rid])}
    assert got == {f"{how}-{i}": None for how in ("direct", "journal") for i in range(4)}


def _run(pid, start, latency, *, error=None, parent=None, trace=None, run_type="chain",
         example=None, extra=None, events=None):
    rid = str(uuid.uuid4())
    return {"id": rid, "name": run_type, "run_type": run_type, "session_id": str(pid),
            "start_time": start, "end_time": start + timedelta(seconds=latency),
            "parent_run_id": parent, "trace_id": trace or rid, "error": error,
            "reference_example_id": example, "extra": extra, "events": events,
            "inputs": {}, "outputs": {}}


def test_statistics_match_an_independent_computation(client: Client) -> None:
    ds = client.create_dataset("stats")
    ex = client.create_example({"q": 1}, dataset_id=ds.id)
    earlier = client.create_project("exp-0", reference_dataset_id=ds.id)
    p = client.create_project("exp-1", reference_dataset_id=ds.id)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rng = np.random.default_rng(7)
    latencies = [round(float(x), 6) for x in rng.uniform(0.05, 3.0, size=37)]
    roots, children = [], []
    for i, lat in enumerate(latencies):
        root = _run(p.id, t0 + timedelta(seconds=i), lat,
                    error="ValueError: boom" if i % 9 == 0 else None,
                    example=str(ex.id))
        roots.append(root)
        if i % 2 == 0:  # an llm child that streamed, with usage on a priced model
            children.append(_run(p.id, root["start_time"], lat / 2, parent=root["id"],
                                 trace=root["id"], run_type="llm",
                                 extra={"metadata": {"ls_provider": "openai",
                                                     "ls_model_name": "gpt-4o-mini",
                                                     "usage_metadata": {"input_tokens": 100 + i,
                                                                        "output_tokens": 10}}},
                                 events=[{"name": "new_token",
                                          "time": (root["start_time"]
                                                   + timedelta(milliseconds=20 + i)).isoformat()}]))
    client._backend.runs.upsert(posts=roots + children)
    for i, root in enumerate(roots):
        client.create_feedback(root["id"], "correct", value="CORRECT" if i % 3 else "INCORRECT",
                               score=1 if i % 3 else 0)
        client.create_feedback(root["id"], "quality", score=i / 10)
    client.create_feedback(None, "f1", score=0.8, project_id=p.id)

    s = client.read_project(project_id=p.id, include_stats=True)
    assert s.run_count == 37
    assert s.latency_p50 == pytest.approx(np.percentile(latencies, 50), abs=1e-6)
    assert s.latency_p99 == pytest.approx(np.percentile(latencies, 99), abs=1e-6)
    ft = [(20 + i) / 1000 for i in range(0, 37, 2)]
    assert s.first_token_p50 == pytest.approx(np.percentile(ft, 50), abs=1e-6)
    assert s.first_token_p99 == pytest.approx(np.percentile(ft, 99), abs=1e-6)
    prompt = sum(100 + i for i in range(0, 37, 2))
    assert (s.prompt_tokens, s.completion_tokens, s.total_tokens) == (prompt, 190, prompt + 190)
    assert s.prompt_cost == pytest.approx(prompt * 0.15 / 1e6)
    assert s.completion_cost == pytest.approx(190 * 0.6 / 1e6)
    assert s.total_cost == pytest.approx(s.prompt_cost + s.completion_cost)
    assert s.error_rate == pytest.approx(5 / 37)
    assert s.streaming_rate == pytest.approx(19 / 37)
    scores = [1 if i % 3 else 0 for i in range(37)]
    fc = s.feedback_stats["correct"]
    assert (fc.n, fc.values) == (37, {"CORRECT": scores.count(1), "INCORRECT": scores.count(0)})
    assert fc.avg == pytest.approx(np.mean(scores)) and fc.stdev == pytest.approx(np.std(scores))
    q = s.feedback_stats["quality"]
    assert q.avg == pytest.approx(np.mean([i / 10 for i in range(37)]))
    assert q.values == {}
    assert s.session_feedback_stats["f1"].avg == pytest.approx(0.8)
    assert s.test_run_number == 2
    assert client.read_project(project_id=earlier.id, include_stats=True).test_run_number == 1
    assert s.last_run_start_time == t0 + timedelta(seconds=36)
    dumped = s.json(indent=2)
    assert '"run_count": 37' in dumped and s.model_dump_json(indent=2) == dumped


def test_empty_project_statistics(client: Client) -> None:
    p = client.create_project("empty")
    s = client.read_project(project_id=p.id, include_stats=True)
    assert s.run_count == 0 and s.latency_p50 is None and s.first_token_p50 is None
    assert s.total_tokens == 0 and s.total_cost is None and s.feedback_stats == {}
    assert s.test_run_number is None
