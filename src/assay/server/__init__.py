"""The team server: the LangSmith REST API that the official SDKs use, over an assay store.

``create_app(store_url)`` builds the FastAPI app (``assay serve`` runs it with uvicorn). Every
request carries an API key (``x-api-key``) that selects one workspace; nothing crosses
workspaces. Point the official SDKs at it with ``LANGSMITH_ENDPOINT`` / ``LANGSMITH_API_KEY``,
or assay's own ``Client(api_url=..., api_key=...)``.

The app (FastAPI, the routes) is imported on first use of one of these names: a process that
imports one of the package's modules alone does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import DEFAULT_MAX_BODY_BYTES, app_from_env, create_app

__all__ = ["DEFAULT_MAX_BODY_BYTES", "app_from_env", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import _app

        return getattr(_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
