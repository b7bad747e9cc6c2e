"""The journal: batches of runs and feedback made durable now, indexed before the next read.

A row of ``runs`` costs tens of microseconds to write (30 columns, seven indexes, the session
and hourly aggregates), more than a no-op target and its evaluator cost to run. assay's own
bulk writers (the tracing writer, ``evaluate()``'s feedback sink, and the server's ingest
through ``admit``) therefore append each batch as one JSON row here: a few microseconds per
run, committed, so a crash loses nothing (the tracing writer's finished runs as lists of
values, their column names once per batch, a dotted order the writer did not need left for the
fold to derive, their inputs and outputs as the JSON text the fold stores: the batch names
such columns in ``json``, so entries written before, which hold the values, still fold).
The JSON is zstd-compressed (level 1, ~50x for runs; zlib before, whose rows
still fold): compressing runs outside the GIL, 3.5x faster than zlib, and a 1,000-run batch
then commits ~4 KB instead of ~470 KB, which also spares SQLite's WAL a checkpoint every few
batches. ``fold`` then applies the journal in order through the same code as a direct write
(``RunRepo._upsert``, ``FeedbackRepo._insert``), or the fast paths that store the same rows
(``_fold_columns`` for the writer's value lists, ``_fold_rows`` for posts), and deletes what it
applied, in one transaction per chunk. A batch this process appended is taken from the plain
copy it kept of it (``_recent``), not decoded again: the same batch, without the JSON. In a
chunk, consecutive batches of runs of one workspace fold as one (``_fold_merge``: the server
journals each request on its own), the new runs' statistics are written once (``FoldScope``),
and a batch is first tried without looking up which of its runs are stored already (a stored
one fails it on the primary key; it is then tried with the look-up).

Each append wakes a folder thread of the process for its database (``_background``), so the
fold starts as soon as batches arrive, off the readers' path. Every read of runs, feedback,
projects or statistics still calls ``settle`` first, which folds what is left when the journal
is not empty (one indexed probe when it is). So readers always see what was
appended before they asked, whichever process appended it; a process killed between append and
fold leaves its batches for the next reader. Folds are serialized (SQLite's write lock, a
PostgreSQL advisory lock), so a batch is applied exactly once.

Entries are trusted: they come from assay's writers, not from the wire. Should one still fail
(say, a run whose post never names a start time), it is applied item by item and only what
fails is dropped, with a logged warning and a count in ``dropped``; the journal never blocks.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic_core
import zstandard
from sqlalchemy import bindparam, delete, func, insert, select, text

from .. import _json, _zstd
from .._gc import relaxed_gc
from .._ids import dotted_segment_us, uuid_text
from .._model_prices import batch_rules, journaled
from .._time import to_micros, utcnow
from . import _recent
from ._background import appended, appending, folds_here
from ._driver import marked, sqlite
from ._fold_columns import (
    JSON_COLUMNS,
    WRITER_COLUMNS,
    decoded,
    encoded_rows,
    fill_orders,
    insert_rows,
)
from ._fold_merge import UnmergedBatch, coalesced, merged
from ._fold_ready import MISSING
from ._fold_rows import (
    FoldScope,
    admitted_as_text,
    from_text,
    insert_new,
)
from ._fold_scores import insert_scores, score_rows
from ._fold_stream import fold_streamed
from ._placing import dotted_orders_of
from ._queue import AFTER, ENTRIES, claim, claimed, mark, queue_store, set_mark, trim
from ._queue import append as append_to_queue
from ._tables import journal

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store
    from ._fold_ready import Ready

__all__ = ["Journal", "from_values"]

log = logging.getLogger("assay.store")

RUNS, FEEDBACK = "runs", "feedback"
_CHUNK = 20  # journal rows per fold transaction: a long fold does not starve other writers
# PostgreSQL: a transaction of the tracing writer's batches folded as one stream
# (``_fold_stream``); False: batch by batch, as before (bench/fold_cost.py's A/B sets it)
STREAM = True
_PG_LOCK = 0x617373617901  # "assay\1": one folder at a time
# asked before every experiment's first example (see ``settle``): SQL, not a Core statement
# whose first compile would cost a millisecond there
_ANY_TEXT = "SELECT 1 FROM journal LIMIT 1"
_ANY_SQL = text(_ANY_TEXT)
# a fold's own statements, built once: made anew at every fold, their expressions cost more than
# SQLite takes to run them
# (SQL text to the driver: a Core select compiled anew for every engine cost a new store's first
# fold ~1.5 ms; ``created_at`` comes as the driver gives it, epoch microseconds)
_OLDEST = f"{ENTRIES} ORDER BY seq LIMIT ?"
_PG_FOLD_LOCK = text("SELECT pg_advisory_xact_lock(:k)").bindparams(k=_PG_LOCK)
_DELETE = delete(journal).where(journal.c.seq.in_(bindparam("seqs", expanding=True)))
_SAVEPOINT = "SAVEPOINT assay_fold"
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT assay_fold"
_RELEASE = "RELEASE SAVEPOINT assay_fold"


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # how a zstd frame starts


def _pack(data: bytes) -> bytes:
    return _zstd.compressor().compress(data)  # type: ignore[no-any-return]  # bytes


def from_values(items: Sequence[Any], columns: Sequence[str],
                shared: Mapping[str, Any] | None = None) -> list[Any]:
    """Items journaled as lists of values in ``columns`` order back as dicts (``shared``: the
    fields every such item has, given once per batch); dict items pass through."""
    if shared:
        return [{**shared, **dict(zip(columns, i, strict=False))} if i.__class__ is list else i
                for i in items]
    return [dict(zip(columns, i, strict=False)) if i.__class__ is list else i for i in items]


def _row_posts(posts: Sequence[Any], columns: Sequence[str],
               extra: Mapping[str, Any] | None) -> list[Any]:
    """The tracing writer's rows back as LangSmith posts (see ``Journal.append_runs``)."""
    return _row_posts_common(posts, columns, extra)[0]


