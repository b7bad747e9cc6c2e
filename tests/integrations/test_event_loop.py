"""One event loop per process for every sync entry point.

Agents keep async HTTP clients bound to the loop they first ran on; a fresh ``asyncio.run`` per
sync call closed that loop behind them ("RuntimeError: Event loop is closed" on the next call).
Here each evaluator's sync ``run()`` and ``evaluate()`` are called many times on ONE agent: a
real pydantic-ai Agent (its own AsyncOpenAI/httpx client) and a small class holding an
``openai.AsyncOpenAI``, both against the scripted model server.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
from typing import Any

import openai
import pytest

from assay._sync import run_sync
from assay.demo import ScriptedModelServer
from assay.evals import (
    AccuracyEvaluator,
    AgentUnderTest,
    PerformanceEvaluator,
    ReliabilityEvaluator,
)
from assay.evaluation import evaluate
from assay.llm import JudgeOptions, OpenAIJudge

from .conftest import make_pydantic_agent

CALLS = 10
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("h21a_var", default="unset")


class RawOpenAIAgent:
    """An agent of the simplest kind: an AsyncOpenAI client made once, used on every call."""

    def __init__(self, base_url: str) -> None:
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key="scripted", max_retries=0)

    async def __call__(self, query: Any) -> str:
        text = query if isinstance(query, str) else str(query.get("question"))
        resp = await self.client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}])
        return resp.choices[0].message.content or ""


def _judge(srv: ScriptedModelServer) -> OpenAIJudge:
    return OpenAIJudge("gpt-4o-mini", base_url=srv.base_url,
                       options=JudgeOptions(backoff_initial=0.01, backoff_max=0.05))


def test_each_evaluator_run_many_times_on_one_pydantic_ai_agent(model: ScriptedModelServer
                                                                ) -> None:
    agent = make_pydantic_agent(model.base_url)
    query = "get_weather for Paris"
    accuracy = AccuracyEvaluator(_judge(model), agent, query, "Paris")
    perf = PerformanceEvaluator(agent, query, num_iterations=1, warmup_runs=0)
    # reliability reads the result of an agent run made from sync code (not agent.run_sync:
    # pydantic-ai runs that on a loop of its own, which the client, bound to assay's loop by
    # then, cannot follow)
    reliability = ReliabilityEvaluator([{"name": "get_weather", "args": {"city": "Paris"}}])
    under_test = AgentUnderTest(agent)
    for _ in range(CALLS):
        result = accuracy.run()
        assert not result.failed_iterations, result.failed_iterations
        assert result.evaluation_scores and "Paris" in result.generated_output
        assert len(perf.run().all_runs) == 1
        assert reliability.run(under_test.call(query)).passed


def test_accuracy_run_many_times_on_one_async_openai_client(model: ScriptedModelServer) -> None:
    """The failure as first reported: a plain AsyncOpenAI client reused across sync runs (with
    ``asyncio.run`` per call, every second call failed with "Event loop is closed")."""
    agent = RawOpenAIAgent(model.base_url)
    accuracy = AccuracyEvaluator(_judge(model), agent, "What about Paris?", "Paris",
                                 num_iterations=2)
    for _ in range(CALLS):
        result = accuracy.run()
        assert not result.failed_iterations, result.failed_iterations
        assert len(result.evaluation_scores) == 2
    assert len(PerformanceEvaluator(agent, "Paris?", num_iterations=3, warmup_runs=1).run()
               .all_runs) == 3


def test_evaluate_many_times_on_one_agent(model: ScriptedModelServer) -> None:
    agent = RawOpenAIAgent(model.base_url)
    data = [{"inputs": {"question": "What about Rome?"}, "outputs": {}}]
    for _ in range(CALLS):
        results = evaluate(agent, data=data, upload_results=False)
        rows = list(results)
        assert rows[0]["run"].error is None and "Rome" in rows[0]["run"].outputs["output"]


def test_non_blocking_evaluate_shares_the_loop(model: ScriptedModelServer) -> None:
    agent = RawOpenAIAgent(model.base_url)
    data = [{"inputs": {"question": "And Oslo?"}, "outputs": {}}]
    evaluate(agent, data=data, upload_results=False)  # the client binds to the loop here
    results = evaluate(agent, data=data, upload_results=False, blocking=False)
    results.wait()
    assert [r["run"].error for r in results] == [None]


def test_every_call_runs_on_the_same_loop_with_the_caller_s_context() -> None:
    async def where() -> tuple[int, str, str]:
        return id(asyncio.get_running_loop()), threading.current_thread().name, VAR.get()

    VAR.set("caller")
    first = run_sync(where())
    second = run_sync(where())
    assert first == second and first[1] == "assay-loop" and first[2] == "caller"


def test_called_from_the_loop_s_own_thread_it_does_not_deadlock() -> None:
    async def inner() -> str:
        return threading.current_thread().name

    async def outer() -> str:
        return run_sync(inner())  # a sync wrapper inside a coroutine on the shared loop

    assert run_sync(outer()).startswith("assay-sync")


def test_called_inside_another_running_loop() -> None:
    async def inner() -> int:
        return 7

    async def jupyter_like() -> int:
        return run_sync(inner())

    assert asyncio.run(jupyter_like()) == 7


def test_errors_and_interrupts_reach_the_caller_and_the_loop_survives() -> None:
    async def boom() -> None:
        raise KeyError("x")

    async def interrupt() -> None:
        raise KeyboardInterrupt

    async def fine() -> int:
        return 1

    with pytest.raises(KeyError):
        run_sync(boom())
    with pytest.raises(KeyboardInterrupt):
        run_sync(interrupt())
    assert run_sync(fine()) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_loop_of_its_own() -> None:
    async def value() -> int:
        return 2

    assert run_sync(value()) == 2  # the parent's loop thread exists now
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            signal.alarm(10)
            code = 0 if run_sync(value()) == 2 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's run_sync failed or hung"


def test_threads_calling_run_at_once_share_the_loop(model: ScriptedModelServer) -> None:
    """Sync calls from several threads at a time run concurrently on the one loop."""
    from concurrent.futures import ThreadPoolExecutor

    agent = RawOpenAIAgent(model.base_url)
    accuracy = AccuracyEvaluator(_judge(model), agent, "What about Lima?", "Lima")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: accuracy.run(), range(16)))
    assert all(not r.failed_iterations and r.average_score == 9 for r in results)
