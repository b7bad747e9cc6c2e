"""A scripted OpenAI- and Anthropic-compatible HTTP server on 127.0.0.1, for wrapper tests.

Real HTTP (uvicorn in a thread), real SSE streams, so the official ``openai`` and ``anthropic``
clients run unmodified against it. Answers are a pure function of the request:

* the reply text is ``"Hello, <last user text>!"``; token counts are word counts
  (input: all message words, output: reply words);
* a last user message starting with ``"use tool"`` gets a ``get_weather`` tool call back
  (arguments streamed in pieces when streaming);
* model ``"bad-model"`` gets a 400 error;
* streams wait ``FIRST_TOKEN_DELAY`` seconds before the first chunk, so first-token time is
  measurably later than the start; streamed chat completions carry usage in a final chunk only
  when ``stream_options.include_usage`` is set (as OpenAI does).

Every request body is appended to ``server.requests``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

FIRST_TOKEN_DELAY = 0.05
TOOL_ARGS = {"city": "Paris", "unit": "celsius"}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _last_user(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return _text_of(m.get("content"))
    return ""


def _words(text: str) -> int:
    return len(text.split())


def _script(messages: list[dict[str, Any]], system: str = "") -> tuple[str, bool, int]:
    last = _last_user(messages)
    reply = f"Hello, {last}!"
    n_in = _words(system) + sum(_words(_text_of(m.get("content"))) for m in messages)
    return reply, last.startswith("use tool"), n_in


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def make_app(requests: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    def error(provider: str) -> JSONResponse:
        if provider == "anthropic":
            body = {"type": "error", "error": {"type": "invalid_request_error",
                                               "message": "model bad-model does not exist"}}
        else:
            body = {"error": {"message": "model bad-model does not exist",
                              "type": "invalid_request_error", "code": "model_not_found"}}
        return JSONResponse(body, status_code=400)

    # -- OpenAI chat completions ------------------------------------------------------------
    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        requests.append({"path": "/v1/chat/completions", **body})
        if body.get("model") == "bad-model":
            return error("openai")
        reply, tool, n_in = _script(body.get("messages", []))
        n_out = 4 if tool else _words(reply)
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": body["model"]}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": None if tool else reply}
            if tool:
                message["tool_calls"] = [{"id": "call_1", "type": "function", "function": {
                    "name": "get_weather", "arguments": json.dumps(TOOL_ARGS)}}]
            return {**base, "object": "chat.completion", "usage": usage, "choices": [{
                "index": 0, "message": message,
                "finish_reason": "tool_calls" if tool else "stop"}]}

        async def stream() -> AsyncIterator[str]:
            await asyncio.sleep(FIRST_TOKEN_DELAY)
            chunk = {**base, "object": "chat.completion.chunk"}
            yield _sse({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant"},
                                              "finish_reason": None}]})
            if tool:
                args = json.dumps(TOOL_ARGS)
                pieces = [args[: len(args) // 2], args[len(args) // 2:]]
                yield _sse({**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [{
                    "index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": ""}}]},
                    "finish_reason": None}]})
                for p in pieces:
                    yield _sse({**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [{
                        "index": 0, "function": {"arguments": p}}]}, "finish_reason": None}]})
            else:
                for i, word in enumerate(reply.split(" ")):
                    yield _sse({**chunk, "choices": [{"index": 0, "delta": {
                        "content": word if i == 0 else " " + word}, "finish_reason": None}]})
                    await asyncio.sleep(0.005)
            yield _sse({**chunk, "choices": [{"index": 0, "delta": {},
                                              "finish_reason": "tool_calls" if tool else "stop"}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                yield _sse({**chunk, "choices": [], "usage": usage})
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    # -- OpenAI responses -------------------------------------------------------------------
    @app.post("/v1/responses")
    async def responses(request: Request) -> Any:
        body = await request.json()
        requests.append({"path": "/v1/responses", **body})
        if body.get("model") == "bad-model":
            return error("openai")
        inp = body.get("input")
        messages = [{"role": "user", "content": inp}] if isinstance(inp, str) else (inp or [])
        reply, _, n_in = _script(messages, body.get("instructions") or "")
        n_out = _words(reply)
        resp = {"id": "resp_fake", "object": "response", "created_at": int(time.time()),
                "model": body["model"], "status": "completed", "output": [{
                    "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": reply, "annotations": []}]}],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": n_in, "output_tokens": n_out,
                          "total_tokens": n_in + n_out,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
        if not body.get("stream"):
            return resp

        async def stream() -> AsyncIterator[str]:
            await asyncio.sleep(FIRST_TOKEN_DELAY)
            seq = 0
            yield _sse({"type": "response.created", "sequence_number": seq,
                        "response": {**resp, "status": "in_progress", "output": [],
                                     "usage": None}}, "response.created")
            for i, word in enumerate(reply.split(" ")):
                seq += 1
                yield _sse({"type": "response.output_text.delta", "sequence_number": seq,
                            "item_id": "msg_1", "output_index": 0, "content_index": 0,
                            "delta": word if i == 0 else " " + word, "logprobs": []},
                           "response.output_text.delta")
            yield _sse({"type": "response.completed", "sequence_number": seq + 1,
                        "response": resp}, "response.completed")

        return StreamingResponse(stream(), media_type="text/event-stream")

    # -- Anthropic messages -----------------------------------------------------------------
    @app.post("/v1/messages")
    async def messages(request: Request) -> Any:
        body = await request.json()
        requests.append({"path": "/v1/messages", **body})
        if body.get("model") == "bad-model":
            return error("anthropic")
        system = body.get("system") or ""
        reply, tool, n_in = _script(body.get("messages", []), _text_of(system))
        n_out = 4 if tool else _words(reply)
        # pretend part of the prompt came from the cache, as Anthropic reports it separately
        usage = {"input_tokens": n_in, "output_tokens": n_out, "cache_read_input_tokens": 2,
                 "cache_creation_input_tokens": 0}
        content: list[dict[str, Any]] = (
            [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": TOOL_ARGS}]
            if tool else [{"type": "text", "text": reply}])
        msg = {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
               "content": content, "stop_reason": "tool_use" if tool else "end_turn",
               "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return msg

        async def stream() -> AsyncIterator[str]:
            await asyncio.sleep(FIRST_TOKEN_DELAY)
            yield _sse({"type": "message_start", "message": {
                **msg, "content": [], "stop_reason": None,
                "usage": {**usage, "output_tokens": 1}}}, "message_start")
            if tool:
                yield _sse({"type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
                    "content_block_start")
                args = json.dumps(TOOL_ARGS)
                for p in (args[:7], args[7:]):
                    yield _sse({"type": "content_block_delta", "index": 0, "delta": {
                        "type": "input_json_delta", "partial_json": p}}, "content_block_delta")
            else:
                yield _sse({"type": "content_block_start", "index": 0,
                            "content_block": {"type": "text", "text": ""}}, "content_block_start")
                for i, word in enumerate(reply.split(" ")):
                    yield _sse({"type": "content_block_delta", "index": 0, "delta": {
                        "type": "text_delta", "text": word if i == 0 else " " + word}},
                        "content_block_delta")
                    await asyncio.sleep(0.005)
            yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
            yield _sse({"type": "message_delta", "delta": {
                "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": n_out}}, "message_delta")
            yield _sse({"type": "message_stop"}, "message_stop")

        return StreamingResponse(stream(), media_type="text/event-stream")

    return app


class FakeLLMServer:
    """Start with ``start()``; ``base_url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(make_app(self.requests), host="127.0.0.1", port=self.port,
                                log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeLLMServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
