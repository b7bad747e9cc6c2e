"""The part of a fold done before its transaction: entries read and decoded, rows built.

On SQLite a fold holds the database's one write lock from its first statement to its commit,
and while it holds it no append can commit: the server's requests wait for it. About half of a
fold of the server's runs is work on the batch alone (decompressing and parsing the entry,
building each run's row: its columns, tokens, cost and first token), which needs no lock.
``prepare`` does that part with a plain read of the journal, outside any write transaction,
so the fold process (``assay serve --fold process``) works on the next batch while the server
appends, and its transaction then only writes (``Journal.fold_some(..., ready=...)``).

Nothing here is trusted by the transaction: it reads its entries again under the lock and
takes a prepared one only when the entry is still there with the same bytes (another fold
may have folded it meanwhile, and SQLite may give a later entry a deleted one's ``seq``);
anything else it decodes and builds itself, as without ``ready``. A prepared row leaves its
session to the transaction (a project may have to be created, which is a write).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._model_prices import batch_rules
from ._fold_rows import admitted_as_text, prebuilt_rows

if TYPE_CHECKING:
    from ._journal import Journal

__all__ = ["MISSING", "Ready", "prepare"]

MISSING = object()  # an entry not prepared, or not as it is now


class Ready:
    """Entries decoded before the fold's transaction (``seq`` -> their bytes and batch), the
    rows built of their admitted posts (``id(post)`` -> row, see ``prebuilt_rows``; the
    batches keep the posts alive, so their ids stay theirs), and how many entries were read
    (``count``: the fold that takes them folds as many, not the ones appended since, whose rows
    it would build under the write lock)."""

    __slots__ = ("count", "entries", "rows")

    def __init__(self, count: int = 0) -> None:
        self.count = count
        self.entries: dict[int, tuple[bytes, Any]] = {}
        self.rows: dict[int, list[Any]] = {}

    def batch(self, entry: Any) -> Any:
        """The entry's decoded batch if it was prepared as it is now, else ``MISSING``."""
        got = self.entries.get(entry.seq)
        if got is None or got[0] != bytes(entry.payload):
            return MISSING
        return got[1]


def prepare(journal_: Journal, rows: int) -> Ready | None:
    """The oldest ``rows`` journal entries, decoded, with their admitted runs' rows built;
    None when the journal is empty. An entry that does not decode is left to the fold (which
    counts and logs it)."""
    from ._journal import RUNS, decode, next_entries
    from ._queue import queue_store

    store = journal_.store
    with store.read() as conn:  # the entries the fold will take, as it takes them
        entries = next_entries(conn, queue_store(store, create=False), rows, None,
                               claim_missing=False)[0]
    if not entries:
        return None
    ready = Ready(len(entries))
    for entry in entries:
        data = bytes(entry.payload)
        try:
            payload = decode(data)
        except Exception:  # noqa: BLE001 - the transaction decodes it again and says why
            continue
        ready.entries[entry.seq] = (data, payload)
        if entry.kind == RUNS and isinstance(payload, dict) and admitted_as_text(payload):
            with batch_rules(payload):
                prebuilt_rows(payload.get("posts") or (), entry.tenant_id, ready.rows)
    return ready
