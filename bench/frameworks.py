"""What assay's capture of a real framework costs per llm/tool step (issue 21).

    .venv/bin/python bench/frameworks.py [--calls 40] [--rounds 5]
        [--only langgraph,langchain,openai-agents,pydantic-ai,google-adk] [--same-tokens]

Each framework's real agent (a LangGraph ReAct agent on ``ChatOpenAI``, LangGraph's prebuilt
``create_react_agent`` or, as ``langchain``, LangChain 1.x's ``create_agent``; an OpenAI Agents SDK
``Agent`` on ``OpenAIChatCompletionsModel``; a pydantic-ai ``Agent`` on its
``OpenAIChatModel``; a Google ADK ``Agent`` on ``Gemini``, through the scripted model's Gemini
API) answers one tool-using question against the bundled scripted model on 127.0.0.1: two llm
calls and one tool call per answer, three steps. Measured, in turn (the order turning round by
round) for ``--rounds`` rounds of ``--calls`` answers each (medians reported):

- ``off``: the framework with tracing off (LangGraph: no assay run current, so assay's configure
  hook adds no handler; Agents SDK: ``set_tracing_disabled(True)``);
- ``sdk``: the framework's own tracing machinery on, recording nothing: LangGraph with a no-op
  callback handler (LangChain then makes a run manager and dispatches every step's events, as
  for any tracer), the Agents SDK with its tracing on (assay's processor registered, no assay
  run current): what the framework itself spends once anything listens; pydantic-ai: the agent
  with assay's instrumentation installed, no assay run current (assay's default then gives the
  run no instrumentation: what an agent costs outside assay, ~off);
- ``langsmith`` (LangGraph only): the agent traced by LangSmith's own tracer instead
  (``LangChainTracer``, its ``langsmith`` client posting zstd-compressed batches to a loopback
  endpoint in another process that keeps nothing, ``_LangSmithSink``), every run posted before
  the batch's clock stops: what a LangGraph user runs without assay;
- ``spans`` (pydantic-ai only): the agent called directly inside an assay run, as a plain
  function calls it: through pydantic-ai's OpenTelemetry instrumentation;
- ``assay``: inside an assay run (``trace(...)``, a fresh SQLite store, the background writer
  storing every run): every step becomes a run through the framework's own hooks (pydantic-ai:
  run by assay's adapter, as ``evaluate(agent)`` runs it, through assay's run capability).

Per step = (assay - off) / steps (and (assay - sdk) / steps: assay's part of it), against the
framework's own time per step (off / steps),
with the scripted model's loopback round trips included in the latter. Goal: <= 5%.
The scripted model counts a prompt's words as its tokens: each answer of a round puts its own
number of filler words before the question (the same ones in every mode), so each llm call has
its own token counts and its price is worked out, not found in a cache, as with real prompts
(``--same-tokens``: one question throughout, as before; the replays vary their counts alike).
Both clocks are reported: wall time, and this process's CPU time (all its threads, the writer's
too; the model server runs in a process of its own so its CPU is not counted). An ``assay``
batch ends with the writer's flush and the fold of what it journaled (``settle``, on the
bench's thread, as a read would), so the store's work is counted in the batch that caused it.
CPU per thread is printed too (MainThread: the agent, assay's hooks and that fold;
assay-run-writer; assay-fold). On a busy machine the end-to-end differences are noisy
(scheduling, not assay): the load average is printed.
A second figure replays one answer's hook calls without the framework (LangChain: the callback
events of one real answer, recorded, replayed on fresh deep copies; Agents SDK: spans made with
the SDK's own span functions): the capture's own cost per step, on the agent's thread and in
CPU including the writer and the store's fold, set against the framework's own CPU per step.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
import warnings
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "src"))
os.environ.pop("OPENAI_API_KEY", None)  # nothing may be exported anywhere

from measures._common import paired as paired_share  # noqa: E402
from measures._common import turns  # noqa: E402

from assay.client import Client  # noqa: E402 - after the sys.path set-up
from assay.integrations import instrument  # noqa: E402
from assay.tracing import trace  # noqa: E402

QUESTION = "How many people live in Paris? Use lookup_city."
SAME_TOKENS = False  # --same-tokens: every answer the same question, so the same token counts


def question(k: int) -> str:
    """The question of answer ``k`` of a round: ``k`` filler words before it (so each llm call
    has its own prompt token count, as real traffic does, and pricing it is not a cache hit);
    each mode of a round asks the same ones. With --same-tokens, always QUESTION."""
    return QUESTION if SAME_TOKENS else "kindly " * k + QUESTION


STEPS = 3  # llm (tool call), tool, llm (answer)
GOAL = 0.05


def lookup_city(city: str) -> str:
    """The population of a city."""
    return f"{city} has 2102650 people"


# -- the agents -----------------------------------------------------------------------------------
def langgraph_agent(base_url: str, *, langchain: bool = False) -> Any:
    """LangGraph's prebuilt ReAct agent (``create_react_agent``, 16 runs an answer), or with
    ``langchain`` its successor in LangChain 1.x, ``langchain.agents.create_agent`` (what
    LangGraph's deprecation warning sends users to; a LangGraph graph too, 8 runs an answer)."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        model = ChatOpenAI(model="gpt-4o-mini", base_url=base_url,  # type: ignore[call-arg]  # pydantic aliases mypy does not see
                           api_key="scripted", max_retries=0)
        if langchain:
            from langchain.agents import create_agent

            agent = create_agent(model, [tool(lookup_city)])
        else:
            agent = create_react_agent(model, [tool(lookup_city)])
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import RunnableConfig

    class Noop(BaseCallbackHandler):
        run_inline = True  # as assay's: called in place, no executor hop

        def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            """Taken, as assay's and LangSmith's handlers take it: left to the base class, it
            raises NotImplementedError and LangChain redoes the event as ``on_llm_start`` with
            the messages made text, a cost no real tracer pays."""

    noop: RunnableConfig = {"callbacks": [Noop()]}

    async def run(mode: str = "off", k: int = 0) -> Any:
        config = noop if mode == "sdk" else LANGSMITH[0] if mode == "langsmith" else None
        return await agent.ainvoke({"messages": [("user", question(k))]}, config)

    run.graph = agent  # type: ignore[attr-defined]  # (the replay records its events)
    return run


