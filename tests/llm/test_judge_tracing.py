"""Every judge call is an llm run with its provider, model, tokens and (for known models) cost."""

from __future__ import annotations

import pytest

from assay.errors import JudgeError
from assay.evals import EvaluationScore
from assay.llm import JudgeOptions, OpenAIJudge, agenerate_structured
from assay.tracing import trace, tracing_context

from .fake_openai import FakeLLMServer, chat, error, verdict

FAST = JudgeOptions(timeout=5, max_retries=1, backoff_initial=0.01, backoff_max=0.05, jitter=0,
                    max_output_retries=1)
MESSAGES = [{"role": "user", "content": "Judge."}]


async def test_judge_calls_are_llm_runs_with_usage(server: FakeLLMServer, client) -> None:  # type: ignore[no-untyped-def]
    judge = OpenAIJudge("gpt-4o-mini", base_url=server.base_url, options=FAST, provider="openai")
    server.push(chat(verdict(score=11), prompt_tokens=100, completion_tokens=20),
                chat(verdict(score=9), prompt_tokens=150, completion_tokens=30))
    with tracing_context(enabled=True, client=client, project_name="judge-tracing"), \
            trace("accuracy check") as parent:
        score = await agenerate_structured(judge, MESSAGES, EvaluationScore)
    assert score.score == 9
    client.flush()
    runs = list(client.list_runs(project_name="judge-tracing", run_type="llm"))
    assert len(runs) == 2  # the invalid verdict and the re-ask are both model calls
    for run in runs:
        assert run.name == "openai:gpt-4o-mini"
        assert run.parent_run_id == parent.id
        assert run.metadata["ls_provider"] == "openai"
        assert run.metadata["ls_model_name"] == "gpt-4o-mini"
        assert run.inputs["messages"][0] == MESSAGES[0]
        assert run.error is None
    by_tokens = sorted(runs, key=lambda r: r.prompt_tokens or 0)
    assert [(r.prompt_tokens, r.completion_tokens, r.total_tokens) for r in by_tokens] == [
        (100, 20, 120), (150, 30, 180)]
    assert by_tokens[1].outputs["choices"][0]["message"]["content"] == verdict(score=9)
    assert all(r.total_cost is not None and r.total_cost > 0 for r in runs)  # genai-prices


async def test_failed_judge_call_is_recorded_with_its_error(server: FakeLLMServer,
                                                            client) -> None:  # type: ignore[no-untyped-def]
    judge = OpenAIJudge("local-model", base_url=server.base_url, options=FAST)
    server.push(error(500, "gpu on fire"), error(500, "gpu on fire"))
    with tracing_context(enabled=True, client=client, project_name="judge-errors"), \
            pytest.raises(JudgeError):
        await agenerate_structured(judge, MESSAGES, EvaluationScore)
    client.flush()
    (run,) = list(client.list_runs(project_name="judge-errors", run_type="llm"))
    assert run.name == "openai-compatible:local-model"
    assert "HTTP 500" in (run.error or "") and "gpu on fire" in (run.error or "")
    assert run.prompt_tokens is None


async def test_tracing_can_be_switched_off_per_judge(server: FakeLLMServer, client) -> None:  # type: ignore[no-untyped-def]
    judge = OpenAIJudge("m", base_url=server.base_url,
                        options=FAST.model_copy(update={"trace": False}))
    server.push(chat(verdict()))
    with tracing_context(enabled=True, client=client, project_name="judge-silent"), \
            trace("parent"):
        await agenerate_structured(judge, MESSAGES, EvaluationScore)
    client.flush()
    assert [r.name for r in client.list_runs(project_name="judge-silent")] == ["parent"]
    assert len(server.requests) == 1
