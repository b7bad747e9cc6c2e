"""``assay keys``: API keys of the team server, one workspace per key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ..errors import InvalidInputError, NotFoundError
from ._common import (
    DbOption,
    JsonOption,
    console,
    emit_json,
    err_console,
    handle_errors,
    open_store,
)

if TYPE_CHECKING:
    from ..store import Store
    from ..store._keys import ApiKey

app = typer.Typer(help="Create, list and revoke the server's API keys (one workspace each).",
                  no_args_is_help=True)


@app.command("create")
def create(
    workspace: Annotated[str, typer.Option(
        "--workspace", "-w", help="Workspace name (created if new; 'default' holds local data).")
    ] = "default",
    description: Annotated[str | None, typer.Option(help="A note on who uses the key.")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Create an API key for a workspace and print it (shown only this once)."""
    with handle_errors(), open_store(db, create=True) as store:
        key = store.keys.create(tenant=workspace, description=description)
        tenant = store.keys.tenant(key.tenant_id)
    if json_out:
        emit_json({**key.model_dump(), "workspace": tenant.name})
        return
    typer.echo(key.key)
    err_console.print(f"key id {key.id} ({key.prefix}...) for workspace {tenant.name!r}; "
                      "store it now: it is not shown again")


@app.command("list")
def list_(
    workspace: Annotated[str | None,
                         typer.Option("--workspace", "-w", help="Only this workspace.")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """List API keys (ids and prefixes, never the secrets)."""
    with handle_errors(), open_store(db) as store:
        keys = store.keys.list(tenant=workspace)
        names = {t.id: t.name for t in store.keys.list_tenants()}
    if json_out:
        emit_json([{**k.model_dump(), "workspace": names.get(k.tenant_id)} for k in keys])
        return
    table = Table("id", "prefix", "workspace", "created", "revoked", "description")
    for k in keys:
        table.add_row(k.id, k.prefix, names.get(k.tenant_id, k.tenant_id), str(k.created_at),
                      str(k.revoked_at or ""), k.description or "")
    console.print(table)


_MIN_ID_START = 8  # a shorter start of an id is not looked up: too easily a wrong key


def _revoke(store: Store, key: str) -> ApiKey:
    """By the whole id or the prefix ``keys list`` shows (the store's lookup), else by a unique
    start of the id: what the table's id column invites copying part of."""
    try:
        return store.keys.revoke(key)
    except NotFoundError:
        if len(key) < _MIN_ID_START:
            raise
        matches = [k for k in store.keys.list() if k.id.lower().startswith(key.lower())]
        if not matches:
            raise
        if len(matches) > 1:
            raise InvalidInputError(f"{key!r} starts the ids of {len(matches)} keys: give more "
                                    "of the id, or the whole id") from None
        return store.keys.revoke(matches[0].id)


@app.command("revoke")
def revoke(
    key: Annotated[str, typer.Argument(help=(
        "The key to revoke: its id (whole, or a start of it of 8 or more characters that "
        "names one key) or its prefix (asy_...), as 'assay keys list' shows them."))],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Revoke an API key: requests with it get 401 from then on."""
    with handle_errors(), open_store(db) as store:
        revoked = _revoke(store, key)
    if json_out:
        emit_json(revoked.model_dump())
        return
    console.print(f"revoked key {revoked.id} ({revoked.prefix}...)")
