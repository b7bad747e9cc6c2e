"""A real server (uvicorn on 127.0.0.1) over a real SQLite store, and headless Chromium.

The browser is Debian's ``chromium`` driven by Playwright's Python package; Playwright's own
browser download is never used. With CI=true a missing browser fails the run; elsewhere the
browser tests skip with the install hint.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from assay.store import Store

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from assay_factory import T0, LiveServer, Outcome, add_experiment, make_dataset  # noqa: E402

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = os.environ.get("ASSAY_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
INSTALL_HINT = ("browser tests need Debian's chromium and Playwright's Python package: "
                "apt-get install -y chromium && pip install playwright "
                "(never `playwright install`; set ASSAY_TEST_CHROMIUM to use another binary)")


def _missing(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}; {INSTALL_HINT}")
    pytest.skip(f"{reason}; {INSTALL_HINT}")


# per module: while playwright's sync API is open, its event loop counts as running in this
# thread, and any later test of the process that runs a loop (asyncio.run) would fail
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    if not Path(CHROMIUM).exists():
        _missing(f"no chromium at {CHROMIUM}")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def seed(store: Store) -> dict[str, Any]:
    """A dataset with versions and splits, and three experiments: baseline, same, worse."""
    ds, examples = make_dataset(store, "qa-ui", 12)
    store.datasets.tag(ds.id, "v1")
    extra = store.examples.create_many(
        [{"inputs": {"question": f"late{i}"}, "outputs": {"answer": "x"}, "split": "holdout"}
         for i in range(2)], dataset_id=ds.id)

    def base(i: int, ex: Any, rep: int) -> Outcome:
        return Outcome(latency=1.0 + 0.05 * i + 0.01 * rep, prompt_tokens=100 + i,
                       completion_tokens=20, cost=0.001 * (1 + i % 3), first_token=0.1 + 0.01 * i,
                       output=f"a{i}", scores={"correctness": 0.0 if i == 5 else 1.0,
                                                "helpfulness": 0.6 + 0.02 * i},
                       labels={"verdict": "INCORRECT" if i == 5 else "CORRECT"})

    def same(i: int, ex: Any, rep: int) -> Outcome:
        return base(i, ex, 0)

    def worse(i: int, ex: Any, rep: int) -> Outcome:
        o = base(i, ex, 0)
        o.latency += 0.8
        o.scores["correctness"] = 0.0 if i % 2 else 1.0
        o.scores["helpfulness"] -= 0.3
        if i in (3, 7):
            o.error = f"ToolError: search timed out on q{i}"
            o.output = ""
        return o

    b = add_experiment(store, ds.id, examples, "baseline", base, repetitions=2, start=T0)
    s = add_experiment(store, ds.id, examples, "same-model", same, start=T0 + timedelta(hours=1))
    w = add_experiment(store, ds.id, examples, "worse-prompt", worse, start=T0 + timedelta(hours=2))
    return {"dataset": ds, "examples": examples + extra, "baseline": b, "same": s, "worse": w}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The real team server app (auth on) over a seeded SQLite store, served by uvicorn."""
    from assay.server import create_app

    path = tmp_path_factory.mktemp("ui-store") / "assay.db"
    base = Store.open(path)
    key = base.keys.create(tenant="ui-team")
    store = base.for_tenant(key.tenant_id)
    data = seed(store)
    with LiveServer(create_app(store=base)) as live:
        yield {"url": live.url, "key": key.key, "store": store, **data}
    base.close()


def logged_in(browser: Any, url: str, key: str, landing: str = "/") -> Iterator[Any]:
    """A page logged in through the login form (which sets the cookie), on ``landing``."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(10_000)
    pg.goto(url + "/ui/login" + ("" if landing == "/" else f"?next={landing}"))
    pg.fill("#api_key", key)
    pg.click("button[type=submit]")
    pg.wait_for_url(url + landing)
    yield pg
    context.close()


@pytest.fixture(scope="module")
def page(browser: Any, site: dict[str, Any]) -> Iterator[Any]:
    yield from logged_in(browser, site["url"], site["key"])
