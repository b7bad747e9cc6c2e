"""The SQLite library assay's stores use: the one ``pysqlite3-binary`` bundles, where installed.

Python's ``sqlite3`` module uses the system's SQLite. Debian's (3.40) is built with
``OMIT_LOOKASIDE`` (every small allocation of a statement goes to ``malloc``) and
``SECURE_DELETE``; the SQLite that ``pysqlite3-binary`` bundles (3.51) is built without them.
An insert into ``runs`` with its indexes takes 41.0k instructions a row there against 54.4k
with Debian's (-25%; wall time alike, 11.5 against 15.5 us a row on one machine); a whole fold
of traced runs, 74.7k against 79.5k a run (-6%), the first read after an experiment -4.5%
(bench/README.md, stop 50). So the dependency is installed where it has wheels (Linux on
x86_64) and used when importable; ``ASSAY_SQLITE_DRIVER=stdlib`` keeps the ``sqlite3`` module.

Every connection assay opens to a SQLite file goes through ``sqlite`` (``driver()``): the
stores' engines, the checkpoint thread. Two copies of SQLite in one process must not open the
same file at once: POSIX locks belong to the process, and one copy closing the file drops the
locks the other holds (SQLite's "How To Corrupt" §2.2.1). Code that opens an assay database
itself while assay has it open, in the same process, should use ``assay.store.sqlite_driver()``.

``marked`` writes SQL text for whichever driver a connection has (SQLite's or psycopg's);
``in_marks`` an ``IN (...)`` list whose text the driver's statement cache keeps.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["driver", "in_marks", "marked", "sqlite"]

ENV = "ASSAY_SQLITE_DRIVER"  # "stdlib": Python's sqlite3 module, whatever is installed


def _load() -> ModuleType:
    if os.environ.get(ENV, "").strip().lower() != "stdlib":
        try:
            from pysqlite3 import dbapi2  # type: ignore[import-not-found, import-untyped, unused-ignore]

            return dbapi2  # type: ignore[no-any-return, unused-ignore]
        except ImportError:
            pass
    import sqlite3

    return sqlite3


def _quick_binds(module: ModuleType) -> None:
    """Adapters for ``None`` and ``bool``, where none is registered. Without one, the driver
    looks for ``__adapt__`` and ``__conform__`` before it binds such a value (making and
    clearing an ``AttributeError`` each time): 0.9 us a ``None`` and 0.5 a ``bool`` with
    Python's module, 1.7 and 1.9 with pysqlite3's, against ~0.2 with the adapter found at once
    (an ``executemany`` of 20,000 rows: bench/README.md, stop 50). The values bound are the
    same: NULL, and a bool as the integer SQLite stores for it."""
    adapters, protocol = getattr(module, "adapters", None), getattr(module, "PrepareProtocol", None)
    if not isinstance(adapters, dict) or protocol is None:
        return
    for cls, adapt in ((type(None), {None: None}.get), (bool, int)):
        if (cls, protocol) not in adapters:
            module.register_adapter(cls, adapt)


sqlite: ModuleType = _load()
_quick_binds(sqlite)


def driver() -> ModuleType:
    """The DB-API module (``sqlite3``'s interface) whose SQLite assay's stores use."""
    return sqlite


@functools.lru_cache(maxsize=64)
def _pyformat(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


def marked(conn: Any, sql: str) -> str:
    """``sql``, written with ``?`` marks, for ``conn``'s driver (``exec_driver_sql``): as it is
    for SQLite's, ``%s`` for psycopg's (a literal ``%`` doubled). SQL text sent this way is not
    compiled: a Core statement costs each new engine ~0.5-2 ms to compile, which the first
    read after an experiment paid for each of its statements (stop 52). For statements of
    plain columns only: the driver's values come back without the column types' processing."""
    return sql if conn.dialect.paramstyle == "qmark" else _pyformat(sql)


def in_marks(values: Sequence[Any]) -> tuple[str, list[Any]]:
    """SQLite's ``IN (?, ...)`` for ``values`` and the values to bind, padded to a power of two
    with the last value repeated (the rows matched are the same).

    The driver prepares each distinct SQL text and keeps a few hundred per connection
    (``_engine.CACHED_STATEMENTS``): a list of every length a batch happens to have made a
    statement prepared anew every time (a remainder of a few hundred ids: ~0.1-0.3M
    instructions) and crowded the fold's dearer statements (a 64-row insert: ~1.5M) out of
    the cache. Padded, a probe takes one of ten shapes up to 512."""
    n = len(values)
    size = 1 << (n - 1).bit_length() if n > 1 else 1
    bound = list(values)
    if size > n:
        bound.extend([bound[-1]] * (size - n))
    return f"IN ({', '.join(['?'] * size)})", bound
