"""The ``assay`` command line."""

from __future__ import annotations

import inspect

import typer

from . import _datasets, _db, _demo, _experiments, _keys, _online, _prices, _runs, _serve

__all__ = ["app", "main"]

app = typer.Typer(
    name="assay",
    help=("Evaluate LLM agents: datasets, experiments, statistics, and a LangSmith-compatible"
          " server."),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(_db.app, name="db")
app.add_typer(_datasets.app, name="datasets")
app.add_typer(_experiments.app, name="experiments")
app.command("demo")(_demo.demo)
app.add_typer(_keys.app, name="keys")
app.command("online")(_online.online)
app.command("prices")(_prices.prices)
app.add_typer(_runs.app, name="runs")
app.command("serve")(_serve.serve)


def _reflow_help(group: typer.Typer) -> None:
    """Each paragraph of a command's docstring as one line. typer (rich mode) keeps the line
    breaks of the paragraphs after the first, and rich breaks those lines again at its width:
    at 80 columns a word or two stood alone on every other line of ``--help``."""
    for info in group.registered_commands:
        if info.help is None and info.callback is not None:
            doc = inspect.getdoc(info.callback) or ""
            info.help = "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n"))
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _reflow_help(sub.typer_instance)


_reflow_help(app)


def main() -> None:
    app()
