"""Shared CLI plumbing: the store option, JSON output and error exit codes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from .._json import jsonable
from ..errors import AssayError, InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from ..client import Client
    from ..store import Store

__all__ = ["DbOption", "JsonOption", "as_experiment", "console", "emit_json", "err_console",
           "error_line", "handle_errors", "money", "open_client", "open_store", "require_store",
           "secs", "styled"]

# Without markup: what the CLI prints is mostly data (names, inputs, errors, install hints), and
# rich reads ``[langgraph]`` in "pip install 'assay[langgraph]'" as a style tag and drops it
# (an error text with ``[/...]`` in it even raised). Styles are given as ``Text`` (``styled``).
# Piped (``assay runs list | grep ...``, a file, CI's log), rich would lay tables out for 80
# columns and cut every cell to a letter; there the width is the content's (up to
# ``_PIPED_WIDTH``), unless COLUMNS says otherwise. A terminal's width is its own.
_PIPED_WIDTH = 400


def _width(stream: Any) -> int | None:
    if os.environ.get("COLUMNS"):
        return None
    try:
        return None if stream.isatty() else _PIPED_WIDTH
    except (AttributeError, ValueError):  # (a closed or odd stream)
        return _PIPED_WIDTH


console = Console(markup=False, width=_width(sys.stdout))
err_console = Console(stderr=True, markup=False, width=_width(sys.stderr))


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

# exit codes (README, "The command line"): 0 ok, 1 failed check (a regression, ``db check``),
# 2 bad input (typer's usage errors too), 3 not found, 4 other assay error (e.g. the store)
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


def emit_json(data: Any, *, lines: bool = False) -> None:
    """``data`` as JSON on stdout, indented; ``lines``: on one line (JSON Lines, one object
    per report of a command that goes on reporting), flushed."""
    sys.stdout.write(json.dumps(jsonable(data), indent=None if lines else 2) + "\n")
    if lines:
        sys.stdout.flush()


@contextmanager
def handle_errors() -> Iterator[None]:
    """assay's errors as one line on stderr and their exit code. ``soft_wrap``: the line is
    not cut at rich's width (80 columns when stderr is a pipe) but left to the terminal."""
    try:
        yield
    except InvalidInputError as exc:
        err_console.print(styled(("error:", "red"), f" {exc}"), soft_wrap=True)
        raise typer.Exit(EXIT_INPUT) from None
    except NotFoundError as exc:
        err_console.print(styled(("not found:", "red"), f" {exc}"), soft_wrap=True)
        raise typer.Exit(EXIT_NOT_FOUND) from None
    except AssayError as exc:
        err_console.print(styled(("error:", "red"), f" {exc}"), soft_wrap=True)
        raise typer.Exit(EXIT_ERROR) from None


@contextmanager
def as_experiment() -> Iterator[None]:
    """The store calls every experiment a project: name it as the experiments commands do."""
    try:
        yield
    except NotFoundError as exc:
        text = str(exc)
        if not text.startswith("project "):
            raise
        raise NotFoundError("experiment " + text.removeprefix("project ")) from exc


def require_store(db: str | None) -> None:
    """Refuse a SQLite store that does not exist: opening it would create it, and a read-only
    command given a mistyped ``--db`` would answer from a new, empty store (and leave it
    behind). Commands that write (import, demo, serve, keys create, db upgrade) skip this."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from ..store import resolve_url

    try:
        url = make_url(resolve_url(db))
    except ArgumentError:  # opening the store names a malformed URL
        return
    database = url.database or ""
    if (url.get_backend_name() != "sqlite" or database in ("", ":memory:")
            or url.query.get("uri") or Path(database).exists()):
        return
    if db is None:
        raise NotFoundError(f"no store yet at {database}: `assay demo`, `assay datasets import "
                            "FILE` or evaluate() create one here; --db names another")
    source = "ASSAY_DATABASE_URL" if os.environ.get("ASSAY_DATABASE_URL") == db else "--db"
    raise InvalidInputError(f"no store at {database}: the file does not exist (check {source}; "
                            "`assay db upgrade --db PATH` creates an empty store)")


def open_client(db: str | None, *, create: bool = False) -> Client:
    """The CLI's client; ``create``: a missing SQLite store is made (else refused, see
    ``require_store``). With ``ASSAY_API_URL`` and no ``--db`` the client is remote."""
    from ..client import Client

    if not create and (db is not None or not os.environ.get("ASSAY_API_URL")):
        require_store(db)
    return Client(database_url=db)


def open_store(db: str | None, *, create: bool = False, migrate: bool = True) -> Store:
    """``Store.open`` for the commands that use the store directly; ``create`` as in
    ``open_client``."""
    from ..store import Store

    if not create:
        require_store(db)
    return Store.open(db, migrate=migrate)
