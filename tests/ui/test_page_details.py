"""What a person meets on the pages beyond the numbers: where links go, errors read, chart
labels, queue options from feedback configs, summary evaluators, HTML for every /ui address."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from assay.store import Store
from assay.ui import ui_router_for
from assay.ui._format import error_line
from assay.ui._svg import series_svg

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from assay_factory import LiveServer, Outcome, add_experiment, make_dataset  # noqa: E402

TRACEBACK = ("Traceback (most recent call last):\n  File \"agent.py\", line 12, in run\n"
             "    return tool(q)\nValueError: the search tool found nothing for 'q3'\n")
LLM = "00000000-0000-4000-8000-0000000000c1"
ODD = "00000000-0000-4000-8000-0000000000c2"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    store = Store.open(tmp_path_factory.mktemp("pages") / "assay.db")
    ds, examples = make_dataset(store, "qa", 4)
    exp = add_experiment(store, ds.id, examples, "with-errors", lambda i, ex, r: Outcome(
        error=TRACEBACK if i == 3 else None, scores={"correct": float(i % 2)}))
    store.feedback.create(key="pass_rate", score=0.75, session_id=str(exp.id))
    plain = add_experiment(store, ds.id, examples, "plain", lambda i, ex, r: Outcome())
    base = {"run_type": "llm", "session_name": "prod", "start_time": "2025-01-01T00:00:00Z",
            "end_time": "2025-01-01T00:00:01Z",
            "inputs": {"messages": [{"role": "user", "content": "capital of France?"}]}}
    store.runs.upsert(posts=[
        {**base, "id": LLM, "name": "stream", "outputs": {"output": ["Paris", " is", " it."]}},
        {**base, "id": ODD, "name": "odd", "outputs": {"tokens": [1, 2, 3]}}])
    empty = store.projects.create("empty-project")
    web = FastAPI()
    web.include_router(ui_router_for(store, auth=False))
    with LiveServer(web) as live, httpx.Client(base_url=live.url) as http:
        yield {"store": store, "http": http, "experiment": exp, "plain": plain, "dataset": ds,
               "prod": store.projects.read(project_name="prod"), "empty": empty}
    store.close()


def test_home_links_a_tracing_project_to_its_traces(site: dict[str, Any]) -> None:
    home = site["http"].get("/").text
    tracing = home.split('id="projects"')[1]
    prod = site["prod"].id
    assert f'href="/ui/projects/{prod}"' in tracing and f"/ui/experiments/{prod}" not in tracing


def test_an_empty_project_says_it_has_no_runs(site: dict[str, Any]) -> None:
    page = site["http"].get("/ui/projects").text
    row = page.split(f'data-id="{site["empty"].id}"')[1].split("</tr>")[0]
    assert "no runs yet" in row
    prod = page.split(f'data-id="{site["prod"].id}"')[1].split("</tr>")[0]
    assert "no runs yet" not in prod and "2025-01-01 00:00:00" in prod


def test_a_streamed_reply_reads_as_one_turn_and_odd_outputs_show_as_json(
        site: dict[str, Any]) -> None:
    http = site["http"]
    streamed = http.get(f"/ui/runs/{LLM}").text
    assert '<div class="text">Paris is it.</div>' in streamed
    odd = http.get(f"/ui/runs/{ODD}").text
    step = odd.split(f'id="step-{ODD}"')[1]
    assert "capital of France?" in step and "outputs" in step and "&#34;tokens&#34;" in step


def test_an_errors_last_line_leads_and_the_traceback_opens_on_demand(
        site: dict[str, Any]) -> None:
    assert error_line(TRACEBACK) == "ValueError: the search tool found nothing for 'q3'"
    assert error_line("x" * 300, 20) == "x" * 19 + "…" and error_line(None) == ""
    page = site["http"].get(f"/ui/experiments/{site['experiment'].id}").text
    cell = re.search(r'<details class="error"><summary class="error-text">(.*?)</summary>'
                     r'<pre class="error-text">(.*?)</pre></details>', page, re.S)
    assert cell is not None
    assert cell.group(1) == "ValueError: the search tool found nothing for &#39;q3&#39;"
    assert "Traceback (most recent call last):" in cell.group(2)


def test_summary_evaluators_appear_on_the_experiment_and_its_list(site: dict[str, Any]) -> None:
    http, exp, plain = site["http"], site["experiment"], site["plain"]
    page = http.get(f"/ui/experiments/{exp.id}").text
    cards = page.split('id="summary"')[1].split("</div>\n</div>")[0]
    assert 'data-key="pass_rate"' in cards and "0.750" in cards
    assert 'id="summary"' not in http.get(f"/ui/experiments/{plain.id}").text
    listing = http.get(f"/ui/datasets/{site['dataset'].id}/experiments").text
    assert "pass_rate <span" in listing
    row = listing.split(f'<tr data-id="{exp.id}">')[1].split("</tr>")[0]
    assert 'data-key="summary:pass_rate" data-value="0.75"' in row
    other = listing.split(f'<tr data-id="{plain.id}">')[1].split("</tr>")[0]
    assert 'data-key="summary:pass_rate" data-value="">–' in other


def test_series_axis_fits_its_labels_and_the_legend_keeps_its_colours() -> None:
    svg = str(series_svg(["a", "b"], {"p50": [0.0012, 1234.5678], "p99": [0.5, 2.0]},
                         title="cost", fmt=lambda v: f"${v:.4f}"))
    axis = re.search(r'<line x1="(\d+)" y1="18" x2="\1"', svg)
    assert axis is not None and int(axis.group(1)) >= 6.2 * len("$1234.5678") + 8
    assert 'style="fill:#5b7be0">p50</text>' in svg and 'style="fill:#e0703a">p99</text>' in svg
    short = str(series_svg(["a"], {"n": [3.0]}, title="n"))
    assert '<line x1="34" y1="18" x2="34"' in short  # short labels keep the usual margin


def test_every_ui_address_answers_html(site: dict[str, Any]) -> None:
    http, exp = site["http"], site["experiment"]
    for path in ("/ui", "/ui/datasets", "/ui/experiments"):
        r = http.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/", path
    for path, status, says in [
        ("/ui/no/such/page", 404, "no page at /ui/no/such/page"),
        (f"/ui/experiments/{exp.id}?threshold=abc", 400,
         "threshold: Input should be a valid number"),
        ("/ui/compare?resamples=many", 400, "resamples: Input should be a valid integer"),
        (f"/ui/datasets/{site['dataset'].id}?offset=x", 400, "offset"),
    ]:
        r = http.get(path)
        assert r.status_code == status and r.headers["content-type"].startswith("text/html")
        assert says in r.text and 'id="error-message"' in r.text, path


def test_a_bad_filter_is_named_above_the_kept_filter_box(site: dict[str, Any]) -> None:
    http, prod = site["http"], site["prod"].id
    for params, says in [({"run_type": "bogus"}, "run_type &#39;bogus&#39;: one of chain"),
                         ({"score_min": "0.5"}, "need a feedback key"),
                         ({"where": "eq(name, "}, "")]:
        r = http.get(f"/ui/projects/{prod}", params=params)
        assert r.status_code == 400 and 'id="trace-filters"' in r.text, params
        note = r.text.split('id="filter-error">')[1].split("</p>")[0]
        assert says in note and "until the filter above is mended" in r.text
    ok = http.get(f"/ui/projects/{prod}", params={"run_type": "llm"})
    assert ok.status_code == 200 and 'id="filter-error"' not in ok.text


def test_a_queue_offers_the_categories_of_a_keys_feedback_config(site: dict[str, Any]) -> None:
    store, http = site["store"], site["http"]
    store.feedback_configs.create("tone", {"type": "categorical", "categories": [
        {"value": 0, "label": "rude"}, {"value": 1, "label": "polite"}]})
    store.feedback_configs.create("stars", {"type": "categorical", "categories": [
        {"value": 1}, {"value": 5}]})
    store.feedback_configs.create("quality", {"type": "continuous", "min": 0, "max": 10})
    queue = store.queues.create("review", rubric_items=[
        {"feedback_key": "tone"}, {"feedback_key": "stars"}, {"feedback_key": "quality"}])
    store.queues.add_runs(queue.id, [LLM])
    page = http.get(f"/ui/queues/{queue.id}").text
    assert 'name="value:tone" value="rude"' in page and 'name="value:tone" value="polite"' in page
    assert 'name="value:stars" value="5"' in page and 'name="score:tone"' not in page
    assert 'name="score:quality"' in page and "0..10" in page
    r = http.post(f"/ui/queues/{queue.id}/runs/{LLM}",
                  data={"value:tone": "polite", "value:stars": "5", "score:quality": "7"})
    assert r.status_code == 303
    got = {f.key: (f.score, f.value) for f in store.feedback.list(run_ids=[LLM])}
    assert got == {"tone": (1.0, "polite"), "stars": (5.0, None), "quality": (7.0, None)}


def test_a_traces_chain_rows_sum_the_llm_calls_under_them(site: dict[str, Any]) -> None:
    store, http = site["store"], site["http"]
    root, step = "00000000-0000-4000-8000-0000000000d0", "00000000-0000-4000-8000-0000000000d1"
    t = "2025-01-01T00:00:0{}Z"

    def run(rid: str, kind: str, parent: str | None, at: int, **more: Any) -> dict[str, Any]:
        return {"id": rid, "name": f"{kind}-{rid[-2:]}", "run_type": kind, "trace_id": root,
                "parent_run_id": parent, "session_name": "agents", "start_time": t.format(at),
                "end_time": t.format(at + 1), "inputs": {"q": "x"}, "outputs": {"a": "y"},
                **more}

    usage = {"extra": {"metadata": {"usage_metadata": {"input_tokens": 20, "output_tokens": 5}}}}
    store.runs.upsert(posts=[
        run(root, "chain", None, 0), run(step, "chain", root, 1),
        run("00000000-0000-4000-8000-0000000000d2", "llm", step, 2, **usage),
        run("00000000-0000-4000-8000-0000000000d3", "llm", root, 3, **usage)])
    page = http.get(f"/ui/runs/{root}").text

    def tokens(rid: str) -> str:
        row = page.split(f'data-id="{rid}"')[1].split("</tr>")[0]
        return re.findall(r'<td class="num">([^<]*)', row)[1].strip()  # first token, tokens

    assert tokens(root) == "50" and tokens(step) == "25"