# ``langsmith`` mode (LangGraph): (the config with LangSmith's tracer, its client), set by main
LANGSMITH: list[Any] = [None, None]


def langsmith_tracer(sink: str, flush_interval: float | None = None) -> tuple[Any, Any]:
    """LangSmith's own tracer of a LangChain run (``LangChainTracer``) and its ``langsmith``
    client, posting to ``sink`` (``_LangSmithSink``): what a LangGraph user runs without assay.
    ``flush_interval``: its compression thread's (0.5 s), for a run slowed down by valgrind."""
    from langchain_core.tracers.langchain import LangChainTracer
    from langsmith import Client as LangSmithClient

    if flush_interval is not None:
        from langsmith._internal import _background_thread

        _background_thread.tracing_control_thread_func_compress_parallel.__defaults__ = (
            flush_interval,)
    ls_client = LangSmithClient(api_url=sink, api_key="bench")
    return LangChainTracer(client=ls_client, project_name="bench"), ls_client


def agents_sdk_agent(base_url: str) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    model = OpenAIChatCompletionsModel(
        model="gpt-4o-mini",
        openai_client=AsyncOpenAI(base_url=base_url, api_key="scripted", max_retries=0))
    agent = Agent(name="geo", instructions="Answer with the tool's figure.",
                  tools=[function_tool(lookup_city)], model=model)

    async def run(mode: str = "off", k: int = 0) -> Any:
        return await Runner.run(agent, question(k))

    return run


