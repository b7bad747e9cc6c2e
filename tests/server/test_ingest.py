"""Run ingestion over HTTP: multipart (plain, gzip, zstd), batch, single runs and run queries."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from ._wire import make_run, ms, multipart
from .conftest import Workspace


@pytest.mark.parametrize("encoding", [None, "gzip", "zstd"])
def test_multipart_post_then_patch_with_feedback(ws: Workspace, encoding: str | None) -> None:
    start = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    end = start + timedelta(milliseconds=250)
    run = make_run("root", session="mp", start=start)
    rid = run["id"]
    inputs, extra = run.pop("inputs"), {"metadata": {"k": "v"}}
    fb_id = str(uuid.uuid4())
    body, headers = multipart([
        (f"post.{rid}", run),
        (f"post.{rid}.inputs", inputs),
        (f"post.{rid}.extra", extra),
        (f"post.{rid}.events", []),
        (f"attachment.{rid}.notes", b'{"seen": true}'),  # stored (issue 23): JSON as declared
    ], encoding=encoding)
    resp = ws.http.post("/runs/multipart", content=body, headers=headers)
    assert resp.status_code == 202, resp.text
    assert resp.json()["ingested"] == {"post": 1, "patch": 0, "feedback": 0, "attachments": 1}
    assert list(ws.store.attachments.of_runs([rid])[rid]) == ["notes"]
    stored = ws.store.runs.read(rid)
    assert stored.status == "pending" and stored.inputs == inputs and stored.extra == extra

    # the patch arrives in a later request, JS style: end_time in epoch milliseconds
    body, headers = multipart([
        (f"patch.{rid}", {"id": rid, "trace_id": rid, "end_time": ms(end)}),
        (f"patch.{rid}.outputs", {"answer": 42}),
        (f"feedback.{fb_id}", {"id": fb_id, "run_id": rid, "key": "ok", "score": True,
                               "start_time": ms(start)}),
    ], encoding=encoding)
    resp = ws.http.post("/runs/multipart", content=body, headers=headers)
    assert resp.status_code == 202, resp.text
    stored = ws.store.runs.read(rid)
    assert stored.outputs == {"answer": 42} and stored.status == "success"
    assert stored.end_time == end.replace(microsecond=373000)  # the instant, at ms precision
    assert stored.inputs == inputs  # untouched by the patch
    fb = ws.store.feedback.read(fb_id)
    assert fb.run_id == uuid.UUID(rid) and fb.score == 1.0
    assert fb.session_id == stored.session_id  # filled in from the run
    stats = ws.store.projects.read(project_name="mp", include_stats=True)
    assert stats.run_count == 1 and stats.feedback_stats["ok"].n == 1
    assert stats.latency_p50 == pytest.approx(0.250 - 0.000456)


def test_patch_before_post_and_merged_post(ws: Workspace) -> None:
    run = make_run("late", session="order")
    rid = run["id"]
    end = datetime.now(UTC)
    body, headers = multipart([(f"patch.{rid}", {"id": rid, "end_time": end.isoformat(),
                                                 "trace_id": rid}),
                               (f"patch.{rid}.outputs", {"o": 1})])
    assert ws.http.post("/runs/multipart", content=body, headers=headers).status_code == 202
    body, headers = multipart([(f"post.{rid}", run)])
    assert ws.http.post("/runs/multipart", content=body, headers=headers).status_code == 202
    stored = ws.store.runs.read(rid)
    assert stored.name == "late" and stored.outputs == {"o": 1} and stored.end_time == end
    assert stored.status == "success" and stored.inputs == {"q": "late"}
    # post and patch of another run merged into one post part (as Python does after flush)
    other = make_run("merged", session="order", end_time=end.isoformat(), outputs={"x": 1})
    body, headers = multipart([(f"post.{other['id']}", other)])
    assert ws.http.post("/runs/multipart", content=body, headers=headers).status_code == 202
    assert ws.store.runs.read(other["id"]).status == "success"
    assert ws.store.projects.read(project_name="order", include_stats=True).run_count == 2


def test_runs_batch_single_patch_and_read(ws: Workspace) -> None:
    root = make_run("root", session="batch")
    child = make_run("child", session="batch", parent=root, run_type="llm",
                     extra={"metadata": {"usage_metadata": {"input_tokens": 3,
                                                            "output_tokens": 4}}})
    resp = ws.http.post("/runs/batch", json={"post": [root, child], "patch": []})
    assert resp.status_code == 202, resp.text
    end = datetime.now(UTC).isoformat()
    resp = ws.http.post("/runs/batch", json={"patch": [{"id": child["id"], "trace_id": root["id"],
                                                        "end_time": end, "outputs": {"t": "hi"}}]})
    assert resp.status_code == 202
    single = make_run("single", session="batch")
    assert ws.http.post("/runs", json=single).status_code == 202
    resp = ws.http.patch(f"/runs/{single['id']}", json={"end_time": end, "error": "boom"})
    assert resp.status_code == 202, resp.text
    got = ws.http.get(f"/runs/{single['id']}").json()
    assert got["error"] == "boom" and got["status"] == "error" and got["name"] == "single"
    tree = ws.http.get(f"/runs/{root['id']}", params={"load_child_runs": "true"}).json()
    assert [c["name"] for c in tree["child_runs"]] == ["child"]
    assert tree["child_runs"][0]["total_tokens"] == 7
    stats = ws.http.get("/sessions", params={"name": "batch", "include_stats": "true"}).json()[0]
    assert stats["run_count"] == 2 and stats["error_rate"] == 0.5 and stats["total_tokens"] == 7


def test_runs_query_filters_and_cursor_pages(ws: Workspace) -> None:
    base = datetime(2026, 3, 1, tzinfo=UTC)
    roots = [make_run(f"r{i}", session="q", start=base + timedelta(seconds=i)) for i in range(5)]
    kid = make_run("kid", session="q", parent=roots[0], run_type="tool",
                   start=base + timedelta(milliseconds=10))
    assert ws.http.post("/runs/batch", json={"post": roots + [kid]}).status_code == 202
    sid = str(ws.store.projects.read(project_name="q").id)

    def query(**body):  # type: ignore[no-untyped-def]
        resp = ws.http.post("/runs/query", json={"session": [sid], **body})
        assert resp.status_code == 200, resp.text
        return resp.json()

    seen, cursor = [], None
    while True:
        page = query(is_root=True, limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [r["name"] for r in page["runs"]]
        cursor = page["cursors"]["next"]
        if not cursor:
            break
    assert seen == ["r4", "r3", "r2", "r1", "r0"]  # newest first, as LangSmith
    assert [r["name"] for r in query(order="asc",
                                     is_root=True)["runs"]] == [f"r{i}" for i in range(5)]
    assert [r["name"] for r in query(run_type="tool")["runs"]] == ["kid"]
    assert [r["name"] for r in query(trace=roots[0]["id"])["runs"]] == ["r0", "kid"]
    assert [r["name"] for r in query(parent_run=roots[0]["id"])["runs"]] == ["kid"]
    assert [r["name"] for r in query(id=[roots[2]["id"]])["runs"]] == ["r2"]
    later = query(start_time=(base + timedelta(seconds=3)).isoformat(), order="asc")["runs"]
    assert [r["name"] for r in later] == ["r3", "r4"]
    assert query(session=[str(uuid.uuid4())])["runs"] == []


def test_concurrent_requests_creating_one_new_project_all_succeed(ws: Workspace) -> None:
    """Several senders naming the same brand-new project at once: every request is accepted
    and every run lands in that one project (on PostgreSQL the losers of the project-creation
    race used to get a 409)."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    bodies = []
    for sender in range(8):
        parts = []
        for i in range(10):
            run = make_run(f"s{sender}-{i}", session="raced")
            parts.append((f"post.{run['id']}", run))
        bodies.append(multipart(parts, encoding="zstd"))

    def send(item: tuple[bytes, dict[str, str]]) -> int:
        body, headers = item
        with httpx.Client(base_url=ws.server.url, headers={"x-api-key": ws.key}, timeout=30) as h:
            return h.post("/runs/multipart", content=body, headers=headers).status_code

    for _ in range(3):  # a race: try it a few times
        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(send, bodies))
        assert codes == [202] * 8
    projects = [p for p in ws.store.projects.list() if p.name == "raced"]
    assert len(projects) == 1
    assert ws.store.projects.read(project_name="raced", include_stats=True).run_count == 80


