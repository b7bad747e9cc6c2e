"""PostgreSQL's fold of traced batches as one stream: the server indexes while the fold builds.

A fold transaction of the tracing writer's batches used to decode them all, give them their
dotted orders, check and build their rows, and only then ``COPY`` the rows, whose end waits
until the server has written and indexed every one. The fold's own work (~6 us a run) and the
server's (~8) took turns: ~14 us a run, where either alone is about half of that
(bench/README.md, stop 45). Here each batch of the transaction is decoded, ordered, checked and
written in turn into one ``COPY`` held open for the whole transaction (``SharedCopy``): the
socket's buffers hold a batch's rows while the server works through them and the fold builds
the next batch.

A batch of the tracing writer's value lists is streamed when the columnar path takes it whole
(new plain or llm runs; no patches, nothing handed on to the general path), with no
savepoint; a child whose parent comes in a later batch of the transaction waits for it (the
merged batch of ``Journal.fold_some`` has the same effect), and one whose parent is in no
batch of it has its parent looked up at the end, as before. A server's requests' batches
(``Journal.admit``'s, without patches) stream too, their rows made by ``insert_new``'s fast
path. Another entry (evaluate()'s feedback between its runs, a batch with patches) ends the
``COPY`` and is folded as before, in its savepoint; the next batch opens another.

A transaction that starts with a batch of another format raises ``NotStreamed``, and so does
anything else this does not take, before anything is committed: the caller rolls the
transaction back and folds the same entries as before. So does a failure of the ``COPY``
itself (a run stored already: the fast paths' first try never looks), which the fold as
before then settles as it always did. Nothing is kept of a rolled-back try, and the journal's
entries are deleted only by the transaction that folds them.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._model_prices import batch_rules
from ._fold_columns import (
    _DOTTED,
    _ID,
    _WIDTH,
    JSON_COLUMNS,
    WRITER_COLUMNS,
    fill_orders,
    insert_rows,
)
from ._fold_merge import _signature
from ._fold_rows import _FULL_ORDER, FoldScope, admitted_as_text, insert_new
from ._pg_copy import SharedCopy

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._journal import Journal
    from ._runs import RunRepo

__all__ = ["STREAM_SKIP", "NotStreamed", "fold_stream", "fold_streamed"]

log = logging.getLogger("assay.store")

_WRITER = list(WRITER_COLUMNS)
_JSON = list(JSON_COLUMNS)
NOT_WRITER = "not the tracing writer's plain batch"  # (why the first entry was not taken)
STREAM_SKIP = 16  # transactions not tried after one whose first entry was of another format
# engine -> fold transactions of this process that were streamed (tests, benches)
STREAMED: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


class NotStreamed(Exception):
    """A transaction's entries are not all ones ``fold_stream`` takes: fold them as before."""


def _plain(payload: Any) -> bool:
    """A batch of the tracing writer's value lists, their JSON as text, without patches."""
    return (_writer(payload) and payload.get("json") == _JSON and not payload.get("patches")
            and bool(payload.get("posts")) and payload["posts"].__class__ is list)


def _admitted(payload: Any, patches: bool = False) -> bool:
    """A batch ``Journal.admit`` journaled (a server's request: cleaned posts, their JSON as
    text), without patches unless ``patches``."""
    if payload.__class__ is not dict or not admitted_as_text(payload):
        return False
    return patches or (not payload.get("patches") and bool(payload.get("posts"))
                       and payload["posts"].__class__ is list)


def _writer(payload: Any) -> bool:
    return payload.__class__ is dict and payload.get("columns") == _WRITER


def _learn(known: dict[Any, Any], payload: Any) -> None:
    """The orders a batch folded as before gave its runs (value lists, set in place), for
    children in later batches."""
    for item in payload.get("posts") or ():
        if item.__class__ is list and len(item) == _WIDTH and item[_DOTTED] \
                and item[_ID].__class__ is str:
            known[item[_ID]] = item[_DOTTED]


