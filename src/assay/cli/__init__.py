"""The ``assay`` command line."""

from __future__ import annotations

import typer

from . import _datasets, _db

__all__ = ["app", "main"]

app = typer.Typer(
    name="assay",
    help="Evaluate LLM agents: datasets, experiments, statistics, and a LangSmith-compatible server.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(_db.app, name="db")
app.add_typer(_datasets.app, name="datasets")


def main() -> None:
    app()
