"""The web UI: server-rendered pages over the store, mounted by ``assay serve`` at ``/``.

Jinja2 templates ship inside the package, CSS and the little JavaScript that sorts tables are
inlined, and charts are SVG drawn on the server: nothing to build at install time and nothing
fetched from the internet when a page opens.

``create_ui_router(get_store)`` gives a FastAPI router; ``get_store`` is a dependency returning the
request's Store view, or a ``LoginRedirect`` to send the browser to the login form first.
``StoreFromKey(store, auth=...)`` is the usual one: it reads an API key from
the ``assay_api_key`` cookie (set by ``/ui/login``) or the ``x-api-key`` header.
"""

from ._auth import COOKIE_NAME, LoginRedirect, StoreFromKey
from ._router import create_ui_router, ui_router_for

__all__ = ["COOKIE_NAME", "LoginRedirect", "StoreFromKey", "create_ui_router", "ui_router_for"]
