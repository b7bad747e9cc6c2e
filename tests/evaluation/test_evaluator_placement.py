"""Where sync evaluators run when examples run concurrently: on the loop's thread while they
are fast, on threads once one is slow (a few calls in a row) or needs its own event loop."""

from __future__ import annotations

import asyncio
import threading
import time

from assay import aevaluate
from assay.client import Client

from .conftest import make_dataset


async def _target(inputs: dict) -> dict:
    await asyncio.sleep(0.001)
    return {"y": 2 * inputs["x"]}


async def test_fast_sync_evaluator_stays_on_the_loop_slow_one_moves_to_threads(
        client: Client) -> None:
    make_dataset(client, "d", 12)
    loop_thread = threading.get_ident()
    fast_threads: list[int] = []
    slow_threads: list[int] = []

    def fast(outputs: dict, reference_outputs: dict) -> bool:
        fast_threads.append(threading.get_ident())
        return outputs["y"] == reference_outputs["y"]

    def slow(outputs: dict) -> bool:
        slow_threads.append(threading.get_ident())
        time.sleep(0.005)  # past the inline limit: after 3 such calls, a thread's work
        return True

    stalled: list[int] = []

    def stalled_once(outputs: dict) -> bool:  # one pause (a GC, the GIL elsewhere), then fast
        stalled.append(threading.get_ident())
        if len(stalled) == 1:
            time.sleep(0.005)
        return True

    res = await aevaluate(_target, data="d", evaluators=[fast, slow, stalled_once],
                          client=client, max_concurrency=4)
    # (a preempted call may also pass the limit on a busy machine: most stay on the loop)
    assert fast_threads[0] == loop_thread and fast_threads.count(loop_thread) >= 6
    assert slow_threads[:3] == [loop_thread] * 3 and loop_thread not in slow_threads[3:]
    assert len(slow_threads) == 12
    assert stalled.count(loop_thread) >= 10  # one slow call did not send it to threads
    assert all(r["evaluation_results"].results[0].score == 1 for r in res)
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.feedback_stats["fast"].n == 12 and stats.feedback_stats["slow"].avg == 1.0


async def test_sync_evaluator_running_its_own_event_loop_still_works(client: Client) -> None:
    make_dataset(client, "d", 8)

    async def judge(y: int) -> bool:
        return y >= 0

    def wraps_async(outputs: dict) -> bool:
        return asyncio.run(judge(outputs["y"]))  # cannot run on the loop's thread

    res = await aevaluate(_target, data="d", evaluators=[wraps_async], client=client,
                          max_concurrency=3)
    scores = [r["evaluation_results"].results[0] for r in res]
    assert [s.score for s in scores] == [1] * 8, [s.comment for s in scores]
