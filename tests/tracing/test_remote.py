"""Tracing through a remote Client (an `assay serve` app on 127.0.0.1): same runs, same tree."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from assay.client import Client
from assay.store import Store
from assay.tracing import trace, traceable, tracing_context


@pytest.fixture
def remote(sqlite_url: str) -> Iterator[tuple[Client, Store]]:
    from assay.server import create_app

    store = Store.open(sqlite_url)
    config = uvicorn.Config(create_app(store=store), host="127.0.0.1", port=0,
                            log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    key = store.keys.create(tenant="tracing")
    view = store.for_tenant(key.tenant_id)
    try:
        yield Client(api_url=f"http://127.0.0.1:{port}", api_key=key.key), view
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()


def test_traced_runs_reach_a_remote_server(remote: tuple[Client, Store], tmp_path: Path) -> None:
    client, view = remote

    @traceable(run_type="tool")
    def tool(x: int) -> int:
        return x * 2

    with tracing_context(enabled=True, client=client, project_name="remote"):
        with trace("agent", inputs={"q": 1}) as root:
            tool(1)
            with trace("model", run_type="llm") as llm:
                llm.set_usage(input_tokens=100, output_tokens=10, provider="openai",
                              model="gpt-4o-mini")
            tool(2)
    client.flush()
    stored = view.runs.read(root.id, load_child_runs=True)
    assert [c.name for c in stored.child_runs] == ["tool", "model", "tool"]
    assert stored.child_runs[2].outputs == {"output": 4}
    assert stored.child_runs[1].total_tokens == 110 and stored.child_runs[1].total_cost > 0
    assert stored.start_time == root.start_time and stored.end_time == root.end_time
    assert client.read_run(root.id).name == "agent"