def _row_posts_common(posts: Sequence[Any], columns: Sequence[str],
                      extra: Mapping[str, Any] | None) -> tuple[list[Any], Any]:
    """``_row_posts``, and the one ``extra`` object every post without metadata or extra of
    its own shares (the fold serializes it once per batch; nothing changes it), or None."""
    out = from_values(posts, columns)
    if "metadata" not in columns:
        return out, None  # rows of earlier versions: extra as the post has it
    shared = extra or {}
    common: dict[str, Any] | None = None
    for post, given in zip(out, posts, strict=True):
        if given.__class__ is list:
            own = post.get("extra")
            meta = post.pop("metadata") or {}
            if own:
                post["extra"] = {**shared, **own, "metadata": meta}
            elif meta:
                post["extra"] = {**shared, "metadata": meta}
            else:
                if common is None:
                    common = {**shared, "metadata": {}}
                post["extra"] = common
            if post.get("tags") is None:  # a run's lists are made on first use: none, empty
                post["tags"] = []
            if post.get("events") is None:
                post["events"] = []
    return out, common


def _fill_orders(conn: Connection, tenant: str, posts: list[Any]) -> None:
    """Dotted orders the tracing writer left to the fold, as ``RunTree.dotted_order`` gives
    them: a root's from its start and id, a child's from its parent's order. The writer leaves
    a child's out only when its parent was queued first, so the parent is earlier in this batch
    or already stored (in an earlier batch, folded before this one)."""
    known: dict[str, str] = {}

    def settle(post: dict[str, Any]) -> bool:
        """Give ``post`` its order if it can be derived now; False if its parent's is unknown."""
        order = post.get("dotted_order")
        if order is None:
            start, parent = post.get("start_time"), post.get("parent_run_id")
            if start.__class__ is not int:  # not a writer's row: the store checks it as given
                return True
            up = "" if parent is None else known.get(parent)
            if up is None:
                return False
            seg = dotted_segment_us(start, post["id"])
            order = post["dotted_order"] = f"{up}.{seg}" if up else seg
        known[post["id"]] = order
        return True

    waiting = [post for post in posts if not settle(post)]
    if not waiting:
        return
    known.update(dotted_orders_of(conn, tenant, {p["parent_run_id"] for p in waiting}
                                  - known.keys()))
    for post in waiting:  # in order: a child of a waiting run comes after it
        if not settle(post):  # its parent never reached the store: kept without an order
            log.warning("assay store: run %s: parent %s not stored, no dotted order",
                        post["id"], post["parent_run_id"])


