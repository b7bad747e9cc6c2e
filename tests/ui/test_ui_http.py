"""The UI router over HTTP (no browser): auth modes, redirects, escaping, errors, charts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from assay.store import Store
from assay.ui import COOKIE_NAME, LoginRedirect, StoreFromKey, create_ui_router, ui_router_for
from assay.ui._format import pretty, signed, usd
from assay.ui._svg import histogram_svg, seconds_tick

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from assay_factory import LiveServer, Outcome, add_experiment, make_dataset  # noqa: E402


@pytest.fixture
def local(sqlite_url: str) -> Any:
    """A UI without keys (local use): the store's default workspace."""
    store = Store.open(sqlite_url)
    app = FastAPI()
    app.include_router(ui_router_for(store, auth=False))
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as http:
        yield store, http
    store.close()


@pytest.fixture
def team(sqlite_url: str) -> Any:
    from assay.server import create_app

    store = Store.open(sqlite_url)
    with LiveServer(create_app(store=store)) as live, httpx.Client(base_url=live.url) as http:
        yield store, http
    store.close()


def test_without_auth_pages_show_the_default_workspace(local: Any) -> None:
    store, http = local
    ds, examples = make_dataset(store, "<script>alert(1)</script>", 3)
    page = http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<script>alert(1)</script>" not in page.text
    assert http.get(f"/ui/datasets/{ds.id}").status_code == 200
    login = http.get("/ui/login")
    assert "runs without API keys" in login.text


def test_nothing_is_fetched_from_elsewhere(local: Any) -> None:
    store, http = local
    ds, examples = make_dataset(store, "qa", 4)
    exp = add_experiment(store, ds.id, examples, "e", lambda i, ex, r: Outcome(scores={"s": 1.0}))
    for url in ("/", f"/ui/datasets/{ds.id}", f"/ui/datasets/{ds.id}/experiments",
                f"/ui/experiments/{exp.id}"):
        text = http.get(url).text
        assert "<link" not in text and "src=" not in text and "@import" not in text
        assert "https://" not in text.replace("http://www.w3.org/2000/svg", "")


def test_key_from_header_cookie_or_bearer(team: Any) -> None:
    store, http = team
    key = store.keys.create(tenant="acme")
    other = store.keys.create(tenant="globex")
    make_dataset(store.for_tenant(key.tenant_id), "acme-data", 2)
    make_dataset(store.for_tenant(other.tenant_id), "globex-data", 2)
    for headers in ({"x-api-key": key.key}, {"authorization": f"Bearer {key.key}"}):
        page = http.get("/", headers=headers)
        assert page.status_code == 200
        assert "acme-data" in page.text and "globex-data" not in page.text
    page = http.get("/", headers={"cookie": f"{COOKIE_NAME}={other.key}"})
    assert "globex-data" in page.text and "acme-data" not in page.text


def test_missing_or_revoked_key_redirects_to_login(team: Any) -> None:
    store, http = team
    key = store.keys.create(tenant="acme")
    resp = http.get("/ui/compare?ids=a,b")
    assert resp.status_code == 303
    assert resp.headers["location"] == "/ui/login?next=%2Fui%2Fcompare%3Fids%3Da%2Cb"
    store.keys.revoke(key.id)
    resp = http.get("/", headers={"x-api-key": key.key})
    assert resp.status_code == 303 and "revoked" in resp.headers["location"]
    login = http.get(resp.headers["location"])
    assert login.status_code == 401 and "this API key was revoked" in login.text


def test_login_sets_an_http_only_cookie_and_refuses_open_redirects(team: Any) -> None:
    store, http = team
    key = store.keys.create(tenant="acme")
    bad = http.post("/ui/login", data={"api_key": "nope", "next": "/"})
    assert bad.status_code == 401 and "unknown API key" in bad.text
    ok = http.post("/ui/login", data={"api_key": key.key, "next": "//evil.example/x"})
    assert ok.status_code == 303 and ok.headers["location"] == "/"
    cookie = ok.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}={key.key}") and "HttpOnly" in cookie
    assert "samesite=lax" in cookie.lower()
    out = http.post("/ui/logout")
    assert out.status_code == 303 and f'{COOKIE_NAME}=""' in out.headers["set-cookie"]