def pydantic_ai_agent(base_url: str) -> Any:
    """pydantic-ai: ``off`` is an agent with ``instrument = False``; ``sdk`` the agent with
    assay's instrumentation, no assay run current (assay's default gives such a run no
    instrumentation: what the agent costs outside assay); ``spans`` that agent called
    directly inside an assay run (a plain function's call: pydantic-ai's instrumentation into
    assay's span processor); ``assay`` the agent run by assay's adapter, as
    ``evaluate(agent)`` runs it (assay's run-level capability, no OpenTelemetry)."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from assay.integrations import require_adapter

    def agent(instrument: bool | None) -> Any:
        model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(
            openai_client=AsyncOpenAI(base_url=base_url, api_key="scripted", max_retries=0)))
        made = Agent(model, name="geo", instructions="Answer with the tool's figure.")
        made.instrument = instrument  # False: off whatever the default; None: the default
        made.tool_plain(lookup_city)
        return made

    plain, traced = agent(False), agent(None)
    adapter = require_adapter(traced)

    async def run(mode: str = "off", k: int = 0) -> Any:
        if mode == "assay":
            return await adapter.arun(question(k))
        return await (plain if mode == "off" else traced).run(question(k))

    return run


def google_adk_agent(base_url: str) -> Any:
    """Google ADK: ``off`` an ``InMemoryRunner`` whose App has no plugin; ``sdk`` the same agent
    run by assay's adapter (its App with assay's plugin) with no assay run current (each
    callback a look-up that finds nothing); ``assay`` that adapter inside an assay run, as
    ``evaluate(agent)`` runs it. A new session per answer in every mode, as the adapter makes."""
    from google.adk.agents import Agent
    from google.adk.apps import App
    from google.adk.models import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from assay.integrations import require_adapter

    def agent() -> Any:
        model = Gemini(model="gemini-2.5-flash", base_url=base_url.removesuffix("/v1"),
                       client_kwargs={"api_key": "scripted"})
        return Agent(name="geo", model=model, instruction="Answer with the tool's figure.",
                     tools=[lookup_city])

    plain = InMemoryRunner(app=App(name="geo", root_agent=agent()))
    adapter = require_adapter(agent())

    async def run(mode: str = "off", k: int = 0) -> Any:
        if mode != "off":
            return await adapter.arun(question(k))
        session = await plain.session_service.create_session(app_name="geo", user_id="assay")
        message = types.Content(role="user", parts=[types.Part(text=question(k))])
        async for _ in plain.run_async(user_id="assay", session_id=session.id,
                                       new_message=message):
            pass

    return run


def agent_for(framework: str, base_url: str) -> Any:
    """``framework``'s agent (``langgraph``, ``langchain``, ``openai-agents``, ``pydantic-ai``
    or ``google-adk``), with assay's instrumentation of it installed (the Agents SDK's tracing
    processors: assay's alone, so nothing is exported to OpenAI). The Agents SDK's tracing is
    switched per mode by ``_set_sdk_tracing``."""
    if framework in ("langgraph", "langchain"):
        instrument("langchain")
        return langgraph_agent(base_url, langchain=framework == "langchain")
    if framework == "openai-agents":
        from agents import set_trace_processors

        from assay.integrations import _openai_agents

        instrument("openai-agents")
        set_trace_processors([_openai_agents.processor()])
        return agents_sdk_agent(base_url)
    if framework == "google-adk":
        instrument("google-adk")
        return google_adk_agent(base_url)
    instrument("pydantic-ai")
    return pydantic_ai_agent(base_url)


# -- measurement ----------------------------------------------------------------------------------
def _thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each live thread of this process, by thread name (the agent's
    event loop is MainThread; assay's are assay-run-writer and assay-fold)."""
    out: dict[str, float] = {}
    for t in threading.enumerate():
        if t.ident is None:
            continue
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except (OSError, ValueError):  # ended meanwhile
            continue
        out[t.name] = out.get(t.name, 0.0) + cpu
    return out


BY_THREAD: dict[str, dict[str, list[float]]] = {}  # framework -> thread -> CPU s per answer


