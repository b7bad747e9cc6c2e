"""Runs created one at a time with a parent but no dotted order (LangSmith's single-run API,
``create_run(parent_run_id=...)``): they nest in their trace and count in its chains' usage,
through assay's own Client and through the official SDK against the server."""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay import Client

from .conftest import Workspace

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated")

USAGE = {"metadata": {"usage_metadata": {"input_tokens": 3, "output_tokens": 4}}}


def _trace(client: Any, project: str, with_trace: bool = True) -> uuid.UUID:
    """root -> step -> llm (7 tokens), and an llm (7 tokens) right under root: each made with
    create_run and ended with update_run, as LangSmith's docs show the API (``with_trace``:
    naming the trace too; the SDK's create_run does not when only the parent is given)."""
    root, step, deep, near = (uuid.uuid4() for _ in range(4))
    t0 = datetime.now(UTC) - timedelta(seconds=10)
    made = [(root, "root", "chain", None, 0), (step, "step", "chain", root, 1),
            (deep, "deep", "llm", step, 2), (near, "near", "llm", root, 3)]
    for rid, name, kind, parent, at in made:
        more = {"extra": USAGE} if kind == "llm" else {}
        if parent is not None:
            more.update(parent_run_id=parent, **({"trace_id": root} if with_trace else {}))
        client.create_run(name=name, run_type=kind, inputs={"q": name}, id=rid,
                          project_name=project, start_time=t0 + timedelta(seconds=at), **more)
    for rid, *_ in reversed(made):
        client.update_run(rid, outputs={"a": 1}, end_time=t0 + timedelta(seconds=5))
    return root


def _check(client: Any, root: uuid.UUID, project: str) -> None:
    tree = client.read_run(root, load_child_runs=True)
    assert [c.name for c in tree.child_runs] == ["step", "near"]
    assert [c.name for c in tree.child_runs[0].child_runs] == ["deep"]
    assert tree.total_tokens == 14 and tree.child_runs[0].total_tokens == 7
    listed = {r.name: r for r in client.list_runs(project_name=project)}
    assert {str(r.trace_id) for r in listed.values()} == {str(root)}
    assert listed["root"].total_tokens == 14 and listed["step"].total_tokens == 7
    assert listed["deep"].dotted_order.startswith(listed["step"].dotted_order + ".")
    assert listed["step"].dotted_order.startswith(listed["root"].dotted_order + ".")


def _flows() -> dict[str, tuple[Any, Any]]:
    """(make the runs, check them): runs made one at a time in order, and runs stored before
    their parents (each placed when its parent is stored, the ones below it then too: a
    grandparent's usage counts them)."""
    return {"one-by-one": (_trace, _check), "later": (_late_chain, _check_late_chain),
            # a child named by its parent alone (a 202, then dropped by the fold: the trace
            # is its parent's, found when the parent is stored, or when it comes)
            "one-by-one-no-trace": (functools.partial(_trace, with_trace=False), _check),
            "later-no-trace": (functools.partial(_late_chain, with_trace=False),
                               _check_late_chain)}


FLOWS = ["one-by-one", "later", "one-by-one-no-trace", "later-no-trace"]


@pytest.mark.parametrize("flow", FLOWS)
def test_assays_client(sqlite_url: str, flow: str) -> None:
    make, check = _flows()[flow]
    client = Client(database_url=sqlite_url)
    check(client, make(client, flow), flow)


@pytest.mark.parametrize("flow", FLOWS)
def test_the_langsmith_sdk_against_the_server(ws: Workspace, flow: str) -> None:
    from langsmith import Client as LangSmithClient

    make, check = _flows()[flow]
    sdk = LangSmithClient(api_url=ws.server.url, api_key=ws.key)
    root = make(sdk, f"sdk-{flow}")
    sdk.flush()
    check(sdk, root, f"sdk-{flow}")
    sdk.cleanup()


def test_a_child_stored_before_its_parent_still_nests(sqlite_url: str) -> None:
    """The child arrives first (its parent unknown, so no order derived): it nests by its
    parent on reads, and counts in the parent's usage."""
    client = Client(database_url=sqlite_url)
    root, child = uuid.uuid4(), uuid.uuid4()
    t0 = datetime.now(UTC)
    client.create_run(name="child", run_type="llm", inputs={}, id=child, parent_run_id=root,
                      trace_id=root, project_name="late", start_time=t0, extra=USAGE)
    client.create_run(name="root", run_type="chain", inputs={}, id=root, project_name="late",
                      start_time=t0 - timedelta(seconds=1))
    tree = client.read_run(root, load_child_runs=True)
    assert [c.name for c in tree.child_runs] == ["child"] and tree.total_tokens == 7
    listed = {r.name: r for r in client.list_runs(project_name="late")}
    assert listed["root"].total_tokens == 7


