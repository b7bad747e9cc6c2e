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
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["driver", "sqlite"]

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


sqlite: ModuleType = _load()


def driver() -> ModuleType:
    """The DB-API module (``sqlite3``'s interface) whose SQLite assay's stores use."""
    return sqlite