async def _batch(run: Any, calls: int, client: Client | None, mode: str,
                 threads: dict[str, list[float]] | None = None,
                 first: int = 0) -> tuple[float, float, float]:
    """(wall, CPU, CPU without the store's fold) seconds per answer over ``calls`` answers
    (inside one assay run each when ``client``). CPU is this process's, all threads (the
    writer's too); the model server runs in another process, so it is the framework's and
    assay's alone. The third figure leaves out the fold (the settle on this thread and the
    assay-fold thread: the store's work, not the capture's). ``threads`` gets each thread's CPU
    per answer. The answers ask ``question(first)`` ... ``question(first + calls - 1)``."""
    before = _thread_cpu()
    start, cpu = time.perf_counter(), time.process_time()
    for k in range(first, first + calls):
        if client is None:
            await run(mode, k)
        else:
            async with trace("example", client=client, enabled=True):
                await run(mode, k)
    fold = 0.0
    if mode == "langsmith":  # every run serialized, compressed and posted: LangSmith's work
        LANGSMITH[0]["callbacks"][0].wait_for_futures()
        LANGSMITH[1].flush()
    if client is not None:
        # the writer's and the fold's work are part of the cost: both timed, the fold of
        # what is left done here (as a read does) rather than waited for (the background
        # folder coalesces appends for up to 0.5 s: waiting would time its delay, not its
        # work; left to run on, it would be counted in the next mode's batch)
        client.flush()
        fold = time.thread_time()
        client._store.journal.settle()
        fold = time.thread_time() - fold
    wall, spent = time.perf_counter() - start, time.process_time() - cpu
    after = _thread_cpu()
    fold += after.get("assay-fold", 0.0) - before.get("assay-fold", 0.0)
    if threads is not None:
        for name, used in after.items():
            threads.setdefault(name, []).append((used - before.get(name, 0.0)) / calls)
    return wall / calls, spent / calls, (spent - fold) / calls


def _set_sdk_tracing(disabled: bool) -> None:
    from agents import set_tracing_disabled

    set_tracing_disabled(disabled)


async def measure(name: str, run: Any, modes: list[str], calls: int, rounds: int,
                  client: Client) -> dict[str, tuple[float, float, float]]:
    per: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
    spare = rounds * calls  # questions no measured answer asks
    for k in range(3):  # warm up: connections, imports, caches, each mode's agent
        for mode in modes:
            if mode in ("assay", "spans"):
                async with trace("warmup", client=client, enabled=True):
                    await run(mode, spare + k)
            else:
                await run(mode, spare + k)
    for r, mode in turns(modes, rounds):  # each mode of a round asks the same questions
        if name == "openai-agents":
            _set_sdk_tracing(mode == "off")
        per[mode].append(await _batch(run, calls,
                                      client if mode in ("assay", "spans") else None, mode,
                                      BY_THREAD.setdefault(f"{name} {mode}", {}),
                                      first=r * calls))
    if name == "openai-agents":
        _set_sdk_tracing(False)
    if name == "langgraph":
        await _record_langchain(run.graph)
    PAIRED[name] = per
    return {m: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v),
                statistics.median(x[2] for x in v)) for m, v in per.items()}


# framework -> mode -> each round's (wall, cpu, cpu*) per answer: the paired figures below
PAIRED: dict[str, dict[str, list[tuple[float, float, float]]]] = {}


def paired(name: str) -> str:
    """Round by round (the modes of a round ask the same questions, one after the other): the
    CPU assay adds over off and over sdk, as a share of off; the median and the range. The
    ratio of medians above mixes rounds; this pairs them, so a slow round counts once."""
    per = PAIRED.get(name)
    if not per:
        return ""

    def over(mode: str, base: str) -> str:
        """CPU of ``mode`` over ``base``, each round, as a share of that round's ``off``."""
        return paired_share([m[1] for m in per[mode]], [b[1] for b in per[base]],
                            [o[1] for o in per["off"]])
    return (f"{name:<14} cpu paired by round, median (range): assay over off "
            f"{over('assay', 'off')}, over sdk {over('assay', 'sdk')}; sdk over off "
            f"{over('sdk', 'off')}")


# -- the hooks alone ------------------------------------------------------------------------------
def _stored(client: Client, root: Any) -> None:
    """Wait until the runs are stored and indexed: the writer's flush, then a read (which folds
    the journal into the runs table first), so their CPU is counted too."""
    client.flush()
    if root is not None:
        client.read_run(root.id)

RECORDED: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []  # see _record_langchain


