"""Issue 23's queue, feedback config and dataset calls with the official ``langsmith`` npm
package against a real assay server (SQLite and PostgreSQL); see ``js/queues.mjs``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from ._checks import parse_printed_json
from .conftest import Workspace
from .test_js_sdk import _node, node  # noqa: F401  (the session's node + npm install)


def test_queues_configs_and_dataset_tools_with_the_official_js_client(
        node: str, ws: Workspace) -> None:  # noqa: F811
    start = datetime.now(UTC)
    ids = [str(uuid.uuid4()) for _ in range(2)]
    times = [start + timedelta(milliseconds=i) for i in range(2)]
    posts = [{"id": rid, "trace_id": rid, "name": "agent", "run_type": "chain",
              "start_time": t.isoformat(), "end_time": t.isoformat(),
              "dotted_order": t.strftime("%Y%m%dT%H%M%S%fZ") + rid, "session_name": "js-q",
              "inputs": {"q": "x"}} for rid, t in zip(ids, times, strict=True)]
    assert ws.http.post("/runs/batch", json={"post": posts}).status_code == 202
    session = ws.store.projects.read(project_name="js-q")
    out = parse_printed_json(_node(node, "queues.mjs", ws, *ids, str(session.id),
                                   *(t.isoformat() for t in times)))
    assert out["config_key"] == "correct" and out["config_keys"] == ["correct"]
    assert out["rubric_key"] == out["rubric_config_key"] == "correct"
    assert out["size"] == 2 and out["first"] == ids[0] and out["after"] == [ids[1]]
    assert out["queues"] == ["js-review"]
    assert out["csv_name"] == "js-csv" and out["csv_outputs"] == ["me", "that"]
    assert out["modified"] == [out["modified_expected"]]
    assert "inputs.q does not match" in out["schema_error"]
    assert out["filtered"] == ["fine"]
    (queue,) = ws.store.queues.list()
    assert [str(r.id) for r in ws.store.queues.list_runs(queue.id)] == [ids[1]]
