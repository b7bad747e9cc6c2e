"""The team server: the LangSmith REST API that the official SDKs use, over an assay store.

``create_app(store_url)`` builds the FastAPI app (``assay serve`` runs it with uvicorn). Every
request carries an API key (``x-api-key``) that selects one workspace; nothing crosses
workspaces. Point the official SDKs at it with ``LANGSMITH_ENDPOINT`` / ``LANGSMITH_API_KEY``,
or assay's own ``Client(api_url=..., api_key=...)``.
"""

from ._app import DEFAULT_MAX_BODY_BYTES, app_from_env, create_app

__all__ = ["DEFAULT_MAX_BODY_BYTES", "app_from_env", "create_app"]