def test_ingest_is_journaled_and_indexed_in_the_background_without_a_read(
        ws: Workspace) -> None:
    """202 means durable (journaled); the server's background fold then indexes the runs and
    their project's statistics with nobody reading (a read would fold them itself)."""
    import time

    from sqlalchemy import func, select

    from assay.store._tables import runs

    parts = []
    for i in range(30):
        run = make_run(f"bg{i}", session="background")
        parts.append((f"post.{run['id']}", run))
    body, headers = multipart(parts, encoding="zstd")
    assert ws.http.post("/runs/multipart", content=body, headers=headers).status_code == 202

    def indexed() -> int:  # straight from the table: no settle
        with ws.store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(runs).where(
                runs.c.tenant_id == ws.store.tenant_id)).scalar() or 0)

    deadline = time.monotonic() + 15
    while (ws.store.journal.pending() or indexed() < 30) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ws.store.journal.pending() == 0 and indexed() == 30
    assert ws.store.projects.read(project_name="background", include_stats=True,
                                  settle=False).run_count == 30


def test_background_fold_waits_for_a_gap_but_bounds_the_backlog(tmp_path) -> None:
    """While requests keep coming the folder only folds past ``max_backlog`` journal rows (and
    then down to below it); once they stop it folds the rest."""
    import time

    from assay.server._folder import Folder
    from assay.store import Store

    store = Store.open(tmp_path / "fold.db")
    folder = Folder(store, interval=0.01, idle=1.0, chunk=1, max_backlog=4)

    def rows() -> int:
        return store.journal.backlog(1_000_000)

    def append(n: int) -> None:
        for _ in range(n):
            store.journal.append_runs([make_run("r", session="bounded")])

    folder.ingested()
    append(3)  # under the bound: left alone while busy
    folder.start()
    try:
        busy_until = time.monotonic() + 0.5
        while time.monotonic() < busy_until:
            folder.ingested()
            time.sleep(0.02)
        assert rows() == 3
        append(7)  # past the bound: folded down below it though requests keep coming
        busy_until = time.monotonic() + 1.0
        while time.monotonic() < busy_until:
            folder.ingested()
            time.sleep(0.02)
        assert rows() == 3
        deadline = time.monotonic() + 5  # requests stop: the rest is folded
        while rows() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rows() == 0
        assert store.projects.read(project_name="bounded", include_stats=True,
                                   settle=False).run_count == 10
    finally:
        folder.stop()
        store.close()
