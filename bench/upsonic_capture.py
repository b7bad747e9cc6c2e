"""What assay's capture of a real Upsonic agent costs per llm/tool step (issue 21).

    .venv/bin/python bench/upsonic_capture.py [--calls 30] [--rounds 5]

An Upsonic ``Agent`` on its own ``OpenAIChatModel`` answers one tool-using question against the
bundled scripted model on 127.0.0.1: two llm calls and one tool call per answer, three steps.
Measured in turn (the order turning round by round), ``--rounds`` rounds of ``--calls``
answers each (medians of the rounds):

- ``off``: an agent built with ``instrument=False`` (no tracing at all), inside an assay run:
  what Upsonic costs on its own (plus the run's own write);
- ``idle``: the agent assay traces (handed to it, so traced from its own objects: its model
  wrapped, its span hooks assay's), no assay run current: what a traced agent costs outside
  assay;
- ``sdk``: an agent with Upsonic's own OpenTelemetry instrumentation recording the spans assay's
  span path keeps, inside an assay run, but with no span processor: nothing becomes a run. What
  Upsonic's instrumentation costs before any backend sees a span (its message, tool and run
  attributes as JSON, its own ``cost()`` of each response, the SDK's spans);
- ``spans``: an agent built after assay instrumented Upsonic and never handed to assay (a
  plain function's agent): traced through Upsonic's instrumentation into assay's span
  processor, every kept span a run;
- ``assay``: the agent assay traces, inside an assay run (``trace(...)``, a fresh SQLite
  store, the background writer storing every run): every model request, tool call and agent
  run becomes a run.

Per step = (assay - off) / 3 against Upsonic's own time per step (off / 3), loopback round trips
included in the latter, in wall time and in process CPU time (steadier on a loaded machine),
and the same for the span path, (spans - off) / 3. Goal: <= 5%. A last figure leaves out the
store's fold of the journal (the capture's own part; the goal is judged end to end).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "src"))
os.environ.pop("OPENAI_API_KEY", None)

from measures._common import paired as paired_share  # noqa: E402
from measures._common import turns  # noqa: E402

from assay.client import Client  # noqa: E402 - after the sys.path and env set-up above
from assay.demo import ScriptedModelServer  # noqa: E402
from assay.tracing import trace  # noqa: E402

QUESTION = "How many people live in Paris? Use lookup_city"
STEPS = 3
GOAL = 0.05


def build(base_url: str) -> tuple[Any, Any, Any, Any, Any]:
    from openai import AsyncOpenAI
    from upsonic import Agent, Task
    from upsonic.models.openai import OpenAIChatModel
    from upsonic.providers.openai import OpenAIProvider
    from upsonic.tools import tool

    @tool(max_retries=0)
    def lookup_city(city: str) -> str:
        """The population of a city."""
        return f"{city} has 2102650 people"

    def model() -> Any:
        client = AsyncOpenAI(base_url=base_url, api_key="scripted", max_retries=0)
        return OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))

    from upsonic.models.instrumented import InstrumentationSettings

    from assay.integrations import require_adapter
    from assay.integrations._upsonic_spans import tracer_provider

    traced = Agent(model(), name="traced", tools=[lookup_city])
    require_adapter(traced)  # instruments Upsonic: agents alive now and built from now on
    plain = Agent(model(), name="plain", tools=[lookup_city], instrument=False)  # opted out
    # assay's tracer (the same spans recorded, the same ones never made) with no processor
    listening = Agent(model(), name="sdk", tools=[lookup_city],
                      instrument=InstrumentationSettings(tracer_provider=tracer_provider()))
    spans = Agent(model(), name="spans", tools=[lookup_city])  # built since: the span path
    from assay.integrations._upsonic import _instrumentation
    from assay.integrations._upsonic_native import is_captured

    assert is_captured(traced) and plain._instrument_settings is None
    assert spans._instrument_settings is _instrumentation() and not is_captured(spans)
    return plain, listening, spans, traced, Task


def _fold_thread_cpu() -> float:
    """CPU seconds so far of the store's background fold thread (``assay-fold``), if any."""
    for t in threading.enumerate():
        if t.name == "assay-fold" and t.ident is not None:
            try:
                return time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except (OSError, ValueError):  # ended meanwhile
                return 0.0
    return 0.0


