"""Who is looking: the UI's store dependency (API key from a cookie or the x-api-key header).

A browser cannot send a header on a link click, so ``/ui/login`` puts the key in an HTTP-only
cookie; scripts may still send ``x-api-key``. Without auth (a local ``assay serve``) every page
shows the default workspace.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from fastapi import Request

from ..errors import AuthError

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["COOKIE_NAME", "LoginRedirect", "StoreFromKey", "safe_next"]

COOKIE_NAME = "assay_api_key"


class LoginRedirect:
    """Returned (not raised) by ``StoreFromKey`` when a page needs a key: the router answers
    with a 303 to the login form. Returned because an app's own exception handlers (the
    server's turn every HTTPException into JSON) would otherwise swallow the redirect."""

    def __init__(self, path: str, error: str | None = None) -> None:
        self.location = "/ui/login?next=" + quote(path, safe="")
        if error:
            self.location += "&error=" + quote(error, safe="")


def safe_next(value: str | None) -> str:
    """Only same-site paths, so the login form cannot redirect to another site."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


class StoreFromKey:
    """FastAPI dependency giving the request's Store view (or a ``LoginRedirect``).

    ``store`` is the server's Store (or a callable returning it, read per request so an app can
    swap it). ``auth=False`` serves the store's own (default) workspace without a key.
    """

    def __init__(self, store: "Store | Callable[[], Store]", *, auth: bool = True) -> None:
        self._store = store
        self.auth = auth

    @property
    def store(self) -> "Store":
        return self._store() if callable(self._store) else self._store

    def check_key(self, key: str) -> str:
        """The workspace id of ``key``; AuthError when it is missing, unknown or revoked."""
        return self.store.keys.authenticate(key)

    def __call__(self, request: Request) -> "Store | LoginRedirect":
        base = self.store
        if not self.auth:
            return base
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        key = _key(request)
        if not key:
            return LoginRedirect(path)
        try:
            tenant = base.keys.authenticate(key)
        except AuthError as exc:
            return LoginRedirect(path, str(exc))
        return base.for_tenant(tenant)


def _key(request: Request) -> str | None:
    """x-api-key, then ``Authorization: Bearer`` (as the REST API), then the login cookie."""
    key = request.headers.get("x-api-key")
    if not key:
        auth = request.headers.get("authorization", "")
        key = auth[7:] if auth.lower().startswith("bearer ") else None
    key = key or request.cookies.get(COOKIE_NAME)
    return key.strip() if key else None
