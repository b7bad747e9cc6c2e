"""The official ``langsmith`` Python package, unmodified, against a real assay server.

The SDK runs in a subprocess pointed at the server by LANGSMITH_ENDPOINT / LANGSMITH_API_KEY,
exactly as a user would run it. When the subprocess exits the SDK has flushed its runs.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ._checks import check_experiment, parse_printed_json
from .conftest import Workspace, sdk_env

HERE = Path(__file__).parent
# a verbatim copy of the seed document (seeds/langsmith-experiment-performance-metrics.zh.txt)
SEED = HERE / "data" / "langsmith-experiment-performance-metrics.zh.txt"


def _seed_python() -> list[str]:
    """The seed's two Python snippets, as the lines of code they hold."""
    lines = SEED.read_text(encoding="utf-8").splitlines()
    a = lines.index("from langsmith import Client")
    b = lines.index("client.create_examples(dataset_id=dataset.id, examples=examples)")
    c = lines.index("from langsmith.schemas import Example, Run")
    d = lines.index("print(resp.json(indent=2))")
    return lines[a: b + 1] + lines[c: d + 1]


def test_seed_script_is_the_seed_snippet_verbatim() -> None:
    ours = (HERE / "seed_py.py").read_text().splitlines()
    want = [line.replace("print(resp.json(indent=2))", "print(resp.model_dump_json(indent=2))")
            for line in _seed_python()]
    # the seed lost the function body's indentation in extraction; only that is restored
    assert [line.lstrip() for line in ours] == [line.lstrip() for line in want]
    assert [line for line in ours if line != line.lstrip()] == [
        '    return {"score": 1, "key": "foo"}']


def _run(script: Path, ws: Workspace, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(script), *args], env=sdk_env(ws.server, ws.key),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return proc.stdout


def test_seed_python_snippet(ws: Workspace) -> None:
    printed = parse_printed_json(_run(HERE / "seed_py.py", ws))
    # what the snippet printed (runs may still be in flight then; feedback is not)
    assert printed["name"].startswith("Hello-")
    assert printed["feedback_stats"]["foo"]["n"] == 2
    assert printed["feedback_stats"]["foo"]["avg"] == 1.0
    assert printed["reference_dataset_id"] == str(
        ws.store.datasets.read(dataset_name="HelloDataset").id)
    meta = printed["extra"]["metadata"]
    assert meta["num_repetitions"] == 1 and meta["dataset_splits"] == ["base"]
    assert "dataset_version" in meta  # set by PATCH /sessions (nulls left name etc. unchanged)
    # the client flushed at exit: the statistics are complete and right
    stats = check_experiment(ws.store, ws.http, printed["name"], runs=2, feedback={"foo": (2, 1.0)})
    assert stats["name"] == printed["name"] and stats["id"] == printed["id"]
    # the evaluator traces went to their own project, as LangSmith does
    assert ws.store.projects.read(project_name="evaluators", include_stats=True).run_count == 2
    # and the official client reads the same statistics
    from langsmith import Client as LangSmithClient

    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    project = ls.read_project(project_name=printed["name"], include_stats=True)
    assert project.run_count == 2
    assert project.latency_p50.total_seconds() == pytest.approx(stats["latency_p50"], abs=2e-6)
    assert project.feedback_stats["foo"]["n"] == 2
    examples = list(ls.list_examples(dataset_name="HelloDataset"))
    assert sorted(e.inputs["input"] for e in examples) == ["Ankush", "Harrison"]
    assert {e.outputs["expected"] for e in examples} == {"Hello Ankush", "Hello Harrison"}


