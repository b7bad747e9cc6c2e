"""Every page in headless Chromium against the real server and a seeded SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.analysis import compare_experiments, load_experiment


def shot(page: Any, screenshots: Path, name: str) -> None:
    path = screenshots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5_000


def values(page: Any, rows: str, cell: str, attr: str = "data-value") -> list[str]:
    return page.eval_on_selector_all(
        rows, "(rs, [cell, attr]) => rs.map(r => r.querySelector(cell).getAttribute(attr))",
        [cell, attr])


def test_login_is_required_and_checks_the_key(browser: Any, site: dict[str, Any]) -> None:
    context = browser.new_context()
    pg = context.new_page()
    ds = site["dataset"]
    pg.goto(f"{site['url']}/ui/datasets/{ds.id}")
    assert "/ui/login" in pg.url  # redirected, remembering where it was going
    pg.fill("#api_key", "asy_not-a-key")
    pg.click("button[type=submit]")
    assert "unknown API key" in pg.inner_text("#login-error")
    pg.fill("#api_key", site["key"])
    pg.click("button[type=submit]")
    pg.wait_for_url(f"{site['url']}/ui/datasets/{ds.id}")
    assert pg.inner_text("h1") == ds.name
    pg.click("text=Log out")
    pg.wait_for_url("**/ui/login")
    pg.goto(site["url"] + "/")
    assert "/ui/login" in pg.url
    context.close()


def test_datasets_list(page: Any, site: dict[str, Any], screenshots: Path) -> None:
    page.goto(site["url"] + "/")
    rows = page.query_selector_all("#datasets tbody tr")
    assert len(rows) == 1
    row = page.query_selector(f"#datasets tr[data-id='{site['dataset'].id}']")
    text = row.inner_text()
    assert "qa-ui" in text and "14" in text and "3" in text
    shot(page, screenshots, "datasets")


def test_dataset_examples_splits_and_versions(page: Any, site: dict[str, Any],
                                              screenshots: Path) -> None:
    ds = site["dataset"]
    page.goto(f"{site['url']}/ui/datasets/{ds.id}")
    assert len(page.query_selector_all("#examples tbody tr")) == 14
    splits = page.inner_text("#splits")
    assert "train (6)" in splits and "test (6)" in splits and "holdout (2)" in splits
    shot(page, screenshots, "dataset")
    page.click("#splits a[data-split='holdout']")
    page.wait_for_url("**split=holdout**")
    assert len(page.query_selector_all("#examples tbody tr")) == 2
    assert "late0" in page.inner_text("#examples")
    # versions: the tagged one shows the dataset before the two holdout examples were added
    versions = page.query_selector_all("#versions tbody tr")
    assert len(versions) >= 2
    tagged = page.query_selector("#versions tr:has(.badge:text('v1'))")
    tagged.query_selector("a").click()
    page.wait_for_url("**as_of=**")
    assert len(page.query_selector_all("#examples tbody tr")) == 12
    assert "late0" not in page.inner_text("#examples")


def test_experiments_table_matches_the_store_and_sorts(page: Any, site: dict[str, Any],
                                                       screenshots: Path) -> None:
    ds = site["dataset"]
    page.goto(f"{site['url']}/ui/datasets/{ds.id}/experiments")
    ids = values(page, "#experiments tbody tr", "input", "value")
    stats = {str(p.id): p for p in site["store"].projects.list(reference_dataset_id=ds.id,
                                                                include_stats=True)}
    # newest first
    assert ids == [str(site["worse"].id), str(site["same"].id), str(site["baseline"].id)]
    for pid in ids:
        p = stats[pid]
        row = f"#experiments tr[data-id='{pid}']"
        for key in ("run_count", "latency_p50", "latency_p99", "first_token_p50",
                    "first_token_p99", "total_tokens", "total_cost", "error_rate"):
            shown = page.get_attribute(f"{row} td[data-key='{key}']", "data-value")
            assert float(shown) == pytest.approx(getattr(p, key)), (pid, key)
        for key in ("correctness", "helpfulness"):
            shown = page.get_attribute(f"{row} td[data-key='feedback:{key}']", "data-value")
            assert float(shown) == pytest.approx(p.feedback_stats[key].avg)
        assert page.inner_text(f"{row} td[data-key='run_count']") == str(p.run_count)
        assert "INCORRECT" in page.inner_text(f"{row} td[data-key='feedback:verdict']")
    assert stats[str(site["baseline"].id)].run_count == 24  # two repetitions
    shot(page, screenshots, "experiments")

    # click a header: latency p50 descending, then ascending
    page.click("th[data-key=latency_p50]")
    lat = [float(v) for v in values(page, "#experiments tbody tr", "td[data-key=latency_p50]")]
    assert lat == sorted(lat, reverse=True)
    assert values(page, "#experiments tbody tr", "input", "value")[0] == str(site["worse"].id)
    page.click("th[data-key=latency_p50]")
    lat = [float(v) for v in values(page, "#experiments tbody tr", "td[data-key=latency_p50]")]
    assert lat == sorted(lat)
    page.click("th[data-key='feedback:correctness']")
    corr = [float(v) for v in values(page, "#experiments tbody tr",
                                      "td[data-key='feedback:correctness']")]
    assert corr == sorted(corr, reverse=True)

    # tick two experiments (newest row first on screen): the oldest becomes the baseline
    page.click("th[data-key=start_time]")
    assert values(page, "#experiments tbody tr", "input", "value")[0] == str(site["baseline"].id)
    page.click("th[data-key=start_time]")
    assert values(page, "#experiments tbody tr", "input", "value")[0] == str(site["worse"].id)
    page.check(f"input[value='{site['worse'].id}']")
    page.check(f"input[value='{site['baseline'].id}']")
    assert page.inner_text("form.compare-form button[type=submit]") == "Compare 2 experiments"
    page.click("form.compare-form button[type=submit]")
    page.wait_for_url("**/ui/compare?**")
    assert page.inner_text("p.muted a") == "baseline"
    assert page.inner_text("#verdict") == "3 significant regressions"
    # and back the other way round: the worse prompt as the baseline improves on everything
    page.click("a.make-baseline")
    page.wait_for_url("**baseline=**")
    assert page.inner_text("p.muted a") == "worse-prompt"
    assert page.inner_text("#verdict") == "No significant regressions"
    assert len(page.query_selector_all("table.diffs tr.improvement")) == 3


def test_experiment_rows_charts_and_filters(page: Any, site: dict[str, Any],
                                            screenshots: Path) -> None:
    worse = site["worse"]
    data = load_experiment(site["store"], worse.id)
    page.goto(f"{site['url']}/ui/experiments/{worse.id}")
    rows = page.query_selector_all("#rows tbody tr")
    assert len(rows) == 12
    lat = [float(v) for v in values(page, "#rows tbody tr", "td[data-key=latency]")]
    assert lat == pytest.approx([r.latency for r in data.rows])
    assert page.inner_text("#stats [data-stat=runs] .value") == "12"
    assert "ToolError: search timed out on q3" in page.inner_text("#rows")
    # charts: latency + one per scored feedback key; every example counted once
    charts = page.query_selector_all("#charts svg")
    labels = [c.get_attribute("aria-label") for c in charts]
    assert labels == ["latency (s) histogram", "correctness histogram", "helpfulness histogram"]
    for chart in charts:
        counts = chart.eval_on_selector_all("rect.bar", "bs => bs.map(b => +b.dataset.count)")
        assert sum(counts) == 12
    shot(page, screenshots, "experiment")

    # the filter form: failing correctness hides the passing rows
    page.select_option("#failing", "correctness")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**failing=correctness**")
    failing = [r for r in data.rows if r.scores["correctness"] < 0.5]
    shown = values(page, "#rows tbody tr", "td[data-key='feedback:correctness']")
    assert len(shown) == len(failing) == 6
    numbers = [int(v) for v in values(page, "#rows tbody tr", "td[data-key=number]")]
    assert numbers == [i for i, r in enumerate(data.rows, 1) if r.scores["correctness"] < 0.5]
    assert all(float(v) < 0.5 for v in shown)
    assert "showing 6 of 12" in page.inner_text("#row-count")
    shot(page, screenshots, "experiment-failing")

    # errors only, via query parameters
    page.goto(f"{site['url']}/ui/experiments/{worse.id}?errors=true")
    errs = page.eval_on_selector_all("#rows tbody tr", "rs => rs.map(r => r.className)")
    assert errs == ["error", "error"]
    # either: failing helpfulness below 0.5 or an error
    page.goto(f"{site['url']}/ui/experiments/{worse.id}?failing=helpfulness&errors=true")
    expect = [r for r in data.rows if r.scores["helpfulness"] < 0.5 or r.error]
    assert len(page.query_selector_all("#rows tbody tr")) == len(expect)


def test_run_tree(page: Any, site: dict[str, Any], screenshots: Path) -> None:
    page.goto(f"{site['url']}/ui/experiments/{site['worse'].id}")
    page.click("#rows tbody tr:nth-child(2) a.trace-link")
    page.wait_for_url("**/ui/runs/**")
    types = page.eval_on_selector_all("#tree tr.node", "rs => rs.map(r => r.dataset.runType)")
    assert types == ["chain", "llm", "tool"]
    depths = page.eval_on_selector_all("#tree tr.node", "rs => rs.map(r => +r.dataset.depth)")
    assert depths == [0, 1, 1]
    llm = page.query_selector("#tree tr[data-run-type=llm]")
    assert "gpt-test" in llm.inner_text()
    assert "121" in llm.inner_text() and "(101 / 20)" in llm.inner_text()  # tokens of example 1
    page.click("#tree tr[data-run-type=tool] a")  # the step's own section, full width
    tool = page.query_selector("section.step[data-run-type=tool]")
    assert "arguments" in tool.inner_text() and '"query": "q1"' in tool.inner_text()
    assert "found q1" in tool.inner_text()
    assert "correctness" in page.inner_text("#feedback")
    shot(page, screenshots, "run")


def test_compare_marks_regressions(page: Any, site: dict[str, Any], screenshots: Path) -> None:
    base, same, worse = site["baseline"], site["same"], site["worse"]
    expected, _ = compare_experiments(site["store"], [str(base.id), str(same.id), str(worse.id)])
    page.goto(f"{site['url']}/ui/compare?ids={base.id},{same.id}&ids={worse.id}")
    assert page.inner_text("#verdict") == f"{len(expected.regressions)} significant regressions"
    assert len(expected.regressions) == 3
    for d in expected.diffs:
        row = (f"table.diffs[data-candidate='{d.candidate.id}'] "
               f"tr[data-metric='{d.metric}'][data-kind='{d.kind}']")
        assert page.get_attribute(row, "data-status") == d.status
        if d.diff is not None:
            assert float(page.get_attribute(row, "data-diff")) == pytest.approx(d.diff)
            assert float(page.get_attribute(row, "data-low")) == pytest.approx(d.ci_low)
    worse_tbl = f"table.diffs[data-candidate='{worse.id}']"
    for metric in ("correctness", "helpfulness", "latency"):
        status = page.get_attribute(f"{worse_tbl} tr[data-metric='{metric}']", "data-status")
        assert status == "regression"
        assert "regression" in page.inner_text(f"{worse_tbl} tr[data-metric='{metric}']")
    # 2 errors in 12 examples: a difference, but its interval still contains 0
    errors = f"{worse_tbl} tr[data-metric='error']"
    assert float(page.get_attribute(errors, "data-diff")) == pytest.approx(2 / 12)
    assert page.get_attribute(errors, "data-status") == "no significant change"
    same_tbl = f"table.diffs[data-candidate='{same.id}']"
    assert page.get_attribute(f"{same_tbl} tr[data-metric='correctness']", "data-status") == \
        "no significant change"
    assert len(page.query_selector_all("#side-by-side tbody tr")) == 12
    # example 1 of the worse experiment lost its correctness point: marked worse than baseline
    assert page.query_selector_all("#side-by-side td.worse span.worse[data-score=correctness]")
    shot(page, screenshots, "compare")


def test_error_pages(page: Any, site: dict[str, Any]) -> None:
    resp = page.goto(f"{site['url']}/ui/compare?ids={site['baseline'].id}")
    assert resp.status == 400 and "at least two" in page.inner_text("#error-message")
    resp = page.goto(f"{site['url']}/ui/experiments/00000000-0000-0000-0000-000000000000")
    assert resp.status == 404 and "not found" in page.inner_text("#error-message")


def test_rest_api_still_answers(page: Any, site: dict[str, Any]) -> None:
    resp = page.request.get(site["url"] + "/info")
    assert resp.status == 200 and "batch_ingest_config" in resp.json()
    resp = page.request.get(site["url"] + "/datasets", headers={"x-api-key": site["key"]})
    assert resp.status == 200 and resp.json()[0]["name"] == "qa-ui"
