"""Run statistics (``getRunStats``) and the v2 queries the official JS client has
(``traces.query``, ``traces.listRuns``, ``runs.queryV2``, ``runs.retrieveV2``,
``datasets.experimentRuns.query`` with a feedback sort) against ``assay serve`` on SQLite and
PostgreSQL: the JS client reads what the Python SDK reads of the same runs."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from assay.client import Client

from ._checks import parse_printed_json
from .conftest import Workspace
from .test_js_sdk import _node, node  # noqa: F401  (the fixture: npm install once a session)
from .test_run_stats_v2 import T0, seed

pytestmark = pytest.mark.filterwarnings("ignore:.*(is deprecated|older than the minimum)")


def _experiment(client: Client) -> tuple[str, str, dict[int, float | None]]:
    """A dataset of 4 examples and one experiment on it, its runs scored 0.5, 1, 0 and none."""
    ds = client.create_dataset(f"js-sort-{uuid.uuid4().hex[:6]}")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"i": i}} for i in range(4)])
    name = f"js-exp-{uuid.uuid4().hex[:6]}"
    project = client.create_project(name, reference_dataset_id=ds.id)
    scores: dict[int, float | None] = {0: 0.5, 1: 1.0, 2: 0.0, 3: None}
    for ex in client.list_examples(dataset_id=ds.id):
        i, rid = ex.inputs["i"], str(uuid.uuid4())
        start = T0 + timedelta(seconds=i)
        client.create_run("target", {"i": i}, "chain", id=rid, trace_id=rid, project_name=name,
                          start_time=start, end_time=start + timedelta(seconds=1),
                          dotted_order=start.strftime("%Y%m%dT%H%M%S%fZ") + rid,
                          outputs={"o": i}, reference_example_id=str(ex.id))
        if scores[i] is not None:
            client.create_feedback(rid, "correct", score=scores[i])
    return str(ds.id), str(project.id), scores


def test_run_stats_and_v2_queries_with_the_official_js_client(node: str,  # noqa: F811
                                                              ws: Workspace) -> None:
    from langsmith import Client as LangSmithClient

    remote = Client(api_url=ws.server.url, api_key=ws.key)
    ids = seed(remote, "js-stats")
    pid = str(remote.read_project(project_name="js-stats").id)
    dataset_id, experiment_id, _ = _experiment(remote)
    window = (T0 - timedelta(minutes=1)).isoformat()
    out = parse_printed_json(_node(node, "run_stats.mjs", ws, "js-stats", pid, ids["roots"][0],
                                   ids["roots"][1], ids["llms"][1], window, dataset_id,
                                   experiment_id))

    sdk = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    py_roots = sdk.get_run_stats(project_names=["js-stats"], is_root=True)
    assert out["stats_roots"] == py_roots  # the same JSON to both clients
    assert out["stats_roots"]["run_count"] == 3 and out["stats_roots"]["total_tokens"] == 66
    assert out["stats_roots"]["latency_p50"] == pytest.approx(2.0)
    assert out["stats_trace"]["run_count"] == 2 and out["stats_trace"]["prompt_tokens"] == 40
    assert out["stats_filtered"]["run_count"] == 2
    assert out["bad_filter"] and "422" in out["bad_filter"]

    # three traces, newest first, two a page (the JS pager follows the cursor)
    assert [t["id"] for t in out["traces"]] == ids["roots"][::-1]
    assert [t["name"] for t in out["traces"]] == ["agent-2", "agent-1", "agent-0"]
    assert [t["status"] for t in out["traces"]] == ["ERROR", "SUCCESS", "SUCCESS"]
    assert [t["total_tokens"] for t in out["traces"]] == [33, 22, 11]
    assert out["trace_runs"] == [["agent-1", "chain", []], ["chat", "llm", [ids["roots"][1]]]]
    assert sorted(r[0] for r in out["child_runs"]) == sorted(ids["llms"])
    assert {r[0]: (r[1], r[2], r[3]) for r in out["child_runs"]}[ids["llms"][2]] == (
        "chat", 30, 33)
    assert out["retrieved"] == [ids["llms"][1], "chat", ids["roots"][1], 20]

    # ascending by the experiment's "correct" score; the unscored example last
    assert out["sorted"] == [[2, [{"o": 2}]], [0, [{"o": 0}]], [1, [{"o": 1}]], [3, [{"o": 3}]]]
