"""The server's ingest into the journal: a batch from an untrusted sender, checked now.

``Journal.admit`` takes what assay's own writers do not: runs and feedback off the wire. What
a direct write would refuse is refused here, before anything is kept: a malformed run or
feedback item (``InvalidInputError``), a project of another workspace (``NotFoundError``), a
run or feedback id stored in another workspace (``ConflictError``). Projects named by the batch
are resolved (created when new) in the transaction of the checks, before the append, so a
refused batch leaves nothing behind. With a SQLite file's queue file (``_queue``) that
transaction is a read of the database, whose write lock the fold holds most of the time, or a
write when a project is new; the append is then the queue's own. Only a race these checks
cannot see (another workspace storing the same new id between this call and the fold) is met
at fold time, where the late item is dropped loudly and the owner's data stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from .._ids import uuid_text
from .._time import to_micros, utcnow
from ..errors import ConflictError, InvalidInputError, NotFoundError
from ._admitted import AdmittedPost
from ._fold_columns import column_text
from ._fold_rows import TEXT_KEYS, stored_ids
from ._journal import FEEDBACK, RUNS
from ._tables import feedback as feedback_table
from ._tables import runs, sessions

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store
    from ._journal import Journal

__all__ = ["admit"]


class _NewProject(Exception):
    """``admit`` in a read: a batch names a project that must be created (a write)."""


def _as_text(posts: list[dict[str, Any]]) -> None:
    """Admitted posts' JSON columns (``TEXT_KEYS``) as the text the fold stores, in place: the
    fold then neither decodes nor encodes them again (server ingest, 10,000 runs: admit + fold
    27.0 -> 24.3 us CPU a run). Entries of earlier versions hold the values and fold the same
    (tests/store/test_fold_fast.py)."""
    for post in posts:
        for key in TEXT_KEYS:
            value = post.get(key)
            if value is not None:
                post[key] = column_text(value)


def _taken_elsewhere(conn: Connection, tenant: str, table: Any, ids: Sequence[str]) -> str | None:
    """The first of ``ids`` stored in another workspace (ids are global keys), or None: asked
    for every request's runs."""
    taken = stored_ids(conn, table.name, ids, not_tenant=tenant, first=True)
    return str(taken[0]) if taken else None


def _require_identity(conn: Connection, tenant: str,
                      runs_in: list[tuple[bool, dict[str, Any], Any]]) -> None:
    """A new run needs a run type and a start time: from its post, a patch beside it, or the
    stored run it completes (as ``RunRepo._upsert`` would insist)."""
    if all(patch or ("run_type" in c and "start_time" in c) for patch, c, _ in runs_in):
        return  # the usual case: every post names both
    given: dict[str, set[str]] = {}
    posted = set()
    for patch, clean, _ in runs_in:
        given.setdefault(clean["id"], set()).update(k for k in ("run_type", "start_time")
                                                    if k in clean)
        if not patch:
            posted.add(clean["id"])
    lacking = {rid: need for rid in posted if (need := {"run_type", "start_time"} - given[rid])}
    if not lacking:
        return
    stored = set(conn.execute(select(runs.c.id).where(
        runs.c.id.in_(sorted(lacking)), runs.c.tenant_id == tenant)).scalars())
    for rid, need in lacking.items():
        if rid not in stored:
            raise InvalidInputError(f"run {rid}: missing required field {sorted(need)[0]!r}")


