"""``assay serve``: run the team server (LangSmith-compatible REST API) with uvicorn."""

from __future__ import annotations

import enum
import os
from typing import Annotated

import typer

from ._common import DbOption, console, handle_errors, styled

__all__ = ["serve"]


class FoldMode(enum.StrEnum):
    auto = "auto"
    process = "process"
    thread = "thread"


def serve(
    db: DbOption = None,
    host: Annotated[str,
                    typer.Option(help="Interface to listen on (0.0.0.0 for all).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 1984,
    workers: Annotated[int,
                       typer.Option(min=1, help="Worker processes (use >1 with PostgreSQL).")] = 1,
    max_body_bytes: Annotated[
        int,
        typer.Option(min=1024, help="Largest request body accepted, compressed or not (bytes).")
    ] = 64 * 1024 * 1024,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    no_auth: Annotated[bool, typer.Option(
        "--no-auth",
        help="Serve the default workspace without API keys (only on 127.0.0.1).")] = False,
    fold: Annotated[FoldMode, typer.Option(
        help="Who indexes what ingest journals: a process of its own beside the workers "
             "(accepting and indexing on separate cores), or a thread in each worker, which "
             "folds in the gaps between requests (one process fewer, ~30-45% fewer runs/s "
             "indexed on 2 cores); auto: the process.")
    ] = FoldMode.auto,
) -> None:
    """Serve the store over HTTP for the official LangSmith SDKs and assay's remote Client.

    Clients authenticate with an API key from `assay keys create`; point the SDKs at it with
    LANGSMITH_ENDPOINT=http://HOST:PORT and LANGSMITH_API_KEY=<key>.
    """
    from ..errors import require

    uvicorn = require("uvicorn", "server", "assay serve")
    require("fastapi", "server", "assay serve")
    from ..store import Store, resolve_url

    if no_auth and host not in ("127.0.0.1", "localhost", "::1"):
        console.print(styled(("error:", "red"), " --no-auth only listens on 127.0.0.1: anyone "
                             "who can reach another interface would get the whole store"))
        raise typer.Exit(2)
    from .._model_prices import check_environment

    with handle_errors():
        check_environment()  # ASSAY_MODEL_PRICES: a bad rule refused before serving
        url = resolve_url(db)
        store = Store.open(url)  # migrate once, before any worker starts
        shown = store.url
        store.close()
    # workers re-create the app from these variables (uvicorn --factory)
    os.environ["ASSAY_DATABASE_URL"] = url
    os.environ["ASSAY_MAX_BODY_BYTES"] = str(max_body_bytes)
    os.environ["ASSAY_SERVER_NO_AUTH"] = "1" if no_auth else ""
    if fold is FoldMode.auto:
        fold = FoldMode.process
    os.environ["ASSAY_SERVER_FOLD"] = fold.value
    console.print(f"assay serving {shown} on http://{host}:{port} ({workers} worker(s), "
                  f"fold: {fold.value})")
    folder = None
    if fold is FoldMode.process:
        from ..store._fold_process import FoldProcess

        folder = FoldProcess(url)
        folder.start()
    try:
        uvicorn.run("assay.server:app_from_env", factory=True, host=host, port=port,
                    workers=workers, log_level=log_level)
    finally:
        if folder is not None:
            folder.stop()
