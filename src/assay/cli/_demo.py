"""``assay demo``: the main job, a real experiment with no API key and no network.

A scripted tool-using agent answers a bundled dataset several times over; evaluators score it;
runs, feedback and statistics go to the embedded store (``.assay/assay.db`` by default), and the
statistics are printed as a table. ``--framework langgraph`` (``openai-agents``, ``pydantic-ai``,
``upsonic``, ``google-adk``) runs a real
framework's agent instead, against the bundled scripted model served on 127.0.0.1, and points at
one example's trace: the framework's own llm and tool runs, recorded without any decorator.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ._common import (
    DbOption,
    JsonOption,
    console,
    emit_json,
    err_console,
    handle_errors,
    open_client,
    styled,
)

__all__ = ["demo"]


# typer renders help text as rich markup, where "[langgraph]" would be a style tag: "\\[" keeps it
_FRAMEWORK_HELP = ("Run a real framework's agent instead (langgraph, openai-agents, pydantic-ai, "
                   "upsonic, google-adk) against the bundled scripted model: needs "
                   "assay\\[langgraph], assay\\[openai-agents], assay\\[pydantic-ai], "
                   "assay\\[upsonic] or assay\\[google-adk].")


def demo(
    db: DbOption = None,
    repetitions: Annotated[int, typer.Option(min=1, max=100,
                                             help="Times each example runs.")] = 3,
    concurrency: Annotated[int, typer.Option(min=1, max=256,
                                             help="Examples run at the same time.")] = 4,
    json_out: JsonOption = False,
    framework: Annotated[str | None, typer.Option(help=_FRAMEWORK_HELP)] = None,
) -> None:
    """Run the demo experiment (a tool-using agent, no API key) and print its statistics."""
    from ..demo import DATASET_NAME, run_demo
    from ._experiments import stats_table

    trace_id = None
    with handle_errors():
        if framework is not None:  # a name refused before the store is created for it
            from ..demo._frameworks import FRAMEWORKS
            from ..errors import InvalidInputError

            if framework not in FRAMEWORKS:
                raise InvalidInputError(f"unknown demo framework {framework!r}: choose one of "
                                        f"{', '.join(FRAMEWORKS)}")
        client = open_client(db, create=True)
        with contextlib.ExitStack() as stack:
            if json_out:  # what a framework prints (Upsonic's tool errors) must not reach the
                stack.enter_context(contextlib.redirect_stdout(sys.stderr))  # JSON's stream
            if framework is not None:
                from ..demo._frameworks import FRAMEWORK_DATASET, framework_demo

                dataset = FRAMEWORK_DATASET
                results = stack.enter_context(framework_demo(
                    client, framework, num_repetitions=repetitions,
                    max_concurrency=concurrency))
            else:
                dataset = DATASET_NAME
                results = run_demo(client, num_repetitions=repetitions,
                                   max_concurrency=concurrency, blocking=False)
            total = len(results)
            out = err_console if json_out else console
            with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                          MofNCompleteColumn(), TimeElapsedColumn(), console=out,
                          transient=json_out) as progress:
                task = progress.add_task(f"{results.experiment_name}", total=total)
                for row in results:
                    if trace_id is None and not row["run"].error:
                        trace_id = row["run"].id
                    progress.advance(task)
            results.wait()
        client.flush()
        stats = client.read_project(project_id=results.experiment_id, include_stats=True)
    if json_out:
        emit_json(stats.model_dump())
        return
    console.print(stats_table(stats, title=f"{stats.name} on {dataset} "
                                           f"({repetitions} repetitions)"))
    if framework is not None and trace_id is not None:
        console.print(styled(f"the {framework} agent's trace (its own llm and tool runs): ",
                             (f"assay runs show {trace_id}", "bold")))
    console.print(f"store: {client.store.url}")
    console.print(styled("next: ", (f"assay experiments show {stats.name}", "bold"),
                         " (per-run detail), ", ("assay experiments list", "bold")))