def test_streaming_llm_with_tool_in_chain(ws: Workspace) -> None:
    from genai_prices import Usage, calc_price

    root_id = _run(HERE / "llm_trace.py", ws, "py-agent").strip().splitlines()[-1]
    project = ws.store.projects.read(project_name="py-agent")
    runs = {r.name: r for r in ws.store.runs.list(project_ids=[str(project.id)])}
    assert set(runs) == {"agent", "lookup", "chat"}
    llm, tool, chain = runs["chat"], runs["lookup"], runs["agent"]
    assert str(chain.id) == root_id
    assert llm.run_type == "llm" and tool.run_type == "tool" and chain.run_type == "chain"
    assert llm.parent_run_id == chain.id and tool.parent_run_id == chain.id
    assert {llm.trace_id, tool.trace_id} == {chain.id}

    stats = ws.http.get("/sessions", params={"name": "py-agent", "include_stats": True}).json()[0]
    assert (stats["prompt_tokens"], stats["completion_tokens"],
            stats["total_tokens"]) == (1200, 350, 1550)
    price = calc_price(Usage(input_tokens=1200, output_tokens=350), model_ref="gpt-4o-mini",
                       provider_id="openai")
    assert stats["prompt_cost"] == pytest.approx(float(price.input_price))
    assert stats["completion_cost"] == pytest.approx(float(price.output_price))
    assert stats["total_cost"] == pytest.approx(float(price.total_price))
    # first token: from the llm run's start to its first new_token event, computed here
    first = min(e["time"] for e in llm.events if e["name"] == "new_token")
    from datetime import datetime

    ttft = (datetime.fromisoformat(first) - llm.start_time).total_seconds()
    assert ttft >= 0.04
    assert stats["first_token_p50"] == pytest.approx(ttft, abs=1e-6)
    assert stats["first_token_p99"] == pytest.approx(ttft, abs=1e-6)
    assert stats["run_count"] == 1 and stats["streaming_rate"] == 1.0

    # the official client sees the tree
    from langsmith import Client as LangSmithClient

    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    listed = list(ls.list_runs(project_name="py-agent"))
    assert {r.name for r in listed} == {"agent", "lookup", "chat"}
    by_name = {r.name: r for r in listed}
    assert by_name["chat"].parent_run_id == by_name["agent"].id
    assert by_name["chat"].total_tokens == 1550
    assert float(by_name["chat"].total_cost) == pytest.approx(float(price.total_price))
    tree = ls.read_run(root_id, load_child_runs=True)
    assert sorted(c.name for c in tree.child_runs) == ["chat", "lookup"]
    roots = list(ls.list_runs(project_name="py-agent", is_root=True))
    assert [r.name for r in roots] == ["agent"]
    # a chain carries the tokens, cost and first token of the llm calls under it, as
    # LangSmith's runs do (a trace's usage from its root: the docs' export recipe)
    for chain_run in (roots[0], tree, by_name["agent"]):
        assert (chain_run.prompt_tokens, chain_run.completion_tokens,
                chain_run.total_tokens) == (1200, 350, 1550)
        assert float(chain_run.total_cost) == pytest.approx(float(price.total_price))
        assert chain_run.first_token_time == by_name["chat"].first_token_time is not None
    assert by_name["lookup"].total_tokens is None  # (a tool that called no model)
    # each run's page: app_path (the SDK's run.url) and get_run_url's link open the web UI's
    for link in (roots[0].app_path, ls.get_run_url(run=roots[0])):
        page = ws.http.get(link[link.index("/o/"):], follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == f"/ui/runs/{root_id}"
    # LangSmith's filter language, through the official client
    big_llm = ls.list_runs(project_name="py-agent",
                           filter='and(eq(run_type, "llm"), gt(total_tokens, 1000))')
    assert [r.name for r in big_llm] == ["chat"]
    # a chain's usage is its llm calls' when filtered too (the SDK's docstring example)
    big_chain = ls.list_runs(project_name="py-agent",
                             filter='and(eq(run_type, "chain"), gt(total_tokens, 1000))')
    assert [r.name for r in big_chain] == ["agent"]
    assert {r.name for r in ls.list_runs(project_name="py-agent",
                                         filter="gte(total_cost, 0.0001)")} == {"agent", "chat"}
    assert not list(ls.list_runs(project_name="py-agent", is_root=True,
                                 filter="gt(total_tokens, 2000)"))
    tools = ls.list_runs(project_name="py-agent", filter='eq(run_type, "tool")',
                         trace_filter='eq(name, "agent")')
    assert [r.name for r in tools] == ["lookup"]
    assert [r.name for r in ls.list_runs(project_name="py-agent", query="LOOKUP")] == ["lookup"]
    with pytest.raises(Exception, match="422.*unknown function"):
        list(ls.list_runs(project_name="py-agent", filter='foo(name, "x")'))


def test_update_feedback_with_the_official_client(ws: Workspace) -> None:
    from langsmith import Client as LangSmithClient

    from ._wire import make_run

    run = make_run("scored", session="fb-update")
    assert ws.http.post("/runs", json=run).status_code == 202
    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    fb = ls.create_feedback(run["id"], key="q", score=0, value="bad", comment="why")
    ls.update_feedback(fb.id, score=1, comment=None)  # value untouched, comment cleared
    got = ls.read_feedback(fb.id)
    assert (got.score, got.value, got.comment) == (1, "bad", None)
    stats = ls.read_project(project_name="fb-update", include_stats=True).feedback_stats["q"]
    assert stats["n"] == 1 and stats["avg"] == 1.0
    # by source type (the SDK's feedback_source_type, sent as ?source=): a judge's, the API's
    from langsmith.schemas import FeedbackSourceType

    ls.create_feedback(run["id"], key="judge", score=0.5,
                       feedback_source_type=FeedbackSourceType.MODEL)
    by_source = {kind: [f.key for f in ls.list_feedback(run_ids=[run["id"]],
                                                         feedback_source_type=[kind])]
                 for kind in (FeedbackSourceType.MODEL, FeedbackSourceType.API)}
    assert by_source == {FeedbackSourceType.MODEL: ["judge"], FeedbackSourceType.API: ["q"]}

    # what the server refuses, it names; nothing changes
    bad = ws.http.patch(f"/feedback/{fb.id}", json={"score": {"x": 1}})
    assert bad.status_code == 422 and "score" in bad.json()["detail"]
    assert ws.http.patch(f"/feedback/{fb.id}", json=[1]).status_code == 422
    missing = ws.http.patch(f"/feedback/{uuid.uuid4()}", json={"score": 1})
    assert missing.status_code == 404
    assert ls.read_feedback(fb.id).score == 1


def test_dataset_splits_with_the_official_client(ws: Workspace) -> None:
    from langsmith import Client as LangSmithClient

    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    ds = ls.create_dataset("split-me")
    ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": i}, "outputs": {"a": i}, "split": "train"} for i in range(3)])
    ids = sorted(str(e.id) for e in ls.list_examples(dataset_id=ds.id))
    assert ls.list_dataset_splits(dataset_id=ds.id) == ["train"]
    # the SDK tries the newer bulk metadata route first, then falls back to PUT .../splits
    ls.update_dataset_splits(dataset_id=ds.id, split_name="hard", example_ids=ids[:2])
    assert ls.list_dataset_splits(dataset_id=ds.id) == ["hard", "train"]
    assert sorted(str(e.id) for e in ls.list_examples(dataset_id=ds.id, splits=["hard"])) == ids[:2]
    ls.update_dataset_splits(dataset_id=ds.id, split_name="hard", example_ids=ids[:1],
                             remove=True)
    assert [str(e.id) for e in ws.store.examples.list(dataset_id=ds.id,
                                                      splits=["hard"])] == [ids[1]]
    bad = ws.http.put(f"/datasets/{ds.id}/splits", json={"split_name": "", "examples": ids})
    assert bad.status_code == 422 and "split_name" in bad.json()["detail"]
    gone = ws.http.put(f"/datasets/{ds.id}/splits",
                       json={"split_name": "x", "examples": [str(uuid.uuid4())]})
    assert gone.status_code == 404


def test_get_experiment_results_with_the_official_client(ws: Workspace) -> None:
    from langsmith import Client as LangSmithClient
    from langsmith import evaluate

    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    ds = ls.create_dataset("results-by-example")
    ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": q}, "outputs": {"a": q.upper()}} for q in ("a", "b", "c")])

    def target(inputs: dict) -> dict:
        return {"a": inputs["q"].upper() if inputs["q"] != "c" else "?"}

    def exact(outputs: dict, reference_outputs: dict) -> bool:
        return outputs["a"] == reference_outputs["a"]

    res = evaluate(target, data=ds.name, evaluators=[exact], num_repetitions=2, client=ls)
    ls.flush()
    got = ls.get_experiment_results(name=res.experiment_name)
    assert got["run_stats"]["run_count"] == 6 and got["feedback_stats"]["exact"]["n"] == 6
    rows = {e.inputs["q"]: e for e in got["examples_with_runs"]}
    assert sorted(rows) == ["a", "b", "c"]
    for q, example in rows.items():
        assert len(example.runs) == 2  # one per repetition
        for run in example.runs:
            assert run.reference_example_id == example.id
            assert run.feedback_stats["exact"]["avg"] == (0.0 if q == "c" else 1.0)

    # the legacy results table reads each root's feedback_stats from list_runs
    table = ls.get_test_results(project_name=res.experiment_name)
    assert sorted(table["feedback.exact"].tolist()) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]

    # a page, and a filter per experiment, over HTTP
    session = ws.store.projects.read(project_name=res.experiment_name)
    page = ws.http.post(f"/datasets/{ds.id}/runs", json={
        "session_ids": [str(session.id)], "limit": 2, "offset": 1,
        "filters": {str(session.id): ['eq(feedback_key, "exact")', "eq(feedback_score, 0)"]}})
    assert page.status_code == 200, page.text
    body = page.json()
    assert len(body) == 2
    assert {len(e["runs"]) for e in body if e["inputs"]["q"] != "c"} <= {0}
    assert all(len(e["runs"]) == 2 for e in body if e["inputs"]["q"] == "c")
    for bad, words in (({"session_ids": []}, "session_ids"),
                       ({"session_ids": [str(session.id)], "filters": {str(uuid.uuid4()): []}},
                        "not in session_ids"),
                       ({"session_ids": [str(session.id)],
                         "filters": {str(session.id): ["eq(colour, 1)"]}}, "colour")):
        answer = ws.http.post(f"/datasets/{ds.id}/runs", json=bad)
        assert answer.status_code == 422 and words in answer.json()["detail"], answer.text
    other = ws.http.post(f"/datasets/{uuid.uuid4()}/runs", json={"session_ids": [str(session.id)]})
    assert other.status_code in (404, 422)


def test_the_prompt_hub_is_refused_by_name(ws: Workspace) -> None:
    """The SDK's prompt methods get a 422 naming the prompt hub as not served, not a bare 404
    that reads like a broken server or a wrong endpoint."""
    from langsmith import Client as LangSmithClient

    ls = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    for call in (lambda: ls.list_prompts(), lambda: ls.pull_prompt("my-prompt"),
                 lambda: ls.push_prompt("my-prompt", object="Say {x}")):
        with pytest.raises(Exception, match="422") as refused:
            call()
        assert "prompt hub" in str(refused.value)
    assert ws.http.get("/api/v1/repos/").status_code == 422  # (under the SDKs' prefix too)