def _late_chain(client: Any, project: str, with_trace: bool = True) -> uuid.UUID:
    """root, then an llm whose parents arrive after it, the nearest last:
    root -> outer -> inner -> llm (7 tokens), created llm, inner, outer."""
    root, outer, inner, llm = (uuid.uuid4() for _ in range(4))
    t0 = datetime.now(UTC) - timedelta(seconds=10)
    client.create_run(name="root", run_type="chain", inputs={}, id=root, project_name=project,
                      start_time=t0)
    for rid, name, kind, parent, at in [(llm, "llm", "llm", inner, 3),
                                        (inner, "inner", "chain", outer, 2),
                                        (outer, "outer", "chain", root, 1)]:
        client.create_run(name=name, run_type=kind, inputs={}, id=rid, parent_run_id=parent,
                          **({"trace_id": root} if with_trace else {}), project_name=project,
                          start_time=t0 + timedelta(seconds=at),
                          **({"extra": USAGE} if kind == "llm" else {}))
        client.flush()  # each stored on its own, before its parent (the SDK batches them)
    return root


def _check_late_chain(client: Any, root: uuid.UUID, project: str) -> None:
    listed = {r.name: r for r in client.list_runs(project_name=project)}
    assert {str(r.trace_id) for r in listed.values()} == {str(root)}
    assert listed["llm"].dotted_order.startswith(listed["inner"].dotted_order + ".")
    assert listed["inner"].dotted_order.startswith(listed["outer"].dotted_order + ".")
    assert listed["outer"].dotted_order.startswith(listed["root"].dotted_order + ".")
    assert listed["root"].total_tokens == 7 and listed["outer"].total_tokens == 7
    tree = client.read_run(root, load_child_runs=True)
    assert tree.total_tokens == 7
    assert [c.name for c in tree.child_runs[0].child_runs[0].child_runs] == ["llm"]


def test_a_guessed_trace_moves_its_statistics_when_the_run_is_placed(sqlite_url: str) -> None:
    """Streamed llm runs posted naming only their parents (two steps of one trace), before
    those steps: stored under a guess (the step's id as their trace), they take the root's
    trace when placed, and the streamed-trace count (kept per trace on write) moves with them:
    one trace streamed, not two, and the maintained statistics equal a recount (what ``assay
    db check`` compares)."""
    from assay.store import Store
    from assay.store._stats import recompute_session_stats, session_stats
    from assay.store._tables import sessions

    client = Client(database_url=sqlite_url)
    root, steps, llms = uuid.uuid4(), [uuid.uuid4(), uuid.uuid4()], [uuid.uuid4(), uuid.uuid4()]
    t0 = datetime.now(UTC) - timedelta(seconds=10)
    client.create_run(name="root", run_type="chain", inputs={}, id=root, project_name="moved",
                      start_time=t0, end_time=t0 + timedelta(seconds=9))
    for i, (step, llm) in enumerate(zip(steps, llms, strict=True)):
        at = t0 + timedelta(seconds=1 + 3 * i)
        client.create_run(name=f"llm{i}", run_type="llm", inputs={}, id=llm, parent_run_id=step,
                          project_name="moved", start_time=at + timedelta(seconds=1),
                          end_time=at + timedelta(seconds=2), extra=USAGE, events=[
                              {"name": "new_token", "time": (at + timedelta(seconds=1.5)
                                                             ).isoformat()}])
    client.flush()
    assert str(client.read_run(llms[0]).trace_id) == str(steps[0])  # the guess, for now
    for i, step in enumerate(steps):
        at = t0 + timedelta(seconds=1 + 3 * i)
        client.create_run(name=f"step{i}", run_type="chain", inputs={}, id=step,
                          parent_run_id=root, project_name="moved", start_time=at,
                          end_time=at + timedelta(seconds=2))
    client.flush()
    listed = {r.name: r for r in client.list_runs(project_name="moved")}
    assert {str(r.trace_id) for r in listed.values()} == {str(root)}
    assert listed["root"].total_tokens == 14
    store = Store.open(sqlite_url)
    try:
        with store.engine.connect() as conn:
            (row,) = conn.execute(sessions.select().where(sessions.c.name == "moved")).all()
            kept, counted = session_stats(conn, row), recompute_session_stats(conn, row)
        assert kept == counted
        assert kept["streaming_rate"] == 1.0  # one trace, and it streamed
    finally:
        store.close()
