"""The ``assay`` command line."""

from __future__ import annotations

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


def main() -> None:
    app()
