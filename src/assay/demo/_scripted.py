"""A scripted OpenAI-compatible chat model on 127.0.0.1: real agent frameworks, no API key.

``assay demo --framework ...`` and the framework tests run the real packages (LangGraph,
the OpenAI Agents SDK, pydantic-ai, Upsonic, ...) against this server through their own
``openai`` clients, so what assay traces is what those frameworks really send and receive.
It is the standard library's threading HTTP server (no extra needed for the demo) speaking
``POST /v1/chat/completions`` (JSON and SSE streams), ``POST /v1/responses`` (the Responses
API, JSON and SSE: see ``_responses.py``), ``POST /v1/messages`` (Anthropic's Messages API, for
agents on Claude: see ``_messages.py``; an Anthropic client takes ``url`` as its ``base_url``),
``POST /v1beta/models/<model>:generateContent`` and ``:streamGenerateContent`` (Gemini's, for
agents on Google's models: see ``_gemini.py``; a ``google-genai`` client takes ``url`` as its
``base_url``) and ``GET /v1/models``.

It plays a tool-using model, deterministically:

* tools offered and no tool result yet for the last user turn: it calls a tool (the first tool
  whose name appears in the user's text, else the first tool offered), with arguments made from
  the tool's JSON schema (a string from the user's text outside any ``{...}`` block: its last
  quoted phrase, else its last capitalised word inside a sentence, not in capitals; numbers
  from the text; booleans true). Tools named in the text are called in the order they appear
  there, one per turn, each once (all in one turn, in that order, with
  ``parallel_tool_calls=True``, as OpenAI's models call tools);
* after a handoff (the OpenAI Agents SDK's ``transfer_to_<agent>`` call), the agent handed to
  starts afresh: the handoff's result counts as no tool result, so it calls its own tool;
* then a final answer that quotes the tool results (``"Answer: <result>; <result>"``); with no
  tools, an entry of ``answers`` whose key the question contains, else ``"You asked: <text>"``;
* a request for a judge's verdict (``response_format`` json_object, a json_schema with a
  ``score``, or a prompt about ``evaluation_data``) gets one: score 9 when the expected
  output's words all appear in the generated output, else 3;
* any other json_schema (an agent's own output type: the Agents SDK's ``output_type``, a
  provider-native structured output) gets, once the tools are done, an instance of the schema
  made as tool arguments are (strings: the user's last quoted phrase or capitalised word;
  numbers: the tool results' first number, else the user's); an output tool on offer
  (pydantic-ai's and Upsonic's ``final_result``) is called with such an instance instead of a
  text answer;
* a tool the request names in ``tool_choice`` (a structured answer through a forced tool, as
  LangChain's and pydantic-ai's Anthropic models ask for one) is called with such an instance;
* Azure OpenAI's deployment paths (``AzureOpenAI(azure_endpoint=url)``): answered as the
  chat API is, naming the served ``model`` whatever the deployment is called, as Azure does;
* usage: prompt tokens = words in the messages, completion tokens = words in the reply; streams
  send a usage chunk when ``stream_options.include_usage`` is set (as OpenAI does) and wait
  ``first_token_delay`` before the first content chunk, so first-token time is measurable;
* prompt caching: Anthropic's by its ``cache_control`` breakpoints (always: see
  ``_messages.py``), OpenAI's automatic one and Gemini's implicit one with
  ``prompt_caching=True``: the words of the longest run of leading messages an earlier request
  began with are reported as cached tokens.

Faults on demand: ``fail_next(status, times=, retry_after=)``; ``script(reply)`` queues a reply of
your own (malformed tool arguments, an unknown tool, empty ``choices``, a slow reply). Every
request body is kept in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import _gemini, _messages
from ._responses import chat_request, response_body, stream_events
from ._responses import content_text as _text

__all__ = ["ScriptedModelServer", "ScriptedReply"]


@dataclass
class ScriptedReply:
    """One reply of your own, served before the scripted behaviour.

    ``content`` and/or ``tool_calls`` (``[{"name": ..., "arguments": str | dict}]``) make an
    ordinary completion; ``status``/``body`` an arbitrary answer (``body`` JSON or text);
    ``delay`` seconds are waited first (a reply past the client's timeout); ``headers`` are sent.
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def _words(text: str) -> int:
    return len(text.split())


def _last_user_turn(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The last user message's text and the messages after it."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return _text(messages[i].get("content")), messages[i + 1:]
    return "", messages


def _tool_name(tool: Mapping[str, Any]) -> str:
    inner = tool.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
    return str(fn.get("name", ""))


def _handoff(name: str, offered: set[str]) -> bool:
    """Whether a call of ``name`` was a handoff to the agent now asking (the OpenAI Agents
    SDK's ``transfer_to_<agent>`` tool, which the agent handed to is not offered)."""
    return name.startswith("transfer_to_") and name not in offered


_NUMBER = r"-?\d+(?:\.\d+)?"
_BRACES = re.compile(r"\{[^{}]*\}")
_NAME_INSIDE = re.compile(r"(?<![.!?:\n])(?<![.!?:\n] )\b(?<!^)([A-Z][\w-]*)\b")


def _output_tool(name: str) -> bool:
    """Whether ``name`` is an agent's output tool (pydantic-ai's and Upsonic's ``final_result``,
    ``final_result_<Type>`` for a union), called to end the run with a structured answer."""
    return name.startswith("final_result")


def _prose(text: str) -> str:
    """``text`` without its ``{...}`` blocks: a JSON schema a framework puts in the prompt
    (CrewAI's ``output_pydantic``) is no place to take a tool's arguments from."""
    while True:
        stripped = _BRACES.sub(" ", text)
        if stripped == text:
            return text
        text = stripped


def _value_for(schema: Mapping[str, Any], name: str, text: str, facts: str = "") -> Any:
    """A value of ``schema`` from the user's ``text`` (its prose); numbers from ``facts``
    (tool results) first."""
    text = _prose(text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind in ("number", "integer"):
        found = re.findall(_NUMBER, facts) or re.findall(_NUMBER, text)
        value = float(found[0]) if found else 2.0
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    quoted = re.findall(r"['\"]([^'\"]+)['\"]", text)
    if quoted:
        return quoted[-1]
    capitalised = [w for w in re.findall(r"\b([A-Z][\w-]*)\b", text)
                   if w.lower() not in ("what", "use", "the", "is", "how")]
    # a name inside a sentence, not a sentence's first word ("This is the expected ...") nor an
    # instruction's MUST, which frameworks' prompts put after the question
    names = [m.group(1) for m in _NAME_INSIDE.finditer(text)
             if not (len(m.group(1)) > 1 and m.group(1).isupper())]
    found = names or capitalised
    return found[-1] if found else text.strip() or name


def _requested_schema(fmt: Any) -> Mapping[str, Any] | None:
    """The JSON schema a structured-output request asks for: under ``json_schema.schema`` in a
    chat completion's ``response_format``, under ``schema`` in the Responses API's
    ``text.format``; None for any other request."""
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    inner = fmt.get("json_schema")
    schema = (inner if isinstance(inner, Mapping) else fmt).get("schema")
    return schema if isinstance(schema, Mapping) else None


def _instance(schema: Mapping[str, Any], text: str, facts: str, root: Mapping[str, Any],
              depth: int = 0) -> Any:
    """A value of ``schema`` made from ``text`` as a tool's arguments are (``$ref`` to the
    root's ``$defs`` followed, ``anyOf`` its first choice that is not null)."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and depth < 16:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            return _instance(target, text, facts, root, depth + 1)
    choices = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(choices, list) and depth < 16:
        for choice in choices:
            if isinstance(choice, Mapping) and choice.get("type") != "null":
                return _instance(choice, text, facts, root, depth + 1)
    props = schema.get("properties")
    if schema.get("type") == "object" and isinstance(props, Mapping) and depth < 16:
        return {name: _instance(sub, text, facts, root, depth + 1) if isinstance(sub, Mapping)
                else None for name, sub in props.items()}
    return _value_for(schema, "", text, facts)


def tool_arguments(tool: Mapping[str, Any], text: str) -> dict[str, Any]:
    """Arguments for ``tool`` made from its JSON schema and the user's text."""
    inner = tool.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    required = params.get("required") or list(props)
    return {name: _value_for(props.get(name) or {}, name, text) for name in required}


class _Brain:
    """What the model answers: a pure function of the request (plus the queued faults)."""

    def __init__(self, answers: Mapping[str, str], parallel_tool_calls: bool = False) -> None:
        self.answers = dict(answers)
        self.parallel = parallel_tool_calls

    def reply(self, body: Mapping[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
        messages = list(body.get("messages") or [])
        text, after = _last_user_turn(messages)
        if self._wants_verdict(body, messages):
            return self._verdict(messages), []
        tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
        names = {str(c.get("id")): str((c.get("function") or {}).get("name")) for m in after
                 if m.get("role") == "assistant" for c in (m.get("tool_calls") or [])}
        called = set(names.values())
        offered = {_tool_name(t) for t in tools}
        # a handoff's result ({"assistant": "geo"}) is no tool result of the agent handed to
        results = [_text(m.get("content")) for m in after if m.get("role") == "tool"
                   and not _handoff(names.get(str(m.get("tool_call_id")), ""), offered)]
        chosen = body.get("tool_choice")
        forced = ((chosen.get("function") or {}).get("name")
                  if isinstance(chosen, Mapping) else None)
        finals = [t for t in tools if _tool_name(t) == forced] or [
            t for t in tools if _output_tool(_tool_name(t))]
        if forced and finals:  # a tool the request forces (a structured answer through a tool)
            tools = []
        tools = [t for t in tools if not _output_tool(_tool_name(t))]
        if tools:
            named = sorted((text.find(_tool_name(t)), i, t) for i, t in enumerate(tools)
                           if _tool_name(t) and _tool_name(t) in text)
            order = [t for _, _, t in named] or ([tools[0]] if not results else [])
            todo = [t for t in order if _tool_name(t) not in called]
            if todo:  # one a turn, or all at once (parallel tool calls, unless the request
                # turns them off, as OpenAI's parallel_tool_calls=false does)
                both = self.parallel and body.get("parallel_tool_calls") is not False
                return None, [{"name": _tool_name(t), "arguments": tool_arguments(t, text)}
                              for t in (todo if both else todo[:1])]
        if finals:  # the tools are done: the structured answer, through the output tool
            params = (finals[0].get("function") or finals[0]).get("parameters") or {}
            return None, [{"name": _tool_name(finals[0]),
                           "arguments": _instance(params, text, " ".join(results), params)}]
        schema = _requested_schema(body.get("response_format"))
        if schema is not None:  # the agent's own output type: an instance of its schema
            return json.dumps(_instance(schema, text, " ".join(results), schema)), []
        if results:
            return "Answer: " + "; ".join(results), []
        for key, answer in self.answers.items():
            if key.lower() in text.lower():
                return answer, []
        return f"You asked: {text}", []

    @staticmethod
    def _wants_verdict(body: Mapping[str, Any], messages: list[dict[str, Any]]) -> bool:
        fmt = body.get("response_format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
            return True
        schema = _requested_schema(fmt)
        if schema is not None and "score" in (schema.get("properties") or {}):
            return True  # a judge's verdict schema (score, reasoning, ...)
        return any("evaluation_data" in _text(m.get("content")) for m in messages)

    @staticmethod
    def _verdict(messages: list[dict[str, Any]]) -> str:
        blob = " ".join(_text(m.get("content")) for m in messages)
        data: dict[str, Any] = {}
        match = re.search(r"\{.*\}", blob, re.S)
        if match:
            try:
                data = json.loads(match.group(0))
            except ValueError:
                data = {}
        expected = str(data.get("expected_output", "")).lower()
        generated = str(data.get("generated_output", "")).lower()
        words = re.findall(r"\w+", expected)
        good = bool(words) and all(w in generated for w in words)
        score = 9 if good else 3
        return json.dumps({
            "reasoning": "The generated output " + ("contains" if good else "lacks")
                         + " the facts of the expected output.",
            "critique": "No improvements needed." if good else "Give the expected facts.",
            "score": score, "is_met": good})


class ScriptedModelServer:
    """The scripted model, served on 127.0.0.1 from a background thread.

    ``with ScriptedModelServer() as srv: OpenAI(base_url=srv.base_url, api_key="scripted")``.
    """

    def __init__(self, *, answers: Mapping[str, str] | None = None, model: str = "gpt-4o-mini",
                 first_token_delay: float = 0.01, host: str = "127.0.0.1", port: int = 0,
                 parallel_tool_calls: bool = False, prompt_caching: bool = False) -> None:
        self.model = model
        self.prompt_caching = prompt_caching
        self.first_token_delay = first_token_delay
        self.requests: list[dict[str, Any]] = []
        self._brain = _Brain(answers or {}, parallel_tool_calls)
        self._queue: deque[ScriptedReply] = deque()
        self._cached: set[str] = set()  # the prompt prefixes cached (prompt caching)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``."""
        return self.url + "/v1"

    def start(self) -> ScriptedModelServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever,
                                            name="assay-scripted-model", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- scripting ----------------------------------------------------------------------------
    def script(self, *replies: ScriptedReply) -> None:
        """Serve these replies (in order) before going back to the scripted behaviour."""
        with self._lock:
            self._queue.extend(replies)

    def fail_next(self, status: int = 500, *, times: int = 1, retry_after: float | None = None,
                  message: str = "scripted failure") -> None:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        body = {"error": {"message": message, "type": "server_error", "code": str(status)}}
        self.script(*(ScriptedReply(status=status, body=body, headers=dict(headers))
                      for _ in range(times)))

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self._cached.clear()

    def _next_scripted(self) -> ScriptedReply | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    # -- answers ------------------------------------------------------------------------------
    def completion(self, body: Mapping[str, Any], scripted: ScriptedReply | None,
                   cache: bool = True) -> tuple[str | None, list[dict[str, Any]], dict[str, Any]]:
        if scripted is not None and (scripted.content is not None or scripted.tool_calls):
            content, calls = scripted.content, list(scripted.tool_calls or [])
        else:
            content, calls = self._brain.reply(body)
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        prompt = sum(_words(_text(m.get("content"))) for m in messages)
        out = _words(content or "") + sum(_words(json.dumps(c.get("arguments"))) for c in calls)
        usage: dict[str, Any] = {"prompt_tokens": max(prompt, 1), "completion_tokens": max(out, 1)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if self.prompt_caching and cache:
            usage["prompt_tokens_details"] = {"cached_tokens": self._cached_tokens(messages)}
        return content, calls, usage

    def _cached_tokens(self, messages: list[Mapping[str, Any]]) -> int:
        """OpenAI's automatic prompt caching, played: the words of the longest run of leading
        messages an earlier request began with (OpenAI's 1,024-token minimum left out)."""
        keys: list[str] = []
        words: list[int] = []
        digest = hashlib.sha256()
        for m in messages:
            digest.update(json.dumps(m, sort_keys=True, default=str).encode() + b"\0")
            keys.append(digest.hexdigest())
            words.append(_words(_text(m.get("content"))))
        with self._lock:
            hit = next((i + 1 for i in range(len(keys) - 1, -1, -1) if keys[i] in self._cached), 0)
            self._cached.update(keys)
        return sum(words[:hit])


def _wire_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, call in enumerate(calls):
        args = call.get("arguments")
        out.append({"index": i, "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": call["name"],
                                 "arguments": args if isinstance(args, str) else json.dumps(args)}})
    return out


def _handler(srv: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # reply at once: with Nagle on, a small reply waits ~40 ms for the client's delayed ACK
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None
                  ) -> None:
            data = payload if isinstance(payload, bytes) else (
                payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [
                    {"id": srv.model, "object": "model", "created": 0, "owned_by": "assay"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            try:
                self._post()
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                self.close_connection = True

        def _post(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, {"error": {"message": "request body is not JSON"}})
                return
            with srv._lock:
                srv.requests.append(body)
            path = self.path.split("?", 1)[0].rstrip("/")  # (?beta=true: Anthropic beta calls)
            responses = path.endswith("/responses")  # the Responses API (see _responses.py)
            anthropic = path.endswith("/v1/messages")  # Anthropic's API (see _messages.py)
            gemini = _gemini.is_gemini(path)  # Google's (see _gemini.py)
            if not (responses or anthropic or gemini or path.endswith("/chat/completions")):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            scripted = srv._next_scripted()
            if scripted is not None and scripted.delay:
                time.sleep(scripted.delay)
            if scripted is not None and (scripted.status != 200 or scripted.body is not None):
                self._send(scripted.status, scripted.body if scripted.body is not None else {},
                           scripted.headers)
                return
            # Azure OpenAI's deployments (``/openai/deployments/<name>/...``, a name of the
            # user's own) answer with the model they serve, as Azure does
            model = (srv.model if path.startswith("/openai/deployments/")
                     else str(body.get("model") or srv.model))
            if responses:
                self._responses(body, scripted, model)
                return
            if anthropic:
                self._messages(body, scripted, model)
                return
            if gemini:
                self._gemini(body, scripted, _gemini.model_of(path),
                             ":streamGenerateContent" in path)
                return
            content, calls, usage = srv.completion(body, scripted)
            cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
            if body.get("stream"):
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                self._stream(cid, model, content, calls, usage if include else None)
                return
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                         for c in _wire_calls(calls)]
            self._send(200, {
                "id": cid, "object": "chat.completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}]})

        def _responses(self, body: dict[str, Any], scripted: ScriptedReply | None,
                       model: str) -> None:
            content, calls, usage = srv.completion(chat_request(body), scripted)
            if not body.get("stream"):
                self._send(200, response_body(body, model, content, calls, usage))
                return
            self._events(stream_events(body, model, content, calls, usage, self._wait_first))

        def _messages(self, body: dict[str, Any], scripted: ScriptedReply | None,
                      model: str) -> None:
            content, calls, counts = srv.completion(_messages.chat_request(body), scripted,
                                                    cache=False)  # (cache_control decides)
            with srv._lock:
                usage = _messages.usage_of(body, counts, srv._cached)
            if not body.get("stream"):
                self._send(200, _messages.message_body(model, content, calls, usage))
                return
            self._events(_messages.stream_events(model, content, calls, usage,
                                                 self._wait_first))

        def _gemini(self, body: dict[str, Any], scripted: ScriptedReply | None, model: str,
                    stream: bool) -> None:
            content, calls, counts = srv.completion(_gemini.chat_request(body), scripted)
            usage = _gemini.usage_of(body, counts)
            if not stream:
                self._send(200, _gemini.reply(model, content, calls, usage))
                return
            self._events((None, chunk) for chunk in _gemini.stream_chunks(
                model, content, calls, usage, self._wait_first))

        @staticmethod
        def _wait_first() -> None:
            time.sleep(srv.first_token_delay)

        def _events(self, events: Iterable[tuple[str | None, Any]]) -> None:
            """An SSE stream: named events (the Responses and the Messages APIs) or bare data
            (Gemini's chunks)."""
            self._open_stream()
            for kind, data in events:
                self._sse(kind, data)

        def _sse(self, kind: str | None, data: Any) -> None:
            """One server-sent event (``event:`` line when named), flushed at once."""
            head = f"event: {kind}\n".encode() if kind else b""
            body = data if isinstance(data, bytes) else json.dumps(data).encode()
            self.wfile.write(head + b"data: " + body + b"\n\n")
            self.wfile.flush()

        def _open_stream(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True

        def _stream(self, cid: str, model: str, content: str | None,
                    calls: list[dict[str, Any]], usage: dict[str, int] | None) -> None:
            self._open_stream()

            def chunk(delta: dict[str, Any] | None, finish: str | None = None,
                      extra: dict[str, Any] | None = None) -> None:
                event = {"id": cid, "object": "chat.completion.chunk",
                         "created": int(time.time()), "model": model,
                         "choices": [] if delta is None else [
                             {"index": 0, "delta": delta, "finish_reason": finish}]}
                if extra:
                    event.update(extra)
                self._sse(None, event)

            chunk({"role": "assistant", "content": ""})
            self._wait_first()
            if content:
                words = content.split(" ")
                for i, word in enumerate(words):
                    chunk({"content": word if i == 0 else " " + word})
            for call in _wire_calls(calls):
                args = call["function"]["arguments"]
                half = len(args) // 2
                chunk({"tool_calls": [{"index": call["index"], "id": call["id"],
                                       "type": "function",
                                       "function": {"name": call["function"]["name"],
                                                    "arguments": args[:half]}}]})
                chunk({"tool_calls": [{"index": call["index"],
                                       "function": {"arguments": args[half:]}}]})
            chunk({}, "tool_calls" if calls else "stop")
            if usage is not None:
                chunk(None, extra={"usage": usage})
            self._sse(None, b"[DONE]")

    return Handler
