"""The v2 threads API (``client.threads``: ``query``, ``list_traces``, ``stats``,
``aggregate_stats``) through the official SDK, on turns the SDK traced with a thread id in their
metadata; every figure is recomputed here from the stored runs."""

from __future__ import annotations

import asyncio
import statistics
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from assay.schemas import Run

from .conftest import Workspace

pytestmark = pytest.mark.filterwarnings("ignore:.*(is deprecated|older than the minimum)")

# (metadata key, thread, question, llm tokens in/out or None, fails): in the order they happen
TURNS = [("thread_id", "t-1", "hi", (10, 2), False),
         ("session_id", "s-9", "hello", None, False),
         ("thread_id", "t-1", "and then?", (20, 3), False),
         ("conversation_id", "c-3", "x1", (5, 1), False),
         ("thread_id", "t-1", "boom", (30, 4), True),
         ("conversation_id", "c-3", "x2", None, False)]


@pytest.fixture
def ls(ws: Workspace) -> Iterator[Any]:
    from langsmith import Client as LangSmithClient

    client = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    yield client
    client.cleanup()


def _seed(ls: Any) -> tuple[str, list[str]]:
    """The six turns above (the llm calls costing a millidollar per 10 prompt tokens), a trace
    in no thread, a three-day-old turn of thread ``old``, feedback on t-1's first two turns."""
    from langsmith import traceable, tracing_context

    @traceable(run_type="llm")
    def model(q: str, tokens: tuple[int, int]) -> dict[str, Any]:
        i, o = tokens
        return {"answer": q.upper(), "usage_metadata": {
            "input_tokens": i, "output_tokens": o, "total_tokens": i + o,
            "input_cost": i / 10_000, "output_cost": o / 10_000, "total_cost": (i + o) / 10_000}}

    @traceable
    def chat(q: str, tokens: tuple[int, int] | None, fail: bool) -> dict[str, Any]:
        answer = model(q, tokens)["answer"] if tokens else q
        if fail:
            raise ValueError(f"no answer to {q}")
        return {"answer": answer}

    project = f"bot-{uuid.uuid4().hex[:6]}"
    ids = []
    with tracing_context(enabled=True, client=ls, project_name=project):
        for key, thread, q, tokens, fail in TURNS:
            rid = str(uuid.uuid4())
            ids.append(rid)
            try:
                chat(q, tokens, fail, langsmith_extra={"metadata": {key: thread}, "run_id": rid})
            except ValueError:
                pass
        chat("alone", None, False)
    old = datetime.now(UTC) - timedelta(days=3)
    ls.create_run("chat", {"q": "long ago"}, "chain", project_name=project, start_time=old,
                  end_time=old + timedelta(seconds=1), outputs={"answer": "then"},
                  extra={"metadata": {"thread_id": "old"}})
    ls.flush()
    ls.create_feedback(ids[0], "helpful", score=1.0, comment="nice")
    ls.create_feedback(ids[2], "helpful", score=0.0)
    return project, ids


def _roots(ws: Workspace, project: str) -> dict[str, list[Run]]:
    """The stored turns of each thread (the last day's), in time order."""
    pid = str(ws.store.projects.read(project_name=project).id)
    out: dict[str, list[Run]] = {}
    for run in ws.store.runs.list(project_ids=[pid], is_root=True):
        meta = run.metadata
        thread = next((meta[k] for k in ("session_id", "thread_id", "conversation_id")
                       if k in meta), None)
        if thread is not None and thread != "old":
            out.setdefault(thread, []).append(run)
    return out


