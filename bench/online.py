"""What a pass of online evaluation costs assay per run, beside the evaluator's own time.

    .venv/bin/python bench/online.py [--runs 5000] [--rounds 3] [--db URL]

Traces ``--runs`` root runs (an agent with one tool call each) into a fresh project of a fresh
store (SQLite file by default; ``--db postgresql://...`` for PostgreSQL), then times, ``--rounds``
times each on a fresh copy of the project's state:

- ``first pass``: every run scored by a trivial evaluator (a length check) - listing the runs,
  asking which are scored, running the evaluator, writing each run's feedback;
- ``first pass, reliability``: the same with ``ReliabilityEvaluator(["lookup"])``, which reads
  each run's tree (its tool calls) first;
- ``repeat pass``: a pass that finds every run scored (what a watch costs when nothing is new).

Prints microseconds per run and runs per second (medians), and asserts every run was scored.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from assay import Client, traceable  # noqa: E402 - after the sys.path set-up
from assay.evals import ReliabilityEvaluator  # noqa: E402
from assay.evaluation import evaluate_online  # noqa: E402
from assay.tracing import tracing_context  # noqa: E402


@traceable(run_type="tool")
def lookup(q: str) -> str:
    return q.upper()


@traceable(name="agent")
def agent(q: str) -> dict[str, str]:
    return {"answer": lookup(q)}


def short(outputs: dict[str, str]) -> bool:
    return len(outputs["answer"]) < 8


def traffic(client: Client, project: str, n: int) -> None:
    with tracing_context(enabled=True, client=client, project_name=project):
        for i in range(n):
            agent(f"q{i}")
    client.flush()
    client.read_project(project_name=project, include_stats=True)  # folded, indexed


def timed(fn: object, n: int) -> float:
    start = time.perf_counter()
    report = fn()  # type: ignore[operator]
    elapsed = time.perf_counter() - start
    assert report.scored + report.already_scored == n, report
    return elapsed / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{os.path.join(tmp, 'online.db')}"
        client = Client(database_url=url)
        project = f"prod-{uuid.uuid4().hex[:6]}"
        traffic(client, project, args.runs)
        figures: dict[str, list[float]] = {"first pass": [], "first pass, reliability": [],
                                           "repeat pass": []}
        for r in range(args.rounds):
            figures["first pass"].append(timed(lambda r=r: evaluate_online(
                project, [short], rule=f"short-{r}", client=client), args.runs))
            figures["repeat pass"].append(timed(lambda r=r: evaluate_online(
                project, [short], rule=f"short-{r}", client=client), args.runs))
            figures["first pass, reliability"].append(timed(lambda r=r: evaluate_online(
                project, [ReliabilityEvaluator(["lookup"])], rule=f"tools-{r}", client=client),
                args.runs))
    print(f"online evaluation, {args.runs} runs, {args.rounds} rounds, "
          f"{'sqlite' if args.db is None else args.db.split(':')[0]}")
    print(f"{'pass':<28}{'us/run':>10}{'runs/s':>10}")
    for name, values in figures.items():
        us = statistics.median(values)
        print(f"{name:<28}{us:>10.1f}{1e6 / us:>10.0f}")


if __name__ == "__main__":
    main()
