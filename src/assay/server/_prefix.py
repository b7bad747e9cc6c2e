"""The REST API under ``/api/v1`` and ``/api`` too, as a self-hosted LangSmith serves it.

People point the SDKs at ``https://host/api/v1`` (a self-hosted LangSmith's endpoint), and the
SDKs derive the web UI's links from that endpoint by cutting the suffix: ``evaluate()``'s printed
experiment URL, ``share_run``'s link. Serving the API under the prefix as well makes those links
land on assay's own web UI on the same host and port. The prefix becomes the ASGI ``root_path``
(Starlette's mount semantics), so the routes, and the URLs the server builds, stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ApiPrefixMiddleware", "route_paths"]

_PREFIXES = ("/api/v1", "/api")  # /api/v1/platform/... is /v1/platform/... under /api
_GROUP = re.compile(r"\(\?P<\w+>")


def route_paths(routes: Iterable[Any]) -> re.Pattern[str]:
    """One pattern for every route's path (any method), walking included routers."""
    found: list[str] = []
    stack = list(routes)
    while stack:
        route = stack.pop()
        if hasattr(route, "original_router"):  # an included router, walked lazily by FastAPI
            stack.extend(route.original_router.routes)
            continue
        regex = getattr(route, "path_regex", None)
        if regex is not None:
            body = _GROUP.sub("(?:", regex.pattern.removeprefix("^").removesuffix("$"))
            found.append(f"(?:{body})")  # unnamed: the same parameter name recurs
    return re.compile("|".join(found) or r"(?!)")


class ApiPrefixMiddleware:
    """Serve ``/api/v1/<path>`` and ``/api/<path>`` as ``<path>`` when a route answers that and
    none answers the path as it is (``/api/v2/...``, ``/api/v1/platform/...`` live there
    themselves); every other request passes through after one ``startswith``."""

    def __init__(self, app: ASGIApp, routes: re.Pattern[str]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if (path.startswith("/api/") and not scope.get("root_path")
                    and not self.routes.fullmatch(path)):
                for prefix in _PREFIXES:
                    if path.startswith(prefix + "/") and self.routes.fullmatch(
                            path[len(prefix):]):
                        scope = dict(scope, root_path=prefix)
                        break
        await self.app(scope, receive, send)
