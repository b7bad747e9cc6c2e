"""Alembic migrations, applied when a store is opened and by ``assay db upgrade``.

Opening a store checks the recorded revision first and only imports Alembic when the schema is
behind, so the common case costs one query. Upgrades hold the database's write lock (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock), so two processes opening a new store at once
do not both try to create it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from ..errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["HEAD", "current_revision", "upgrade"]

HEAD = "0017"
_MIGRATIONS = Path(__file__).parent / "migrations"
_PG_LOCK = 0x617373617900  # "assay\0"


def current_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _alembic_config(conn: Connection) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Bring the schema to ``revision`` (default head); return the revision now recorded."""
    with engine.connect() as probe:
        if revision == "head" and current_revision(probe) == HEAD:
            return HEAD
    from alembic import command

    try:
        with engine.connect().execution_options(assay_write=True) as conn:
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK})
                if revision != "head" or current_revision(conn) != HEAD:
                    command.upgrade(_alembic_config(conn), revision)
                now = current_revision(conn)
    except Exception as exc:
        raise StoreError(f"migrating the store to {revision} failed: {exc}") from exc
    return now or ""
