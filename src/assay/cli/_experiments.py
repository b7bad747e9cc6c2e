"""``assay experiments list`` / ``show``: stored experiments and their statistics.

The statistics are ``read_project(include_stats=True)``: the same numbers the seed's payload
carries, rendered as tables (or ``--json`` for scripts). ``stats_table`` is shared with
``assay demo``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.table import Table

from ._common import (
    DbOption,
    JsonOption,
    as_experiment,
    console,
    emit_json,
    error_line,
    handle_errors,
    money,
    open_client,
    secs,
    styled,
)

if TYPE_CHECKING:
    from ..schemas import TracerSessionResult

__all__ = ["app", "feedback_summary", "stats_table"]

app = typer.Typer(help="List and inspect experiments and their statistics.", no_args_is_help=True)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _brief(value: Any, width: int = 60) -> str:
    """A dict as its only value, else compact JSON; cut to ``width``."""
    import json

    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _score(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def feedback_summary(stats: dict[str, Any] | None) -> str:
    """``key=avg`` pairs, the short form used in list rows."""
    parts = []
    for key, fs in sorted((stats or {}).items()):
        avg = fs.avg if hasattr(fs, "avg") else fs.get("avg")
        parts.append(f"{key}={avg:.2f}" if avg is not None else f"{key}=-")
    return " ".join(parts)


def stats_table(stats: Any, title: str | None = None) -> Table:
    """The statistics of one experiment (a TracerSessionResult) as a two-column table."""
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("statistic")
    table.add_column("value", overflow="fold")
    rows: list[tuple[str, str]] = [
        ("experiment", stats.name),
        ("runs", str(stats.run_count)),
        ("error rate", _rate(stats.error_rate)),
        ("latency p50 / p99", f"{secs(stats.latency_p50)} / {secs(stats.latency_p99)}"),
        ("first token p50 / p99",
         f"{secs(stats.first_token_p50)} / {secs(stats.first_token_p99)}"),
        ("streaming rate", _rate(stats.streaming_rate)),
        ("tokens (prompt / completion)",
         f"{stats.total_tokens or 0} "
         f"({stats.prompt_tokens or 0} / {stats.completion_tokens or 0})"),
        ("cost (prompt / completion)",
         f"{money(stats.total_cost)} ({money(stats.prompt_cost)} / "
         f"{money(stats.completion_cost)})"),
    ]
    for key, fs in sorted((stats.feedback_stats or {}).items()):
        value = "-" if fs.avg is None else f"{fs.avg:.3f}"
        detail = f"n={fs.n}"
        if fs.stdev is not None:
            detail += f", stdev={fs.stdev:.3f}"
        if fs.values:
            detail += ", " + ", ".join(f"{k}: {v}" for k, v in sorted(fs.values.items()))
        rows.append((f"feedback: {key}", f"{value} ({detail})"))
    for key, fs in sorted((stats.session_feedback_stats or {}).items()):
        rows.append((f"summary: {key}", "-" if fs.avg is None else f"{fs.avg:.3f}"))
    if stats.test_run_number is not None:
        rows.append(("test run #", str(stats.test_run_number)))
    for name, value in rows:
        table.add_row(name, value)
    return table


@app.command("list")
def list_(
    db: DbOption = None,
    dataset: Annotated[str | None, typer.Option(help="Only experiments on this dataset.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, newest first.")] = 20,
    json_out: JsonOption = False,
) -> None:
    """List experiments, newest first, with their main statistics."""
    with handle_errors():
        client = open_client(db)
        # include_stats=True: each is a TracerSessionResult
        items = cast("list[TracerSessionResult]", list(client.list_projects(
            reference_free=False, reference_dataset_name=dataset, include_stats=True,
            limit=limit)))
        names = {str(d.id): d.name for d in client.list_datasets()}
    if json_out:
        emit_json([p.model_dump() for p in items])
        return
    if not items:
        console.print(styled("no experiments yet: run ", ("assay demo", "bold"),
                             " or evaluate()"))
        return
    table = Table()
    table.add_column("name", no_wrap=True)  # kept whole: it is what `show` takes
    for header in ("dataset", "runs", "p50 / p99", "errors", "cost", "feedback", "started"):
        table.add_column(header)
    for p in items:
        table.add_row(p.name, names.get(str(p.reference_dataset_id), "-"), str(p.run_count),
                      f"{secs(p.latency_p50)} / {secs(p.latency_p99)}", _rate(p.error_rate),
                      money(p.total_cost), feedback_summary(p.feedback_stats),
                      p.start_time.strftime("%Y-%m-%d %H:%M"))
    console.print(table)


def _rows(client: Any, experiment_id: Any, limit: int,
          filter_: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` root runs as rows, and how many there are."""
    roots = list(client.list_runs(project_id=experiment_id, is_root=True, filter=filter_))
    feedback: dict[str, dict[str, Any]] = {}
    for fb in client.list_feedback(project_ids=[experiment_id]):
        if fb.run_id is not None and fb.comparative_experiment_id is None:  # not pairwise
            feedback.setdefault(str(fb.run_id), {})[fb.key] = (
                fb.score if fb.score is not None else fb.value)
    out = []
    for run in roots[:limit]:
        out.append({
            "id": str(run.id),
            "example_id": str(run.reference_example_id) if run.reference_example_id else None,
            "repetition": run.metadata.get("repetition"),
            "inputs": run.inputs,
            "outputs": run.outputs,
            "error": error_line(run.error),
            "latency": run.latency.total_seconds() if run.latency is not None else None,
            "feedback": feedback.get(str(run.id), {}),
        })
    return out, len(roots)


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Experiment name or id.")],
    db: DbOption = None,
    limit: Annotated[int, typer.Option(min=0, help="Show at most this many runs.")] = 20,
    filter_: Annotated[str | None, typer.Option(
        "--filter", "-f", help="Only the rows whose run matches: "
        'and(eq(feedback_key, "correct"), eq(feedback_score, 0)).')] = None,
    json_out: JsonOption = False,
) -> None:
    """Show one experiment: its statistics, what it ran on, and its runs."""
    import uuid

    with handle_errors():
        client = open_client(db)
        try:
            key: dict[str, Any] = {"project_id": uuid.UUID(name)}
        except ValueError:
            key = {"project_name": name}
        with as_experiment():
            stats = client.read_project(include_stats=True, **key)
        rows, total = _rows(client, stats.id, limit, filter_)
    if json_out:
        emit_json({"experiment": stats.model_dump(), "runs": rows})
        return
    console.print(stats_table(stats, title=f"experiment {stats.name}"))
    meta = stats.metadata
    git = meta.get("git") or {}
    facts = [f"dataset version {meta.get('dataset_version') or '-'}",
             f"splits {', '.join(meta.get('dataset_splits') or []) or '-'}",
             f"repetitions {meta.get('num_repetitions', 1)}"]
    if git:
        facts.append(f"git {str(git.get('commit') or '')[:10]} on {git.get('branch')}"
                     + (" (dirty)" if git.get("dirty") else ""))
    console.print("  ".join(facts))
    if not rows:
        return
    keys = sorted({k for r in rows for k in r["feedback"]})
    table = Table("rep", "inputs", "outputs", "error", "latency", *keys)
    for r in rows:
        rep = r["repetition"]
        table.add_row("-" if rep is None else str(rep), _brief(r["inputs"]), _brief(r["outputs"]),
                      (r["error"] or "")[:40], secs(r["latency"]),
                      *[_score(r["feedback"].get(k)) for k in keys])
    console.print(table)
    if total > len(rows):
        console.print(f"the first {len(rows)} of {total} runs: --limit shows more", style="dim")


try:  # `compare` belongs to its own module; register it in this group when present
    from ._compare import compare as _compare_command
except ImportError:  # pragma: no cover
    _compare_command = None  # type: ignore[assignment]  # the optional module is absent
if _compare_command is not None:
    app.command("compare")(_compare_command)
