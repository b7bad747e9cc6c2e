"""The day-to-day flows in headless Chromium: browse a project's traces, read an llm call as a
chat, review runs through an annotation queue with the keyboard, and see the statistics move.
Screenshots land in the session's screenshot folder for a reviewer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay import Client
from assay.store import Store
from assay.tracing import trace, traceable

from .conftest import LiveServer, logged_in
from .test_browser import shot


@traceable(run_type="tool")
def lookup_city(city: str) -> dict:
    return {"city": city, "population": 2102650}


@traceable(run_type="llm", metadata={"ls_model_name": "gpt-4o-mini", "ls_provider": "openai"})
def chat(messages: list) -> dict:
    last = messages[-1]["content"]
    if messages[-1]["role"] == "user":
        call = {"id": "call_1", "type": "function",
                "function": {"name": "lookup_city", "arguments": '{"city": "Paris"}'}}
        msg = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        msg = {"role": "assistant", "content": f"Paris has {last} people."}
    return {"choices": [{"message": msg}],
            "usage_metadata": {"input_tokens": 120, "output_tokens": 18, "total_tokens": 138}}


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A production tracing project (not an experiment) behind the real server with keys."""
    from assay.server import create_app

    path = tmp_path_factory.mktemp("ui-prod") / "assay.db"
    base = Store.open(path)
    key = base.keys.create(tenant="ops", description="dana")
    store = base.for_tenant(key.tenant_id)
    client = Client(store=store)
    for i in range(8):
        with trace("answer", inputs={"question": f"How many people live in Paris? #{i}"},
                   client=client, project_name="city-bot", enabled=True) as root:
            msgs = [{"role": "system", "content": "Use tools."},
                    {"role": "user", "content": "How many people live in Paris?"}]
            chat(msgs)
            found = lookup_city("Paris")
            msgs.append({"role": "tool", "tool_call_id": "call_1",
                         "content": str(found["population"])})
            answer = chat(msgs)
            root.end(outputs={"answer": answer["choices"][0]["message"]["content"]})
    client.flush()
    project = store.projects.read(project_name="city-bot")
    queue = store.queues.create("triage", rubric_instructions="Is the answer right?",
                                rubric_items=[{"feedback_key": "correct", "value_descriptions":
                                               {"yes": "right answer", "no": "wrong"}}])
    roots = store.runs.list(project_ids=[str(project.id)], is_root=True)
    store.queues.add_runs(queue.id, [r.id for r in roots[:3]])
    with LiveServer(create_app(store=base)) as live:
        yield {"url": live.url, "key": key.key, "store": store, "project": project,
               "queue": queue}
    base.close()


@pytest.fixture(scope="module")
def tab(browser: Any, prod: dict[str, Any]) -> Iterator[Any]:
    yield from logged_in(browser, prod["url"], prod["key"], "/ui/projects")


def test_browse_a_project_and_read_a_trace_as_a_chat(tab: Any, prod: dict[str, Any],
                                                     screenshots: Path) -> None:
    row = tab.query_selector(f"#projects tr[data-id='{prod['project'].id}']")
    assert "city-bot" in row.inner_text() and "tracing" in row.inner_text()
    shot(tab, screenshots, "projects")
    tab.click("text=city-bot")
    tab.wait_for_url(f"**/ui/projects/{prod['project'].id}")
    assert len(tab.query_selector_all("#traces tr.trace")) == 8
    assert tab.query_selector_all("#charts svg.chart")
    assert "276" in tab.inner_text("#traces tr.trace")  # two llm calls' tokens per trace
    shot(tab, screenshots, "project")
    tab.fill("input[name=where]", 'eq(run_type, "llm")')
    tab.select_option("select[name=run_type]", "llm")
    tab.click("#trace-filters button[type=submit]")
    tab.wait_for_load_state()
    assert len(tab.query_selector_all("#traces tr.trace")) == 16
    tab.click("#traces tr.trace a")
    tab.wait_for_url("**/ui/runs/**")
    turns = tab.eval_on_selector_all(".chat .turn", "ts => ts.map(t => t.className)")
    assert [t.split()[1] for t in turns][:2] == ["system", "user"]
    assert "lookup_city" in tab.inner_text(".chat") or "Paris has" in tab.inner_text(".chat")
    shot(tab, screenshots, "run-chat")


def test_review_a_queue_with_the_keyboard_and_see_the_statistic(tab: Any, prod: dict[str, Any],
                                                                 screenshots: Path) -> None:
    store, queue = prod["store"], prod["queue"]
    tab.goto(f"{prod['url']}/ui/queues")
    assert "triage" in tab.inner_text("#queues")
    tab.click("text=triage")
    tab.wait_for_url(f"**/ui/queues/{queue.id}")
    assert "0 of 3 reviewed" in tab.inner_text("#progress")
    # the Enter hint on the blue button is readable: dark text on its own light key cap
    hint = tab.eval_on_selector("#done kbd", "k => [getComputedStyle(k).color, "
                                "getComputedStyle(k).backgroundColor]")
    assert hint[0] != hint[1] and hint[0] != "rgb(255, 255, 255)", hint
    shot(tab, screenshots, "queue")
    for key in ("1", "2", "1"):  # 1 = yes, 2 = no; Enter = done, next run
        tab.keyboard.press(key)
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
    assert tab.query_selector("#queue-done") is not None
    stats = store.projects.read(project_id=prod["project"].id, include_stats=True)
    assert stats.feedback_stats["correct"].values == {"yes": 2, "no": 1}
    fb = store.feedback.list(project_ids=[str(prod["project"].id)], feedback_key=["correct"])
    assert {f.feedback_source.metadata["user"] for f in fb} == {"dana"}
    tab.goto(f"{prod['url']}/ui/projects/{prod['project'].id}")
    assert "correct: yes" in tab.inner_text("#traces")
    tab.goto(f"{prod['url']}/ui/projects")
    shot(tab, screenshots, "projects-after-review")
