"""Pairwise (comparative) experiments through the official SDKs against ``assay serve`` (SQLite
and PostgreSQL): LangSmith's ``evaluate((experiment_a, experiment_b), evaluators=[...])`` in
Python and ``evaluate([a, b], {evaluators})`` in JS, the ``/datasets/comparative`` routes, and
bad input refused with nothing stored."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

import pytest

from assay import Client, evaluate

from ._checks import parse_printed_json
from .conftest import Workspace
from .test_js_sdk import _node, node  # noqa: F401  (the session's node + npm install)

pytestmark = pytest.mark.filterwarnings("ignore:.*[Dd]eprecated")


def _ls(ws: Workspace) -> Any:
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


def _two_experiments(ws: Workspace, name: str) -> tuple[Any, str, str]:
    """A dataset of three questions and two experiments on it by the official SDK: one answers
    in capitals (and matches the reference), one does not; each has its own ``exact`` score."""
    from langsmith import evaluate as ls_evaluate

    ls = _ls(ws)
    ds = ls.create_dataset(name)
    ls.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": q}, "outputs": {"a": q.upper()}} for q in ("one", "two", "three")])

    def exact(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> bool:
        return bool(outputs["a"] == reference_outputs["a"])

    upper = ls_evaluate(lambda i: {"a": i["q"].upper()}, data=name, evaluators=[exact],
                        client=ls, experiment_prefix="upper")
    plain = ls_evaluate(lambda i: {"a": i["q"]}, data=name, evaluators=[exact], client=ls,
                        experiment_prefix="plain")
    ls.flush()  # the experiments' runs are posted in the background
    return ls, upper.experiment_name, plain.experiment_name


def _groups(store: Any, cid: str) -> dict[str, list[Any]]:
    rows = [f for f in store.feedback.list() if str(f.comparative_experiment_id) == cid]
    groups: dict[str, list[Any]] = defaultdict(list)
    for f in rows:
        groups[str(f.feedback_group_id)].append(f)
    return groups


def test_pairwise_evaluation_with_the_python_sdk(ws: Workspace) -> None:
    from langsmith import evaluate as ls_evaluate

    ls, upper, plain = _two_experiments(ws, f"pw-{uuid.uuid4().hex[:8]}")

    def prefers_upper(outputs: list[dict[str, Any]]) -> list[int]:  # LangSmith's list form
        return [int(o["a"].isupper()) for o in outputs]

    def longer(runs: list[Any], example: Any) -> dict[str, Any]:  # the dict form, comments
        return {"key": "longer", "scores": {r.id: len(r.outputs["a"]) for r in runs},
                "comment": {str(r.id): f"{len(r.outputs['a'])} chars" for r in runs}}

    res = ls_evaluate((upper, plain), evaluators=[prefers_upper, longer], client=ls,
                      randomize_order=True)
    assert len(list(res)) == 3
    cid = str(res.comparative_experiment.id)
    exp = {p.name: str(p.id) for p in (ls.read_project(project_name=n) for n in (upper, plain))}

    stored = ws.store.comparative.read(cid)
    assert [e["name"] for e in stored.experiments_info] == [upper, plain]
    # scored by run, whatever order the runs were shown in: the capitals win every time
    assert stored.feedback_stats["prefers_upper"] == {
        exp[upper]: {"n": 3, "avg": 1.0}, exp[plain]: {"n": 3, "avg": 0.0}}
    assert stored.feedback_stats["longer"][exp[upper]] == {"n": 3, "avg": pytest.approx(11 / 3)}

    groups = _groups(ws.store, cid)
    assert len(groups) == 6  # (example, evaluator) pairs
    for rows in groups.values():  # each group: one run of each experiment, on one example
        assert sorted(str(f.session_id) for f in rows) == sorted(exp.values())
        runs = [ws.store.runs.read(f.run_id) for f in rows]
        assert len({r.reference_example_id for r in runs}) == 1
        if rows[0].key == "longer":
            assert {f.comment for f in rows} == {f"{int(f.score)} chars" for f in rows}

    # each experiment's own statistics hold its own scores only
    for name in (upper, plain):
        stats = ls.read_project(project_name=name, include_stats=True).feedback_stats
        assert set(stats) == {"exact"} and stats["exact"]["n"] == 3
    dataset = str(stored.reference_dataset_id)
    listed = ws.http.get(f"/datasets/{dataset}/comparative").json()
    assert [c["id"] for c in listed] == [cid]
    assert ws.http.get(f"/datasets/{uuid.uuid4()}/comparative").status_code == 404

    # the examples with their runs: each run's own scores, or that comparison's (the SDK's
    # pairwise view asks with its id)
    body = {"session_ids": list(exp.values())}
    own = ws.http.post(f"/datasets/{dataset}/runs", json=body).json()
    paired = ws.http.post(f"/datasets/{dataset}/runs",
                          json={**body, "comparative_experiment_id": cid}).json()
    assert {k for ex in own for r in ex["runs"] for k in r["feedback_stats"]} == {"exact"}
    for ex in paired:
        for r in ex["runs"]:
            assert set(r["feedback_stats"]) == {"prefers_upper", "longer"}
            assert r["feedback_stats"]["prefers_upper"]["avg"] == float(
                str(r["session_id"]) == exp[upper])

    # assay's own client, remote: its own pairwise evaluation of the same experiments, then it
    # reads and deletes the SDK's comparison
    remote = Client(api_url=ws.server.url, api_key=ws.key)
    mine = evaluate((upper, plain), evaluators=[prefers_upper], client=remote)
    assert mine.comparative_experiment.feedback_stats == {
        "prefers_upper": stored.feedback_stats["prefers_upper"]}
    assert [c.id for c in remote.list_comparative_experiments(dataset_id=dataset)] == [
        mine.comparative_experiment.id, stored.id]
    assert remote.read_comparative_experiment(cid).feedback_stats == stored.feedback_stats
    remote.delete_comparative_experiment(cid)
    assert _groups(ws.store, cid) == {}
    assert ws.http.get(f"/datasets/comparative/{cid}").status_code == 404
    assert ls.read_project(project_name=upper, include_stats=True).feedback_stats["exact"][
        "n"] == 3


def test_pairwise_evaluation_with_the_js_sdk(node: str, ws: Workspace) -> None:  # noqa: F811
    name = f"js-pw-{uuid.uuid4().hex[:8]}"
    out = parse_printed_json(_node(node, "pairwise.mjs", ws, name))
    assert out["results"] == 2
    stored = ws.store.comparative.read(out["comparative"])
    ids = {e["name"]: e["id"] for e in stored.experiments_info}
    upper, plain = out["experiments"]
    assert stored.feedback_stats["prefers_upper"] == {
        ids[upper]: {"n": 2, "avg": 1.0}, ids[plain]: {"n": 2, "avg": 0.0}}
    # the JS client sends no feedback_group_id: one pairwise row per run of each example
    rows = [f for g in _groups(ws.store, out["comparative"]).values() for f in g]
    assert len(rows) == 4 and len({f.run_id for f in rows}) == 4


def _experiment(client: Client, dataset: str) -> str:
    client.create_dataset(dataset)
    client.create_examples(dataset_name=dataset, examples=[{"inputs": {"q": "x"}}])
    return evaluate(lambda i: {"a": 1}, data=dataset, client=client).experiment_name


def test_bad_comparisons_are_refused_and_store_nothing(ws: Workspace) -> None:
    client = Client(store=ws.store)
    a, b = (_experiment(client, f"bad-{uuid.uuid4().hex[:6]}") for _ in range(2))
    ids = [str(client.read_project(project_name=n).id) for n in (a, b)]

    def post(body: Any) -> Any:
        return ws.http.post("/datasets/comparative", json=body)

    assert post({"experiment_ids": []}).status_code == 422
    missing = str(uuid.uuid4())
    resp = post({"experiment_ids": [ids[0], missing]})
    assert resp.status_code == 404 and missing in resp.json()["detail"]
    resp = post({"experiment_ids": ids, "name": "x"})  # two datasets
    assert resp.status_code == 422 and "different datasets" in resp.json()["detail"]
    client.create_run("traced", {"q": 1}, "chain", project_name="plain-tracing")
    client.flush()
    tracing = str(client.read_project(project_name="plain-tracing").id)
    resp = post({"experiment_ids": [ids[0], tracing]})
    assert resp.status_code == 422 and "not an experiment" in resp.json()["detail"]
    assert ws.store.comparative.list(dataset_id=client.read_project(
        project_name=a).reference_dataset_id) == []

    # a comparison of one dataset's two experiments; the same id again is the same record
    dataset = client.read_project(project_name=a).reference_dataset_id
    second = evaluate(lambda i: {"a": 2}, data=str(dataset), client=client).experiment_name
    pair = [ids[0], str(client.read_project(project_name=second).id)]
    cid = str(uuid.uuid4())
    made = post({"id": cid, "experiment_ids": pair, "name": "pair"})
    assert made.status_code == 200, made.text
    assert post({"id": cid, "experiment_ids": pair, "name": "pair"}).json() == made.json()
    assert post({"id": cid, "experiment_ids": pair[::-1]}).status_code == 409

    # pairwise feedback: its comparison must exist and its run be in a compared experiment;
    # a list with one bad item stores none of it
    run_a = next(iter(client.list_runs(project_id=pair[0], is_root=True))).id
    run_other = next(iter(client.list_runs(project_name=b, is_root=True))).id
    good = {"run_id": str(run_a), "key": "pref", "score": 1, "comparative_experiment_id": cid}
    resp = ws.http.post("/feedback", json=[good, {**good, "run_id": str(run_other)}])
    assert resp.status_code == 422 and "none of the experiments" in resp.json()["detail"]
    resp = ws.http.post("/feedback", json={**good, "comparative_experiment_id": missing})
    assert resp.status_code == 404 and missing in resp.json()["detail"]
    assert _groups(ws.store, cid) == {}
    assert ws.http.post("/feedback", json=good).status_code == 200
    assert ws.store.comparative.read(cid).feedback_stats == {"pref": {pair[0]: {"n": 1,
                                                                                "avg": 1.0}}}
    # deleting the dataset takes its comparisons and their feedback along
    client.delete_dataset(dataset_id=dataset)
    assert ws.http.get(f"/datasets/comparative/{cid}").status_code == 404
    assert _groups(ws.store, cid) == {}
