"""Shared CLI plumbing: the store option, JSON output and error exit codes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from .._json import jsonable
from ..errors import AssayError, InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["DbOption", "JsonOption", "console", "emit_json", "err_console", "error_line",
           "handle_errors", "money", "open_client", "secs", "styled"]

# Without markup: what the CLI prints is mostly data (names, inputs, errors, install hints), and
# rich reads ``[langgraph]`` in "pip install 'assay[langgraph]'" as a style tag and drops it
# (an error text with ``[/...]`` in it even raised). Styles are given as ``Text`` (``styled``).
console = Console(markup=False)
err_console = Console(stderr=True, markup=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line of plain text and ``(text, style)`` pieces, printed as they are."""
    return Text.assemble(*parts)

DbOption = Annotated[
    str | None,
    typer.Option("--db", envvar="ASSAY_DATABASE_URL",
                 help="Store URL or SQLite path (default: .assay/assay.db)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

F = TypeVar("F", bound=Callable[..., Any])

# exit codes: 0 ok, 1 failed check (e.g. regression), 2 bad input, 3 not found, 4 other assay error
EXIT_INPUT, EXIT_NOT_FOUND, EXIT_ERROR = 2, 3, 4


def secs(value: float | None) -> str:
    """A duration for a table cell: milliseconds under a second."""
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.3f} s"


def error_line(error: str | None) -> str | None:
    """The line of an error that names it: assay writes ``Type: message`` first, a bare
    Python traceback (as other SDKs send it) ends with that line."""
    lines = [ln.strip() for ln in (error or "").strip().splitlines() if ln.strip()]
    if not lines:
        return None
    return lines[-1] if lines[0].startswith("Traceback (most recent call last)") else lines[0]


def money(value: float | None) -> str:
    return "-" if value is None else f"${value:.6f}"


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(jsonable(data), indent=2) + "\n")


@contextmanager
def handle_errors() -> Iterator[None]:
    try:
        yield
    except InvalidInputError as exc:
        err_console.print(styled(("error:", "red"), f" {exc}"))
        raise typer.Exit(EXIT_INPUT) from None
    except NotFoundError as exc:
        err_console.print(styled(("not found:", "red"), f" {exc}"))
        raise typer.Exit(EXIT_NOT_FOUND) from None
    except AssayError as exc:
        err_console.print(styled(("error:", "red"), f" {exc}"))
        raise typer.Exit(EXIT_ERROR) from None


def open_client(db: str | None) -> Client:
    from ..client import Client

    return Client(database_url=db)
