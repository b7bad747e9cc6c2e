"""The store pieces added for experiments: bulk inserts, delete_traces, create_many without
read-back (on both backends)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from assay.client import Client
from assay.errors import InvalidInputError
from assay.store import Store
from assay.store._bulk import insert_many
from assay.store._tables import feedback

RUN, SESSION = str(uuid.uuid4()), str(uuid.uuid4())


def _row(tenant: str, **over: object) -> dict:
    now = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    row = {"id": str(uuid.uuid4()), "tenant_id": tenant, "run_id": RUN,
           "session_id": SESSION, "trace_id": None, "key": "k", "score": 0.5,
           "value": {"nested": [1, "two", None]}, "label": "x", "comment": "c",
           "correction": None, "feedback_source": {"type": "model"}, "extra": None,
           "created_at": now, "modified_at": now}
    row.update(over)
    return row


def test_bulk_insert_stores_what_sqlalchemy_stores(store: Store) -> None:
    t = store.tenant_id
    a, b = _row(t), _row(t, value="plain", score=None, extra={"error": True})
    c, d = _row(t), _row(t, value="plain", score=None, extra={"error": True})
    with store.write() as conn:
        insert_many(conn, feedback, [a, b])
        conn.execute(feedback.insert(), [c, d])
        raw = {r.id: r for r in conn.exec_driver_sql(
            "SELECT id, value, correction, extra, created_at, score FROM feedback "
            f"WHERE tenant_id = '{t}'")}
        typed = {r.id: r for r in conn.execute(select(feedback).where(feedback.c.tenant_id == t))}
    for mine, theirs in ((a, c), (b, d)):
        r1, r2 = raw[mine["id"]], raw[theirs["id"]]
        assert tuple(r1)[1:] == tuple(r2)[1:]  # byte-for-byte the same stored values
        t1, t2 = typed[mine["id"]], typed[theirs["id"]]
        assert {k: v for k, v in t1._mapping.items() if k != "id"} == {
            k: v for k, v in t2._mapping.items() if k != "id"}
    assert typed[a["id"]].value == {"nested": [1, "two", None]}
    assert typed[a["id"]].created_at == a["created_at"]


def test_delete_traces_keeps_only_what_is_asked(client: Client) -> None:
    p = client.create_project("p")
    other = client.create_project("other")
    traces = [uuid.uuid4() for _ in range(3)]
    posts = []
    for t in traces:
        posts.append({"id": str(t), "trace_id": str(t), "name": "root", "run_type": "chain",
                      "start_time": datetime.now(UTC), "session_id": str(p.id)})
        kid = uuid.uuid4()
        posts.append({"id": str(kid), "trace_id": str(t), "parent_run_id": str(t),
                      "name": "kid", "run_type": "llm", "start_time": datetime.now(UTC),
                      "session_id": str(p.id)})
    posts.append({"id": str(uuid.uuid4()), "name": "elsewhere", "run_type": "chain",
                  "start_time": datetime.now(UTC), "session_id": str(other.id)})
    client.store.runs.upsert(posts=posts)
    for t in traces:
        client.create_feedback(t, "k", score=1)
    ghost = client.store.feedback.create_many(
        [{"run_id": str(uuid.uuid4()), "session_id": str(p.id), "key": "k", "score": 0}],
        return_records=False)
    assert ghost == []
    assert client.store.runs.delete_traces(p.id, keep=[traces[0]]) == 4
    left = list(client.list_runs(project_id=p.id))
    assert {r.trace_id for r in left} == {traces[0]} and len(left) == 2
    assert [f.run_id for f in client.list_feedback(project_ids=[p.id])] == [traces[0]]
    assert len(list(client.list_runs(project_id=other.id))) == 1
    assert client.store.runs.delete_traces(p.id, trace_ids=[traces[0]]) == 2
    assert list(client.list_runs(project_id=p.id)) == []
    with pytest.raises(InvalidInputError, match="exactly one"):
        client.store.runs.delete_traces(p.id)