def _duplicate_key(exc: BaseException) -> bool:
    """Whether ``exc`` is a unique key's refusal (PostgreSQL's SQLSTATE 23505, SQLite's
    constraint codes), from the driver or wrapped by SQLAlchemy."""
    orig = getattr(exc, "orig", None) or exc
    name = getattr(orig, "sqlite_errorname", None)
    return (getattr(orig, "sqlstate", None) == "23505"
            or name in ("SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE")
            # pysqlite3 (``_driver``) gives the primary code only, and a primary key's
            # refusal is SQLite's "UNIQUE constraint failed" too
            or (name == "SQLITE_CONSTRAINT"
                and str(orig).startswith("UNIQUE constraint failed")))


@contextlib.contextmanager
def _savepoint(conn: Connection) -> Iterator[None]:
    """A savepoint in the caller's transaction, as plain SQL: rolled back to (and released)
    when the block raises. ``Connection.begin_nested`` does the same through SQLAlchemy's
    transaction objects, at ~75 us a savepoint on SQLite against ~15 us here (the fold takes
    one per batch; a small fold's fixed cost was ~1.7 ms). Nothing in the block begins a
    savepoint of SQLAlchemy's own, so its bookkeeping has nothing to miss."""
    conn.exec_driver_sql(_SAVEPOINT)
    try:
        yield
    except BaseException:
        conn.exec_driver_sql(_ROLLBACK_TO)
        conn.exec_driver_sql(_RELEASE)
        raise
    conn.exec_driver_sql(_RELEASE)


def _shown_run(item: tuple[bool, Any]) -> Any:
    """What a warning names a journaled run by: a post or patch, or a value list's id."""
    raw = item[1]
    return raw[0] if raw.__class__ is list and raw else raw


def _patch_id(patch: Any) -> Any:
    """A patch's run id as the fold compares it (canonical text when it can be)."""
    rid = patch.get("id") if isinstance(patch, Mapping) else None
    if rid is None:
        return None
    try:
        return uuid_text(rid, "run id")
    except Exception:  # noqa: BLE001 - the general path reports it
        return rid


def _unpack(data: bytes) -> bytes:
    """A payload as JSON: zstd-compressed, or as older versions wrote it, zlib-compressed (its
    header byte is ``x``) or plain JSON (``{``)."""
    if data[:4] == _ZSTD_MAGIC:
        return _zstd.decompressor().decompress(data)  # type: ignore[no-any-return]  # bytes
    return zlib.decompress(data) if data[:1] == b"x" else data


def decode(data: bytes) -> Any:
    """A journal entry's payload as its batch (raises when it is not one): the copy this
    process kept when it appended it (``_recent``), else decoded."""
    kept = _recent.take(data)
    return _payload(_unpack(data)) if kept is None else kept


def _payload(data: bytes) -> Any:
    """A batch's JSON; one with lone surrogates (``\\ud800`` escapes, see ``_json.dumpb``),
    which pydantic-core refuses, through ``json``. Only keys go through pydantic-core's
    string cache: a batch's values (ids, times, texts) are nearly all unique, and caching them
    cost a quarter of the decode (an experiment's runs 0.59 -> 0.44 us each)."""
    try:
        return pydantic_core.from_json(data, cache_strings="keys")
    except ValueError:
        return _json.loads(data)


def _size(kind: str, payload: dict[str, Any]) -> int:
    if kind == RUNS:
        return len(payload["posts"]) + len(payload["patches"])
    return len(payload["items"])


