"""``get_run_stats`` (``POST /runs/stats``), the v2 traces API (``client.traces``) and v2
experiment runs (``client.datasets.experiment_runs``) through the official SDK, and
``get_run_stats`` on assay's own Client, local and remote alike."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay.client import Client

from .conftest import Workspace

pytestmark = pytest.mark.filterwarnings("ignore:.*(is deprecated|older than the minimum)")

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)


def _seg(t: datetime, rid: str) -> str:
    return t.strftime("%Y%m%dT%H%M%S%fZ") + rid


def seed(client: Client, project: str) -> dict[str, Any]:
    """Three traces (agent -> llm): latencies 1, 2 and 4 s, the third failing; the llm calls
    use 10/20/30 prompt and 1/2/3 completion tokens at known costs; feedback on the first."""
    out: dict[str, Any] = {"roots": [], "llms": []}
    for i, seconds in enumerate((1, 2, 4)):
        rid, lid = str(uuid.uuid4()), str(uuid.uuid4())
        start = T0 + timedelta(minutes=i)
        root_order = _seg(start, rid)
        client.create_run(f"agent-{i}", {"q": i}, "chain", id=rid, trace_id=rid,
                          project_name=project, start_time=start, dotted_order=root_order,
                          end_time=start + timedelta(seconds=seconds),
                          outputs={"a": i}, error="ValueError: no" if i == 2 else None,
                          tags=["beta"] if i else [])
        lstart = start + timedelta(milliseconds=100)
        usage = {"input_tokens": 10 * (i + 1), "output_tokens": i + 1,
                 "total_tokens": 11 * (i + 1), "input_cost": 0.001 * (i + 1),
                 "output_cost": 0.0001 * (i + 1), "total_cost": 0.0011 * (i + 1)}
        client.create_run("chat", {"m": i}, "llm", id=lid, trace_id=rid, parent_run_id=rid,
                          project_name=project, start_time=lstart,
                          dotted_order=f"{root_order}.{_seg(lstart, lid)}",
                          end_time=lstart + timedelta(milliseconds=500),
                          extra={"metadata": {"usage_metadata": usage}}, outputs={"t": "x"})
        out["roots"].append(rid)
        out["llms"].append(lid)
    client.create_feedback(out["roots"][0], "correct", score=1.0)
    client.create_feedback(out["roots"][1], "correct", score=0.0)
    return out


def _stats(client: Client, project: str, ids: dict[str, Any]) -> dict[str, Any]:
    return {
        "all": client.get_run_stats(project_names=[project]),
        "roots": client.get_run_stats(project_names=[project], is_root=True),
        "filtered": client.get_run_stats(project_names=[project],
                                         filter='and(eq(is_root, true), has(tags, "beta"))'),
        "errors": client.get_run_stats(project_names=[project], error=True),
        "window": client.get_run_stats(project_names=[project], is_root=True,
                                       start_time=(T0 + timedelta(seconds=30)).isoformat(),
                                       end_time=(T0 + timedelta(seconds=90)).isoformat()),
        "trace": client.get_run_stats(project_names=[project], trace=ids["roots"][1]),
    }


def _check(stats: dict[str, Any]) -> None:
    roots = stats["roots"]
    assert roots["run_count"] == 3
    assert roots["latency_p50"] == pytest.approx(2.0)
    assert roots["latency_p99"] == pytest.approx(2 + 2 * 0.98)  # numpy's linear method
    assert roots["error_rate"] == pytest.approx(1 / 3)
    # each root counts its llm call's usage, as LangSmith rolls it up
    assert (roots["prompt_tokens"], roots["completion_tokens"],
            roots["total_tokens"]) == (60, 6, 66)
    assert roots["total_cost"] == pytest.approx(0.0066)
    assert roots["median_tokens"] == pytest.approx(22)
    assert roots["feedback_stats"]["correct"]["n"] == 2
    assert roots["feedback_stats"]["correct"]["avg"] == pytest.approx(0.5)
    assert roots["last_run_start_time"] == T0 + timedelta(minutes=2)
    everything = stats["all"]
    assert everything["run_count"] == 6 and everything["total_tokens"] == 132  # counted twice
    assert everything["latency_p50"] == pytest.approx(0.75)
    assert stats["filtered"]["run_count"] == 2 and stats["filtered"]["total_tokens"] == 55
    assert stats["errors"]["run_count"] == 1 and stats["errors"]["error_rate"] == 1.0
    assert stats["window"]["run_count"] == 1 and stats["window"]["latency_p50"] == 2.0
    assert stats["trace"]["run_count"] == 2 and stats["trace"]["prompt_tokens"] == 40


def test_get_run_stats_local_equals_remote_equals_sdk(ws: Workspace) -> None:
    local, remote = Client(store=ws.store), Client(api_url=ws.server.url, api_key=ws.key)
    ids_local = seed(local, "stats-local")
    ids_remote = seed(remote, "stats-remote")
    got_local = _stats(local, "stats-local", ids_local)
    got_remote = _stats(remote, "stats-remote", ids_remote)
    _check(got_local)
    _check(got_remote)
    assert got_local == got_remote

    from langsmith import Client as LangSmithClient

    sdk = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    by_sdk = sdk.get_run_stats(project_names=["stats-remote"], is_root=True,
                               data_source_type="current")
    assert by_sdk == {**got_remote["roots"],
                      "last_run_start_time": got_remote["roots"]["last_run_start_time"].isoformat()}
    filtered = sdk.get_run_stats(project_ids=[sdk.read_project(project_name="stats-remote").id],
                                 filter='and(eq(is_root, true), has(tags, "beta"))',
                                 reference_example_ids=None)
    assert filtered["run_count"] == 2
    with pytest.raises(Exception, match="422|filter"):
        sdk.get_run_stats(project_names=["stats-remote"], filter="eq(nonsense")
    resp = ws.http.post("/runs/stats", json={"session": [str(uuid.uuid4())]})
    assert resp.status_code == 404
    with pytest.raises(ValueError, match="project_names or project_ids"):
        local.get_run_stats()


# -- v2 traces -------------------------------------------------------------------------------

@pytest.fixture
def sdk(ws: Workspace) -> Iterator[Any]:
    from langsmith import Client as LangSmithClient

    client = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    yield client
    client.cleanup()


def _collect(pages: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [item async for item in pages]

    return asyncio.run(go())


def test_traces_query_pages_filters_and_aggregates(ws: Workspace, sdk: Any) -> None:
    ids = seed(Client(api_url=ws.server.url, api_key=ws.key), "traces")
    pid = str(ws.store.projects.read(project_name="traces").id)
    window = {"min_start_time": (T0 - timedelta(minutes=1)).isoformat()}
    got = _collect(sdk.traces.query(project_id=pid, page_size=1, selects=[
        "ID", "NAME", "STATUS", "LATENCY_SECONDS", "TOTAL_TOKENS", "TOTAL_COST",
        "FIRST_TOKEN_TIME"], **window))
    assert [t.root_run.id for t in got] == ids["roots"][::-1]  # newest first, a page each
    assert [t.root_run.name for t in got] == ["agent-2", "agent-1", "agent-0"]
    assert [t.root_run.status for t in got] == ["ERROR", "SUCCESS", "SUCCESS"]
    assert [t.root_run.latency_seconds for t in got] == [4.0, 2.0, 1.0]
    assert [t.trace_aggregates.total_tokens for t in got] == [33, 22, 11]
    assert got[0].trace_aggregates.total_cost == pytest.approx(0.0033)
    assert got[0].root_run.total_tokens is None  # aggregates go under trace_aggregates

    beta = _collect(sdk.traces.query(project_id=pid, trace_filter='has(tags, "beta")',
                                     selects=["ID"], **window))
    assert sorted(t.root_run.id for t in beta) == sorted(ids["roots"][1:])
    errs = _collect(sdk.traces.query(project_id=pid, tree_filter='eq(status, "error")', **window))
    assert [t.root_run.id for t in errs] == [ids["roots"][2]]
    assert errs[0].trace_aggregates is None  # only aggregates asked for are given
    one = _collect(sdk.traces.query(project_id=pid, trace_ids=[ids["roots"][0]], **window))
    assert [t.root_run.id for t in one] == [ids["roots"][0]]
    assert _collect(sdk.traces.query(project_id=pid)) == []  # the default window: the last day
    before = _collect(sdk.traces.query(project_id=pid, max_start_time=T0 + timedelta(minutes=1),
                                       **window))  # exclusive: agent-1 started right then
    assert [t.root_run.id for t in before] == [ids["roots"][0]]

    runs = asyncio.run(sdk.traces.list_runs(ids["roots"][1], project_id=pid,
                                            selects=["ID", "NAME", "RUN_TYPE", "PARENT_RUN_IDS"]))
    assert [(r.name, r.run_type) for r in runs.items] == [("agent-1", "chain"), ("chat", "llm")]
    assert runs.items[1].parent_run_ids == [ids["roots"][1]]

    for payload, word in (({"project_id": pid, "ai_search": "slow runs"}, "ai_search"),
                          ({"project_id": pid, "selects": ["NOPE"]}, "selects")):
        resp = ws.http.post("/api/v2/traces/query", json=payload)
        assert resp.status_code == 422 and word in resp.text
    assert ws.http.post("/api/v2/traces/query",
                        json={"project_id": str(uuid.uuid4())}).status_code == 404


def test_experiment_runs_v2_cursor_pagination(ws: Workspace, sdk: Any) -> None:
    client = Client(api_url=ws.server.url, api_key=ws.key)
    ds = client.create_dataset("exp-v2")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"i": i}} for i in range(5)])
    examples = sorted(client.list_examples(dataset_id=ds.id), key=lambda e: e.inputs["i"])
    experiments = []
    for name in ("exp-a", "exp-b"):
        project = client.create_project(name, reference_dataset_id=ds.id)
        experiments.append(str(project.id))
        for ex in examples:
            rid = str(uuid.uuid4())
            start = T0 + timedelta(seconds=ex.inputs["i"])
            client.create_run("target", dict(ex.inputs), "chain", id=rid, trace_id=rid,
                              project_name=name, start_time=start, dotted_order=_seg(start, rid),
                              end_time=start + timedelta(seconds=1),
                              outputs={"o": ex.inputs["i"] * (1 if name == "exp-a" else 2)},
                              reference_example_id=str(ex.id))
    got = _collect(sdk.datasets.experiment_runs.query(
        str(ds.id), experiment_ids=experiments, page_size=2,
        selects=["ID", "OUTPUTS", "PROJECT_ID", "REFERENCE_EXAMPLE_ID"]))
    assert sorted(str(item.id) for item in got) == sorted(str(e.id) for e in examples)
    for item in got:
        assert len(item.runs) == 2
        assert {r.project_id for r in item.runs} == set(experiments)
        assert all(r.reference_example_id == item.id for r in item.runs)
        assert sorted(r.outputs["o"] for r in item.runs) == sorted(
            [item.inputs["i"], item.inputs["i"] * 2])
    only = _collect(sdk.datasets.experiment_runs.query(
        str(ds.id), experiment_ids=experiments[:1], example_ids=[str(examples[0].id)],
        filters={experiments[0]: ['eq(name, "target")']}))
    assert [len(i.runs) for i in only] == [1] and only[0].runs[0].id is not None

    # sort: by one experiment's feedback score, as the SDK sends it; unscored examples last
    runs_b = {str(r.reference_example_id): r.id
              for r in client.list_runs(project_name="exp-b", is_root=True)}
    for ex, score in zip(examples, (0.5, 1.0, 0.0, 0.5), strict=False):  # the 5th: unscored
        client.create_feedback(runs_b[str(ex.id)], "correct", score=score)
    client.create_feedback(runs_b[str(examples[0].id)], "correct", score=1.0)  # mean 0.75
    client.create_feedback(runs_b[str(examples[4].id)], "other", score=9.0)
    order = {str(ex.id): ex.inputs["i"] for ex in examples}
    for sort, want in (({"by": "feedback.correct", "order": "DESC"}, [1, 0, 3, 2, 4]),
                       ({"by": "correct", "order": "ASC"}, [2, 3, 0, 1, 4]),
                       ({"by": "feedback.correct"}, [1, 0, 3, 2, 4])):  # DESC by default
        got = _collect(sdk.datasets.experiment_runs.query(
            str(ds.id), experiment_ids=experiments[1:], page_size=2, sort=sort,
            selects=["ID", "REFERENCE_EXAMPLE_ID"]))
        assert [order[str(item.id)] for item in got] == want, sort
        assert all(r.reference_example_id == item.id for item in got for r in item.runs)
    for sort, word in (({"by": "feedback.correct"}, "single experiment"),
                       ({"by": "outputs.o"}, "'outputs.o' is not supported"),
                       ({"by": "latency"}, "'latency' is not supported"),
                       ({"by": "correct", "order": "UP"}, "'UP'"),
                       ({"by": "correct", "nulls": "first"}, "['nulls']"),
                       ({"order": "ASC"}, "sort.by")):
        ids = experiments if word == "single experiment" else experiments[1:]
        resp = ws.http.post(f"/api/v2/datasets/{ds.id}/experiment-runs",
                            json={"experiment_ids": ids, "sort": sort})
        assert resp.status_code == 422 and word in resp.json()["detail"], (sort, resp.text)
    other = client.create_project("not-an-experiment")
    resp = ws.http.post(f"/api/v2/datasets/{ds.id}/experiment-runs",
                        json={"experiment_ids": [str(other.id)]})
    assert resp.status_code == 422 and "did not run on dataset" in resp.text
    resp = ws.http.post(f"/api/v2/datasets/{ds.id}/experiment-runs",
                        json={"experiment_ids": experiments, "cursor": "garbage"})
    assert resp.status_code == 422 and "cursor" in resp.text
