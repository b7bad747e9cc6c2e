"""The Anthropic judge: the official SDK against a scripted Messages endpoint on 127.0.0.1."""

from __future__ import annotations

import pytest

from assay.errors import JudgeError, MissingDependencyError, require
from assay.evals import EvaluationScore
from assay.llm import AnthropicJudge, JudgeOptions, agenerate_structured, get_judge

from .fake_openai import FakeLLMServer, SeenRequest, anthropic_message, error, verdict

FAST = JudgeOptions(timeout=5, max_retries=2, backoff_initial=0.01, backoff_max=0.05, jitter=0)
MESSAGES = [{"role": "system", "content": "You judge answers."},
            {"role": "user", "content": "Judge this."}]


def api_key(req: SeenRequest) -> str | None:
    """The key as sent: ``x-api-key`` (older SDKs) or ``Authorization: Bearer`` (newer)."""
    auth = req.headers.get("authorization", "")
    return req.headers.get("x-api-key") or (auth[7:] if auth.startswith("Bearer ") else None)


def judge_for(server: FakeLLMServer, **opts: object) -> AnthropicJudge:
    options = FAST.model_copy(update=opts) if opts else FAST
    return AnthropicJudge("claude-test", base_url=server.root_url, api_key="sk-ant-test",
                          options=options)


async def test_verdict_through_messages_api_with_output_schema(server: FakeLLMServer) -> None:
    server.push(anthropic_message(verdict(score=9, reasoning="Correct capital.")))
    score = await agenerate_structured(judge_for(server), MESSAGES, EvaluationScore)
    assert (score.score, score.reasoning) == (9, "Correct capital.")
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req.path == "/v1/messages"
    assert api_key(req) == "sk-ant-test"
    assert req.json["system"] == "You judge answers."
    assert req.json["messages"] == [{"role": "user", "content": "Judge this."}]
    assert req.json["max_tokens"] > 0
    fmt = req.json["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert set(fmt["schema"]["properties"]) == {"score", "reasoning", "is_met", "critique"}


async def test_overloaded_529_is_retried_honouring_retry_after(server: FakeLLMServer) -> None:
    server.push(error(529, "Overloaded", headers={"retry-after": "1"}, kind="overloaded_error"),
                anthropic_message(verdict(score=6)))
    score = await agenerate_structured(judge_for(server), MESSAGES, EvaluationScore)
    assert score.score == 6
    assert len(server.requests) == 2
    assert server.requests[1].time - server.requests[0].time >= 0.95


async def test_invalid_verdict_is_reasked_then_fails_clearly(server: FakeLLMServer) -> None:
    server.push(anthropic_message("Score: eleven out of ten!"),
                anthropic_message(verdict(score=11)), anthropic_message(verdict(score=0)))
    with pytest.raises(JudgeError) as info:
        await agenerate_structured(judge_for(server), MESSAGES, EvaluationScore)
    assert "anthropic:claude-test" in str(info.value) and "3 attempts" in str(info.value)
    assert "greater than or equal to 1" in str(info.value)
    assert len(server.requests) == 3
    # each re-ask carries the previous reply as the assistant turn
    assert server.requests[1].json["messages"][1]["role"] == "assistant"


async def test_endpoint_without_output_config_falls_back(server: FakeLLMServer) -> None:
    def old_api(req: SeenRequest):  # type: ignore[no-untyped-def]
        if "output_config" in req.json:
            return error(400, "output_config: Extra inputs are not permitted",
                         kind="invalid_request_error")
        return anthropic_message("Here you go: " + verdict(score=5))

    server.push(old_api, old_api)
    score = await agenerate_structured(judge_for(server), MESSAGES, EvaluationScore)
    assert score.score == 5
    assert ["output_config" in r.json for r in server.requests] == [True, False]
    assert '"is_met"' in server.requests[1].json["system"]


async def test_persistent_500_and_timeout(server: FakeLLMServer) -> None:
    server.push(*[error(500, "boom", kind="api_error")] * 3)
    with pytest.raises(JudgeError, match="3 attempts: HTTP 500"):
        await agenerate_structured(judge_for(server), MESSAGES, EvaluationScore)
    server.push(anthropic_message(verdict()), anthropic_message(verdict()))
    server.script[0].delay = server.script[1].delay = 1.0
    with pytest.raises(JudgeError, match="timed out after 0.25s"):
        await agenerate_structured(judge_for(server, timeout=0.25, max_retries=1), MESSAGES,
                                   EvaluationScore)
    assert len(server.requests) == 5


async def test_registry_and_sdk_client(server: FakeLLMServer) -> None:
    import anthropic

    judge = get_judge(anthropic.AsyncAnthropic(base_url=server.root_url, api_key="k2"),
                      model="claude-test", options=FAST)
    assert judge.name == "anthropic:claude-test"
    server.push(anthropic_message(verdict(score=8)))
    assert (await agenerate_structured(judge, MESSAGES, EvaluationScore)).score == 8
    assert api_key(server.requests[0]) == "k2"


async def test_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(JudgeError, match="ANTHROPIC_API_KEY"):
        await agenerate_structured(get_judge("anthropic:claude-x"), MESSAGES,  # type: ignore[arg-type]
                                   EvaluationScore)


def test_missing_extra_gives_an_install_hint() -> None:
    # the judge imports its SDK through require(); an absent module names the extra to install
    with pytest.raises(MissingDependencyError, match=r"pip install 'assay\[anthropic\]'"):
        require("anthropic_sdk_that_is_not_installed", "anthropic", "The Anthropic judge")
