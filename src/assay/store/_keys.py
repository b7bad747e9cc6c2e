"""Workspaces (tenants) and their API keys. Keys are stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from .._ids import new_id_text, utcnow
from ..errors import AuthError, ConflictError, InvalidInputError, NotFoundError
from ._tables import api_keys, tenants

if TYPE_CHECKING:

    from ._base import Store

__all__ = ["KeyRepo", "ApiKey", "Tenant", "KEY_PREFIX", "AUTH_CACHE_TTL"]

KEY_PREFIX = "asy_"
AUTH_CACHE_TTL = 5.0  # seconds a successful authentication is reused (ASSAY_AUTH_CACHE_TTL)
_CACHE_MAX = 4096  # entries; past it the cache starts over (keys in use are few)

# (database url, key hash) -> (workspace id, monotonic expiry): successes only, process-wide so
# a revocation through any Store of this process (e.g. the CLI's) drops the entry at once
_cache: dict[tuple[str, str], tuple[str, float]] = {}
_cache_lock = threading.Lock()
_revocations = [0]  # bumped by each revocation: a read that raced one is not cached


def _cache_ttl() -> float:
    raw = os.environ.get("ASSAY_AUTH_CACHE_TTL")
    if raw is None or raw == "":
        return AUTH_CACHE_TTL
    try:
        ttl = float(raw)
    except ValueError:
        ttl = -1.0
    if not ttl >= 0:  # also NaN
        raise InvalidInputError(
            f"ASSAY_AUTH_CACHE_TTL must be a number of seconds >= 0, got {raw!r}")
    return ttl


def _forget(key_hash: str) -> None:
    """Drop a key's cached authentications (every database of this process)."""
    with _cache_lock:
        _revocations[0] += 1
        for entry in [e for e in _cache if e[1] == key_hash]:
            del _cache[entry]


class Tenant(BaseModel):
    id: str
    name: str


class ApiKey(BaseModel):
    id: str
    tenant_id: str
    prefix: str
    description: str | None = None
    created_at: Any
    revoked_at: Any = None
    key: str | None = None  # the secret, only when just created


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyRepo:
    def __init__(self, store: Store, *, cache_ttl: float | None = None) -> None:
        self.store = store
        # seconds a successful ``authenticate`` is reused without a query (0: never)
        self.cache_ttl = _cache_ttl() if cache_ttl is None else cache_ttl
        self._url = store.engine.url.render_as_string(hide_password=True)

    def create_tenant(self, name: str) -> Tenant:
        if not name or not isinstance(name, str):
            raise InvalidInputError("workspace name must be a non-empty string")
        tid = new_id_text()
        try:
            with self.store.write() as conn:
                if conn.execute(select(tenants.c.id).where(tenants.c.name == name)).first():
                    raise ConflictError(f"a workspace named {name!r} already exists")
                conn.execute(tenants.insert().values(id=tid, name=name, created_at=utcnow()))
        except IntegrityError as exc:
            raise ConflictError(f"a workspace named {name!r} already exists") from exc
        return Tenant(id=tid, name=name)

    def tenant(self, name_or_id: str) -> Tenant:
        with self.store.read() as conn:
            row = conn.execute(select(tenants).where(
                (tenants.c.name == name_or_id) | (tenants.c.id == name_or_id))).first()
        if row is None:
            raise NotFoundError(f"workspace {name_or_id!r} not found")
        return Tenant(id=row.id, name=row.name)

    def list_tenants(self) -> list[Tenant]:
        with self.store.read() as conn:
            return [Tenant(id=r.id, name=r.name)
                    for r in conn.execute(select(tenants).order_by(tenants.c.created_at))]

    def create(self, *, tenant: str = "default", description: str | None = None) -> ApiKey:
        """A new key for the workspace ``tenant`` (name or id; created if it is a new name)."""
        try:
            t = self.tenant(tenant)
        except NotFoundError:
            t = self.create_tenant(tenant)
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        row: dict[str, Any] = {"id": new_id_text(), "tenant_id": t.id, "key_hash": _hash(secret),
               "prefix": secret[:10], "description": description, "created_at": utcnow()}
        with self.store.write() as conn:
            conn.execute(api_keys.insert().values(**row))
        return ApiKey(key=secret, **{k: v for k, v in row.items() if k != "key_hash"})

    def list(self, *, tenant: str | None = None) -> list[ApiKey]:
        q = select(api_keys).order_by(api_keys.c.created_at)
        if tenant is not None:
            q = q.where(api_keys.c.tenant_id == self.tenant(tenant).id)
        with self.store.read() as conn:
            return [ApiKey(id=r.id, tenant_id=r.tenant_id, prefix=r.prefix,
                           description=r.description, created_at=r.created_at,
                           revoked_at=r.revoked_at) for r in conn.execute(q)]

    def revoke(self, key_id_or_prefix: str) -> ApiKey:
        with self.store.write() as conn:
            row = conn.execute(select(api_keys).where(
                (api_keys.c.id == key_id_or_prefix)
                | (api_keys.c.prefix == key_id_or_prefix))).all()
            if not row:
                raise NotFoundError(f"API key {key_id_or_prefix!r} not found")
            if len(row) > 1:
                raise InvalidInputError(
                    f"{key_id_or_prefix!r} matches several keys: use the key id")
            conn.execute(update(api_keys).where(api_keys.c.id == row[0].id)
                         .values(revoked_at=utcnow()))
        _forget(row[0].key_hash)  # committed: this process refuses the key from now on
        return next(k for k in self.list() if k.id == row[0].id)

    def cached(self, key: str | None) -> str | None:
        """The workspace id ``authenticate`` would answer from this process's cache, or None
        (no key, not cached, or expired: ``authenticate`` asks the database). Reads nothing,
        so a server answers it on its event loop instead of a hop to the thread pool."""
        return self._cached((self._url, _hash(key))) if key else None

    def _cached(self, entry: tuple[str, str]) -> str | None:
        hit = _cache.get(entry)
        if hit is None:
            return None
        if hit[1] > time.monotonic():
            return hit[0]
        with _cache_lock:
            _cache.pop(entry, None)
        return None

    def authenticate(self, key: str | None) -> str:
        """The workspace id of a valid, unrevoked key; AuthError otherwise.

        Every request authenticates, so a success is cached in this process for ``cache_ttl``
        seconds (``AUTH_CACHE_TTL`` = 5 s unless ``ASSAY_AUTH_CACHE_TTL`` says otherwise), keyed
        by the key's hash. A key revoked through a Store of this process is refused at once;
        one revoked by another process (``assay keys revoke`` beside a running server) is
        refused within the TTL. Refusals are never cached: each one asks the database.
        """
        if not key:
            raise AuthError("missing API key: send it in the x-api-key header")
        key_hash = _hash(key)
        entry = (self._url, key_hash)
        tenant_cached = self._cached(entry)
        if tenant_cached is not None:
            return tenant_cached
        generation = _revocations[0]
        with self.store.read() as conn:
            row = conn.execute(select(api_keys.c.tenant_id, api_keys.c.revoked_at).where(
                api_keys.c.key_hash == key_hash)).first()
        if row is None:
            raise AuthError("unknown API key")
        if row.revoked_at is not None:
            raise AuthError("this API key was revoked")
        tenant: str = row.tenant_id
        if self.cache_ttl > 0:
            with _cache_lock:
                if generation != _revocations[0]:  # a revocation committed meanwhile
                    return tenant
                if len(_cache) >= _CACHE_MAX:
                    _cache.clear()
                _cache[entry] = (tenant, time.monotonic() + self.cache_ttl)
        return tenant