def _halves(kind: str, payload: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Two batches with the items of ``payload`` in order, second half first: ``_append`` pops
    from the end, so rows come out first half first (posts still before patches)."""
    if kind == RUNS:
        runs = [("posts", p) for p in payload["posts"]] + [("patches", p) for p in
                                                             payload["patches"]]
        mid = len(runs) // 2
        out = []
        for part in (runs[mid:], runs[:mid]):
            out.append((RUNS, {**payload, "posts": [r for k, r in part if k == "posts"],
                               "patches": [r for k, r in part if k == "patches"]}))
        return out
    items = payload["items"]
    mid = len(items) // 2
    return [(FEEDBACK, {**payload, "items": items[mid:]}),
            (FEEDBACK, {**payload, "items": items[:mid]})]


_DROPPED: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def oldest(conn: Connection, rows: int, max_items: int | None,
           after: int | None = None) -> tuple[list[Any], bool]:
    """A fold transaction's entries: the oldest ``rows`` journal rows (``after``: of those
    numbered after it), cut after the one reaching ``max_items`` items, and whether rows may
    remain."""
    if after is None:
        entries = list(conn.exec_driver_sql(marked(conn, _OLDEST), (rows,)).all())
    else:
        entries = list(conn.exec_driver_sql(AFTER, (after, rows)).all())
    more = len(entries) == rows
    if max_items is not None:
        total = 0
        for i, entry in enumerate(entries):
            total += entry.items
            if total >= max_items:
                more = more or i + 1 < len(entries)
                entries = entries[: i + 1]
                break
    return entries, more


def next_entries(conn: Connection, queue: Store | None, rows: int, max_items: int | None, *,
                 claim_missing: bool = True) -> tuple[list[Any], bool, str, int]:
    """The entries a fold takes next, as the database's transaction ``conn`` sees them: the
    database's own journal first (with a queue file: entries spilled there or from before it),
    then the queue's entries after the fold's mark (``_queue``). Returns them, whether more may
    wait, the queue's epoch and the last of its entries taken (the mark when none; 0 when the
    entries are the database's own). ``claim_missing``: a database without a mark gets one
    (a write; else the queue is read from its start)."""
    entries, more = oldest(conn, rows, max_items)
    if queue is None:
        return entries, more, "", 0
    if entries:
        return entries, True, "", 0  # the queue's entries come after these
    epoch, after = mark(conn, queue)
    if after is None:  # none of them is this database's (``_queue``)
        after = claim(conn, queue) if claim_missing else 0
    with queue.read() as reading:
        entries, more = oldest(reading, rows, max_items, after)
    return entries, more, epoch, entries[-1].seq if entries else after


class Journal:
    # A batch whose JSON passes this is split in halves (one transaction still): a thousand runs
    # with large inputs would otherwise make one value past what the database takes (1 GB) and
    # hold it all in memory at once.
    max_payload = 16 * 1024 * 1024

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stream_skip = 0  # fold transactions left before the next try of fold_streamed

    @property
    def dropped(self) -> int:
        """Items a fold in this process could not apply (logged), on this database: counted
        per engine, since the fold may be the background folder's (``_background``)."""
        return _DROPPED.get(self.store.engine, 0)

    @dropped.setter
    def dropped(self, value: int) -> None:
        _DROPPED[self.store.engine] = value

    # -- append (assay's own writers) ---------------------------------------------------------
    def append_runs(self, posts: Sequence[Mapping[str, Any] | Sequence[Any]] = (),
                    patches: Sequence[Mapping[str, Any]] = (), *,
                    default_project: str = "default",
                    columns: Sequence[str] | None = None,
                    extra: Mapping[str, Any] | None = None) -> int:
        """Journal one batch of LangSmith run posts and patches (see ``RunRepo.upsert``).

        A post may also be a sequence of values in the order of ``columns`` (the names are
        journaled once per batch, not once per run: the tracing writer's finished runs); the
        fold turns it back into the post. Such a row may carry ``metadata`` as a column of its
        own: the fold moves it into the post's ``extra``, which also gets the keys of ``extra``
        (given once here) that the row's own does not have. Rows in the tracing writer's order
        (``WRITER_COLUMNS``) are journaled with their inputs and outputs as the JSON text the
        fold stores (``_fold_columns.column_text``; the caller's rows are not changed), so the
        fold neither decodes nor encodes them again. Not validated here (the fold does,
        and drops with a warning what it must): callers are assay's own writers, whose runs
        are well formed by construction."""
        if not posts and not patches:
            return 0
        payload: dict[str, Any] = {"posts": list(posts), "patches": list(patches),
                                   "default_project": default_project}
        if columns is not None:
            payload["columns"] = list(columns)
            if extra:
                payload["extra"] = dict(extra)
            if tuple(columns) == WRITER_COLUMNS:  # the fold stores their JSON as it is
                payload["posts"] = encoded_rows(payload["posts"])
                payload["json"] = list(JSON_COLUMNS)
        return self._append([(RUNS, payload)])

    def append_feedback(self, items: Sequence[Mapping[str, Any] | Sequence[Any]], *,
                        columns: Sequence[str] | None = None,
                        defaults: Mapping[str, Any] | None = None) -> int:
        """Journal one batch of feedback (see ``FeedbackRepo.create_many``), stored together;
        trusted as ``append_runs`` is. An item may also be a list of values in the order of
        ``columns``, the fields every such item shares given once as ``defaults`` (an
        experiment's plain scores); the fold turns it back into the item."""
        if not items:
            return 0
        # the batch's time stands for each item's created_at that does not give one
        payload: dict[str, Any] = {"items": list(items), "created_at": to_micros(utcnow())}
        if columns is not None:
            payload["columns"] = list(columns)
            payload["defaults"] = dict(defaults or {})
        return self._append([(FEEDBACK, payload)])

    def admit(self, posts: Sequence[Mapping[str, Any]] = (),
              patches: Sequence[Mapping[str, Any]] = (),
              feedback: Sequence[Mapping[str, Any]] = (), *,
              default_project: str = "default") -> int:
        """Journal a batch from an untrusted sender (the server's ingest), checked now: what a
        direct write would refuse is refused before anything is kept (``_journal_admit``)."""
        from ._journal_admit import admit

        return admit(self, posts, patches, feedback, default_project=default_project)

    def _append(self, batches: list[tuple[str, dict[str, Any]]],
                conn: Connection | None = None) -> int:
        """Journal batches in one transaction, each as one row (halved while too large).

        ``batches`` is consumed from its end: the last batch is journaled (and folded) first."""
        now = to_micros(utcnow())
        rows: list[dict[str, Any]] = []
        kept: list[tuple[bytes, Any, int]] = []
        keeps = folds_here(self.store.engine)
        prices = journaled()  # the rules runs are priced by, whichever process folds them
        while batches:
            kind, payload = batches.pop()
            if prices and kind == RUNS:
                payload["prices"] = prices
            # the fold of this process takes the copy, not the JSON; the JSON is the copy's,
            # so the two are the same batch whichever a fold takes
            copy = _recent.plain(payload) if keeps else None
            data = _json.dumpb(payload if copy is None else copy)
            n = _size(kind, payload)
            if len(data) > self.max_payload and n > 1:
                batches.extend(_halves(kind, payload))
                continue
            packed = _pack(data)
            if copy is not None:
                kept.append((packed, copy, len(data)))
            rows.append({"tenant_id": self.store.tenant_id, "kind": kind, "items": n,
                         "payload": packed, "created_at": now})
        for packed, copy, size in kept:  # before a fold can see them (one that never comes,
            _recent.keep(packed, copy, size)  # a failed write's, goes with the oldest)
        queue = self._queue() if conn is None else None
        if queue is not None:  # its own write lock: no fold to wait for (``_queue``)
            claimed(self.store, queue)
            append_to_queue(queue, rows)
        elif conn is not None:
            conn.execute(insert(journal), rows)
        else:
            with appending(self.store), self.store.write() as own:
                own.execute(insert(journal), rows)
        # folded from now on in the background, not by the first reader (``_background``; a
        # batch in the caller's still open transaction, the server's ``admit``, goes to the
        # server's own folder, which looks again after each request)
        items = int(sum(r["items"] for r in rows))
        appended(self.store, items)
        return items

    # -- fold -----------------------------------------------------------------------------
    def _queue(self) -> Store | None:
        """Where appends go when not the database's own journal: a SQLite file's queue file
        (``_queue``), except inside a ``Store.transaction()``, whose writes must all commit or
        none (the server's ingest of a batch with attachments): that appends to the
        database's journal, in the transaction, as without a queue file."""
        return None if self.store._active() is not None else queue_store(self.store)

    def _places(self) -> list[Store]:
        """Where entries wait: the queue file (``_queue``), if any, then the database."""
        queue = queue_store(self.store, create=False)
        return [self.store] if queue is None else [queue, self.store]

    def pending(self) -> int:
        """Items of this workspace waiting in the journal (with a queue file, entries a fold
        applied but had not deleted yet included, until the next fold deletes them)."""
        total = 0
        for place in self._places():
            with place.read() as conn:
                total += int(conn.execute(
                    select(func.coalesce(func.sum(journal.c["items"]), 0))
                    .where(journal.c.tenant_id == self.store.tenant_id)).scalar() or 0)
        return total

    def backlog(self, limit: int) -> int:
        """Journal rows waiting, all workspaces, counted up to ``limit`` (a bounded read, so a
        background folder can look often: no write lock, no scan of a long journal)."""
        head = select(journal.c.seq).limit(limit).subquery()
        total = 0
        for place in self._places():
            with place.read() as conn:
                total += int(conn.execute(select(func.count()).select_from(head)).scalar() or 0)
            if total >= limit:
                break
        return min(total, limit)

    def settle(self) -> int:
        """Fold the journal if it holds anything; return how many items were applied."""
        if not self._any():
            return 0
        return self.fold()

    def _any(self) -> bool:
        """Whether the journal holds a row (in the queue file, then in the database)."""
        return any(self._holds(place) for place in self._places())

    @staticmethod
    def _holds(store: Store) -> bool:
        """Whether ``store``'s journal table holds a row. Every read asks this first, so on
        SQLite (outside a ``Store.transaction``) the question goes to a pooled connection's
        driver as one statement, its own read transaction: ~10 us, where a SQLAlchemy read
        transaction around it took ~95 us, most of a small fold's probe. Anything the driver
        answers otherwise (a busy database, a missing table) is asked again the usual way,
        which waits as configured and reports what is wrong."""
        if store.engine.dialect.name == "sqlite" and store._active() is None:
            pooled = store.engine.raw_connection()
            try:
                driver: Any = pooled.driver_connection  # a sqlite3.Connection
                return driver.execute(_ANY_TEXT).fetchone() is not None
            except sqlite.Error:
                pass
            finally:
                pooled.close()
        with store.read() as conn:
            return conn.execute(_ANY_SQL).first() is not None

    def fold(self) -> int:
        """Apply every journaled batch in order and delete it; return the items applied."""
        applied = 0
        more = True
        with relaxed_gc():  # a chunk decodes thousands of runs at once, all alive until applied
            while more:
                done, more = self.fold_some(_CHUNK)
                applied += done
        return applied

    def fold_some(self, rows: int, max_items: int | None = None, *,
                  ready: Ready | None = None) -> tuple[int, bool]:
        """Apply and delete the oldest ``rows`` journal rows in one transaction; return the
        items applied and whether rows may remain (a background folder pauses between calls,
        so writers waiting for the lock get it). ``max_items``: stop after the row that
        reaches that many items (one row at least), so many small batches go in one
        transaction and large ones one by one. ``ready``: what ``_fold_ready.prepare`` did
        of these rows before the transaction (taken for the entries still as they were)."""
        if ready is None and STREAM and self.store.engine.dialect.name == "postgresql":
            streamed = fold_streamed(self, rows, max_items)  # None: rolled back, as below
            if streamed is not None:
                return streamed
        queue = queue_store(self.store, create=False)
        with self.store.write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(_PG_FOLD_LOCK)
            # read under the lock; ``folded``: with a queue file, the last of its entries
            # taken (the mark when none), 0 for the database's own
            entries, more, epoch, folded = next_entries(conn, queue, rows, max_items)
            if not entries:
                applied = None
            else:
                applied = self._apply_entries(conn, entries, ready)
                if folded:
                    set_mark(conn, epoch, folded)
                else:
                    conn.execute(_DELETE, {"seqs": [e.seq for e in entries]})
        if folded and self.store._active() is None:  # the mark is committed: the entries
            # up to it go (``_queue``); with nothing applied, those a fold killed before its
            # trim left. Inside a ``Store.transaction()`` the mark commits with it, or not at
            # all: the entries stay for a later fold to trim (or, rolled back, to apply)
            assert queue is not None
            trim(queue, folded)
        return (0, False) if applied is None else (applied, more)

    def _apply_entries(self, conn: Connection, entries: list[Any], ready: Ready | None) -> int:
        """Apply a fold transaction's entries in ``conn``; the items applied."""
        # the new runs' statistics, written once for all entries; the rows built ahead
        scope = FoldScope(None if ready is None else ready.rows)
        batches = []
        for e in entries:
            batch = MISSING if ready is None else ready.batch(e)
            batches.append((e, self._decoded(e) if batch is MISSING else batch))
        applied = 0
        for group in coalesced(batches, RUNS):
            if len(group) > 1:  # consecutive batches of runs, folded as one if they can
                try:
                    applied += self._apply(conn, group[0][0], merged(group), scope,
                                           whole_only=True)
                    continue
                except UnmergedBatch:
                    pass
            applied += sum(self._apply(conn, entry, payload, scope)
                           for entry, payload in group)
        scope.write(conn)
        return applied

    def _decoded(self, entry: Any) -> Any:
        """An entry's batch (its JSON), or None when it is not JSON (counted as dropped: not
        retried)."""
        try:
            return decode(entry.payload)
        except (ValueError, zlib.error, zstandard.ZstdError) as exc:
            self.dropped += entry.items
            log.warning("assay store: journal entry %s is not JSON (%s): dropped", entry.seq, exc)
            return None

    def _apply(self, conn: Connection, entry: Any, payload: Any,
               scope: FoldScope | None = None, *, whole_only: bool = False) -> int:
        """Apply one entry's decoded batch (``payload``; None: nothing). ``whole_only``: the
        batch is several entries' runs together (``merged``): raise ``UnmergedBatch`` rather
        than apply it item by item, so each entry is then applied on its own."""
        if payload is None:
            return 0
        store = self.store.for_tenant(entry.tenant_id)
        if entry.kind == RUNS:
            project = payload.get("default_project") or "default"
            columns = payload.get("columns")
            posts = payload.get("posts") or []
            common = None
            # the tracing writer's value lists in today's order: straight to rows, no post
            # dicts (_fold_columns); the rest, and other orders, as posts (below)
            lists = bool(columns) and tuple(columns) == WRITER_COLUMNS
            shared = payload.get("extra")
            # value lists' columns journaled as the JSON text to store (``column_text``)
            named = tuple(payload.get("json") or ())
            texts = tuple(columns.index(c) for c in named if columns and c in columns)
            encoded = lists and bool(named) and named == JSON_COLUMNS
            if lists:
                fill_orders(conn, entry.tenant_id, posts)
            elif columns:  # posts journaled as lists of values
                posts, common = _row_posts_common(decoded(posts, texts) if texts else posts,
                                                  columns, shared)
                _fill_orders(conn, entry.tenant_id, posts)
            runs = [(False, r) for r in posts]
            runs += [(True, r) for r in payload.get("patches") or []]

            clean = payload.get("clean") is True  # from admit(): cleaned already
            # new plain runs straight to rows (_fold_rows): the tracing writer's, the server's
            fast = clean or bool(columns)
            # admit's posts with their JSON columns as the text to store (entries of earlier
            # versions hold the values); another set of names: decoded here, folded as values
            as_text = admitted_as_text(payload)
            if clean and not columns and named and not as_text:
                posts = [from_text(p, named) for p in posts]

            def apply(batch: list[tuple[bool, Any]], probe: bool = True) -> int:
                posts = [r for patch, r in batch if not patch]
                patches = [r for patch, r in batch if patch]
                done = 0
                shared_extra = common
                if fast and posts:
                    patched = {_patch_id(r) for r in patches}
                    if lists:
                        done, posts = insert_rows(store.runs, conn, posts, patched, project,
                                                  shared, encoded=encoded, probe=probe,
                                                  scope=scope)
                        if posts:
                            posts, shared_extra = _row_posts_common(
                                decoded(posts, texts) if texts else posts, columns, shared)
                    if posts:
                        more, posts = insert_new(store.runs, conn, posts, patched, project,
                                                 clean=clean, shared_extra=shared_extra,
                                                 texts=as_text, probe=probe, scope=scope)
                        done += more
                if as_text and posts:  # the general path takes values (copies: see above)
                    posts = [from_text(p) for p in posts]
                if posts or patches:
                    done += store.runs._apply(conn, posts, patches, project, clean=clean)
                return done

            # first without looking up which runs are stored (they seldom are: a probe of
            # the id index cost 2-4 us a run on PostgreSQL, and a sequential scan a batch
            # while the planner had no statistics of a new table); a stored one fails it
            with batch_rules(payload):
                return self._whole_or_each(
                    conn, "runs", runs, apply, _shown_run, scope=scope, each=not whole_only,
                    first=(lambda batch: apply(batch, probe=False)) if fast else None)
        if entry.kind == FEEDBACK:
            created = payload.get("created_at")
            items = payload.get("items") or []
            columns = payload.get("columns")
            defaults = payload.get("defaults")
            whole = None
            if columns:  # items journaled as lists of values (see append_feedback)
                # evaluate()'s plain scores: rows made once, not item by item (_fold_scores);
                # the items become dicts only for the general path
                whole = score_rows(store.feedback, items, columns, defaults, created)
                if whole is None:
                    items = from_values(items, columns, defaults)

            def add(batch: list[Any]) -> int:
                if whole is not None:
                    if batch is items:
                        return insert_scores(conn, whole)
                    batch = from_values(batch, columns, defaults)  # retried one by one
                rows = []
                for item in batch:
                    if isinstance(item, dict) and created is not None:
                        item.setdefault("created_at", created)
                        item.setdefault("modified_at", item["created_at"])
                    rows.append(store.feedback._row(item))
                return store.feedback._insert(conn, rows)

            return self._whole_or_each(conn, "feedback", items, add, lambda item: item)
        self.dropped += entry.items
        log.warning("assay store: journal entry %s has unknown kind %r: dropped", entry.seq,
                    entry.kind)
        return 0

    def _whole_or_each(self, conn: Connection, what: str, items: list[Any],
                       apply: Callable[[list[Any]], int], shown: Callable[[Any], Any], *,
                       first: Callable[[list[Any]], int] | None = None,
                       scope: FoldScope | None = None, each: bool = True) -> int:
        """``apply`` the batch in one savepoint; if that fails, each item in its own, dropping
        (with a warning naming it and why) only the items that fail. ``first``: a cheaper
        ``apply`` tried before it, whose only expected failure is a duplicate key. ``scope``:
        what the attempts share with the transaction's other batches (``FoldScope``): a
        rolled-back attempt's additions are taken back. Not ``each``: raise ``UnmergedBatch``
        instead of going item by item."""
        tried = contextlib.nullcontext if scope is None else scope.attempt
        for attempt in (apply,) if first is None else (first, apply):
            try:
                with _savepoint(conn), tried():
                    return attempt(items)
            except Exception as exc:
                if attempt is first and _duplicate_key(exc):
                    continue
                if not each:
                    raise UnmergedBatch from exc
                log.warning("assay store: a journaled batch of %d %s failed (%s); applying them "
                            "one by one", len(items), what, exc)
                break
        done = 0
        for item in items:
            try:
                with _savepoint(conn), tried():
                    done += apply([item])
            except Exception as exc:
                self.dropped += 1
                raw = shown(item)
                log.warning("assay store: dropped journaled %s %s: %s", what,
                            raw.get("id") if isinstance(raw, Mapping) else raw, exc)
        return done