async def _record_langchain(graph: Any) -> None:
    """The callback events of one real answer (the LangGraph agent with a recording handler),
    into ``RECORDED``: what LangChain hands assay's handler, the graph's state and messages
    included. (On the measuring loop: the model client's connections belong to it.)"""
    from langchain_core.callbacks import BaseCallbackHandler

    events: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def recorder(name: str) -> Any:
        def on(self: Any, *args: Any, **kwargs: Any) -> None:
            events.append((name, args, kwargs))
        return on

    names = ("on_chain_start", "on_chain_end", "on_chain_error", "on_chat_model_start",
             "on_llm_start", "on_llm_new_token", "on_llm_end", "on_llm_error", "on_tool_start",
             "on_tool_end", "on_tool_error")
    recording = type("Recorder", (BaseCallbackHandler,),
                     {"run_inline": True, **{n: recorder(n) for n in names}})
    await graph.ainvoke({"messages": [("user", QUESTION)]}, {"callbacks": [recording()]})
    RECORDED[:] = events


def _add_prompt_tokens(response: Any, extra: int) -> None:
    """``extra`` more prompt tokens in a recorded ``LLMResult`` (its messages' usage)."""
    for generations in response.generations:
        for generation in generations:
            usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
            if usage:
                usage["input_tokens"] += extra
                usage["total_tokens"] += extra


def replay_langchain(n: int, client: Client) -> tuple[float, float]:
    """(CPU µs on the caller's thread, CPU µs with the writer's and the store's share) per
    step for assay's LangChain handler fed one real answer's recorded callback events. Each
    replayed answer gets its own deep copy (new message objects and run ids, time-ordered
    uuid7s as LangChain makes them: random ones cost the store's indexes far more), made
    before the clock starts; the collector is paused while the copies are replayed
    (it would otherwise walk the copies waiting their turn)."""
    import copy
    import gc

    from langchain_core.utils.uuid import uuid7  # the run ids LangChain itself makes

    from assay.integrations._langchain import handler

    events = RECORDED
    h = handler()

    copies = itertools.count(1)

    def fresh() -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
        ids: dict[Any, uuid.UUID] = {}
        out = []
        extra = 0 if SAME_TOKENS else next(copies)  # each copy its own prompt token count
        for name, args, kwargs in copy.deepcopy(events):
            for key in ("run_id", "parent_run_id"):
                if kwargs.get(key) is not None:
                    kwargs[key] = ids.setdefault(kwargs[key], uuid7())
            if name == "on_llm_end" and extra:
                _add_prompt_tokens(args[0] if args else kwargs["response"], extra)
            out.append((getattr(h, name), args, kwargs))
        return out

    def replay(answers: list[Any]) -> None:
        for answer in answers:
            for method, args, kwargs in answer:
                method(*args, **kwargs)

    async def go() -> tuple[float, float, Any]:
        async with trace("replay", client=client, enabled=True) as root:
            replay([fresh() for _ in range(20)])
            answers = [fresh() for _ in range(n)]
            _stored(client, None)
            client._store.journal.settle()
            gc.collect()
            gc.freeze()
            try:
                cpu, start = time.process_time(), time.thread_time()
                replay(answers)
                return time.thread_time() - start, cpu, root
            finally:
                gc.unfreeze()

    own, cpu, root = asyncio.run(go())
    _stored(client, root)
    cpu = time.process_time() - cpu
    return own / n / STEPS * 1e6, cpu / n / STEPS * 1e6


def replay_agents_sdk(n: int, client: Client) -> tuple[float, float]:
    """(wall, CPU) µs per step that assay's Agents SDK processor adds to one answer's spans
    (made by the SDK's own span functions, with its tracing on)."""
    from agents.tracing import agent_span, function_span, generation_span
    from agents.tracing import trace as sdk_trace

    answers = itertools.count()

    def one() -> None:
        extra = 0 if SAME_TOKENS else next(answers)  # each answer its own prompt token count
        with sdk_trace("Agent workflow"), agent_span("geo"):
            for i in range(2):
                with generation_span(input=[{"role": "user", "content": QUESTION}],
                                     model="gpt-4o-mini") as g:
                    g.span_data.output = [{"role": "assistant", "content": "x"}]
                    g.span_data.usage = {"input_tokens": 8 + i + extra, "output_tokens": 2,
                                         "total_tokens": 10 + i + extra}
                if i == 0:
                    with function_span("lookup_city", input='{"city": "Paris"}') as f:
                        f.span_data.output = "Paris has 2102650 people"

    def bare() -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            one()
        return time.perf_counter() - start, time.process_time() - cpu

    async def go() -> tuple[tuple[float, float], tuple[float, float]]:
        for _ in range(50):
            one()
        without = bare()  # the SDK's spans, no assay run: assay's processor returns at once
        async with trace("replay", client=client, enabled=True) as root:
            for _ in range(50):
                one()
            _stored(client, None)
            wall, cpu = bare()
        start = time.process_time()
        _stored(client, root)
        return without, (wall, cpu + time.process_time() - start)

    without, with_assay = asyncio.run(go())
    client.flush()
    return ((with_assay[0] - without[0]) / n / STEPS * 1e6,
            (with_assay[1] - without[1]) / n / STEPS * 1e6)