def admit(journal: Journal, posts: Sequence[Mapping[str, Any]] = (),
          patches: Sequence[Mapping[str, Any]] = (),
          feedback: Sequence[Mapping[str, Any]] = (), *,
          default_project: str = "default") -> int:
    """Journal the batch (see the module docstring); the items journaled."""
    from ._runs import _clean

    # an ``AdmittedPost`` (the server's ingest, ``_admitted``) is checked and ready already
    runs_in = [(False, r, r.raw) if r.__class__ is AdmittedPost else (False, _clean(r), r)
               for r in posts] + [(True, _clean(r), r) for r in patches]
    # the posts' JSON columns as the text the fold stores, made before the write lock is
    # taken: changes admit's own dicts (``_clean``'s), not the caller's
    _as_text([clean for patch, clean, _ in runs_in
              if not patch and clean.__class__ is not AdmittedPost])
    now = to_micros(utcnow())
    fb_in = []
    for item in feedback:
        journal.store.feedback._row(item)  # validates; the fold builds the row again
        fb_in.append({k: v for k, v in item.items() if v is not None})
    if not runs_in and not fb_in:
        return 0
    if journal._queue() is None:  # the journal in the database: one transaction
        with journal.store.write() as conn:
            return journal._append(_admitted(journal.store, conn, runs_in, fb_in, now,
                                             default_project), conn)
    # A queue file (``_queue``): checked in a read of the database, whose write lock the
    # fold holds most of the time, unless a project must be created; appended after it
    try:
        with journal.store.read() as conn:
            batches = _admitted(journal.store, conn, runs_in, fb_in, now, default_project,
                                writable=False)
    except _NewProject:
        with journal.store.write() as conn:
            batches = _admitted(journal.store, conn, runs_in, fb_in, now, default_project)
    return journal._append(batches)


def _admitted(store: Store, conn: Connection, runs_in: list[tuple[bool, dict[str, Any], Any]],
              fb_in: list[dict[str, Any]], now: int | None, default_project: str, *,
              writable: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """``admit``'s checks and project resolution in ``conn``; the batches to journal. Not
    ``writable`` (a read): raises ``_NewProject`` where a project would be created."""
    tenant = store.tenant_id
    projects = store.projects
    resolved: dict[tuple[str, str], str] = {}
    out: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    patched_into: set[str] = set()
    for patch, clean, raw in runs_in:
        out[patch].append(clean)
        name = raw.get("session_name")
        if name is not None and not isinstance(name, str):
            raise InvalidInputError(f"run {clean['id']}: session_name must be a string")
        if patch:
            # a patch's project matters only if its post has not come yet (the fold
            # decides); it is passed on as given, and creates no project here
            if raw.get("session_id"):
                clean["session_id"] = uuid_text(raw["session_id"], "session_id")
                patched_into.add(clean["session_id"])
            if name:
                clean["session_name"] = name
            continue
        if raw.get("session_id"):
            key = ("id", uuid_text(raw["session_id"], "session_id"))
        else:
            key = ("name", name or default_project)
        sid = resolved.get(key)
        if sid is None:
            if not writable:
                sid = projects._existing(conn, key)
                if sid is None:
                    raise _NewProject
            elif key[0] == "id":
                projects._ensure_id(conn, key[1], raw.get("session_name"))
                sid = key[1]
            else:
                sid = projects._get_or_create(conn, key[1])
            resolved[key] = sid
        clean["session_id"] = sid  # resolved: the fold looks up nothing by name
    foreign = _taken_elsewhere(conn, tenant, sessions,
                               sorted(patched_into - set(resolved.values())))
    if foreign is not None:  # as _ensure_id answers for a post
        raise NotFoundError(f"project {foreign} not found")
    _require_identity(conn, tenant, runs_in)
    for table, ids, what in (
            (runs, [c["id"] for _, c, _ in runs_in], "run"),
            (feedback_table, [uuid_text(f["id"], "feedback id") for f in fb_in
                              if f.get("id")], "feedback")):
        taken = _taken_elsewhere(conn, tenant, table, ids)
        if taken is not None:
            raise ConflictError(f"{what} id {taken} is taken in another workspace")
    batches: list[tuple[str, dict[str, Any]]] = []
    if fb_in:  # popped last: applied after the runs it may name
        batches.append((FEEDBACK, {"items": fb_in, "created_at": now}))
    if runs_in:
        batches.append((RUNS, {"posts": out[False], "patches": out[True],
                               "default_project": default_project, "clean": True,
                               "json": list(TEXT_KEYS)}))
    return batches
