"""Annotation queues, feedback configs and (refused) online evaluators through the official
``langsmith`` SDK against ``assay serve`` (SQLite and PostgreSQL), and assay's own Client
(local and remote) giving the same answers."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay import Client
from assay.errors import ConflictError, InvalidInputError, NotFoundError

from .conftest import Workspace

# the SDK marks its legacy queue methods deprecated (still its documented API in 0.15)
pytestmark = pytest.mark.filterwarnings("ignore:.*[Dd]eprecated")


def _ls(ws: Workspace) -> Any:
    from langsmith import Client as LangSmithClient

    return LangSmithClient(api_url=ws.server.url, api_key=ws.key)


def _runs(ws: Workspace, n: int) -> list[str]:
    start = datetime.now(UTC)
    ids, posts = [], []
    for i in range(n):
        rid = str(uuid.uuid4())
        t = start + timedelta(milliseconds=i)
        ids.append(rid)
        posts.append({"id": rid, "trace_id": rid, "name": f"agent-{i}", "run_type": "chain",
                      "start_time": t.isoformat(), "end_time": t.isoformat(),
                      "dotted_order": t.strftime("%Y%m%dT%H%M%S%fZ") + rid,
                      "session_name": "queued", "inputs": {"q": f"question {i}"},
                      "outputs": {"a": f"answer {i}"}})
    resp = ws.http.post("/runs/batch", json={"post": posts})
    assert resp.status_code == 202, resp.text
    return ids


RUBRIC_CONFIG = {"type": "categorical", "categories": [{"value": 0, "label": "wrong"},
                                                       {"value": 1, "label": "right"}]}


def test_feedback_configs_through_the_sdk(ws: Workspace) -> None:
    from langsmith.utils import LangSmithError

    ls = _ls(ws)
    made = ls.create_feedback_config("correct", feedback_config=RUBRIC_CONFIG)
    assert made.feedback_key == "correct" and made.feedback_config["type"] == "categorical"
    assert [c["label"] for c in made.feedback_config["categories"]] == ["wrong", "right"]
    # the same config again: the stored one; a different one: refused
    assert ls.create_feedback_config("correct", feedback_config=RUBRIC_CONFIG).id == made.id
    with pytest.raises(LangSmithError, match="already exists"):
        ls.create_feedback_config("correct", feedback_config={"type": "freeform"})
    ls.create_feedback_config("stars", feedback_config={"type": "continuous", "min": 0,
                                                        "max": 5}, is_lower_score_better=False)
    assert sorted(c.feedback_key for c in ls.list_feedback_configs()) == ["correct", "stars"]
    assert [c.feedback_key for c in ls.list_feedback_configs(feedback_key=["stars"])] == ["stars"]
    assert [c.feedback_key for c in ls.list_feedback_configs(name_contains="orr")] == ["correct"]

    up = ls.update_feedback_config("stars", is_lower_score_better=True)
    assert up.is_lower_score_better is True and up.feedback_config["max"] == 5
    more = ls.add_feedback_categories("correct", [{"value": 2, "label": "partly"}])
    assert [c["value"] for c in more.feedback_config["categories"]] == [0, 1, 2]
    fewer = ls.remove_feedback_categories("correct", [0])
    assert [c["label"] for c in fewer.feedback_config["categories"]] == ["right", "partly"]
    with pytest.raises(LangSmithError, match="min 5.0 is above max 1.0|min 5 is above max 1"):
        ls.update_feedback_config("stars", feedback_config={"type": "continuous", "min": 5,
                                                            "max": 1})

    ls.delete_feedback_config("stars")
    assert [c.feedback_key for c in ls.list_feedback_configs()] == ["correct"]
    everything = list(ls.list_feedback_configs(include_all_configs=True))
    assert {(c.feedback_key, c.is_deleted) for c in everything} == {("correct", False),
                                                                    ("stars", True)}
    # deleted keys can be configured again
    assert ls.create_feedback_config("stars", feedback_config={"type": "freeform"}).id != up.id
    with pytest.raises(LangSmithError):
        ls.update_feedback_config("nope", is_lower_score_better=True)


@pytest.mark.parametrize("config", [
    {"type": "ranking"},
    {"type": "categorical", "categories": [{"value": 1, "label": "only"}]},
    {"type": "categorical", "categories": [{"value": 1, "label": "a"}, {"value": 1, "label": "b"}]},
    {"type": "continuous", "min": "low"},
    {"type": "freeform", "colour": "red"},
])
def test_bad_feedback_configs_are_refused_and_not_stored(ws: Workspace, config: dict) -> None:
    resp = ws.http.post("/feedback-configs", json={"feedback_key": "k", "feedback_config": config})
    assert resp.status_code == 422, resp.text
    assert "feedback_config" in resp.json()["detail"]
    assert ws.http.get("/feedback-configs").json() == []


def test_annotation_queue_through_the_sdk(ws: Workspace) -> None:
    from langsmith.utils import LangSmithNotFoundError

    ls = _ls(ws)
    ls.create_feedback_config("correct", feedback_config=RUBRIC_CONFIG)
    queue = ls.create_annotation_queue(
        name="triage", description="answers to check", rubric_instructions="Is it right?",
        rubric_items=[{"feedback_key": "correct", "description": "the answer is right",
                       "value_descriptions": {"0": "no", "1": "yes"}}])
    assert queue.name == "triage" and str(queue.tenant_id)
    read = ls.read_annotation_queue(queue.id)
    assert read.rubric_instructions == "Is it right?"
    (item,) = read.rubric_items
    assert item["feedback_key"] == "correct" and item["value_descriptions"] == {"0": "no",
                                                                                "1": "yes"}
    assert item["feedback_config"].feedback_config["categories"][1]["label"] == "right"
    other = ls.create_annotation_queue(name="other")
    assert {q.name for q in ls.list_annotation_queues()} == {"triage", "other"}
    assert [q.id for q in ls.list_annotation_queues(name="triage")] == [queue.id]
    assert [q.id for q in ls.list_annotation_queues(queue_ids=[other.id])] == [other.id]
    assert [q.name for q in ls.list_annotation_queues(name_contains="ria")] == ["triage"]

    ls.update_annotation_queue(queue.id, name="triage-2", description="new")
    again = ls.read_annotation_queue(queue.id)
    assert (again.name, again.description) == ("triage-2", "new")
    assert again.rubric_items and again.rubric_items[0]["feedback_key"] == "correct"  # kept

    ids = _runs(ws, 3)
    ls.add_runs_to_annotation_queue(queue.id, run_ids=ids[:2])
    ls.add_runs_to_annotation_queue(queue.id, run_ids=[ids[0], ids[2]])  # ids[0] stays first
    queued = list(ls.list_runs_from_annotation_queue(queue.id))
    assert [str(r.id) for r in queued] == ids
    assert queued[0].inputs == {"q": "question 0"} and queued[0].added_at is not None
    first = ls.get_run_from_annotation_queue(queue.id, index=0)
    assert str(first.id) == ids[0] and first.outputs == {"a": "answer 0"}
    assert str(ls.get_run_from_annotation_queue(queue.id, index=2).id) == ids[2]
    with pytest.raises(LangSmithNotFoundError):
        ls.get_run_from_annotation_queue(queue.id, index=3)

    ls.delete_run_from_annotation_queue(queue.id, run_id=ids[0])
    assert [str(r.id) for r in ls.list_runs_from_annotation_queue(queue.id)] == ids[1:]
    assert str(ls.get_run_from_annotation_queue(queue.id, index=0).id) == ids[1]
    with pytest.raises(LangSmithNotFoundError):
        ls.delete_run_from_annotation_queue(queue.id, run_id=ids[0])
    with pytest.raises(LangSmithNotFoundError):  # a run this workspace does not have
        ls.add_runs_to_annotation_queue(queue.id, run_ids=[str(uuid.uuid4())])

    # the generated client: size, and marking a run reviewed by its queue-run id
    async def generated() -> tuple[int, int]:
        api = ls.annotation_queues
        before = (await api.retrieve_size(str(queue.id))).size
        await api.create_run_status(str(first_queue_run), status="completed")
        return before, (await api.retrieve_size(str(queue.id))).size

    first_queue_run = ws.http.get(f"/annotation-queues/{queue.id}/run/0").json()["queue_run_id"]
    assert asyncio.run(generated()) == (2, 1)
    done = list(ls.list_runs_from_annotation_queue(queue.id, status="completed"))
    assert [str(r.id) for r in done] == [ids[1]] and done[0].last_reviewed_time is not None
    assert [str(r.id) for r in ls.list_runs_from_annotation_queue(
        queue.id, status="needs_my_review")] == [ids[2]]

    ls.delete_annotation_queue(queue.id)
    with pytest.raises(LangSmithNotFoundError):
        ls.read_annotation_queue(queue.id)
    assert [q.name for q in ls.list_annotation_queues()] == ["other"]


def test_generated_client_queue_run_paths(ws: Workspace) -> None:
    """``/api/v1/annotation-queues/{id}/runs/...`` as the generated client sends them."""
    q = ws.http.post("/api/v1/annotation-queues", json={"name": "gen"}).json()
    ids = _runs(ws, 3)
    base = f"/api/v1/annotation-queues/{q['id']}"
    assert ws.http.post(f"{base}/runs", json=ids).status_code == 200
    runs = ws.http.get(f"{base}/runs").json()
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    resp = ws.http.patch(f"{base}/runs/{runs[0]['queue_run_id']}", json={"added_at": later})
    assert resp.status_code == 200, resp.text
    assert [r["id"] for r in ws.http.get(f"{base}/runs").json()] == [ids[1], ids[2], ids[0]]
    resp = ws.http.post(f"{base}/runs/delete", json={"delete_all": True,
                                                     "exclude_run_ids": [ids[2]]})
    assert resp.json() == {"deleted": 2}
    assert [r["id"] for r in ws.http.get(f"{base}/runs").json()] == [ids[2]]
    assert ws.http.get(f"{base}/total_size").json() == {"size": 1}
    resp = ws.http.post("/api/v1/annotation-queues",
                        json={"name": "x", "enable_reservations": True})
    assert resp.status_code == 422 and "reservations" in resp.json()["detail"]
    resp = ws.http.post("/api/v1/annotation-queues", json={"name": "x", "colour": "red"})
    assert resp.status_code == 422 and "colour" in resp.json()["detail"]


def test_queues_are_per_workspace(server: Any) -> None:
    _, store_a = server.new_key()
    key_b, _ = server.new_key()
    queue = store_a.queues.create("mine")
    import httpx

    with httpx.Client(base_url=server.url, headers={"x-api-key": key_b}) as other:
        assert other.get(f"/annotation-queues/{queue.id}").status_code == 404
        assert other.get("/annotation-queues").json() == []
        assert other.delete(f"/annotation-queues/{queue.id}").status_code == 404
    assert store_a.queues.read(queue.id).name == "mine"


def test_online_evaluators_are_refused_by_name(ws: Workspace) -> None:
    from langsmith.utils import LangSmithError

    ls = _ls(ws)

    async def listing() -> Any:
        return [e async for e in ls.evaluators.list()]

    with pytest.raises(Exception, match="online evaluator rules .* `assay online"):
        asyncio.run(listing())
    for method, path in (("POST", "/api/v1/platform/evaluators"),
                         ("DELETE", f"/api/v1/platform/evaluators/{uuid.uuid4()}"),
                         ("GET", (f"/api/v1/platform/annotation-queues/{uuid.uuid4()}/items/"
                                  f"{uuid.uuid4()}/placement"))):
        resp = ws.http.request(method, path)
        assert resp.status_code == 422, (method, path, resp.text)
        assert "not served by assay" in resp.json()["detail"]
    del LangSmithError


def test_annotation_queue_items_with_the_generated_client(ws: Workspace) -> None:
    """``client.annotation_queues.items``: the API the SDK tells users to move to."""
    from langsmith import APIStatusError

    ls = _ls(ws)
    queue = ls.create_annotation_queue(name="items")
    qid = str(queue.id)
    ids = _runs(ws, 3)
    items = ls.annotation_queues.items

    async def flow() -> dict[str, Any]:
        made = await items.create(qid, items=[{"item_type": "RUN", "run_id": r} for r in ids])
        out: dict[str, Any] = {"made": [(i.run_id, i.item_type) for i in made.items]}
        out["pages"] = [i.run_id async for i in items.list(qid, status="needs_my_review",
                                                           page_size=2)]
        first = made.items[0].id
        status = await items.create_status(first, status="completed")
        out["archived"] = status.is_archived
        await items.create_status(made.items[1].id, status="viewed")
        out["counts"] = [(await items.retrieve_count(qid, status=s)).count
                         for s in ("needs_my_review", "archived", "needs_others_review")]
        out["done"] = [i.run_id async for i in items.list(qid, status="archived")]
        await items.delete_all(qid, item_ids=[made.items[2].id])
        out["left"] = [i.run_id async for i in items.list(qid, status="needs_my_review")]
        with pytest.raises(APIStatusError, match="THREAD items are not served"):
            await items.create(qid, items=[{"item_type": "THREAD", "thread_id": "t",
                                            "project_id": str(uuid.uuid4())}])
        with pytest.raises(APIStatusError):  # a run this workspace does not have
            await items.create(qid, items=[{"item_type": "RUN", "run_id": str(uuid.uuid4())}])
        return out

    out = asyncio.run(flow())
    assert out["made"] == [(r, "RUN") for r in ids]
    assert out["pages"] == ids  # two pages of 2 and 1, in the order added
    assert out["archived"] is True and out["counts"] == [2, 1, 0]
    assert out["done"] == [ids[0]] and out["left"] == [ids[1]]
    viewed = ws.store.queues.list_runs(qid, status="needs_my_review")[0]
    assert viewed.last_reviewed_time is not None and viewed.completed_at is None


@pytest.fixture(params=["local", "remote"])
def both(request: pytest.FixtureRequest, ws: Workspace) -> Client:
    if request.param == "local":
        return Client(store=ws.store)
    return Client(api_url=ws.server.url, api_key=ws.key)


def test_assay_client_queue_methods_local_and_remote(both: Client, ws: Workspace) -> None:
    c = both
    cfg = c.create_feedback_config("correct", feedback_config=RUBRIC_CONFIG)
    assert cfg.feedback_key == "correct"
    with pytest.raises(ConflictError):
        c.create_feedback_config("correct", feedback_config={"type": "freeform"})
    with pytest.raises(InvalidInputError, match="categorical config needs at least 2"):
        c.create_feedback_config("x", feedback_config={"type": "categorical", "categories": []})
    assert [x.feedback_key for x in c.list_feedback_configs()] == ["correct"]
    q = c.create_annotation_queue(name="review", rubric_items=[{"feedback_key": "correct"}])
    ids = _runs(ws, 2)
    c.add_runs_to_annotation_queue(q.id, run_ids=ids)
    assert [str(r.id) for r in c.list_runs_from_annotation_queue(q.id)] == ids
    assert str(c.get_run_from_annotation_queue(q.id, index=1).id) == ids[1]
    assert c.get_size_from_annotation_queue(q.id) == 2
    c.delete_run_from_annotation_queue(q.id, run_id=ids[0])
    assert c.get_size_from_annotation_queue(q.id) == 1
    read = c.read_annotation_queue(q.id)
    assert read.rubric_items[0]["feedback_config"]["feedback_key"] == "correct"
    c.update_annotation_queue(q.id, description="d")
    assert [x.description for x in c.list_annotation_queues()] == ["d"]
    c.delete_feedback_config("correct")
    assert list(c.list_feedback_configs()) == []
    c.delete_annotation_queue(q.id)
    with pytest.raises(NotFoundError):
        c.read_annotation_queue(q.id)