async def batch(agent: Any, task_cls: Any, calls: int, client: Client | None
                ) -> tuple[float, float, float, float]:
    """Seconds per answer: wall; CPU of the whole process (scripted server and the store
    writer's thread included); CPU of the agent's thread alone (Upsonic and the capture hooks,
    not the writer); the process's CPU without the store's fold of the journal (the settle
    below and the assay-fold thread: the store's work, not the capture's). CPU figures are
    steadier than wall time on a shared machine."""
    fold = -_fold_thread_cpu()
    wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
    for _ in range(calls):
        if client is None:
            await agent.do_async(task_cls(QUESTION))
        else:
            with trace("answer", client=client, enabled=True, project_name="bench-upsonic"):
                await agent.do_async(task_cls(QUESTION))
    own = time.thread_time() - own
    if client is not None:
        client.flush()  # the writer's work belongs to the batch that made it
        settle = time.thread_time()
        client._store.journal.settle()  # and so does the fold (else the next batch pays it)
        fold += time.thread_time() - settle
    cpu = time.process_time() - cpu
    fold += _fold_thread_cpu()
    return ((time.perf_counter() - wall) / calls, cpu / calls, own / calls,
            (cpu - fold) / calls)


async def main_async(calls: int, rounds: int, client: Client
                     ) -> dict[str, list[tuple[float, float, float, float]]]:
    """Each mode's (wall, cpu, agent-thread cpu, cpu without the fold) per answer, by round."""
    with ScriptedModelServer(first_token_delay=0) as srv:
        plain, listening, spans, traced, task_cls = build(srv.base_url)
        logging.getLogger("upsonic").setLevel(logging.WARNING)  # its per-run INFO lines
        modes = {"off": (plain, client), "idle": (traced, None), "sdk": (listening, client),
                 "spans": (spans, client), "assay": (traced, client)}
        for agent, c in modes.values():  # warm up: imports, connections, caches
            await batch(agent, task_cls, 3, c)
        times: dict[str, list[tuple[float, float, float, float]]] = {m: [] for m in modes}
        for _, mode in turns(list(modes), rounds):
            agent, c = modes[mode]
            times[mode].append(await batch(agent, task_cls, calls, c))
        return times


def paired(times: dict[str, list[tuple[float, ...]]], mode: str) -> str:
    """``mode``'s process CPU over ``off``'s, round by round (the two ran minutes apart at
    most, on the same questions), as a share of that round's ``off``: median (range). Steadier
    than the ratio of medians when the machine's speed drifts between rounds."""
    return paired_share([m[1] for m in times[mode]], [o[1] for o in times["off"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (before)")
    with tempfile.TemporaryDirectory() as tmp:
        client = Client(database_url=f"sqlite:///{tmp}/bench.db")
        times = asyncio.run(main_async(args.calls, args.rounds, client))
        client.flush()
        client.close()
    print(f"load average {os.getloadavg()[0]:.2f} (after)")
    result = {m: tuple(statistics.median(x[i] for x in v) for i in range(4))
              for m, v in times.items()}
    for i, what in enumerate(("wall", "process cpu", "agent-thread cpu",
                              "process cpu without the store's fold")):
        off, idle, sdk, spans, assay = (result[m][i]
                                        for m in ("off", "idle", "sdk", "spans", "assay"))
        own, cost, via_spans = off / STEPS, (assay - off) / STEPS, (spans - off) / STEPS
        print(f"{what}: per answer ({STEPS} steps) off {off * 1e3:.2f} ms, idle "
              f"{idle * 1e3:.2f} ms ({(idle - off) / off:+.1%}), sdk {sdk * 1e3:.2f} ms "
              f"({(sdk - off) / off:+.1%}), spans {spans * 1e3:.2f} ms, assay "
              f"{assay * 1e3:.2f} ms; capture per step {cost * 1e3:.3f} ms = "
              f"{cost / own:.1%} of Upsonic's own {own * 1e3:.2f} ms (goal <= {GOAL:.0%}); "
              f"through Upsonic's instrumentation (spans) {via_spans * 1e3:.3f} ms = "
              f"{via_spans / own:.1%}")
    print(f"process cpu paired by round, over off, median (range): assay "
          f"{paired(times, 'assay')}, spans {paired(times, 'spans')}, sdk "
          f"{paired(times, 'sdk')}, idle {paired(times, 'idle')} (per answer = per step)")


if __name__ == "__main__":
    main()
