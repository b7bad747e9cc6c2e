"""Online evaluation against ``assay serve`` (SQLite and PostgreSQL): ``evaluate_online`` with
assay's remote client scores the traces an application posted, reading each run's tool calls,
and a second pass finds them scored."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from assay import Client, evaluate_online
from assay.evals import ReliabilityEvaluator

from .conftest import Workspace


def _trace(ws: Workspace, project: str, with_tool: bool) -> str:
    root, tool = str(uuid.uuid4()), str(uuid.uuid4())
    t0 = datetime.now(UTC)
    t1 = t0 + timedelta(milliseconds=5)
    order = t0.strftime("%Y%m%dT%H%M%S%fZ") + root
    posts = [{"id": root, "trace_id": root, "name": "agent", "run_type": "chain",
              "start_time": t0.isoformat(), "end_time": (t0 + timedelta(seconds=1)).isoformat(),
              "dotted_order": order, "session_name": project, "inputs": {"q": "capital?"},
              "outputs": {"answer": "Paris"}}]
    if with_tool:
        posts.append({"id": tool, "trace_id": root, "parent_run_id": root, "name": "lookup",
                      "run_type": "tool", "start_time": t1.isoformat(),
                      "end_time": t1.isoformat(), "session_name": project,
                      "dotted_order": order + "." + t1.strftime("%Y%m%dT%H%M%S%fZ") + tool,
                      "inputs": {"city": "France"}, "outputs": {"output": "Paris"}})
    assert ws.http.post("/runs/batch", json={"post": posts}).status_code == 202
    return root


def test_online_evaluation_through_the_server(ws: Workspace) -> None:
    roots = [_trace(ws, "prod", with_tool=i < 2) for i in range(3)]
    remote = Client(api_url=ws.server.url, api_key=ws.key)
    report = evaluate_online("prod", [ReliabilityEvaluator(["lookup"])], client=remote)
    assert (report.scored, report.feedback, report.errors) == (3, 3, 0)
    scores = {str(f.run_id): f.score for f in remote.list_feedback(run_ids=roots)}
    assert scores == {roots[0]: 1.0, roots[1]: 1.0, roots[2]: 0.0}
    again = evaluate_online("prod", [ReliabilityEvaluator(["lookup"])], client=remote)
    assert (again.scored, again.already_scored) == (0, 3)
    stats = remote.read_project(project_name="prod", include_stats=True).feedback_stats
    assert stats["reliability"].n == 3


def test_a_pass_over_hundreds_of_runs_through_the_server(ws: Workspace) -> None:
    """More runs than one page of the remote listings (100) and of a pass's feedback look-ups."""
    t0 = datetime.now(UTC)
    posts = []
    for i in range(230):
        rid = str(uuid.uuid4())
        t = t0 + timedelta(microseconds=i)
        posts.append({"id": rid, "trace_id": rid, "name": "agent", "run_type": "chain",
                      "start_time": t.isoformat(), "end_time": t.isoformat(),
                      "dotted_order": t.strftime("%Y%m%dT%H%M%S%fZ") + rid,
                      "session_name": "busy", "outputs": {"answer": "x" * (i % 7)}})
    for i in range(0, len(posts), 100):
        assert ws.http.post("/runs/batch", json={"post": posts[i:i + 100]}).status_code == 202
    remote = Client(api_url=ws.server.url, api_key=ws.key)

    def short(outputs: dict[str, str]) -> bool:
        return len(outputs["answer"]) < 3

    first = evaluate_online("busy", [short], client=remote)
    assert (first.considered, first.scored) == (230, 230)
    again = evaluate_online("busy", [short], client=remote)
    assert (again.scored, again.already_scored) == (0, 230)


def test_conversations_scored_through_the_server(ws: Workspace) -> None:
    """``evaluate_threads_online`` with the remote client: the threads come from the v2
    threads API, each conversation is read turn by turn, the score lands on its last turn."""
    from assay import evaluate_threads_online

    t0 = datetime.now(UTC) - timedelta(hours=1)
    last: dict[str, str] = {}
    for i, (thread, question) in enumerate([("t-1", "my order"), ("t-1", "thanks!"),
                                            ("t-2", "hello")]):
        rid = str(uuid.uuid4())
        start = t0 + timedelta(minutes=i)
        post = {"id": rid, "trace_id": rid, "name": "chat", "run_type": "chain",
                "start_time": start.isoformat(),
                "end_time": (start + timedelta(seconds=1)).isoformat(),
                "dotted_order": start.strftime("%Y%m%dT%H%M%S%fZ") + rid,
                "session_name": "support", "inputs": {"question": question},
                "outputs": {"answer": "ok"}, "extra": {"metadata": {"thread_id": thread}}}
        assert ws.http.post("/runs/batch", json={"post": [post]}).status_code == 202
        last[thread] = rid
    remote = Client(api_url=ws.server.url, api_key=ws.key)
    seen: list[list[str]] = []

    def resolved(inputs: dict[str, object]) -> bool:
        users = [m["content"] for m in inputs["messages"] if m["role"] == "user"]  # type: ignore[attr-defined, index]
        seen.append(users)
        return "thanks" in users[-1]

    report = evaluate_threads_online("support", [resolved], idle=timedelta(minutes=5),
                                     client=remote)
    assert (report.considered, report.scored, report.errors) == (2, 2, 0)
    assert sorted(seen) == [["hello"], ["my order", "thanks!"]]
    scores = {str(f.run_id): f.score for f in remote.list_feedback(run_ids=list(last.values()))}
    assert scores == {last["t-1"]: 1.0, last["t-2"]: 0.0}
    again = evaluate_threads_online("support", [resolved], idle=timedelta(minutes=5),
                                    client=remote)
    assert (again.already_scored, again.scored) == (2, 0)
