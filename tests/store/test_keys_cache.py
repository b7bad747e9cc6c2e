"""``keys.authenticate`` caches successes for a short TTL; never revocations or refusals."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import update

from assay._ids import utcnow
from assay.errors import AuthError, InvalidInputError
from assay.store import Store, _keys
from assay.store._keys import KeyRepo, _hash
from assay.store._tables import api_keys


def _revoke_elsewhere(store: Store, key_id: str) -> None:
    """Revoke as another process would: straight in the database, no hook of this process."""
    with store.write() as conn:
        conn.execute(update(api_keys).where(api_keys.c.id == key_id).values(revoked_at=utcnow()))


def test_a_key_revoked_elsewhere_is_refused_after_the_ttl(store: Store) -> None:
    repo = KeyRepo(store, cache_ttl=0.3)
    key = repo.create(tenant=f"t-{store.tenant_id[:8]}")
    assert key.key is not None
    assert repo.authenticate(key.key) == key.tenant_id
    _revoke_elsewhere(store, key.id)
    assert repo.authenticate(key.key) == key.tenant_id  # within the TTL: the cached answer
    deadline = time.monotonic() + 5
    while True:
        try:
            repo.authenticate(key.key)
        except AuthError as exc:
            assert "revoked" in str(exc)
            break
        assert time.monotonic() < deadline, "still accepted long after the TTL"
        time.sleep(0.05)
    with pytest.raises(AuthError, match="revoked"):  # and stays refused
        repo.authenticate(key.key)


def test_a_key_revoked_in_this_process_is_refused_at_once(store: Store) -> None:
    repo = KeyRepo(store, cache_ttl=600)
    key = repo.create(tenant=f"t-{store.tenant_id[:8]}")
    assert key.key is not None
    assert repo.authenticate(key.key) == key.tenant_id
    # another Store (engine) of the same database, as the CLI's `keys revoke` beside a server
    other = Store.open(store.engine.url.render_as_string(hide_password=False))
    try:
        other.keys.revoke(key.id)
    finally:
        other.close()
    with pytest.raises(AuthError, match="revoked"):
        repo.authenticate(key.key)


def test_refusals_are_never_cached(store: Store) -> None:
    repo = KeyRepo(store, cache_ttl=600)
    wrong = "asy_not-a-key-" + store.tenant_id
    for _ in range(2):
        with pytest.raises(AuthError, match="unknown"):
            repo.authenticate(wrong)
    assert not any(h == _hash(wrong) for _, h in _keys._cache)
    # the same secret becoming valid (inserted by another process) is accepted at once
    key = repo.create(tenant=f"t-{store.tenant_id[:8]}")
    with store.write() as conn:
        conn.execute(update(api_keys).where(api_keys.c.id == key.id)
                     .values(key_hash=_hash(wrong)))
    assert repo.authenticate(wrong) == key.tenant_id
    with pytest.raises(AuthError, match="missing"):
        repo.authenticate("")


def test_ttl_zero_disables_the_cache_and_bad_settings_are_named(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_AUTH_CACHE_TTL", "0")
    repo = KeyRepo(store)
    assert repo.cache_ttl == 0
    key = repo.create(tenant=f"t-{store.tenant_id[:8]}")
    assert key.key is not None
    assert repo.authenticate(key.key) == key.tenant_id
    _revoke_elsewhere(store, key.id)
    with pytest.raises(AuthError, match="revoked"):
        repo.authenticate(key.key)
    monkeypatch.setenv("ASSAY_AUTH_CACHE_TTL", "soon")
    with pytest.raises(InvalidInputError, match="ASSAY_AUTH_CACHE_TTL"):
        KeyRepo(store)
    from assay.server import create_app

    with pytest.raises(InvalidInputError, match="ASSAY_AUTH_CACHE_TTL"):  # at start, not later
        create_app(store=Store(store.engine))
    monkeypatch.delenv("ASSAY_AUTH_CACHE_TTL")
    assert KeyRepo(store).cache_ttl == _keys.AUTH_CACHE_TTL == 5.0


def test_cached_answers_only_what_authenticate_cached(store: Store) -> None:
    """``cached`` (what the server answers on its event loop) never reads the database: a key
    is there only after ``authenticate`` accepted it, and gone once revoked or expired."""
    repo = KeyRepo(store, cache_ttl=0.3)
    key = repo.create(tenant=f"t-{store.tenant_id[:8]}")
    assert key.key is not None
    assert repo.cached(key.key) is None  # valid, but not authenticated in this process yet
    assert repo.cached(None) is None and repo.cached("") is None
    assert repo.cached("asy_not-a-key-" + store.tenant_id) is None
    assert repo.authenticate(key.key) == key.tenant_id
    assert repo.cached(key.key) == key.tenant_id
    deadline = time.monotonic() + 5
    while repo.cached(key.key) is not None:  # expires with the TTL
        assert time.monotonic() < deadline, "still cached long after the TTL"
        time.sleep(0.05)
    assert repo.authenticate(key.key) == key.tenant_id
    repo.revoke(key.id)  # in this process: forgotten at once
    assert repo.cached(key.key) is None
    with pytest.raises(AuthError, match="revoked"):
        repo.authenticate(key.key)
