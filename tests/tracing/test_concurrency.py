"""Nesting across asyncio tasks and worker threads; 10,000 concurrent runs all stored."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import wait

from assay.client import Client
from assay.tracing import (
    ContextThreadPoolExecutor,
    get_current_run_tree,
    run_in_thread,
    trace,
    traceable,
    tracing_context,
    with_context,
)


async def test_10000_runs_from_100_tasks_stored_with_correct_parents(client: Client) -> None:
    """100 tasks x (1 root + 9 async steps x (1 + 10 sync leaves)) = 10,000 runs."""

    @traceable(run_type="tool")
    def leaf(task: int, step: int, k: int) -> int:
        return k

    @traceable
    async def step(task: int, step_no: int) -> int:
        total = 0
        for k in range(10):
            total += leaf(task, step_no, k)
            if k % 3 == 0:
                await asyncio.sleep(0)  # interleave with the other 99 tasks
        return total

    @traceable
    async def task(task_no: int) -> int:
        return sum(await asyncio.gather(*(step(task_no, s) for s in range(9))))

    t0 = time.perf_counter()
    with tracing_context(enabled=True, client=client, project_name="load"):
        results = await asyncio.gather(*(task(i) for i in range(100)))
    client.flush()
    elapsed = time.perf_counter() - t0
    assert results == [9 * 45] * 100

    runs = list(client.list_runs(project_name="load"))
    assert len(runs) == 10_000, f"{len(runs)} runs stored"
    by_id = {r.id: r for r in runs}
    assert len(by_id) == 10_000
    roots = [r for r in runs if r.parent_run_id is None]
    assert len(roots) == 100 and all(r.name == "task" for r in roots)
    for r in runs:
        assert r.status == "success" and r.end_time is not None
        if r.name == "task":
            continue
        parent = by_id[r.parent_run_id]
        assert r.trace_id == parent.trace_id
        assert r.dotted_order.startswith(parent.dotted_order + ".")
        if r.name == "step":
            assert parent.name == "task" and parent.inputs["task_no"] == r.inputs["task"]
        else:
            assert parent.name == "step"
            assert parent.inputs["task"] == r.inputs["task"]
            assert parent.inputs["step_no"] == r.inputs["step"]
    assert elapsed < 60, f"10,000 runs took {elapsed:.1f}s"


def test_worker_threads_inherit_the_current_run(tclient: Client) -> None:
    @traceable(run_type="tool")
    def work(n: int) -> str:
        return threading.current_thread().name

    seen_plain: list[object] = []

    def plain() -> None:
        seen_plain.append(get_current_run_tree())

    with trace("root", client=tclient, project_name="th", enabled=True) as root:
        fut = run_in_thread(work, 1)
        assert fut.result(timeout=10).startswith("assay-trace")
        with ContextThreadPoolExecutor(max_workers=4) as pool:
            wait([pool.submit(work, i) for i in range(2, 10)])
            assert list(pool.map(work, [10, 11])) and True
        t = threading.Thread(target=with_context(work), args=(12,))
        t.start()
        t.join()
        p = threading.Thread(target=plain)  # a plain thread starts with an empty context
        p.start()
        p.join()
    assert seen_plain == [None]
    tclient.flush()
    stored = tclient.read_run(root.id, load_child_runs=True)
    kids = stored.child_runs
    assert sorted(k.inputs["n"] for k in kids) == list(range(1, 13))
    assert all(k.parent_run_id == root.id for k in kids)


async def test_asyncio_to_thread_and_create_task_keep_parents(tclient: Client) -> None:
    @traceable
    def sync_part() -> str:
        return get_current_run_tree().parent.name  # type: ignore[union-attr]

    @traceable
    async def async_part() -> str:
        return get_current_run_tree().parent.name  # type: ignore[union-attr]

    with tracing_context(enabled=True, client=tclient):
        async with trace("outer"):
            assert await asyncio.to_thread(sync_part) == "outer"
            assert await asyncio.create_task(async_part()) == "outer"
            fut = asyncio.wrap_future(run_in_thread(sync_part))
            assert await fut == "outer"
