"""``assay db``: schema migrations."""

from __future__ import annotations

from typing import Annotated

import typer

from ..store import HEAD, Store
from ._common import DbOption, JsonOption, console, emit_json, handle_errors

app = typer.Typer(help="Manage the store's schema.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(
    db: DbOption = None,
    revision: Annotated[str, typer.Option(help="Target revision (default: head).")] = "head",
    json_out: JsonOption = False,
) -> None:
    """Apply pending migrations to the store (opening a store also does this)."""
    with handle_errors():
        store = Store.open(db, migrate=False)
        before = store.schema_version()
        after = store.upgrade(revision)
    if json_out:
        emit_json({"url": store.url, "from": before, "to": after, "head": HEAD})
    else:
        console.print(f"{store.url}: schema {before or 'empty'} -> {after} (head {HEAD})")


@app.command("version")
def version(db: DbOption = None, json_out: JsonOption = False) -> None:
    """Show the store's recorded schema version."""
    with handle_errors():
        store = Store.open(db, migrate=False)
        current = store.schema_version()
    if json_out:
        emit_json({"url": store.url, "version": current, "head": HEAD})
    else:
        console.print(f"{store.url}: schema {current or 'empty'} (head {HEAD})")
