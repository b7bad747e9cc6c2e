"""wrap_openai / wrap_anthropic against a real local HTTP server speaking both APIs (with SSE)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import anthropic
import openai
import pytest
from genai_prices import Usage, calc_price

from assay.client import Client
from assay.errors import InvalidInputError
from assay.schemas import Run
from assay.tracing import trace, tracing_context, wrap_anthropic, wrap_openai

from .fake_llm_server import FIRST_TOKEN_DELAY, TOOL_ARGS, FakeLLMServer

MSG = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "tell me a joke"}]
REPLY = "Hello, tell me a joke!"


def only_llm_run(client: Client, project: str = "w") -> Run:
    client.flush()
    [run] = list(client.list_runs(project_name=project, run_type="llm"))
    return run


def check_llm(run: Run, *, provider: str, model: str, inp: int, out: int,
              streamed: bool) -> None:
    assert run.run_type == "llm" and run.status == "success"
    assert run.metadata["ls_provider"] == provider and run.metadata["ls_model_name"] == model
    usage = run.metadata["usage_metadata"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (inp, out)
    assert (run.prompt_tokens, run.completion_tokens, run.total_tokens) == (inp, out, inp + out)
    if streamed:
        assert [e["name"] for e in run.events] == ["new_token"]
        ttft = run.first_token_time - run.start_time
        assert ttft >= timedelta(seconds=FIRST_TOKEN_DELAY * 0.9)
        assert run.first_token_time <= run.end_time
    else:
        assert run.first_token_time is None


def openai_cost(model: str, inp: int, out: int) -> float:
    return float(calc_price(Usage(input_tokens=inp, output_tokens=out), model_ref=model,
                            provider_id="openai").total_price)


# -- OpenAI -------------------------------------------------------------------------------------
def test_openai_chat_sync(tclient: Client, llm_server: FakeLLMServer) -> None:
    oa = wrap_openai(openai.OpenAI(base_url=llm_server.base_url + "/v1", api_key="x"))
    with tracing_context(enabled=True, client=tclient, project_name="w"):
        with trace("agent") as root:
            resp = oa.chat.completions.create(model="gpt-4o-mini", messages=MSG, temperature=0)
    assert resp.choices[0].message.content == REPLY  # the caller gets the SDK's own object
    run = only_llm_run(tclient)
    check_llm(run, provider="openai", model="gpt-4o-mini", inp=6, out=5, streamed=False)
    assert run.parent_run_id == root.id and run.name == "ChatOpenAI"
    assert run.inputs["messages"] == MSG and run.inputs["model"] == "gpt-4o-mini"
    assert run.outputs["choices"][0]["message"]["content"] == REPLY
    assert run.metadata["ls_temperature"] == 0
    assert run.extra["invocation_params"]["temperature"] == 0
    assert run.total_cost == pytest.approx(openai_cost("gpt-4o-mini", 6, 5))
    assert run.total_cost > 0


def test_openai_chat_stream_with_usage_and_tool_call(tclient: Client,
                                                     llm_server: FakeLLMServer) -> None:
    oa = wrap_openai(openai.OpenAI(base_url=llm_server.base_url + "/v1", api_key="x"))
    with tracing_context(enabled=True, client=tclient, project_name="w"):
        stream = oa.chat.completions.create(model="gpt-4o-mini", messages=MSG, stream=True,
                                            stream_options={"include_usage": True})
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == REPLY
    run = only_llm_run(tclient)
    check_llm(run, provider="openai", model="gpt-4o-mini", inp=6, out=5, streamed=True)
    msg = run.outputs["choices"][0]["message"]
    assert msg["content"] == REPLY and run.outputs["choices"][0]["finish_reason"] == "stop"

    with tracing_context(enabled=True, client=tclient, project_name="tool"):
        with oa.chat.completions.create(
                model="gpt-4o-mini", stream=True,
                messages=[{"role": "user", "content": "use tool please"}]) as s:
            chunks = list(s)
    assert chunks
    run = only_llm_run(tclient, "tool")
    [call] = run.outputs["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == TOOL_ARGS
    assert "usage_metadata" not in run.metadata  # no include_usage: OpenAI sends no usage


async def test_openai_async_and_async_stream(tclient: Client, llm_server: FakeLLMServer) -> None:
    oa = wrap_openai(openai.AsyncOpenAI(base_url=llm_server.base_url + "/v1", api_key="x"))
    with tracing_context(enabled=True, client=tclient, project_name="w"):
        resp = await oa.chat.completions.create(model="gpt-4o-mini", messages=MSG)
        assert resp.usage.total_tokens == 11
    check_llm(only_llm_run(tclient), provider="openai", model="gpt-4o-mini", inp=6, out=5,
              streamed=False)
    with tracing_context(enabled=True, client=tclient, project_name="as"):
        stream = await oa.chat.completions.create(model="gpt-4o-mini", messages=MSG, stream=True,
                                                  stream_options={"include_usage": True})
        parts = [c.choices[0].delta.content async for c in stream if c.choices]
    assert "".join(p or "" for p in parts) == REPLY
    run = only_llm_run(tclient, "as")
    check_llm(run, provider="openai", model="gpt-4o-mini", inp=6, out=5, streamed=True)
    assert run.outputs["choices"][0]["message"]["content"] == REPLY


def test_openai_responses_api(tclient: Client, llm_server: FakeLLMServer) -> None:
    oa = wrap_openai(openai.OpenAI(base_url=llm_server.base_url + "/v1", api_key="x"))
    with tracing_context(enabled=True, client=tclient, project_name="r1"):
        resp = oa.responses.create(model="gpt-4o-mini", input="tell me a joke")
    assert resp.output_text == REPLY
    run = only_llm_run(tclient, "r1")
    check_llm(run, provider="openai", model="gpt-4o-mini", inp=4, out=5, streamed=False)
    with tracing_context(enabled=True, client=tclient, project_name="r2"):
        events = list(oa.responses.create(model="gpt-4o-mini", input="tell me a joke",
                                          stream=True))
    assert events[-1].type == "response.completed"
    run = only_llm_run(tclient, "r2")
    check_llm(run, provider="openai", model="gpt-4o-mini", inp=4, out=5, streamed=True)
    assert run.outputs["output"][0]["content"][0]["text"] == REPLY


def test_openai_error_is_recorded_and_reraised(tclient: Client, llm_server: FakeLLMServer) -> None:
    oa = wrap_openai(openai.OpenAI(base_url=llm_server.base_url + "/v1", api_key="x",
                                   max_retries=0))
    with tracing_context(enabled=True, client=tclient, project_name="w"):
        with pytest.raises(openai.BadRequestError) as info:
            oa.chat.completions.create(model="bad-model", messages=MSG)
    run = only_llm_run(tclient)
    assert run.status == "error" and run.error.startswith("BadRequestError:")
    assert "bad-model does not exist" in run.error
    assert info.value.status_code == 400


def test_wrapped_client_untraced_when_off(tclient: Client, llm_server: FakeLLMServer) -> None:
    oa = wrap_openai(openai.OpenAI(base_url=llm_server.base_url + "/v1", api_key="x"))
    stream = oa.chat.completions.create(model="gpt-4o-mini", messages=MSG, stream=True)
    assert type(stream) is openai.Stream  # off: the SDK's object, untouched
    list(stream)
    assert wrap_openai(oa) is oa  # wrapping twice is harmless
    with pytest.raises(InvalidInputError, match="wrap_openai needs"):
        wrap_openai(object())


# -- Anthropic -------------------------------------------------------------------------------------
ANTHROPIC_MODEL = "claude-haiku-4-5"
A_MSG = [{"role": "user", "content": "tell me a joke"}]


def anthropic_cost(inp_total: int, out: int, cached: int) -> float | None:
    try:
        return float(calc_price(Usage(input_tokens=inp_total, output_tokens=out,
                                      cache_read_tokens=cached),
                                model_ref=ANTHROPIC_MODEL, provider_id="anthropic").total_price)
    except Exception:
        return None


def check_anthropic(run: Run, *, streamed: bool, out: int = 5) -> None:
    # 5 words sent (system 2 + user 4 = 6 with system) + 2 cache reads reported separately
    check_llm(run, provider="anthropic", model=ANTHROPIC_MODEL, inp=run.prompt_tokens, out=out,
              streamed=streamed)
    usage = run.metadata["usage_metadata"]
    assert usage["input_token_details"] == {"cache_read": 2}
    expected = anthropic_cost(usage["input_tokens"], out, 2)
    assert expected is not None and run.total_cost == pytest.approx(expected)


def test_anthropic_sync_and_stream(tclient: Client, llm_server: FakeLLMServer) -> None:
    an = wrap_anthropic(anthropic.Anthropic(base_url=llm_server.base_url, api_key="x"))
    with tracing_context(enabled=True, client=tclient, project_name="a1"):
        msg = an.messages.create(model=ANTHROPIC_MODEL, max_tokens=100, messages=A_MSG,
                                 system="be brief")
    assert msg.content[0].text == REPLY
    run = only_llm_run(tclient, "a1")
    assert run.name == "ChatAnthropic" and run.inputs["system"] == "be brief"
    assert run.prompt_tokens == 6 + 2  # input 6 + cache read 2
    check_anthropic(run, streamed=False)
    assert run.outputs["content"][0]["text"] == REPLY

    with tracing_context(enabled=True, client=tclient, project_name="a2"):
        stream = an.messages.create(model=ANTHROPIC_MODEL, max_tokens=100, messages=A_MSG,
                                    stream=True)
        text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")
    assert text == REPLY
    run = only_llm_run(tclient, "a2")
    assert run.prompt_tokens == 4 + 2
    check_anthropic(run, streamed=True)
    assert run.outputs["content"] == [{"type": "text", "text": REPLY}]
    assert run.outputs["stop_reason"] == "end_turn"


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_cache_writes_priced_by_lifetime(tclient: Client, stream: bool) -> None:
    """Prompt caching on the scripted model (a real Messages API on loopback): the first call
    writes the system prompt to the cache for an hour, the second reads it; each llm run has
    the writes (and their hour-long part) itemised and the price genai-prices gives them."""
    from assay.demo import ScriptedModelServer

    system: Any = [{"type": "text", "text": "You tell short jokes about cities and nothing else",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    cached = 9
    with ScriptedModelServer() as srv:
        an = wrap_anthropic(anthropic.Anthropic(base_url=srv.url, api_key="x"))
        for i in range(2):
            with tracing_context(enabled=True, client=tclient, project_name=f"c{stream}{i}"):
                if stream:
                    with an.messages.stream(model=ANTHROPIC_MODEL, max_tokens=50,
                                            system=system, messages=A_MSG) as s:
                        s.get_final_message()
                else:
                    an.messages.create(model=ANTHROPIC_MODEL, max_tokens=50, system=system,
                                       messages=A_MSG)
    write, read = (only_llm_run(tclient, f"c{stream}{i}") for i in range(2))
    inp = cached + len(A_MSG[0]["content"].split())
    assert write.metadata["usage_metadata"]["input_token_details"] == {
        "cache_creation": cached, "ephemeral_1h_input_tokens": cached}
    assert read.metadata["usage_metadata"]["input_token_details"] == {"cache_read": cached}
    for run, counts in ((write, {"cache_write_tokens": cached, "cache_write_1h_tokens": cached}),
                        (read, {"cache_read_tokens": cached})):
        assert run.prompt_tokens == inp
        want = calc_price(Usage(input_tokens=inp, output_tokens=run.completion_tokens, **counts),
                          model_ref=ANTHROPIC_MODEL, provider_id="anthropic")
        assert (run.prompt_cost, run.completion_cost) == (float(want.input_price),
                                                          float(want.output_price))
    plain = calc_price(Usage(input_tokens=inp, output_tokens=1), model_ref=ANTHROPIC_MODEL,
                       provider_id="anthropic").input_price  # all of it as uncached input
    assert write.prompt_cost > float(plain) > read.prompt_cost


def test_anthropic_stream_helper_and_tool_use(tclient: Client, llm_server: FakeLLMServer) -> None:
    an = wrap_anthropic(anthropic.Anthropic(base_url=llm_server.base_url, api_key="x"))
    with tracing_context(enabled=True, client=tclient, project_name="a3"):
        with an.messages.stream(model=ANTHROPIC_MODEL, max_tokens=100, messages=A_MSG) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
    assert text == REPLY and final.content[0].text == REPLY
    check_anthropic(only_llm_run(tclient, "a3"), streamed=True)

    with tracing_context(enabled=True, client=tclient, project_name="a4"):
        list(an.messages.create(model=ANTHROPIC_MODEL, max_tokens=100, stream=True,
                                messages=[{"role": "user", "content": "use tool now"}]))
    run = only_llm_run(tclient, "a4")
    [block] = run.outputs["content"]
    assert block["type"] == "tool_use" and block["name"] == "get_weather"
    assert block["input"] == TOOL_ARGS
    check_anthropic(run, streamed=True, out=4)


async def test_anthropic_async_and_async_stream(tclient: Client,
                                                llm_server: FakeLLMServer) -> None:
    an = wrap_anthropic(anthropic.AsyncAnthropic(base_url=llm_server.base_url, api_key="x"))
    with tracing_context(enabled=True, client=tclient, project_name="a5"):
        msg = await an.messages.create(model=ANTHROPIC_MODEL, max_tokens=100, messages=A_MSG)
    assert msg.content[0].text == REPLY
    check_anthropic(only_llm_run(tclient, "a5"), streamed=False)
    with tracing_context(enabled=True, client=tclient, project_name="a6"):
        stream = await an.messages.create(model=ANTHROPIC_MODEL, max_tokens=100,
                                          messages=A_MSG, stream=True)
        events: list[Any] = [e async for e in stream]
        async with an.messages.stream(model=ANTHROPIC_MODEL, max_tokens=100,
                                      messages=A_MSG) as s:
            text = "".join([t async for t in s.text_stream])
    assert events[-1].type == "message_stop" and text == REPLY
    tclient.flush()
    runs = list(tclient.list_runs(project_name="a6", run_type="llm"))
    assert len(runs) == 2
    for run in runs:
        check_anthropic(run, streamed=True)


def test_anthropic_error(tclient: Client, llm_server: FakeLLMServer) -> None:
    an = wrap_anthropic(anthropic.Anthropic(base_url=llm_server.base_url, api_key="x",
                                            max_retries=0))
    with tracing_context(enabled=True, client=tclient, project_name="a7"):
        with pytest.raises(anthropic.BadRequestError):
            an.messages.create(model="bad-model", max_tokens=10, messages=A_MSG)
    run = only_llm_run(tclient, "a7")
    assert run.status == "error" and "bad-model does not exist" in run.error
    with pytest.raises(InvalidInputError, match="wrap_anthropic needs"):
        wrap_anthropic(object())
