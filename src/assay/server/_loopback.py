"""What keeps a key-less server (``assay serve --no-auth``) to its own user's browser and tools.

Without keys, the listening address is the only guard, and a browser crosses it for any web
page: a page on another site can post the UI's forms to 127.0.0.1 (feedback written, a trace
shared) or a simple request to the API, and a DNS-rebinding name (``evil.example`` resolving
to 127.0.0.1) reads the store as a same-origin page. So, key-less:

- a request whose ``Host`` is not a loopback name (127.0.0.1, localhost, ::1) is refused (421):
  a rebinding name never gets an answer;
- a request that changes anything (not GET, HEAD or OPTIONS) whose ``Origin`` is another origin
  than the one it was sent to is refused (403): browsers send ``Origin`` with cross-site posts,
  the SDKs and curl send none.

With keys, a cross-site request has no key (and the UI's cookie is ``SameSite=Lax``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from ._errors import error_response

__all__ = ["LoopbackOnlyMiddleware"]

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


def _host_name(host: str) -> str:
    """``host[:port]`` (``[::1]:port`` for IPv6) -> the name, lower case."""
    return (urlsplit(f"//{host}").hostname or "").lower()


class LoopbackOnlyMiddleware:
    """Refuse what a browser on another site, or a rebinding name, sends (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1")
                   for k, v in scope.get("headers") or [] if k in (b"host", b"origin")}
        host = headers.get("host", "")
        if _host_name(host) not in _LOOPBACK:
            resp = error_response(421, "not_loopback", f"this server has no API keys "
                                  f"(assay serve --no-auth) and answers only requests sent to "
                                  f"127.0.0.1 or localhost, not {host!r}")
            await resp(scope, receive, send)
            return
        origin = headers.get("origin")
        if scope.get("method", "GET") not in _SAFE and origin is not None:
            sent = urlsplit(origin)
            if sent.netloc.lower() != host.lower():
                resp = error_response(403, "cross_origin", f"this server has no API keys "
                                      f"(assay serve --no-auth): a page of {origin!r} cannot "
                                      "change it")
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)
