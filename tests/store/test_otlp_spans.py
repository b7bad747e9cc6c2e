"""OTLP spans into the store (``store_spans``): the new-run fast path (``_span_rows``) stores
exactly what the general ``RunRepo`` path stores, and batches that mix new spans, spans sent
again and children whose parents come later are stored once each, in their trees, with exact
statistics; a batch that fails leaves nothing behind. SQLite and PostgreSQL.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from assay.errors import InvalidInputError
from assay.server._otlp import to_span_runs
from assay.store import Store
from assay.store._spans import SpanRun, _place, store_spans
from assay.tracing._otel_map import SpanEvent, SpanView

from ._stored import stored_runs
from .test_aggregates import _check_all

T0 = 1_700_000_000_000_000_000  # ns
TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER = "1bf7651916cd43dd8448eb211c80319d"


def _sid(n: int) -> str:
    return f"{n + 1:016x}"


def _spans() -> list[SpanView]:
    """Spans of every kind the mapping makes, children listed before their parents."""
    def span(n: int, parent: int | None, attrs: dict[str, Any], *, trace: str = TRACE,
             name: str = "span", start: int = 0, end: int | None = 1000,
             events: list[SpanEvent] | None = None, error: bool = False) -> SpanView:
        return SpanView(trace, _sid(n), None if parent is None else _sid(parent), name,
                        T0 + start * 1000, None if end is None else T0 + (start + end) * 1000,
                        attrs, events or [], error, "failed" if error else None,
                        {"service.name": "svc"}, "scope")

    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.system": "openai", "gen_ai.usage.input_tokens": 1000,
            "gen_ai.usage.output_tokens": 200}
    return [
        span(1, 0, chat, name="chat gpt-4o-mini", start=10, end=50),
        span(2, 0, {**chat, "gen_ai.request.model": "unknown-model"}, name="chat other",
             start=70, events=[SpanEvent("gen_ai.content.first_token", T0 + 75_000)]),
        span(3, 2, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": '{"city": "Paris"}'}, start=80, end=5,
             error=True, events=[SpanEvent("exception", T0 + 84_000, {
                 "exception.type": "LookupError", "exception.message": "caf\u00e9 \x00"})]),
        span(4, 0, {"openinference.span.kind": "RETRIEVER", "input.value": "paris",
                    "tag.tags": ("a", "b"), "custom": 1}, name="r\u00e9trieve", start=90,
             end=None),
        span(0, None, {"gen_ai.operation.name": "invoke_agent",
                       "input.value": '{"q": 1}'}, name="invoke_agent", start=0, end=200),
        span(5, None, {"langsmith.span.kind": "chain", "langsmith.metadata.k": "v"},
             trace=OTHER, name="lone root", start=300, end=0),
    ]


def _normalized(store: Store, items: list[SpanRun]) -> list[dict[str, Any]]:
    """Every column of the workspace's runs; ids by their span's position, project by name."""
    names = {it.post["id"]: f"<{n}>" for n, it in enumerate(items)}
    names.update({it.alias_id: f"<alias {n}>" for n, it in enumerate(items)})
    return stored_runs(store, names)


def _items(store: Store, spans: list[SpanView], project: str | None = "otlp") -> list[SpanRun]:
    return list(to_span_runs(store.tenant_id, spans, project))


def test_the_fast_path_stores_what_the_general_path_stores(store: Store) -> None:
    fast, general = (store.for_tenant(str(uuid.uuid4())) for _ in range(2))
    fast_items = _items(fast, _spans())
    store_spans(fast, fast_items)
    general_items = _items(general, _spans())
    _place(general_items, {}, {})
    general.runs.upsert(posts=[it.post for it in general_items])
    a, b = _normalized(fast, fast_items), _normalized(general, general_items)
    assert len(a) == 6
    for x, y in zip(a, b, strict=True):
        assert x == y
    by_name = {r["name"]: r for r in a}
    assert by_name["chat gpt-4o-mini"]["prompt_cost"] > 0  # priced by genai-prices
    assert by_name["chat other"]["first_token_us"] == 5  # start + 5 us
    assert by_name["lookup"]["status"] == "error" and "LookupError" in by_name["lookup"]["error"]
    assert _check_all([fast, general]) == 2


def test_column_values_made_before_the_write_lock_or_in_it_store_the_same(store: Store) -> None:
    """The server computes each run's ``span_values`` on the request's thread (``to_span_runs``
    fills ``SpanRun.values``); a caller that leaves them out gets them computed in the write
    transaction: the same rows either way."""
    early, late = (store.for_tenant(str(uuid.uuid4())) for _ in range(2))
    early_items = _items(early, _spans())
    assert all(it.values is not None for it in early_items)
    late_items = [SpanRun(it.post, it.span_id, it.parent_span_id, it.parent_id, it.alias_id)
                  for it in _items(late, _spans())]
    store_spans(early, early_items)
    store_spans(late, late_items)
    assert _normalized(early, early_items) == _normalized(late, late_items)
    assert _check_all([early, late]) == 2


def test_a_batch_mixing_new_spans_spans_sent_again_and_early_children(store: Store) -> None:
    spans = _spans()
    by_span = {s.span_id: s for s in spans}
    # 1: the tool span alone (its parent, chat 2, comes later) and the lone root
    store_spans(store, _items(store, [by_span[_sid(3)], by_span[_sid(5)]]))
    # 2: chat 1 and chat 2 (new; chat 2 adopts the tool), the tool again renamed (stored:
    #    only what is missing is filled), chat 1 twice in the batch; the root still absent
    tool_again = SpanView(**{**by_span[_sid(3)].__dict__, "name": "renamed"})
    moved = store_spans(store, _items(store, [by_span[_sid(1)], by_span[_sid(2)], tool_again,
                                              by_span[_sid(1)]]))
    assert moved == 1
    got = {r.name: r for r in store.runs.list()}
    assert set(got) == {"chat gpt-4o-mini", "chat other", "lookup", "lone root"}
    assert got["lookup"].parent_run_id == got["chat other"].id
    assert got["lookup"].dotted_order.startswith(got["chat other"].dotted_order + ".")
    assert got["chat other"].parent_run_id is not None  # waits for the root, visible already
    # 3: the root, then everything again (a retrying exporter)
    root_items = _items(store, [by_span[_sid(0)]])
    store_spans(store, root_items)
    store_spans(store, _items(store, spans))
    got_runs = store.runs.list()
    assert len(got_runs) == 6
    by_id = {r.id: r for r in got_runs}
    root = str(root_items[0].post["id"])
    for r in got_runs:
        if r.parent_run_id is None:
            assert str(r.trace_id) == str(r.id) and "." not in r.dotted_order
        else:
            parent = by_id[r.parent_run_id]
            assert r.dotted_order.startswith(parent.dotted_order + ".")
    assert {str(r.parent_run_id) for r in got_runs if r.name.startswith("chat")} == {root}
    project = store.projects.read(project_name="otlp", include_stats=True)
    assert project.run_count == 2  # two roots: the agent and the lone root
    assert project.total_tokens == 2400
    assert _check_all([store]) == 1


def test_a_root_stored_first_takes_children_that_name_it_by_span(store: Store) -> None:
    spans = _spans()
    store_spans(store, _items(store, [spans[4]]))  # the root before any child
    store_spans(store, _items(store, spans[:2]))
    got = {r.name: r for r in store.runs.list()}
    root = got["invoke_agent"]
    for name in ("chat gpt-4o-mini", "chat other"):
        assert got[name].parent_run_id == root.id
        assert got[name].dotted_order.startswith(root.dotted_order + ".")


def test_a_failing_batch_leaves_nothing_behind(store: Store) -> None:
    spans = _spans()
    store_spans(store, _items(store, spans[:1]))
    items = _items(store, spans)
    items[0].post["inputs"] = "not an object"  # stored already: the general path refuses it
    with pytest.raises(InvalidInputError, match="inputs must be an object"):
        store_spans(store, items)
    assert [r.name for r in store.runs.list()] == ["chat gpt-4o-mini"]
    assert _check_all([store]) == 1


@pytest.mark.parametrize("n", [1, 450])
def test_batches_of_any_size(store: Store, n: int) -> None:
    spans = [SpanView(f"{i + 1:032x}", _sid(i), None, "root", T0 + i * 1000, T0 + i * 1000 + 5,
                      {}, [], False, None, {}, None) for i in range(n)]
    store_spans(store, _items(store, spans))
    store_spans(store, _items(store, spans))  # again: stored once
    project = store.projects.read(project_name="otlp", include_stats=True)
    assert project.run_count == n


def test_a_project_created_meanwhile_by_another_worker_is_retried_not_lost(pg_url: str) -> None:
    """PostgreSQL with several workers: another process creates the batch's project between
    this batch's look-up and its insert; the unique violation rolls the batch back and it is
    stored again (an exporter does not retry a 409: the spans would be lost)."""
    import threading
    import time

    import psycopg

    tenant = str(uuid.uuid4())
    ours, theirs = Store.open(pg_url).for_tenant(tenant), Store.open(pg_url).for_tenant(tenant)
    try:
        done: list[BaseException | None] = []
        with theirs.write() as conn:  # the other worker's transaction, not committed yet
            theirs.projects._get_or_create(conn, "raced")
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()

            def export() -> None:
                try:
                    store_spans(ours, _items(ours, _spans(), "raced"))
                    done.append(None)
                except BaseException as exc:  # noqa: BLE001 - checked below
                    done.append(exc)

            thread = threading.Thread(target=export)
            thread.start()
            with psycopg.connect(pg_url, autocommit=True) as watch:  # until ours waits on it
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not watch.execute(
                        "SELECT 1 FROM pg_locks w JOIN pg_locks h ON h.transactionid = "
                        "w.transactionid AND h.granted WHERE NOT w.granted AND h.pid = %s",
                        (pid,)).fetchone():
                    time.sleep(0.01)
        thread.join(20)
        assert done == [None]
        project = ours.projects.read(project_name="raced", include_stats=True)
        assert project.run_count == 2 and len(ours.runs.list()) == 6
    finally:
        ours.close()
        theirs.close()
