"""A scripted OpenAI- and Anthropic-compatible HTTP server on 127.0.0.1 for judge tests.

The real ``openai``/``anthropic`` SDKs talk to it over real HTTP (``base_url``); each request
pops the next scripted reply (a status, a JSON body, headers, an optional delay), so tests can
play valid verdicts, malformed JSON, out-of-range scores, 429 with Retry-After, 500s and slow
replies, and then assert what the server saw.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = [
    "FakeLLMServer",
    "Reply",
    "SeenRequest",
    "anthropic_message",
    "chat",
    "error",
    "verdict",
]


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class SeenRequest:
    path: str
    headers: dict[str, str]
    json: Any
    time: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.json.get("messages", [])

    def text(self) -> str:
        """All message text of the request (system included), for prompt assertions."""
        parts = [self.json.get("system") or ""] if isinstance(self.json.get("system"), str) else []
        for m in self.messages:
            content = m.get("content")
            parts.append(content if isinstance(content, str) else json.dumps(content))
        return "\n".join(parts)


def verdict(score: Any = 8, is_met: bool = True, reasoning: str = "Matches the reference.",
            critique: str = "No improvements needed.") -> str:
    return json.dumps({"score": score, "reasoning": reasoning, "is_met": is_met,
                       "critique": critique})


def chat(content: str, *, prompt_tokens: int = 120, completion_tokens: int = 40,
         model: str = "judge-model", delay: float = 0.0) -> Reply:
    """An OpenAI chat completion carrying ``content``."""
    return Reply(200, {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }, delay=delay)


def anthropic_message(text: str, *, input_tokens: int = 100, output_tokens: int = 30,
                      model: str = "claude-test") -> Reply:
    return Reply(200, {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })


def error(status: int, message: str = "scripted failure", *, headers: dict[str, str] | None = None,
          kind: str = "server_error") -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind}}, headers or {})


Script = Reply | Callable[[SeenRequest], Reply]


class FakeLLMServer:
    """``with FakeLLMServer() as srv: srv.push(chat(verdict())); ...; srv.requests``."""

    def __init__(self) -> None:
        self.script: deque[Script] = deque()
        self.requests: list[SeenRequest] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = None
                seen = SeenRequest(self.path, {k.lower(): v for k, v in self.headers.items()},
                                   body, time.monotonic())
                with outer._lock:
                    outer.requests.append(seen)
                    item = outer.script.popleft() if outer.script else None
                reply = item(seen) if callable(item) else item
                if reply is None:
                    reply = error(500, "the test script has no reply left")
                if reply.delay:
                    time.sleep(reply.delay)
                data = json.dumps(reply.body).encode() if reply.body is not None else b""
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return f"{self.root_url}/v1"

    def push(self, *replies: Script) -> Self:
        with self._lock:
            self.script.extend(replies)
        return self

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
