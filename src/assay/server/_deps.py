"""Request dependencies: the caller's workspace (from ``x-api-key``) and decoded bodies.

Authentication runs before the body is read, so a request without a valid key gets a 401 and is
never parsed. The store view handed to a handler is ``base.for_tenant(tenant_id)``: every query
it makes is confined to the caller's workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from .._json import model_jsonable
from ..errors import AuthError
from ..store import Store
from . import _body
from ._folder import Folder

__all__ = ["FolderDep", "JsonBody", "JsonResponse", "Parts", "Settings", "StoreDep", "dump",
           "json_body", "json_query",
           "multipart_body", "ok", "tenant_store"]


@dataclass(frozen=True)
class Settings:
    """Server options (``create_app`` keywords, ``assay serve`` flags)."""

    max_body_bytes: int = 64 * 1024 * 1024
    max_attachment_bytes: int = 32 * 1024 * 1024  # one attachment (413 over it)
    batch_size_limit: int = 100
    auth: bool = True

    @property
    def ingest_size_limit_bytes(self) -> int:
        # what the SDKs may pack into one ingest request, leaving room for multipart overhead
        return max(1024, self.max_body_bytes // 2)


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _api_key(request: Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return None


async def tenant_store(request: Request) -> Store:
    """The store view of the workspace owning the request's API key (401 otherwise).

    async: a key authenticated within the cache's lifetime is answered on the event loop; as a
    sync dependency every request paid a hop to the thread pool and back for it. A key not
    cached yet is looked up in the pool (a database read)."""
    base: Store = request.app.state.store
    if not _settings(request).auth:  # `assay serve --no-auth`: one person, default workspace
        return base
    key = _api_key(request)
    if not key:
        raise AuthError("missing API key: send it in the x-api-key header")
    keys = base.keys
    tenant = keys.cached(key)
    if tenant is None:
        tenant = await run_in_threadpool(keys.authenticate, key)
    return base.for_tenant(tenant)


async def json_body(request: Request) -> Any:
    return await _body.read_json(request, _settings(request).max_body_bytes)


async def multipart_body(request: Request) -> list[_body.Part]:
    return await _body.read_multipart(request, _settings(request).max_body_bytes)


JsonBody = Annotated[Any, Depends(json_body)]
Parts = Annotated[list[_body.Part], Depends(multipart_body)]
StoreDep = Annotated[Store, Depends(tenant_store)]


async def _folder(request: Request) -> Folder | None:
    # async: a sync dependency costs every request a hop to the thread pool and back
    return request.app.state.folder  # None: a fold process indexes (``_fold_process``)


FolderDep = Annotated[Folder | None, Depends(_folder)]


def json_query(value: str | None, name: str) -> dict[str, Any] | None:
    """A query parameter holding a JSON object (e.g. ``metadata={"k": "v"}``)."""
    if value is None:
        return None
    data = _body.loads(value, f"query parameter {name!r}")
    if not isinstance(data, dict):
        from ._errors import ApiError

        raise ApiError(422, "invalid_input", f"query parameter {name!r} must be a JSON object")
    return data


def dump(value: Any) -> Any:
    """Records (or lists of them) as JSON-ready data, shaped as the wire format."""
    if isinstance(value, list):
        return [dump(v) for v in value]
    if hasattr(value, "model_dump"):
        return model_jsonable(value)  # lone surrogates kept exact, keys too
    return value


class JsonResponse(JSONResponse):
    """Starlette's JSON answer, which cannot encode a lone surrogate as UTF-8: those (stored
    as sent, see ``assay._json``) go out as ``\\ud800`` escapes, as the SDKs sent them."""

    def render(self, content: Any) -> bytes:
        try:  # orjson: 30x faster than the stdlib encoder Starlette uses (7 -> 0.2 ms per 100 runs)
            return orjson.dumps(content)
        except (orjson.JSONEncodeError, TypeError):
            pass  # a lone surrogate (or a type orjson does not know): the general path
        try:
            return super().render(content)
        except UnicodeEncodeError:
            import json

            return json.dumps(content, ensure_ascii=True, allow_nan=False,
                              separators=(",", ":")).encode()


def ok(value: Any, status: int = 200) -> JSONResponse:
    return JsonResponse(dump(value), status_code=status)