def _p(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between the nearest ranks (numpy's default)."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _latencies(turns: list[Run]) -> list[float]:
    return [r.latency.total_seconds() for r in turns if r.latency is not None]


async def _all(pages: Any) -> list[Any]:
    return [item async for item in pages]


def test_query_threads(ws: Workspace, ls: Any) -> None:
    project, ids = _seed(ls)
    pid = str(ls.read_project(project_name=project).id)
    turns = _roots(ws, project)
    t1 = turns["t-1"]

    async def go() -> dict[str, Any]:
        return {
            "all": await _all(ls.threads.query(project_id=pid)),
            "first": await ls.threads.query(project_id=pid, page_size=2),
            "paged": await _all(ls.threads.query(project_id=pid, page_size=1)),
            "t1": await _all(ls.threads.query(project_id=pid, filter='eq(thread_id, "t-1")')),
            "errors": await _all(ls.threads.query(project_id=pid,
                                                  filter='eq(status, "error")')),
            "since": await _all(ls.threads.query(project_id=pid,
                                                 min_start_time=turns["c-3"][0].start_time)),
            "until": await _all(ls.threads.query(project_id=pid,
                                                 max_start_time=t1[1].start_time)),
            "week": await _all(ls.threads.query(
                project_id=pid, min_start_time=datetime.now(UTC) - timedelta(days=7))),
        }

    got = asyncio.run(go())
    # the last day's threads (not "old", not the trace in none), the most recently active first
    assert [(t.thread_id, t.count) for t in got["all"]] == [("c-3", 2), ("t-1", 3), ("s-9", 1)]
    t = got["all"][1]
    assert (t.first_trace_id, t.last_trace_id, t.trace_id) == (ids[0], ids[4], ids[4])
    assert (t.min_start_time, t.max_start_time) == (t1[0].start_time, t1[-1].start_time)
    assert t.start_time == t.max_start_time
    assert t.first_inputs == '{"q":"hi","tokens":[10,2],"fail":false}'
    assert t.last_outputs == '{"output":null}'  # what the SDK records of a failed call
    assert t.last_error.startswith("ValueError('no answer to boom')")
    assert t.num_errored_turns == 1
    assert t.total_tokens == 12 + 23 + 34  # the turns' llm calls, summed
    assert t.total_cost == pytest.approx(69 / 10_000)
    assert t.latency_p50 == pytest.approx(statistics.median(_latencies(t1)))
    assert t.latency_p99 == pytest.approx(_p(_latencies(t1), 0.99))
    helpful = t.feedback_stats["helpful"]
    assert (helpful.n, helpful.avg, helpful.comments) == (2, 0.5, ["nice"])
    s9 = got["all"][2]
    assert s9.total_tokens == 0 and s9.total_cost is None and s9.num_errored_turns == 0
    assert s9.last_outputs == '{"answer":"hello"}' and s9.feedback_stats is None

    first = got["first"]  # a page of two, then the cursor to the third
    assert [x.thread_id for x in first.items] == ["c-3", "t-1"] and first.next_cursor
    assert [x.thread_id for x in got["paged"]] == ["c-3", "t-1", "s-9"]  # followed by the SDK

    assert [(x.thread_id, x.count) for x in got["t1"]] == [("t-1", 3)]
    # a filter picks the turns that count: the thread's errored turn alone
    assert [(x.thread_id, x.count, x.first_trace_id) for x in got["errors"]] == [
        ("t-1", 1, ids[4])]
    assert [(x.thread_id, x.count) for x in got["since"]] == [("c-3", 2), ("t-1", 1)]
    # max_start_time is exclusive: t-1's second turn started right then
    assert [(x.thread_id, x.count) for x in got["until"]] == [("s-9", 1), ("t-1", 1)]
    assert [x.thread_id for x in got["week"]] == ["c-3", "t-1", "s-9", "old"]


def test_query_threads_refusals_and_workspaces(ws: Workspace, ls: Any) -> None:
    project, _ = _seed(ls)
    pid = str(ls.read_project(project_name=project).id)
    for body, word in (({"trace_filter": 'eq(name, "chat")'}, "trace_filter"),
                       ({"tree_filter": 'eq(run_type, "llm")'}, "tree_filter"),
                       ({"thread_filter": "gt(count, 1)"}, "thread_filter"),
                       ({"sem_filter": "angry users"}, "sem_filter"),
                       ({"ai_search": "angry users"}, "ai_search"),
                       ({"page_size": 101}, "page_size"), ({"page_size": 0}, "page_size"),
                       ({"cursor": "nope"}, "cursor"), ({"filter": "eq(nope"}, "nope"),
                       ({"min_start_time": "2030-01-01T00:00:00Z"}, "min_start_time")):
        resp = ws.http.post("/api/v2/threads/query", json={"project_id": pid, **body})
        assert resp.status_code in (400, 422) and word in resp.text, (body, resp.text)
    missing = ws.http.post("/api/v2/threads/query", json={})
    assert missing.status_code == 422 and "project_id" in missing.text
    unknown = str(uuid.uuid4())
    assert ws.http.post("/api/v2/threads/query",
                        json={"project_id": unknown}).status_code == 404
    # another workspace's key does not see the project
    key, _ = ws.server.new_key()
    other = {"x-api-key": key}
    base = ws.server.url + "/api/v2/threads"
    assert httpx.post(f"{base}/query", json={"project_id": pid},
                      headers=other).status_code == 404
    assert httpx.get(f"{base}/t-1/traces", params={"project_id": pid},
                     headers=other).status_code == 404
    assert httpx.get(f"{base}/t-1/stats", params={"session_id": pid, "selects": "TURNS"},
                     headers=other).status_code == 404
    assert httpx.post(f"{base}/stats", json={"project_id": pid, "select": ["THREAD_COUNT"]},
                      headers=other).status_code == 404


def test_list_traces(ws: Workspace, ls: Any) -> None:
    project, ids = _seed(ls)
    pid = str(ls.read_project(project_name=project).id)
    t1 = _roots(ws, project)["t-1"]
    chosen = ["NAME", "START_TIME", "END_TIME", "LATENCY", "INPUTS", "OUTPUTS_PREVIEW",
              "ERROR_PREVIEW", "PROMPT_TOKENS", "COMPLETION_TOKENS", "TOTAL_TOKENS",
              "TOTAL_COST", "TURN_NUMBER", "THREAD_ID", "OP"]

    async def go() -> dict[str, Any]:
        return {
            "ids": await _all(ls.threads.list_traces("t-1", project_id=pid)),
            "all": await _all(ls.threads.list_traces("t-1", project_id=pid, selects=chosen)),
            "page": await ls.threads.list_traces("t-1", project_id=pid, page_size=2,
                                                 selects=["TURN_NUMBER"]),
            "errors": await _all(ls.threads.list_traces(
                "t-1", project_id=pid, filter='eq(status, "error")',
                selects=["TURN_NUMBER", "ERROR"])),
            "trace_filter": await _all(ls.threads.list_traces(
                "t-1", project_id=pid, trace_filter='gt(start_time, "2000-01-01T00:00:00Z")',
                filter='eq(status, "success")', selects=["TURN_NUMBER"])),
            "none": await _all(ls.threads.list_traces("nope", project_id=pid)),
        }

    got = asyncio.run(go())
    assert [t.trace_id for t in got["ids"]] == [ids[0], ids[2], ids[4]]  # time order
    assert got["ids"][0].name is None and got["ids"][0].turn_number is None
    rows = got["all"]
    assert [t.turn_number for t in rows] == [1, 2, 3]
    assert [t.name for t in rows] == ["chat"] * 3 and {t.thread_id for t in rows} == {"t-1"}
    assert [t.start_time for t in rows] == [r.start_time for r in t1]
    assert [t.end_time for t in rows] == [r.end_time for r in t1]
    assert [t.latency for t in rows] == pytest.approx(_latencies(t1))
    assert rows[0].inputs == {"q": "hi", "tokens": [10, 2], "fail": False}
    assert rows[0].outputs_preview == '{"answer":"HI"}' and rows[0].error_preview is None
    assert rows[2].error_preview.startswith("ValueError('no answer to boom')")
    assert [(t.prompt_tokens, t.completion_tokens, t.total_tokens) for t in rows] == [
        (10, 2, 12), (20, 3, 23), (30, 4, 34)]  # each turn's llm call
    assert [t.total_cost for t in rows] == pytest.approx([12e-4, 23e-4, 34e-4])
    assert rows[0].op is None  # not kept here

    page = got["page"]
    assert [t.turn_number for t in page.items] == [1, 2] and page.next_cursor
    assert [t.turn_number for t in asyncio.run(page.get_next_page()).items] == [3]
    # the turn number is the place in the whole thread, whatever the filter leaves
    assert [(t.trace_id, t.turn_number) for t in got["errors"]] == [(ids[4], 3)]
    assert got["errors"][0].error.startswith("ValueError")
    assert [t.turn_number for t in got["trace_filter"]] == [1, 2]
    assert got["none"] == []

    # properties not selected are absent from the answer, not null; trace_id always there
    raw = ws.http.get("/api/v2/threads/t-1/traces", params=[
        ("project_id", pid), ("selects", "NAME"), ("selects", "INPUTS_PREVIEW"),
        ("page_size", "1")]).json()
    assert raw["items"] == [{"trace_id": ids[0], "name": "chat",
                             "inputs_preview": '{"q":"hi","tokens":[10,2],"fail":false}'}]
    assert raw["next_cursor"]
    threads = ws.http.post("/api/v2/threads/query", json={"project_id": pid}).json()
    assert threads["items"][1]["first_inputs"] == raw["items"][0]["inputs_preview"]
    for params, word in (({"selects": "NOPE"}, "NOPE"),
                         ({"tree_filter": 'eq(run_type, "llm")'}, "tree_filter"),
                         ({"page_size": "500"}, "page_size")):
        resp = ws.http.get("/api/v2/threads/t-1/traces", params={"project_id": pid, **params})
        assert resp.status_code == 422 and word in resp.text, resp.text
    assert ws.http.get("/api/v2/threads/t-1/traces",
                       params={"project_id": str(uuid.uuid4())}).status_code == 404


def test_thread_stats(ws: Workspace, ls: Any) -> None:
    project, ids = _seed(ls)
    pid = str(ls.read_project(project_name=project).id)
    t1 = _roots(ws, project)["t-1"]
    every = ["TURNS", "FIRST_START_TIME", "LAST_START_TIME", "LAST_END_TIME", "LATENCY_P50",
             "LATENCY_P99", "PROMPT_TOKENS", "COMPLETION_TOKENS", "TOTAL_TOKENS",
             "PROMPT_COST", "COMPLETION_COST", "TOTAL_COST", "FEEDBACK_STATS"]

    async def go() -> dict[str, Any]:
        return {
            "all": await ls.threads.stats("t-1", session_id=pid, selects=every),
            "errors": await ls.threads.stats("t-1", session_id=pid, selects=["TURNS"],
                                             filter='eq(status, "error")'),
            "none": await ls.threads.stats("t-1", session_id=pid,
                                           selects=["TURNS", "TOTAL_COST"],
                                           filter='eq(name, "nothing")'),
        }

    got = asyncio.run(go())
    s = got["all"]
    assert s.turns == 3
    assert (s.first_start_time, s.last_start_time) == (t1[0].start_time, t1[-1].start_time)
    assert s.last_end_time == max(r.end_time for r in t1 if r.end_time)
    assert s.latency_p50_seconds == pytest.approx(statistics.median(_latencies(t1)))
    assert s.latency_p99_seconds == pytest.approx(_p(_latencies(t1), 0.99))
    assert (s.prompt_tokens, s.completion_tokens, s.total_tokens) == (60, 9, 69)
    assert (s.prompt_cost, s.completion_cost, s.total_cost) == pytest.approx(
        (60e-4, 9e-4, 69e-4))
    assert (s.feedback_stats["helpful"].n, s.feedback_stats["helpful"].avg) == (2, 0.5)
    assert got["errors"].turns == 1
    assert (got["none"].turns, got["none"].total_cost) == (0, None)

    # only what is selected is answered
    raw = ws.http.get("/api/v2/threads/s-9/stats", params=[
        ("session_id", pid), ("selects", "TURNS"), ("selects", "TOTAL_TOKENS")])
    assert raw.json() == {"turns": 1, "total_tokens": 0}
    for params, status, word in (
            ([("session_id", pid), ("selects", "TURNS")], 404, "nope"),
            ([("session_id", pid), ("selects", "TURN")], 422, "TURN"),
            ([("session_id", pid)], 422, "selects"),
            ([("selects", "TURNS")], 422, "session_id"),
            ([("session_id", str(uuid.uuid4())), ("selects", "TURNS")], 404, "project")):
        thread = "nope" if status == 404 and word == "nope" else "t-1"
        resp = ws.http.get(f"/api/v2/threads/{thread}/stats", params=params)
        assert resp.status_code == status and word in resp.text, (params, resp.text)


def test_aggregate_stats(ws: Workspace, ls: Any) -> None:
    project, _ = _seed(ls)
    pid = str(ls.read_project(project_name=project).id)
    turns = [r for rows in _roots(ws, project).values() for r in rows]
    every = ["THREAD_COUNT", "TRACE_COUNT", "TOTAL_TOKENS", "PROMPT_TOKENS", "TOTAL_COST",
             "ERROR_RATE", "LATENCY_P50", "LATENCY_P99", "MEDIAN_TOKENS",
             "THREAD_FEEDBACK_STATS"]

    async def go() -> dict[str, Any]:
        return {
            "all": await ls.threads.aggregate_stats(project_id=pid, select=every),
            "c3": await ls.threads.aggregate_stats(
                project_id=pid, select=["THREAD_COUNT", "TRACE_COUNT", "TOTAL_TOKENS"],
                filter='eq(thread_id, "c-3")'),
            "week": await ls.threads.aggregate_stats(
                project_id=pid, select=["THREAD_COUNT", "TRACE_COUNT"],
                min_start_time=datetime.now(UTC) - timedelta(days=7)),
        }

    got = asyncio.run(go())
    a = got["all"]
    assert (a.thread_count, a.trace_count) == (3, 6)  # the last day's, in a thread
    assert (a.total_tokens, a.prompt_tokens) == (12 + 23 + 34 + 6, 65)
    assert a.total_cost == pytest.approx(75e-4) and a.error_rate == pytest.approx(1 / 6)
    assert a.latency_p50_seconds == pytest.approx(_p(_latencies(turns), 0.5))
    assert a.latency_p99_seconds == pytest.approx(_p(_latencies(turns), 0.99))
    assert a.median_tokens == 18  # of the turns with llm calls: 6, 12, 23, 34
    assert a.thread_feedback_stats["helpful"].n == 2
    assert (got["c3"].thread_count, got["c3"].trace_count, got["c3"].total_tokens) == (1, 2, 6)
    assert (got["week"].thread_count, got["week"].trace_count) == (4, 7)
    raw = ws.http.post("/api/v2/threads/stats", json={"project_id": pid,
                                                      "select": ["TRACE_COUNT"]}).json()
    assert raw == {"trace_count": 6}
    for body, word in (({"select": ["NOPE"]}, "NOPE"), ({"select": []}, "select"),
                       ({"select": ["TRACE_COUNT"], "stride": {"unit": "HOUR", "value": 1}},
                        "stride"),
                       ({"select": ["TRACE_COUNT"], "thread_filter": "gt(turns, 1)"},
                        "thread_filter")):
        resp = ws.http.post("/api/v2/threads/stats", json={"project_id": pid, **body})
        assert resp.status_code == 422 and word in resp.text, resp.text
