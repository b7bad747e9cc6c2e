"""The fold's new runs into PostgreSQL: one ``COPY ... FROM STDIN``, its rows as text.

psycopg's ``Copy.write_row`` formats each row in C but picks a dumper for each value on the
way: ~8 us a run row on a slow machine, a fifth of the PostgreSQL fold's own CPU. The fold's
rows hold only str, int, float, bool and None, so ``_cencode.copy_text`` writes a chunk of
them at once, byte for byte as psycopg would, and the chunk goes out with ``Copy.write``.
Where the C module is not built, or a chunk holds a value it does not write, the chunk's rows
go through ``write_row`` as before (which formats them, or fails on them, as it always did).
Rows are written in chunks as they come, so the server indexes one chunk while the fold
builds the next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import event

from .._compiled import compiled

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["SHARED", "CopyRows", "SharedCopy", "copy_sql", "write_rows"]

_CENCODE = compiled("assay.store._cencode")
_TEXT: Any = getattr(_CENCODE, "copy_text", None)
# rows a chunk: ~40 KB of the fold's run rows, psycopg's own write buffer's size
CHUNK = 64


def copy_sql(conn: Connection, order: Sequence[str], table: str = "runs") -> str:
    """``COPY table (...) FROM STDIN`` for the columns ``order`` (quoted as the dialect
    does)."""
    quote = conn.dialect.identifier_preparer.quote
    return f"COPY {quote(table)} ({', '.join(quote(c) for c in order)}) FROM STDIN"


def write_rows(copy: Any, rows: Sequence[Sequence[Any]]) -> None:
    """``rows`` into the open ``copy``: as one text block where ``copy_text`` writes them all,
    else row by row."""
    data = _TEXT(rows) if _TEXT is not None else None
    if data is None:
        for row in rows:
            copy.write_row(row)
    else:
        copy.write(data)


class CopyRows:
    """A ``COPY`` of rows into ``table`` in the connection's transaction (and savepoint),
    opened at the first row, fed chunk by chunk, ended on leaving (failed on an exception,
    which rolls its rows back with the transaction or savepoint). While a ``SharedCopy`` of
    the same columns is open on the connection, the rows go into it instead and leaving ends
    nothing (its columns past this one's written NULL); one of other columns is ended first (a
    connection runs one COPY at a time)."""

    def __init__(self, conn: Connection, order: Sequence[str], table: str = "runs") -> None:
        self.conn = conn
        self.order = order
        self.table = table
        self._pending: list[Sequence[Any]] = []
        self._stack = contextlib.ExitStack()
        self._copy: Any = None
        shared = conn.info.get(SHARED) if self.__class__ is CopyRows else None
        self._into: SharedCopy | None = None
        self._pad: tuple[None, ...] = ()
        if shared is not None:
            if shared.table == table and tuple(shared.order[:len(order)]) == tuple(order):
                self._into = shared  # its further columns NULL (a plain run's usage)
                self._pad = (None,) * (len(shared.order) - len(order))
            else:
                shared.end()

    def write(self, row: Sequence[Any]) -> None:
        if self._into is not None:
            self._into.write((*row, *self._pad) if self._pad else row)
            return
        self._pending.append(row)
        if len(self._pending) >= CHUNK:
            self._flush()

    def write_all(self, rows: Sequence[Sequence[Any]]) -> None:
        if self._into is not None:
            pad = self._pad
            self._into.write_all([(*row, *pad) for row in rows] if pad else rows)
            return
        for at in range(0, len(rows), CHUNK):
            self._pending.extend(rows[at:at + CHUNK])
            self._flush()

    def _flush(self) -> None:
        if self._copy is None:
            raw: Any = self.conn.connection.driver_connection  # this transaction (savepoint)
            cur = self._stack.enter_context(raw.cursor())
            sql = copy_sql(self.conn, self.order, self.table)
            self._copy = self._stack.enter_context(cur.copy(sql))
        rows, self._pending = self._pending, []
        write_rows(self._copy, rows)

    def __enter__(self) -> CopyRows:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._into is not None:
            return  # the shared COPY's rows: ended by its owner (or by the next statement)
        if exc[0] is None and self._pending:
            try:
                self._flush()
            except BaseException as error:
                self._stack.__exit__(type(error), error, error.__traceback__)
                raise
        self._stack.__exit__(*exc)  # ends the COPY (fails it on an exception)


SHARED = "assay.shared_copy"  # the connection's ``info`` key of its open ``SharedCopy``


class SharedCopy(CopyRows):
    """One ``COPY`` that the fold's batches write into, one after another, for a whole
    transaction (``_fold_stream``): each batch's rows go to the server as soon as they are
    built, and the server indexes them while the fold decodes and builds the next batch
    (the socket's buffers hold what it has not read yet). Ending a COPY waits for the server
    to have written every row, so batches that each had their own COPY took turns with the
    server instead. Any statement on the connection ends it first (``end_before``: a
    connection runs nothing else during a COPY); rows written after that open a new one."""

    def __enter__(self) -> SharedCopy:
        self.conn.info[SHARED] = self
        event.listen(self.conn, "before_cursor_execute", _end_before)
        return self

    def end(self) -> None:
        """Send what is pending and end the COPY (the server has written its rows then)."""
        if self._pending:
            self._flush()
        stack, self._stack, self._copy = self._stack, contextlib.ExitStack(), None
        stack.close()

    def __exit__(self, *exc: Any) -> None:
        self.conn.info.pop(SHARED, None)
        event.remove(self.conn, "before_cursor_execute", _end_before)
        if exc[0] is None:
            self.end()
        else:
            self._stack.__exit__(*exc)  # fails the COPY: the transaction is rolled back


def _end_before(conn: Connection, *_args: Any) -> None:
    shared = conn.info.get(SHARED)
    if shared is not None and (shared._copy is not None or shared._pending):
        shared.end()
