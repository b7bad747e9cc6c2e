"""What assay's capture of a real CrewAI crew costs per llm/tool step (issue 21).

    .ci/crewai --co -q >/dev/null   # once: builds .venv-crewai (crewai pins openai<3)
    .venv-crewai/bin/python bench/crewai_capture.py [--calls 20] [--rounds 9]

A one-agent crew with a ``lookup_city`` tool on CrewAI's own ``LLM`` answers one tool-using
question against the bundled scripted model on 127.0.0.1: two llm calls and one tool call per
answer, three steps. Measured in turn (the order turning round by round), ``--rounds`` rounds of
``--calls`` kickoffs each (medians of the rounds):

- ``off``: the crew kicked off with no assay run current: assay's event-bus listeners are
  registered (``instrument()``) but return at once; CrewAI's own telemetry and tracing are off
  (``CREWAI_DISABLE_TELEMETRY``, ``CREWAI_TRACING_ENABLED=false``), as in the tests;
- ``assay``: the same inside an assay run (``trace(...)``, a fresh SQLite store, the background
  writer storing every run): crew, task, agent, llm and tool events become runs.

Per step = (assay - off) / 3 against CrewAI's own time per step (off / 3), loopback round trips
included in the latter, in process CPU time (the bus's worker threads and the writer's
included) and wall time; and paired round by round. Goal: <= 5%. Prints figures, never asserts.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "src"))
os.environ.pop("OPENAI_API_KEY", None)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # nothing leaves the machine
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from measures._common import paired as paired_share  # noqa: E402
from measures._common import turns  # noqa: E402

from assay.client import Client  # noqa: E402 - after the sys.path and env set-up above
from assay.demo import ScriptedModelServer  # noqa: E402
from assay.tracing import trace  # noqa: E402

STEPS = 3
GOAL = 0.05


def build(base_url: str) -> Any:
    from crewai import LLM, Agent, Crew, Process, Task
    from crewai.tools import tool

    from assay.integrations import instrument

    @tool("lookup_city")
    def lookup_city(city: str) -> str:
        """The population of a city."""
        return f"{city} has 2102650 people"

    llm = LLM(model="openai/gpt-4o-mini", base_url=base_url, api_key="scripted")
    researcher = Agent(role="researcher", goal="Find city figures with lookup_city",
                       backstory="A careful researcher.", tools=[lookup_city], llm=llm,
                       max_iter=3, verbose=False)
    task = Task(description="How many people live in Paris? Use lookup_city for 'Paris'.",
                expected_output="a figure", agent=researcher)
    instrument("crewai")
    logging.getLogger("crewai").setLevel(logging.ERROR)  # a per-call token-count warning
    return Crew(agents=[researcher], tasks=[task], process=Process.sequential, verbose=False)


def batch(crew: Any, calls: int, client: Client | None) -> tuple[float, float]:
    """Seconds per kickoff: wall, and this process's CPU (all threads)."""
    from crewai.events import crewai_event_bus

    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        if client is None:
            crew.copy().kickoff()
        else:
            with trace("answer", client=client, enabled=True, project_name="bench-crewai"):
                crew.copy().kickoff()
    flush = getattr(crewai_event_bus, "flush", None)
    if callable(flush):
        flush()  # the bus's handlers' work belongs to the batch that caused it
    if client is not None:
        client.flush()
        client._store.journal.settle()  # and so does the fold
    return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (before)")
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(first_token_delay=0) as srv:
        client = Client(database_url=f"sqlite:///{tmp}/bench.db")
        crew = build(srv.base_url)
        modes: dict[str, Client | None] = {"off": None, "assay": client}
        for c in modes.values():  # warm up: imports, connections, caches
            batch(crew, 3, c)
        times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for _, mode in turns(list(modes), args.rounds):
            times[mode].append(batch(crew, args.calls, modes[mode]))
        kickoffs = (3 + args.rounds * args.calls)  # each one inside its own "answer" run
        kinds = [r.run_type for r in client.list_runs(project_name="bench-crewai")]
        print(f"stored per kickoff: {len(kinds) / kickoffs:.1f} runs ("
              f"{kinds.count('llm') / kickoffs:.1f} llm, {kinds.count('tool') / kickoffs:.1f} "
              "tool): the capture recorded what it is timed for")
        client.close()
    print(f"load average {os.getloadavg()[0]:.2f} (after)")
    for i, what in enumerate(("wall", "process cpu")):
        off, on = (statistics.median(x[i] for x in times[m]) for m in ("off", "assay"))
        own, cost = off / STEPS, (on - off) / STEPS
        print(f"{what}: per kickoff ({STEPS} steps) off {off * 1e3:.2f} ms, assay "
              f"{on * 1e3:.2f} ms; capture per step {cost * 1e3:.3f} ms = {cost / own:.1%} of "
              f"CrewAI's own {own * 1e3:.2f} ms (goal <= {GOAL:.0%})")
    print("process cpu paired by round: assay over off "
          + paired_share([a[1] for a in times["assay"]], [o[1] for o in times["off"]]))


if __name__ == "__main__":
    main()
