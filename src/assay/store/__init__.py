"""Persistence: the only package that writes SQL.

``Store.open(url)`` opens SQLite (default ``.assay/assay.db``) or PostgreSQL and applies
migrations; its repositories (``datasets``, ``examples``, ``projects``, ``runs``, ``feedback``,
``keys``) return the records of ``assay.schemas``.
"""

from ._base import Store, open_store
from ._driver import driver as sqlite_driver
from ._engine import DEFAULT_DB_PATH, resolve_url
from ._migrate import HEAD, upgrade
from ._tables import DEFAULT_TENANT_ID

__all__ = ["Store", "open_store", "resolve_url", "upgrade", "HEAD", "DEFAULT_DB_PATH",
           "DEFAULT_TENANT_ID", "sqlite_driver"]
