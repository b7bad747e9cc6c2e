"""The OpenAI-compatible judge over real HTTP against a scripted server.

Every test asserts what the server saw: how many requests (retries), what they carried, and
when they arrived (backoff, Retry-After).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from assay.errors import InvalidInputError, JudgeError
from assay.evals import EvaluationScore
from assay.llm import (
    FunctionJudge,
    JudgeOptions,
    OpenAIJudge,
    agenerate_structured,
    generate_structured,
    get_judge,
)

from .fake_openai import FakeLLMServer, Reply, SeenRequest, chat, error, verdict

FAST = JudgeOptions(timeout=5, max_retries=3, backoff_initial=0.01, backoff_max=0.05, jitter=0)
MESSAGES = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Judge."}]


def judge_for(server: FakeLLMServer, **opts: object) -> OpenAIJudge:
    options = FAST.model_copy(update=opts) if opts else FAST
    return OpenAIJudge("judge-model", base_url=server.base_url, options=options)


async def ask(judge: OpenAIJudge) -> EvaluationScore:
    return await agenerate_structured(judge, MESSAGES, EvaluationScore)


async def test_valid_verdict_sends_json_schema(server: FakeLLMServer) -> None:
    server.push(chat(verdict(score=9, is_met=True, reasoning="All facts match.")))
    score = await ask(judge_for(server))
    assert (score.score, score.is_met, score.reasoning) == (9, True, "All facts match.")
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.json["model"] == "judge-model"
    assert req.json["messages"] == MESSAGES
    rf = req.json["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == "EvaluationScore"
    assert rf["json_schema"]["strict"] is True
    schema = rf["json_schema"]["schema"]
    assert list(schema["properties"]) == ["reasoning", "critique", "score", "is_met"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"score", "reasoning", "is_met", "critique"}
    assert req.headers["authorization"] == "Bearer not-needed"


async def test_tolerant_parse_of_fenced_json_in_prose(server: FakeLLMServer) -> None:
    body = ("Sure, here is my verdict:\n```json\n" + verdict(score=6, is_met=False)
            + "\n```\nLet me know {if} you need more.")
    server.push(chat(body))
    score = await ask(judge_for(server))
    assert (score.score, score.is_met) == (6, False)
    assert len(server.requests) == 1


async def test_malformed_json_is_reasked_with_the_problem(server: FakeLLMServer) -> None:
    server.push(chat("I think it deserves an 8 {score: 8,"), chat(verdict(score=8)))
    score = await ask(judge_for(server))
    assert score.score == 8
    assert len(server.requests) == 2
    retry = server.requests[1].messages
    assert retry[:2] == MESSAGES
    assert retry[2] == {"role": "assistant", "content": "I think it deserves an 8 {score: 8,"}
    assert retry[3]["role"] == "user" and "not valid JSON" in retry[3]["content"]


async def test_score_of_eleven_is_rejected_and_reasked(server: FakeLLMServer) -> None:
    server.push(chat(verdict(score=11)), chat(verdict(score=10)))
    score = await ask(judge_for(server))
    assert score.score == 10
    assert len(server.requests) == 2
    assert "less than or equal to 10" in server.requests[1].messages[-1]["content"]


async def test_invalid_output_retries_are_bounded(server: FakeLLMServer) -> None:
    server.push(*[chat(verdict(score=11)) for _ in range(5)])
    with pytest.raises(JudgeError) as info:
        await ask(judge_for(server, max_output_retries=2))
    msg = str(info.value)
    assert "judge-model" in msg and "3 attempts" in msg
    assert "score" in msg and "less than or equal to 10" in msg
    assert len(server.requests) == 3


async def test_missing_field_is_named(server: FakeLLMServer) -> None:
    server.push(*[chat(json.dumps({"score": 5, "reasoning": "r", "critique": "c"}))] * 1)
    with pytest.raises(JudgeError, match="is_met: Field required"):
        await ask(judge_for(server, max_output_retries=0))
    assert len(server.requests) == 1


async def test_429_honours_retry_after(server: FakeLLMServer) -> None:
    server.push(error(429, "slow down", headers={"Retry-After": "1"}, kind="rate_limit"),
                chat(verdict()))
    start = time.monotonic()
    score = await ask(judge_for(server))
    assert score.score == 8
    assert len(server.requests) == 2
    gap = server.requests[1].time - server.requests[0].time
    assert gap >= 0.95, f"retried after {gap:.3f}s despite Retry-After: 1"
    assert time.monotonic() - start < 5


async def test_retry_after_ms_is_preferred(server: FakeLLMServer) -> None:
    server.push(error(429, headers={"retry-after-ms": "300", "retry-after": "30"}),
                chat(verdict()))
    await ask(judge_for(server))
    gap = server.requests[1].time - server.requests[0].time
    assert 0.28 <= gap < 5


async def test_500s_are_retried_with_backoff(server: FakeLLMServer) -> None:
    server.push(error(500), error(503), chat(verdict(score=7)))
    score = await ask(judge_for(server, backoff_initial=0.1, backoff_multiplier=2,
                                backoff_max=1.0))
    assert score.score == 7
    assert len(server.requests) == 3
    gaps = [b.time - a.time for a, b in zip(server.requests, server.requests[1:], strict=False)]
    assert gaps[0] >= 0.09 and gaps[1] >= 0.19, gaps  # 0.1s then 0.2s


async def test_persistent_500_gives_judge_error_after_retries(server: FakeLLMServer) -> None:
    server.push(*[error(500, "model crashed") for _ in range(5)])
    with pytest.raises(JudgeError) as info:
        await ask(judge_for(server, max_retries=2))
    assert "3 attempts" in str(info.value) and "HTTP 500" in str(info.value)
    assert "model crashed" in str(info.value)
    assert info.value.status_code == 500 and info.value.attempts == 3
    assert len(server.requests) == 3


async def test_client_errors_are_not_retried(server: FakeLLMServer) -> None:
    server.push(error(401, "bad key", kind="invalid_request_error"), chat(verdict()))
    with pytest.raises(JudgeError, match="1 attempt: HTTP 401"):
        await ask(judge_for(server))
    assert len(server.requests) == 1


async def test_slow_reply_times_out_and_is_retried(server: FakeLLMServer) -> None:
    # replies far slower than a timeout and the backoff, each judged against its own request
    # (the server's clock): a busy machine slows the whole test (3.7 s once against a 2.5 s
    # bound on the total), not a retry sent before the first reply, or a give-up before the
    # second's
    server.push(chat(verdict(), delay=5.0), chat(verdict(), delay=5.0))
    with pytest.raises(JudgeError, match=r"timed out after 0.3s \(2 attempts\)"):
        await ask(judge_for(server, timeout=0.3, max_retries=1))
    gave_up = time.monotonic()
    assert len(server.requests) == 2
    first, second = server.requests
    assert second.time - first.time < 5.0  # retried without waiting for the first reply
    assert gave_up - second.time < 5.0  # gave up without waiting for the second


async def test_timeout_then_success(server: FakeLLMServer) -> None:
    server.push(chat(verdict(), delay=1.0), chat(verdict(score=5)))
    score = await ask(judge_for(server, timeout=0.3))
    assert score.score == 5
    assert len(server.requests) == 2


async def test_endpoint_without_structured_output_falls_back_to_prompt(
        server: FakeLLMServer) -> None:
    def no_schema_support(req: SeenRequest):  # type: ignore[no-untyped-def]
        if "response_format" in req.json:
            return error(400, "response_format is not supported", kind="invalid_request_error")
        return chat("```json\n" + verdict(score=4, is_met=False) + "\n```")

    server.push(*[no_schema_support] * 3)
    judge = judge_for(server)
    score = await ask(judge)
    assert score.score == 4
    assert [("response_format" in r.json) for r in server.requests] == [True, False]
    system = server.requests[1].messages[0]["content"]
    assert system.startswith("You judge.") and '"is_met"' in system  # schema moved to the prompt
    await ask(judge)  # remembered: no further attempt with response_format
    assert [("response_format" in r.json) for r in server.requests] == [True, False, False]


async def test_forced_json_schema_does_not_fall_back(server: FakeLLMServer) -> None:
    server.push(error(400, "response_format is not supported"), chat(verdict()))
    with pytest.raises(JudgeError, match="HTTP 400"):
        await ask(judge_for(server, structured_output="json_schema"))
    assert len(server.requests) == 1


async def test_json_object_and_prompt_modes(server: FakeLLMServer) -> None:
    server.push(chat(verdict()), chat(verdict()))
    await ask(judge_for(server, structured_output="json_object"))
    await ask(judge_for(server, structured_output="prompt", temperature=0.0, max_tokens=300))
    assert server.requests[0].json["response_format"] == {"type": "json_object"}
    second = server.requests[1].json
    assert "response_format" not in second
    assert second["temperature"] == 0.0 and second["max_tokens"] == 300


def test_sync_wrapper_works_across_event_loops(server: FakeLLMServer) -> None:
    judge = judge_for(server)
    server.push(chat(verdict(score=3)), chat(verdict(score=4)))
    first = generate_structured(judge, MESSAGES, EvaluationScore)
    second = generate_structured(judge, MESSAGES, EvaluationScore)  # a new asyncio.run loop
    assert (first.score, second.score) == (3, 4)


async def test_sync_wrapper_inside_a_running_loop(server: FakeLLMServer) -> None:
    server.push(chat(verdict(score=2, is_met=False)))
    score = generate_structured(judge_for(server), MESSAGES, EvaluationScore)
    assert score.score == 2


async def test_concurrent_calls_share_the_judge(server: FakeLLMServer) -> None:
    server.push(*[chat(verdict(score=s)) for s in (5, 6, 7, 8)])
    judge = judge_for(server)
    scores = await asyncio.gather(*(ask(judge) for _ in range(4)))
    assert sorted(s.score for s in scores) == [5, 6, 7, 8]


async def test_connection_refused_is_retried_then_reported() -> None:
    with FakeLLMServer() as srv:
        url = srv.base_url
    judge = OpenAIJudge("m", base_url=url, options=FAST.model_copy(update={"max_retries": 1}))
    with pytest.raises(JudgeError, match="2 attempts: could not connect"):
        await ask(judge)


# --- the registry -----------------------------------------------------------------------------

async def test_registry_openai_compatible_string(server: FakeLLMServer) -> None:
    judge = get_judge(f"openai-compatible:judge-model@{server.base_url}", options=FAST)
    assert judge.name == "openai-compatible:judge-model"
    server.push(chat(verdict(score=9)))
    assert (await ask(judge)).score == 9  # type: ignore[arg-type]
    assert server.requests[0].json["model"] == "judge-model"


async def test_registry_accepts_sdk_clients(server: FakeLLMServer) -> None:
    import openai

    for client in (openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-async"),
                   openai.OpenAI(base_url=server.base_url, api_key="sk-sync")):
        judge = get_judge(client, model="judge-model", options=FAST)
        server.push(chat(verdict(score=7)))
        assert (await ask(judge)).score == 7  # type: ignore[arg-type]
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer sk-async", "Bearer sk-sync"]
    with pytest.raises(InvalidInputError, match="model="):
        get_judge(openai.AsyncOpenAI(base_url=server.base_url, api_key="k"))


def test_registry_errors_name_the_problem() -> None:
    with pytest.raises(InvalidInputError, match="unknown judge provider 'bogus'.*openai"):
        get_judge("bogus:model")
    with pytest.raises(InvalidInputError, match="<provider>:<model>"):
        get_judge("gpt-4o-mini")
    with pytest.raises(InvalidInputError, match="openai-compatible:<model>@http"):
        get_judge("openai-compatible:llama3")
    with pytest.raises(InvalidInputError, match="got int"):
        get_judge(42)


def test_registry_builds_known_providers_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    openai_judge = get_judge("openai:gpt-4o-mini")
    assert openai_judge.name == "openai:gpt-4o-mini"
    assert get_judge("anthropic:claude-sonnet-4-5").name == "anthropic:claude-sonnet-4-5"
    ollama = get_judge("ollama:llama3.2")
    assert ollama.base_url == "http://127.0.0.1:11434/v1"  # type: ignore[attr-defined]
    assert get_judge(openai_judge) is openai_judge


async def test_missing_api_key_is_a_clear_judge_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(JudgeError, match="no API key: set OPENAI_API_KEY"):
        await ask(get_judge("openai:gpt-4o-mini"))  # type: ignore[arg-type]


async def test_function_judge_sync_and_async() -> None:
    seen = []

    def rubric(messages, schema):  # type: ignore[no-untyped-def]
        seen.append(schema.name)
        return {"score": 10, "reasoning": "exact", "is_met": True, "critique": "none"}

    async def async_rubric(messages):  # type: ignore[no-untyped-def]
        return verdict(score=1, is_met=False)

    assert (await agenerate_structured(get_judge(rubric), MESSAGES, EvaluationScore)).score == 10
    assert seen == ["EvaluationScore"]
    judge = FunctionJudge(async_rubric, name="strict")
    assert judge.name == "function:strict"
    assert (await agenerate_structured(judge, MESSAGES, EvaluationScore)).score == 1


async def test_bad_messages_are_rejected(server: FakeLLMServer) -> None:
    with pytest.raises(InvalidInputError, match=r"messages\[0\].role"):
        await judge_for(server).acomplete([{"role": "robot", "content": "x"}])
    with pytest.raises(InvalidInputError, match="non-empty list"):
        await judge_for(server).acomplete("hello")  # type: ignore[arg-type]
    assert server.requests == []


async def test_a_refusal_is_a_judge_error_not_retried(server: FakeLLMServer) -> None:
    refusal = chat("")
    refusal.body["choices"][0]["message"] = {"role": "assistant", "content": None,
                                             "refusal": "I can't evaluate this."}
    server.push(refusal)
    with pytest.raises(JudgeError, match="refused to answer: I can't evaluate this."):
        await ask(judge_for(server))
    assert len(server.requests) == 1  # asking again would not help


async def test_empty_choices_are_retried_like_a_500(server: FakeLLMServer) -> None:
    """HTTP 200 with ``choices: []`` is a fault of the endpoint (seen at ~5% of a flaky judge's
    replies): retried under the same policy, and a JudgeError only when retries run out."""
    def empty() -> Reply:
        reply = chat("")
        reply.body["choices"] = []
        return reply

    server.push(empty(), chat(verdict(score=7)))
    assert (await ask(judge_for(server))).score == 7
    assert len(server.requests) == 2
    server.push(*(empty() for _ in range(4)))
    with pytest.raises(JudgeError, match="failed after 4 attempts: .*returned no choices"):
        await ask(judge_for(server, max_retries=3))
