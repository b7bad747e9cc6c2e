"""Projects, traces, human feedback, queues and trends over HTTP (no browser)."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from assay import Client
from assay.store import Store
from assay.tracing import trace, traceable
from assay.ui import ui_router_for

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from assay_factory import T0, LiveServer, Outcome, add_experiment, make_dataset  # noqa: E402

XSS = "<script>alert('x')</script>"


@traceable(run_type="llm", metadata={"ls_model_name": "gpt-4o-mini", "ls_provider": "openai"})
def chat(messages: list) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": f"ok {XSS}"}}],
            "usage_metadata": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}}


@pytest.fixture
def app(sqlite_url: str) -> Any:
    client = Client(database_url=sqlite_url)
    for i in range(120):
        with trace(f"turn {i}" if i else XSS, inputs={"q": f"question {i}"}, client=client,
                   project_name="prod", enabled=True) as root:
            chat([{"role": "user", "content": f"question {i} {XSS}"}])
            if i % 10 == 0:
                root.end(error=RuntimeError(f"boom {i}"))
    client.flush()
    store = client.store
    web = FastAPI()
    web.include_router(ui_router_for(store, auth=False))
    with LiveServer(web) as live, httpx.Client(base_url=live.url) as http:
        yield store, http, str(store.projects.read(project_name="prod").id)


def ids(html: str) -> list[str]:
    return re.findall(r'<tr class="trace[^"]*" data-id="([^"]+)"', html)


def test_projects_page_lists_every_project_with_statistics(app: Any) -> None:
    store, http, pid = app
    page = http.get("/ui/projects")
    assert page.status_code == 200
    row = re.search(rf'<tr data-id="{pid}">(.*?)</tr>', page.text, re.S).group(1)
    assert ">120<" in row and "10.0%" in row  # traces, error rate (12 of 120)
    assert "13,200" in row  # tokens of the 120 llm calls
    assert "tracing" in row


def test_traces_page_by_page_newest_first_with_filters(app: Any) -> None:
    store, http, pid = app
    seen: list[str] = []
    url = f"/ui/projects/{pid}"
    while url:
        page = http.get(url)
        assert page.status_code == 200
        seen += ids(page.text)
        nxt = re.search(r'id="next-page" href="([^"]+)"', page.text)
        url = f"/ui/projects/{pid}" + nxt.group(1).replace("&amp;", "&") if nxt else None
    roots = store.runs.list(project_ids=[pid], is_root=True, order="desc")
    assert seen == [str(r.id) for r in roots]  # every trace once, newest first, 50 a page
    errors = ids(http.get(f"/ui/projects/{pid}", params={"errors": "true"}).text)
    assert len(errors) == 12
    llm = http.get(f"/ui/projects/{pid}", params={"run_type": "llm", "where":
                                                   'eq(name, "chat")'}).text
    assert len(ids(llm)) == 50
    found = ids(http.get(f"/ui/projects/{pid}", params={"q": "question 77"}).text)
    assert len(found) == 1
    bad = http.get(f"/ui/projects/{pid}", params={"where": f"eq(name, {XSS}"})
    assert bad.status_code == 400 and XSS not in bad.text
    assert http.get(f"/ui/projects/{pid}", params={"window": "2y"}).status_code == 400
    assert http.get(f"/ui/projects/{pid}", params={"cursor": "nonsense"}).status_code == 400
    charts = http.get(f"/ui/projects/{pid}", params={"window": "24h"}).text
    assert charts.count('class="chart series"') == 5 and "traces per" in charts


def test_search_goes_back_a_slice_at_a_time_and_says_where_it_looked(app: Any) -> None:
    from urllib.parse import parse_qs

    from assay.ui._views_projects import project_page

    store, http, pid = app
    want = [str(r.id) for r in store.runs.list(project_ids=[pid], is_root=True, order="desc",
                                               query="question 1")]
    assert len(want) == 31  # question 1, 10-19, 100-119
    got: list[str] = []
    cursor, requests = None, 0
    while True:  # 30 runs (15 traces) tested per request: "search older" until the start
        ctx = project_page(store, pid, q="question 1", cursor=cursor, slice_runs=30)
        requests += 1
        got += [str(r.id) for r in ctx["runs"]]
        if not ctx["next_url"]:
            break
        cursor = parse_qs(ctx["next_url"][1:])["cursor"][0]
    assert got == want and requests == 8  # 240 runs / 30, every match once, newest first
    # over HTTP: the page names the range it searched, and the query stays escaped
    page = http.get(f"/ui/projects/{pid}", params={"q": "question 7"}).text
    found_note = re.search(r'<p class="muted" id="search-range">(.*?)</p>', page, re.S)
    assert found_note is not None
    note = found_note.group(1)
    assert "since the project's first run" in note and "11 matches" in note  # 7, 70-79
    assert len(ids(page)) == 11 and 'id="next-page"' not in page
    named = http.get(f"/ui/projects/{pid}", params={"q": XSS}).text  # the first trace's name
    assert XSS not in named and "&lt;script&gt;" in named and len(ids(named)) == 1


def test_a_person_adds_and_corrects_feedback_and_the_statistics_follow(app: Any) -> None:
    store, http, pid = app
    root = store.runs.list(project_ids=[pid], is_root=True)[0]
    page = http.get(f"/ui/runs/{root.id}")
    assert 'class="chat"' in page.text and XSS not in page.text
    assert "&lt;script&gt;" in page.text
    r = http.post(f"/ui/runs/{root.id}/feedback",
                  data={"key": "helpful", "score": "1", "comment": XSS})
    assert r.status_code == 303 and r.headers["location"] == f"/ui/runs/{root.id}"
    stats = store.projects.read(project_id=pid, include_stats=True).feedback_stats
    assert stats["helpful"].n == 1 and stats["helpful"].avg == 1.0
    [fb] = store.feedback.list(run_ids=[root.id])
    assert fb.feedback_source.type == "app" and fb.feedback_source.metadata["user"] == "local"
    assert XSS not in http.get(f"/ui/runs/{root.id}").text
    r = http.post(f"/ui/feedback/{fb.id}", data={"score": "0", "value": "", "comment": "no",
                                                  "next": f"/ui/runs/{root.id}"})
    assert r.status_code == 303
    stats = store.projects.read(project_id=pid, include_stats=True).feedback_stats
    assert stats["helpful"].avg == 0.0 and stats["helpful"].n == 1
    bad = http.post(f"/ui/runs/{root.id}/feedback", data={"key": "k", "score": "high"})
    assert bad.status_code == 400 and "score must be a number" in bad.text
    assert http.post(f"/ui/runs/{root.id}/feedback", data={"key": "k"}).status_code == 400
    assert len(store.feedback.list(run_ids=[root.id])) == 1  # nothing half written


def test_a_queue_walks_a_person_through_its_runs(app: Any) -> None:
    store, http, pid = app
    queue = store.queues.create(XSS, rubric_items=[
        {"feedback_key": "correct", "value_descriptions": {"yes": "right", "no": "wrong"}},
        {"feedback_key": "quality", "score_descriptions": {"0": "poor", "1": "great"}}])
    runs = store.runs.list(project_ids=[pid], is_root=True)[:3]
    store.queues.add_runs(queue.id, [r.id for r in runs])
    listing = http.get("/ui/queues").text
    assert XSS not in listing and "&lt;script&gt;" in listing
    reviewed = []
    for answer in ("yes", "no"):
        page = http.get(f"/ui/queues/{queue.id}").text
        run_id = re.search(r'action="/ui/queues/[^/]+/runs/([^"]+)"', page).group(1)
        assert 'name="value:correct" value="yes"' in page and 'name="score:quality"' in page
        r = http.post(f"/ui/queues/{queue.id}/runs/{run_id}",
                      data={"value:correct": answer, "score:quality": "1"})
        assert r.status_code == 303
        reviewed.append(run_id)
    skipped = re.search(r'runs/([^"]+)"', http.get(f"/ui/queues/{queue.id}").text).group(1)
    http.post(f"/ui/queues/{queue.id}/runs/{skipped}", data={"skip": "1"})
    assert store.queues.size(queue.id) == 1 and len(set(reviewed)) == 2
    stats = store.projects.read(project_id=pid, include_stats=True).feedback_stats
    assert stats["correct"].values == {"yes": 1, "no": 1} and stats["quality"].avg == 1.0
    r = http.post(f"/ui/queues/{queue.id}/runs/{skipped}", data={"score:quality": "x"})
    assert r.status_code == 400 and store.queues.size(queue.id) == 1


def test_trends_chart_each_key_across_a_datasets_experiments(sqlite_url: str) -> None:
    store = Store.open(sqlite_url)
    ds, examples = make_dataset(store, "trend", 3)
    exps = [add_experiment(store, ds.id, examples, f"exp{n}",
                           lambda i, e, r, n=n: Outcome(scores={"accuracy": 0.2 * n}),
                           start=T0 + timedelta(hours=n))
            for n in range(4)]
    web = FastAPI()
    web.include_router(ui_router_for(store, auth=False))
    with LiveServer(web) as live, httpx.Client(base_url=live.url) as http:
        page = http.get(f"/ui/datasets/{ds.id}/experiments").text
    trends = page.split('id="trends"')[1].split("</div>")[0]
    assert "accuracy (average)" in trends and "latency (s)" in trends
    [chart] = [c for c in trends.split("</svg>") if 'aria-label="accuracy (average)"' in c]
    points = re.findall(r'<a href="/ui/experiments/([^"]+)"><circle[^>]*data-value="([^"]+)"',
                        chart)
    assert [p[0] for p in points] == [str(e.id) for e in exps]
    assert [round(float(p[1]), 3) for p in points] == [0.0, 0.2, 0.4, 0.6]
    store.close()
