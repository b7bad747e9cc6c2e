"""``assay keys``: API keys of the team server, one workspace per key."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..store import Store
from ._common import DbOption, JsonOption, console, emit_json, err_console, handle_errors

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
    with handle_errors(), Store.open(db) as store:
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
    with handle_errors(), Store.open(db) as store:
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


@app.command("revoke")
def revoke(
    key: Annotated[str, typer.Argument(help="The key id (or its unique prefix) to revoke.")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Revoke an API key: requests with it get 401 from then on."""
    with handle_errors(), Store.open(db) as store:
        revoked = store.keys.revoke(key)
    if json_out:
        emit_json(revoked.model_dump())
        return
    console.print(f"revoked key {revoked.id} ({revoked.prefix}...)")