def test_error_pages_name_the_problem(local: Any) -> None:
    store, http = local
    ds, examples = make_dataset(store, "qa", 3)
    ds2, examples2 = make_dataset(store, "qa2", 3)
    a = add_experiment(store, ds.id, examples, "a", lambda i, ex, r: Outcome())
    b = add_experiment(store, ds2.id, examples2, "b", lambda i, ex, r: Outcome())
    c = add_experiment(store, ds.id, examples, "c", lambda i, ex, r: Outcome())
    for url, status, says in [
        (f"/ui/compare?ids={a.id}&ids={b.id}", 400, "same dataset"),
        (f"/ui/compare?ids={a.id},not-an-id", 400, "&#39;not-an-id&#39; is not an experiment id"),
        (f"/ui/compare?ids={a.id},{a.id}&confidence=2", 400, "confidence"),
        (f"/ui/compare?ids={a.id},{c.id}&baseline={b.id}", 400, "is not one of the compared ids"),
        (f"/ui/datasets/{ds.id}?as_of=no-such-tag", 404, "no-such-tag"),
        (f"/ui/experiments/{a.id}?failing=nope", 400, "no feedback key &#39;nope&#39;"),
    ]:
        resp = http.get(url)
        assert resp.status_code == status and says in resp.text, url
    assert http.get("/ui/runs/00000000-0000-0000-0000-000000000001").status_code == 404


def test_tracing_project_and_a_lone_llm_run(local: Any) -> None:
    store, http = local
    store.runs.upsert(posts=[{
        "id": "00000000-0000-4000-8000-0000000000aa", "name": "chat", "run_type": "llm",
        "session_name": "traces", "start_time": "2025-01-01T00:00:00Z",
        "end_time": "2025-01-01T00:00:02Z",
        "inputs": {"messages": [{"role": "user", "content": "hi"}]},
        "error": "RateLimitError: slow down",
        "extra": {"metadata": {"usage_metadata": {"input_tokens": 7, "output_tokens": 3}}}}])
    home = http.get("/")
    assert "Tracing projects" in home.text and "traces" in home.text
    project = store.projects.read(project_name="traces")
    exp = http.get(f"/ui/experiments/{project.id}")
    assert exp.status_code == 200 and "RateLimitError" in exp.text
    run = http.get("/ui/runs/00000000-0000-4000-8000-0000000000aa")
    assert run.status_code == 200 and "RateLimitError: slow down" in run.text
    assert "10 tokens" in run.text and "2.00 s" in run.text


def test_an_llm_runs_prompt_cache_counts_are_shown(local: Any) -> None:
    """Reads and writes of the prompt cache (Anthropic's as LangChain itemises them, by
    lifetime) beside the tokens; nothing about a cache for a run that used none."""
    store, http = local
    usage = {"input_tokens": 5000, "output_tokens": 10, "input_token_details": {
        "cache_read": 1200, "cache_creation": 0, "ephemeral_5m_input_tokens": 3000,
        "ephemeral_1h_input_tokens": 500}}
    for rid, meta in (("ab", {"usage_metadata": usage, "ls_provider": "anthropic",
                              "ls_model_name": "claude-sonnet-4-6"}),
                      ("ac", {"usage_metadata": {"input_tokens": 7, "output_tokens": 3}})):
        store.runs.upsert(posts=[{
            "id": f"00000000-0000-4000-8000-0000000000{rid}", "name": "chat",
            "run_type": "llm", "session_name": "cached", "start_time": "2025-01-01T00:00:00Z",
            "end_time": "2025-01-01T00:00:02Z", "extra": {"metadata": meta}}])
    page = http.get("/ui/runs/00000000-0000-4000-8000-0000000000ab").text
    assert "(prompt cache: 1,200 read, 3,500 written)" in page
    assert "prompt cache" not in http.get("/ui/runs/00000000-0000-4000-8000-0000000000ac").text


def test_custom_store_dependency(sqlite_url: str) -> None:
    """Any dependency returning a Store works; the login form then accepts a key as is."""
    store = Store.open(sqlite_url)
    make_dataset(store, "mine", 1)
    app = FastAPI()
    app.include_router(create_ui_router(lambda: store))
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as http:
        assert "mine" in http.get("/").text
        assert http.post("/ui/login", data={"api_key": "anything"}).status_code == 303
        assert http.post("/ui/login", data={"api_key": " "}).status_code == 401
    dep = StoreFromKey(lambda: store, auth=False)
    assert dep.store is store
    store.close()