# -- main -----------------------------------------------------------------------------------------
class _ModelProcess:
    """The scripted model in a process of its own (its CPU is not the framework's)."""

    def __enter__(self) -> str:
        import subprocess

        code = ("import sys; from assay.demo import ScriptedModelServer as S; "
                "s = S(first_token_delay=0.0); s.start(); "
                "print(s.base_url, flush=True); sys.stdin.read()")
        env = dict(os.environ, PYTHONPATH=os.path.join(_HERE, "..", "src"))
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


class _LangSmithSink:
    """A LangSmith endpoint that keeps nothing, in a process of its own (its CPU is not the
    framework's): ``/info`` as LangSmith's cloud answers it (zstd-compressed multipart on, the
    SDK's default batch settings), 202 to every post, the body read and dropped. What the
    official ``langsmith`` client spends tracing a LangGraph agent, set beside assay's capture
    (``bench/frameworks_instructions.py``'s ``langsmith`` mode)."""

    _CODE = """
import json, sys
got = []
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
INFO = json.dumps({"version": "0.10.0", "instance_flags": {"zstd_compression_enabled": True},
                   "batch_ingest_config": {"use_multipart_endpoint": True, "size_limit": 100,
                                           "size_limit_bytes": 20971520,
                                           "scale_up_qsize_trigger": 1000,
                                           "scale_up_nthreads_limit": 16,
                                           "scale_down_nempty_trigger": 4}}).encode()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def _send(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self._send(200, INFO if self.path.startswith("/info") else b"{}")
    def do_POST(self):
        got.append(len(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
        self._send(202, b"{}")
    do_PATCH = do_POST
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"http://127.0.0.1:{s.server_address[1]}", flush=True)
import threading; threading.Thread(target=s.serve_forever, daemon=True).start()
sys.stdin.read()
print(len(got), sum(got), flush=True)
"""

    def __enter__(self) -> str:
        import subprocess

        self.proc = subprocess.Popen([sys.executable, "-c", self._CODE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.posts, self.bytes = map(int, self.proc.stdout.readline().split())
        self.proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=40, help="answers per batch")
    ap.add_argument("--rounds", type=int, default=5, help="batches per mode (median)")
    ap.add_argument("--only", default="langgraph,langchain,openai-agents,pydantic-ai,google-adk")
    ap.add_argument("--same-tokens", action="store_true",
                    help="every answer the same question (so the same token counts, and the "
                         "price of each llm call a cache hit); by default each answer of a "
                         "round gets its own number of filler words, as real prompts vary")
    args = ap.parse_args()
    global SAME_TOKENS
    SAME_TOKENS = args.same_tokens
    wanted = args.only.split(",")
    db = os.path.join(tempfile.mkdtemp(prefix="assay-bench-fw-"), "assay.db")
    client = Client(database_url=f"sqlite:///{db}")
    counts = ("the same every answer" if SAME_TOKENS
              else f"varied (0-{args.rounds * args.calls - 1} filler words)")
    print(f"{args.rounds} rounds x {args.calls} answers per mode, {STEPS} steps per answer "
          f"(2 llm + 1 tool); load average {os.getloadavg()[0]:.2f}; token counts {counts}")
    rows = []
    with _ModelProcess() as base_url, _LangSmithSink() as sink:
        for name in ("langgraph", "langchain"):  # create_react_agent, create_agent
            if name not in wanted:
                continue
            run = agent_for(name, base_url)
            tracer, ls_client = langsmith_tracer(sink)
            LANGSMITH[:] = [{"callbacks": [tracer]}, ls_client]
            r = asyncio.run(measure(name, run, ["off", "sdk", "assay", "langsmith"],
                                    args.calls, args.rounds, client))
            rows.append((name, r, replay_langchain(1000, client) if name == "langgraph"
                         else None))
        if "openai-agents" in wanted:
            run = agent_for("openai-agents", base_url)
            r = asyncio.run(measure("openai-agents", run, ["off", "sdk", "assay"], args.calls,
                                    args.rounds, client))
            rows.append(("openai-agents", r, replay_agents_sdk(2000, client)))
        if "pydantic-ai" in wanted:
            run = agent_for("pydantic-ai", base_url)
            r = asyncio.run(measure("pydantic-ai", run, ["off", "sdk", "spans", "assay"],
                                    args.calls, args.rounds, client))
            rows.append(("pydantic-ai", r, None))
        if "google-adk" in wanted:
            run = agent_for("google-adk", base_url)
            r = asyncio.run(measure("google-adk", run, ["off", "sdk", "assay"], args.calls,
                                    args.rounds, client))
            rows.append(("google-adk", r, None))
    print(f"\nper step, median of {args.rounds} rounds ({STEPS} steps per answer); cpu* = CPU "
          "without the store's fold of the journal (settle + assay-fold thread), for the "
          "capture's own part; the goal is judged on wall and cpu (end to end):")
    print(f"{'framework':<14} {'clock':<5} {'off':>9} {'sdk':>9} {'assay':>9} {'added':>9} "
          f"{'ratio':>7} {'(vs sdk)':>9}")
    for name, r, alone in rows:
        for i, clock in enumerate(("wall", "cpu", "cpu*")):
            off, sdk, on = (r[m][i] / STEPS for m in ("off", "sdk", "assay"))
            ratio = (on - off) / off
            print(f"{name:<14} {clock:<5} {off * 1e3:>7.3f}ms {sdk * 1e3:>7.3f}ms "
                  f"{on * 1e3:>7.3f}ms {(on - off) * 1e6:>7.0f}us {ratio * 100:>6.2f}% "
                  f"{(on - sdk) / off * 100:>8.2f}%  {'met' if ratio <= GOAL else 'NOT met'}"
                  + (" (goal <= 5%)" if i < 2 else " (the store's fold left out)"))
        if "langsmith" in r:
            for i, clock in enumerate(("wall", "cpu")):
                off, ls = r["off"][i] / STEPS, r["langsmith"][i] / STEPS
                print(f"{name:<14} {clock:<5} traced by LangSmith's own tracer instead "
                      f"(LangChainTracer, posting to a loopback sink): {ls * 1e3:.3f}ms, "
                      f"{(ls - off) * 1e6:.0f}us = {(ls - off) / off * 100:.2f}%")
        if "spans" in r:
            for i, clock in enumerate(("wall", "cpu", "cpu*")):
                off, spans = r["off"][i] / STEPS, r["spans"][i] / STEPS
                print(f"{name:<14} {clock:<5} through its OpenTelemetry instrumentation (a plain "
                      f"function's call): {spans * 1e3:.3f}ms, {(spans - off) * 1e6:.0f}us = "
                      f"{(spans - off) / off * 100:.2f}%")
        print(paired(name))
        if alone is None:
            continue
        print(f"{name:<14} hooks alone (replayed events, no framework): {alone[0]:.1f} us/step "
              f"on the agent's thread, {alone[1]:.1f} us/step CPU with the writer's and the "
              "store's share "
              f"= {alone[1] / (r['off'][1] / STEPS * 1e6) * 100:.2f}% of the framework's own "
              "CPU per step")
    print("\nCPU per step by thread (median of the rounds; threads of this process only):")
    for key, threads in BY_THREAD.items():
        parts = sorted(((statistics.median(v) / STEPS, name) for name, v in threads.items()),
                       reverse=True)
        print(f"  {key:<20} " + ", ".join(f"{n} {c * 1e6:.0f}us" for c, n in parts if c > 5e-6))
    print(f"\nload average after: {os.getloadavg()[0]:.2f}; store: {db}")
    client.close()


if __name__ == "__main__":
    main()
