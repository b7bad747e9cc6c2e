"""The same feedback id written by several writers at once (an SDK's retry racing its first
try): each write replaces the row, none fails, and the statistics count it once. On PostgreSQL
two transactions both found the id free and the second's insert failed (a 409 to the SDK)."""

from __future__ import annotations

import threading
import uuid

from assay.store import Store


def test_one_feedback_id_written_at_once_by_many(store: Store) -> None:
    project = f"same-id-{uuid.uuid4().hex[:6]}"
    run_id = str(uuid.uuid4())
    store.runs.upsert(posts=[{"id": run_id, "trace_id": run_id, "name": "r", "run_type": "chain",
                              "session_name": project, "start_time": "2026-12-01T00:00:00Z",
                              "dotted_order": f"20261201T000000000000Z{run_id}"}])
    store.settle()
    errors: list[BaseException] = []
    ids = [str(uuid.uuid4()) for _ in range(5)]
    start = threading.Barrier(6)

    def write(score: float) -> None:
        start.wait()
        for fid in ids:
            try:
                store.feedback.create_many([{"id": fid, "run_id": run_id, "key": "conc",
                                             "score": score}], return_records=False)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(float(i % 2),)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = store.feedback.list(run_ids=[run_id])
    assert sorted(str(f.id) for f in rows) == sorted(ids)
    stats = store.projects.read(project_name=project, include_stats=True)
    assert stats.feedback_stats["conc"].n == 5