def test_custom_dependency_may_ask_for_a_login(sqlite_url: str) -> None:
    """The dependency's contract is "a Store or a LoginRedirect" (what StoreFromKey returns):
    a custom one may send the browser to the login form, every page answers with a 303."""
    store = Store.open(sqlite_url)
    make_dataset(store, "mine", 1)

    def get_store(request: Request) -> Store | LoginRedirect:
        return store if request.headers.get("x-team") == "qa" else LoginRedirect(request.url.path)

    app = FastAPI()
    app.include_router(create_ui_router(get_store))
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as http:
        for path in ("/", "/ui/datasets/x", "/ui/compare", "/ui/runs/x"):
            resp = http.get(path)
            assert resp.status_code == 303, (path, resp.text)
            assert resp.headers["location"].startswith("/ui/login?next=%2F"), path
        assert "mine" in http.get("/", headers={"x-team": "qa"}).text
    store.close()


def test_histogram_svg() -> None:
    svg = str(histogram_svg([0.1, 0.2, 0.2, 0.9], title="score", bins=4, value_range=(0, 1)))
    assert svg.startswith("<svg") and 'aria-label="score histogram"' in svg
    counts = [int(x.split('"')[0]) for x in svg.split('data-count="')[1:]]
    assert counts == [3, 0, 0, 1]
    assert "n=4" in svg
    assert "no data" in str(histogram_svg([], title="x"))
    flat = str(histogram_svg([2.0, 2.0], title="x<y"))
    assert "x&lt;y" in flat
    assert sum(int(x.split('"')[0]) for x in flat.split('data-count="')[1:]) == 2


def test_a_histogram_of_fast_latencies_has_readable_bins() -> None:
    """Runs of a millisecond or less: every bin read "0.00 – 0.00" at two decimals."""
    svg = str(histogram_svg([0.000368, 0.0009, 0.0021, 0.0039], title="latency (s)", bins=4,
                            fmt=seconds_tick))
    assert "0.00 – 0.00" not in svg and "0.000368" in svg
    assert seconds_tick(0.5) == "0.5" and seconds_tick(12.345) == "12.3"
    assert seconds_tick(1234.5) == "1234"


def test_formatting() -> None:
    assert usd(0.00012) == "$0.000120" and usd(1.5) == "$1.5000" and usd(None) == "–"
    assert signed(0.25, "latency") == "+250 ms" and signed(-1.5, "latency") == "−1.50 s"
    assert signed(0.1, "error") == "+10.0%" and signed(0.0) == "0"
    assert pretty({"answer": "x"}) == "x" and pretty({"a": 1}) == '{\n  "a": 1\n}'


def test_long_experiments_are_paged(local: Any) -> None:
    import re

    store, http = local
    ds, examples = make_dataset(store, "big", 205)
    a = add_experiment(store, ds.id, examples, "a",
                       lambda i, ex, r: Outcome(scores={"s": float(i % 2)}))
    b = add_experiment(store, ds.id, examples, "b", lambda i, ex, r: Outcome(scores={"s": 1.0}))
    first = http.get(f"/ui/experiments/{a.id}").text
    assert first.count('<tr data-key=') == 200 and "rows 1–200 of 205" in first
    nxt = re.search(r'href="([^"]+)" rel="next"', first).group(1)
    second = http.get(f"/ui/experiments/{a.id}" + nxt.replace("&amp;", "&")).text
    assert second.count('<tr data-key=') == 5 and 'data-value="205"' in second
    # the filter counts every matching row (103 of 205 fail), paging only what it shows
    failing = http.get(f"/ui/experiments/{a.id}?failing=s").text
    assert "showing 103 of 205" in failing and failing.count('<tr data-key=') == 103
    cmp = http.get(f"/ui/compare?ids={a.id},{b.id}&offset=200").text
    assert 'rel="prev"' in cmp and "rows 201–205 of 205" in cmp
    assert cmp.count('<tr data-key=') == 5