def fold_stream(journal: Journal, conn: Connection, entries: Sequence[Any],
                scope: FoldScope) -> int:
    """Fold ``entries`` (journal rows, oldest first) into ``runs``, the tracing writer's
    batches through one ``COPY``; return the items folded. Raises ``NotStreamed`` (or the
    database's error) when they are not ones this takes: nothing is then to be committed."""
    from ._journal import RUNS, decode

    known: dict[Any, Any] = {}  # every order given so far, for children in later batches
    waiting: list[Any] = []  # children whose parents have not come yet
    waiting_key: Any = None
    applied = 0
    repos: dict[str, RunRepo] = {}  # each workspace's, made once for the transaction

    def runs_of(tenant: str) -> RunRepo:
        repo = repos.get(tenant)
        if repo is None:
            repo = repos[tenant] = journal.store.for_tenant(tenant).runs
        return repo

    def put(tenant: str, payload: Any, posts: list[Any]) -> int:
        with batch_rules(payload):
            done, left = insert_rows(runs_of(tenant), conn, posts, set(),
                                     payload.get("default_project") or "default",
                                     payload.get("extra"), encoded=True, probe=False,
                                     scope=scope)
        if left:
            raise NotStreamed("runs the columnar path hands on")
        return done

    with SharedCopy(conn, _FULL_ORDER) as copy:  # llm runs' usage columns too
        for entry in entries:
            try:
                payload = decode(entry.payload)
            except Exception as exc:  # noqa: BLE001 - the fold as before counts and logs it
                raise NotStreamed("not JSON") from exc
            if entry.kind == RUNS and _admitted(payload):  # a server's request's runs
                if waiting:
                    raise NotStreamed("a child waits for its parent past a server's batch")
                with batch_rules(payload):
                    done, left = insert_new(runs_of(entry.tenant_id), conn, payload["posts"],
                                            set(), payload.get("default_project") or "default",
                                            clean=True, texts=True, probe=False, scope=scope)
                if left:
                    raise NotStreamed("runs the fast path hands on")
                applied += done
                continue
            if entry.kind != RUNS or not _plain(payload):
                if entry.kind == RUNS and not (_writer(payload) or _admitted(payload, True)):
                    raise NotStreamed(NOT_WRITER if entry is entries[0] else "another format")
                if waiting and entry.kind == RUNS:  # (feedback waits for its runs anyway)
                    raise NotStreamed("a child waits for its parent past a batch of runs")
                # evaluate()'s feedback between its runs, a batch with patches (a run posted
                # at its start, ended later): folded as before, in a savepoint, once the
                # server has the rows sent so far
                copy.end()
                applied += journal._apply(conn, entry, payload, scope)
                _learn(known, payload)
                continue
            key = (entry.tenant_id, _signature(payload))
            posts = payload["posts"]
            if waiting:
                if key != waiting_key:
                    raise NotStreamed("a child waits for a parent of another batch")
                posts = waiting + posts
            waiting = fill_orders(conn, entry.tenant_id, posts, known, lookup=False)
            waiting_key, waiting_batch = key, (entry.tenant_id, payload)
            if waiting:
                held = {id(item) for item in waiting}
                posts = [item for item in posts if id(item) not in held]
            if posts:
                applied += put(entry.tenant_id, payload, posts)
        if waiting:  # parents of earlier transactions, or none: looked up, as before
            copy.end()
            fill_orders(conn, waiting_batch[0], waiting, known)
            applied += put(*waiting_batch, waiting)
        copy.end()
    return applied


def fold_streamed(journal: Journal, rows: int, max_items: int | None) -> tuple[int, bool] | None:
    """``Journal.fold_some``'s transaction streamed: (items applied, whether rows may remain),
    or None when it was rolled back, to be folded as before (and, when its first entry was of
    another format, the next ``STREAM_SKIP`` transactions are not tried)."""
    from ._journal import _DELETE, _PG_FOLD_LOCK, oldest

    if journal.stream_skip:
        journal.stream_skip -= 1
        return None
    engine = journal.store.engine
    dropped = journal.dropped  # what a batch folded as before inside counted: counted again
    try:
        with journal.store.write() as conn:
            conn.execute(_PG_FOLD_LOCK)
            entries, more = oldest(conn, rows, max_items)
            if not entries:
                return 0, False
            scope = FoldScope(None)
            applied = fold_stream(journal, conn, entries, scope)
            scope.write(conn)
            conn.execute(_DELETE, {"seqs": [e.seq for e in entries]})
    except NotStreamed as why:
        log.debug("assay store: not streamed: %s", why)
        journal.stream_skip = STREAM_SKIP if why.args[0] == NOT_WRITER else 0
        journal.dropped = dropped
        return None
    except Exception as exc:  # noqa: BLE001 - a run stored already, say: folded as before
        log.debug("assay store: the streamed fold fell back (%s)", exc)
        journal.dropped = dropped
        return None
    STREAMED[engine] = STREAMED.get(engine, 0) + 1
    return applied, more
