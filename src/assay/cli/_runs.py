"""``assay runs list`` / ``show``: find runs with LangSmith's filter language, read a trace.

``list`` is ``client.list_runs`` with its filters (``--filter 'and(eq(run_type, "llm"),
gt(latency, "2s"))'``, ``--trace-filter``, ``--tree-filter``, ``--query``); ``show`` prints one
run and the tree under it, with each run's latency, tokens, cost and error.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..schemas import RUN_TYPES
from ._common import (
    DbOption,
    JsonOption,
    console,
    emit_json,
    error_line,
    handle_errors,
    money,
    open_client,
    secs,
    styled,
)

__all__ = ["app"]

app = typer.Typer(help="Find runs (LangSmith's filter language) and read their traces.",
                  no_args_is_help=True)


def _secs(run: Any) -> str:
    return secs(run.latency.total_seconds() if run.latency is not None else None)


def _error(run: Any, width: int = 50) -> str:
    line = error_line(run.error) or ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _tokens(run: Any) -> str:
    return str(run.total_tokens) if run.total_tokens else ""


def _cost(run: Any) -> str:
    return money(float(run.total_cost)) if run.total_cost else ""


def _run_type(value: str | None) -> str | None:
    """A run type the store knows: another one matched no run, silently (exit 0)."""
    if value is not None and value not in RUN_TYPES:
        raise typer.BadParameter(f"{value!r} is not a run type: choose one of "
                                 f"{', '.join(RUN_TYPES)}")
    return value


def _project(value: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        return {"project_id": uuid.UUID(value)}
    except ValueError:
        return {"project_name": value}


@app.command("list")
def list_(
    project: Annotated[str | None, typer.Option(
        "--project", "-p", help="Project or experiment (name or id).")] = None,
    filter_: Annotated[str | None, typer.Option(
        "--filter", "-f", help='On the run: and(eq(run_type, "llm"), gt(latency, "2s")).')] = None,
    trace_filter: Annotated[str | None, typer.Option(
        help="On the root of the run's trace: eq(feedback_score, 0).")] = None,
    tree_filter: Annotated[str | None, typer.Option(
        help='On any run of the run\'s trace: eq(name, "search").')] = None,
    query: Annotated[str | None, typer.Option(
        "--query", "-q", help="Text in the name, error, inputs or outputs.")] = None,
    run_type: Annotated[str | None, typer.Option(
        callback=_run_type, help=f"Only runs of this type: {', '.join(RUN_TYPES)}.")] = None,
    root: Annotated[bool, typer.Option("--root", help="Root runs only.")] = False,
    errors: Annotated[bool, typer.Option("--errors", help="Failed runs only.")] = False,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, newest first.")] = 50,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """List runs matching every option, newest first."""
    with handle_errors():
        client = open_client(db)
        found = list(client.list_runs(
            **_project(project), filter=filter_, trace_filter=trace_filter,
            tree_filter=tree_filter, query=query, run_type=run_type,
            is_root=True if root else None, error=True if errors else None, limit=limit + 1,
            order="desc"))  # (one more: whether there are more to show)
    more = len(found) > limit
    found = found[:limit]
    if json_out:
        emit_json([r.model_dump() for r in found])
        return
    if not found:
        console.print("no runs match")
        return
    table = Table()
    table.add_column("id", no_wrap=True)  # kept whole: it is what `show` takes
    for header in ("name", "type", "status", "started", "latency", "tokens", "cost", "error"):
        table.add_column(header)
    for r in found:
        table.add_row(str(r.id), r.name, r.run_type, r.status,
                      r.start_time.strftime("%Y-%m-%d %H:%M:%S"), _secs(r), _tokens(r), _cost(r),
                      _error(r))
    console.print(table)
    if more:
        console.print(f"the first {limit}: --limit shows more", style="dim")


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Show a run and the runs under it, in the order they ran."""
    with handle_errors():
        client = open_client(db)
        run = client.read_run(run_id, load_child_runs=True)
    if json_out:
        emit_json(run.model_dump())
        return

    def label(r: Any) -> Text:
        facts = [r.run_type, r.status, _secs(r)]
        if r.total_tokens:
            facts.append(f"{r.total_tokens} tokens")
        if r.total_cost:
            facts.append(_cost(r))
        text = styled((r.name, "bold"), f" ({', '.join(facts)})")
        if r.error:
            text.append(f" {_error(r, 80)}", style="red")
        return text

    tree = Tree(label(run))

    def grow(node: Tree, r: Any) -> None:
        for child in r.child_runs or []:
            grow(node.add(label(child)), child)

    grow(tree, run)
    console.print(tree)