def test_experiment_rows_by_the_filter_language(local: Any) -> None:
    store, http = local
    ds, examples = make_dataset(store, "where", 12)
    exp = add_experiment(store, ds.id, examples, "w", lambda i, ex, r: Outcome(
        latency=0.5 + i, scores={"s": float(i % 3 == 0)},
        error="ValueError: bad" if i == 5 else None))
    page = http.get(f"/ui/experiments/{exp.id}", params={"where": 'gt(latency, "8s")'}).text
    assert "showing 4 of 12 examples" in page and page.count("<tr data-key=") == 4
    assert "a run matching <code>gt(latency, &#34;8s&#34;)</code>" in page \
        or "a run matching <code>gt(latency, &quot;8s&quot;)</code>" in page
    # with the other filters: the rows both pick
    both = http.get(f"/ui/experiments/{exp.id}", params={
        "where": 'and(eq(feedback_key, "s"), eq(feedback_score, 1))', "errors": "true"}).text
    assert "showing 0 of 12" in both  # the one error's run scored 0
    scored = http.get(f"/ui/experiments/{exp.id}", params={
        "where": 'and(eq(feedback_key, "s"), eq(feedback_score, 1))'}).text
    assert "showing 4 of 12" in scored
    assert "showing 12 of 12" in http.get(f"/ui/experiments/{exp.id}?where=").text
    bad = http.get(f"/ui/experiments/{exp.id}", params={"where": "gt(latency, <script>)"})
    assert bad.status_code == 400 and "unexpected character" in bad.text
    assert "<script>)" not in bad.text and "&lt;script&gt;" in bad.text  # escaped


def test_pairwise_comparisons_on_the_experiments_and_compare_pages(local: Any) -> None:
    """A pairwise evaluation shows on the dataset's experiments page (linking to the comparison
    of its experiments) and on that comparison, each experiment's mean per key; the links the
    official SDKs print lead there."""
    import re

    from assay import Client, evaluate

    store, http = local
    client = Client(store=store)
    ds = client.create_dataset("pairs")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"q": q}} for q in "abc"])
    upper = evaluate(lambda i: {"a": i["q"].upper()}, data="pairs", client=client)
    plain = evaluate(lambda i: {"a": i["q"]}, data="pairs", client=client)
    ids = [str(client.read_project(project_name=r.experiment_name).id) for r in (upper, plain)]

    def capitals(outputs: list[dict[str, Any]]) -> list[int]:
        return [int(o["a"].isupper()) for o in outputs]

    pair = evaluate((upper, plain), evaluators=[capitals], client=client)
    listing = http.get(f"/ui/datasets/{ds.id}/experiments").text
    assert f'data-id="{pair.comparative_experiment.id}"' in listing
    link = re.search(r'href="(/ui/compare\?ids=[^"]+)">', listing)
    assert link is not None
    page = http.get(link.group(1).replace("&amp;", "&"))
    assert page.status_code == 200, page.text
    cells = dict(re.findall(r'data-experiment="([^"]+)" data-value="([^"]*)"', page.text))
    assert {k: float(v) for k, v in cells.items()} == {ids[0]: 1.0, ids[1]: 0.0}
    # without the second experiment, the comparison is not shown
    assert 'id="pairwise"' not in http.get(f"/ui/experiments/{ids[0]}").text

    to = http.get(f"/o/t/datasets/{ds.id}/compare", params={"selectedSessions": ",".join(ids)})
    assert to.status_code == 303 and to.headers["location"] == (
        f"/ui/compare?ids={ids[0]}%2C{ids[1]}")
    one = http.get(f"/o/t/datasets/{ds.id}/compare", params={"selectedSessions": ids[0]})
    assert one.headers["location"] == f"/ui/experiments/{ids[0]}"
    assert http.get(f"/o/t/projects/p/{ids[1]}").headers["location"] == f"/ui/projects/{ids[1]}"


def test_the_compare_page_says_which_examples_were_left_out(local: Any) -> None:
    """A candidate run on part of the dataset: the page says how many examples paired and how
    many were left out on each side (the table's differences are over the paired ones)."""
    from assay import Client, evaluate

    store, http = local
    client = Client(store=store)
    ds = client.create_dataset("partly")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"q": q}} for q in "abcd"])
    full = evaluate(lambda i: {"a": i["q"]}, data="partly", client=client)
    part = evaluate(lambda i: {"a": i["q"]}, data=list(client.list_examples(dataset_id=ds.id))[:3],
                    client=client)
    ids = [str(client.read_project(project_name=r.experiment_name).id) for r in (full, part)]
    page = http.get("/ui/compare", params={"ids": ",".join(ids)}).text
    said = " ".join(page.split())
    assert (f'data-candidate="{ids[1]}">3 examples paired; left out: 1 only in the baseline, '
            f"0 only in {part.experiment_name}") in said
    other_way = http.get("/ui/compare", params={"ids": ",".join(ids), "baseline": ids[1]})
    assert (f"3 examples paired; left out: 0 only in the baseline, 1 only in "
            f"{full.experiment_name}") in " ".join(other_way.text.split())
