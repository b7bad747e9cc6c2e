"""Attachments of examples and runs: content-addressed blobs in the database.

Why the database (both backends) rather than files beside the SQLite file: an attachment is
written in the SAME transaction as the example version that names it, so a refused request (a
bad part, a lying MIME type, a failed update) leaves neither a half-written example nor an
orphan file, and an attachment name never becomes a path (nothing can be written outside the
store). A team server on PostgreSQL serves the blobs to every process from the one database
(bytea); one backup holds everything. Blobs are keyed by (workspace, sha256): the same bytes
uploaded twice, or kept by ten versions of an example, are stored once; a workspace never
learns whether another holds a file. Range reads are ``substr`` in SQL, so a download of part
of a large blob does not load all of it.

Example attachments hang off ``examples.row_id`` (one example VERSION): an update copies the
references to the new row (``copy_example``), so ``as_of`` returns the attachments of the
version it reads and older versions keep theirs.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, insert, literal, or_, select, text, update
from sqlalchemy.sql import ClauseElement

from .._ids import as_uuid, utcnow
from ..errors import InvalidInputError, NotFoundError
from ._attachment_checks import (
    DEFAULT_MAX_ATTACHMENT_BYTES,
    AttachmentTooLarge,
    LazyReader,
    StoredAttachment,
    Upload,
    check_name,
    check_upload,
    operations,
    uploads_from_sdk,
)
from ._tables import blobs, datasets, example_attachments, examples, run_attachments, signing_keys
from ._types import to_micros

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = [
    "DEFAULT_MAX_ATTACHMENT_BYTES",
    "AttachmentRepo",
    "AttachmentTooLarge",
    "LazyReader",
    "StoredAttachment",
    "Upload",
    "check_name",
    "check_upload",
    "forget_runs",
    "operations",
    "uploads_from_sdk",
]  # the checks live in _attachment_checks; re-exported for the server and the client


# -- the repository ----------------------------------------------------------------------------
_WHOLE = text("SELECT size, data FROM blobs WHERE tenant_id = :t AND sha256 = :h")


def _insert_new(conn: Connection, table: Any) -> Any:
    """INSERT that skips rows whose key exists: two requests storing the same new blob at once
    (PostgreSQL, several server processes) both succeed, one copy kept."""
    from sqlalchemy.dialects import postgresql, sqlite

    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing()


class AttachmentRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def _tenant(self) -> str:
        return self.store.tenant_id

    def _put_blobs(self, conn: Connection, uploads: Iterable[Upload]) -> dict[str, str]:
        """Store each distinct content once per workspace; {name: sha256}."""
        by_hash: dict[str, Upload] = {}
        names = {}
        for up in uploads:
            digest = up.sha256
            by_hash.setdefault(digest, up)
            names[up.name] = digest
        if by_hash:
            have = set(conn.execute(select(blobs.c.sha256).where(
                blobs.c.tenant_id == self._tenant, blobs.c.sha256.in_(list(by_hash)))).scalars())
            now = utcnow()
            new = [{"tenant_id": self._tenant, "sha256": h, "size": len(u.data), "data": u.data,
                    "created_at": now} for h, u in by_hash.items() if h not in have]
            if new:
                conn.execute(_insert_new(conn, blobs), new)
        return names

    # -- examples -------------------------------------------------------------------------
    def _current_row(self, conn: Connection, example_id: str) -> int:
        row = conn.execute(
            select(examples.c.row_id)
            .join(datasets, datasets.c.id == examples.c.dataset_id)
            .where(examples.c.id == example_id, examples.c.valid_to.is_(None),
                   datasets.c.tenant_id == self._tenant)).scalar()
        if row is None:
            raise NotFoundError(f"example {example_id} not found")
        return int(row)

    def set_example(self, example_id: Any, uploads: Sequence[Upload],
                    ops: tuple[list[str], dict[str, str]] | None = None) -> None:
        """Apply ``ops`` (keep ``retain`` and the ``rename`` sources, drop the rest) and then
        ``uploads`` (a new file under an existing name replaces it) to the example's CURRENT
        version. Call it in the transaction that made that version (create or update)."""
        ex_id = str(as_uuid(example_id, "example id"))
        names = [u.name for u in uploads]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"example {ex_id}: attachment named twice")
        with self.store.write() as conn:
            row_id = self._current_row(conn, ex_id)
            ea = example_attachments
            if ops is not None:
                retain, rename = ops
                have = set(conn.execute(select(ea.c.name).where(ea.c.example_row_id == row_id))
                           .scalars())
                missing = sorted((set(retain) | set(rename)) - have)
                if missing:
                    raise InvalidInputError(f"example {ex_id}: attachments_operations names "
                                            f"attachment(s) it does not have: {missing}")
                keep = set(retain) | set(rename)
                drop = have - keep
                if drop:
                    conn.execute(delete(ea).where(ea.c.example_row_id == row_id,
                                                  ea.c.name.in_(sorted(drop))))
                clash = (set(rename.values()) & (set(retain) - set(rename))) | (
                    set(rename.values()) & set(names))
                if clash:
                    raise InvalidInputError(f"example {ex_id}: renamed to a name that is kept "
                                            f"or uploaded: {sorted(clash)}")
                if rename:  # two steps, so a swap (a -> b, b -> a) never collides
                    for i, old in enumerate(rename):
                        conn.execute(update(ea).where(ea.c.example_row_id == row_id,
                                                      ea.c.name == old).values(name=f"..{i}"))
                    for i, new in enumerate(rename.values()):
                        conn.execute(update(ea).where(ea.c.example_row_id == row_id,
                                                      ea.c.name == f"..{i}").values(name=new))
            if uploads:
                digests = self._put_blobs(conn, uploads)
                conn.execute(delete(ea).where(ea.c.example_row_id == row_id,
                                              ea.c.name.in_(names)))
                conn.execute(insert(ea), [
                    {"example_row_id": row_id, "name": u.name, "tenant_id": self._tenant,
                     "sha256": digests[u.name], "mime_type": u.mime_type, "size": len(u.data)}
                    for u in uploads])

    def add_to_examples(self, files: Sequence[tuple[Any, Sequence[Upload]]]) -> None:
        """Attach ``uploads`` to each example's CURRENT version, in a few statements for the
        whole batch (a new name is added, an existing one replaced): what an upload of many
        examples with files needs. ``set_example`` applies operations one example at a time."""
        wanted = [(str(as_uuid(ex_id, "example id")), list(ups)) for ex_id, ups in files if ups]
        if not wanted:
            return
        for ex_id, ups in wanted:
            names = [u.name for u in ups]
            if len(set(names)) != len(names):
                raise InvalidInputError(f"example {ex_id}: attachment named twice")
        ids = [ex_id for ex_id, _ in wanted]
        ea = example_attachments
        with self.store.write() as conn:
            rows: dict[str, int] = {}
            for i in range(0, len(ids), 500):
                rows.update((r[0], r[1]) for r in conn.execute(
                    select(examples.c.id, examples.c.row_id)
                    .join(datasets, datasets.c.id == examples.c.dataset_id)
                    .where(examples.c.id.in_(ids[i:i + 500]), examples.c.valid_to.is_(None),
                           datasets.c.tenant_id == self._tenant)))
            missing = [i for i in ids if i not in rows]
            if missing:
                raise NotFoundError(f"example(s) not found: {', '.join(missing[:5])}")
            all_ups = [u for _, ups in wanted for u in ups]
            stored = self._put_blob_list(conn, all_ups)
            digests = {id(u): h for u, h in zip(all_ups, stored, strict=False)}
            row_ids = [rows[ex_id] for ex_id in ids]
            for i in range(0, len(row_ids), 500):
                conn.execute(delete(ea).where(ea.c.example_row_id.in_(row_ids[i:i + 500]),
                                              ea.c.name.in_({u.name for u in all_ups})))
            conn.execute(insert(ea), [
                {"example_row_id": rows[ex_id], "name": u.name, "tenant_id": self._tenant,
                 "sha256": digests[id(u)], "mime_type": u.mime_type, "size": len(u.data)}
                for ex_id, ups in wanted for u in ups])

    def _put_blob_list(self, conn: Connection, uploads: Sequence[Upload]) -> list[str]:
        """Each upload's sha256, its content stored once per workspace."""
        hashes = [u.sha256 for u in uploads]
        distinct = dict(zip(hashes, uploads, strict=False))
        have: set[str] = set()
        keys = list(distinct)
        for i in range(0, len(keys), 500):
            have.update(conn.execute(select(blobs.c.sha256).where(
                blobs.c.tenant_id == self._tenant, blobs.c.sha256.in_(keys[i:i + 500])))
                .scalars())
        now = utcnow()
        new = [{"tenant_id": self._tenant, "sha256": h, "size": len(u.data), "data": u.data,
                "created_at": now} for h, u in distinct.items() if h not in have]
        if new:
            conn.execute(_insert_new(conn, blobs), new)
        return hashes

    def create_examples(self, items: Sequence[Any], uploads: Sequence[Sequence[Upload]], *,
                        dataset_id: Any = None, dataset_name: str | None = None) -> list[Any]:
        """``examples.create_many`` and each example's attachments, in one transaction."""
        with self.store.transaction():
            made = self.store.examples.create_many(items, dataset_id=dataset_id,
                                                   dataset_name=dataset_name)
            self.add_to_examples([(ex.id, ups) for ex, ups in zip(made, uploads, strict=False)])
        return made

    def update_examples(self, updates: Sequence[Mapping[str, Any]],
                        uploads: Sequence[Sequence[Upload]],
                        ops: Sequence[tuple[list[str], dict[str, str]] | None]) -> list[Any]:
        """``examples.update_many`` and each new version's attachment changes, atomically."""
        with self.store.transaction():
            changed = self.store.examples.update_many(updates)
            for upd, ups, op in zip(updates, uploads, ops, strict=False):
                if ups or op is not None:
                    self.set_example(upd["id"], ups, op)
        return changed

    def sdk_view(self, example_ids: Sequence[Any], *, as_of: datetime | str | None = None,
                 ) -> dict[str, dict[str, dict[str, Any]]]:
        """LangSmith's ``Example.attachments`` per example id: ``{name: {"presigned_url",
        "mime_type", "reader"}}`` (the URL is ``None``: a local store serves no HTTP)."""
        found = self.of_examples(example_ids, as_of=as_of)
        return {ex_id: {name: {"presigned_url": None, "mime_type": att.mime_type,
                               "reader": self.reader(att)} for name, att in atts.items()}
                for ex_id, atts in found.items()}

    @staticmethod
    def copy_example(conn: Connection, old_row_id: int, new_row_id: int) -> None:
        """A new version of an example starts with its previous version's attachments
        (references only: the bytes stay where they are)."""
        ea = example_attachments
        conn.execute(insert(ea).from_select(
            ["example_row_id", "name", "tenant_id", "sha256", "mime_type", "size"],
            select(literal(new_row_id, ea.c.example_row_id.type), ea.c.name, ea.c.tenant_id,
                   ea.c.sha256, ea.c.mime_type, ea.c.size)
            .where(ea.c.example_row_id == old_row_id)))

    def of_examples(self, example_ids: Sequence[Any], *, as_of: datetime | str | None = None,
                    ) -> dict[str, dict[str, StoredAttachment]]:
        """{example id: {name: attachment}} of each example's version at ``as_of`` (a time or
        a tag of its dataset; None: the current version). Examples without any are absent."""
        ids = [str(as_uuid(i, "example id")) for i in example_ids]
        if not ids:
            return {}
        ea, ex = example_attachments, examples
        out: dict[str, dict[str, StoredAttachment]] = {}
        with self.store.read() as conn:
            bounds: dict[str, int | None] = {}
            if as_of is not None:
                for ds_id in conn.execute(select(ex.c.dataset_id).where(ex.c.id.in_(ids))
                                          .distinct()).scalars():
                    bounds[ds_id] = self.store.datasets._as_of_us(conn, ds_id, as_of)
            q = (select(ex.c.id, ex.c.dataset_id, ex.c.modified_at, ex.c.valid_to, ea.c.name,
                        ea.c.sha256, ea.c.mime_type, ea.c.size)
                 .join(ea, ea.c.example_row_id == ex.c.row_id)
                 .where(ea.c.tenant_id == self._tenant))
            if as_of is None:
                q = q.where(ex.c.valid_to.is_(None))
            for i in range(0, len(ids), 500):
                for r in conn.execute(q.where(ex.c.id.in_(ids[i:i + 500]))
                                      .order_by(ex.c.id, ea.c.name)):
                    if as_of is not None:
                        bound = bounds.get(r.dataset_id)
                        made, closed = to_micros(r.modified_at), to_micros(r.valid_to)
                        if bound is None or (made or 0) > bound or (
                                closed is not None and closed <= bound):
                            continue
                    out.setdefault(str(r.id), {})[r.name] = StoredAttachment(
                        r.name, r.sha256, r.mime_type, int(r.size))
        return out

    # -- runs -----------------------------------------------------------------------------
    def set_runs(self, by_run: Mapping[str, Sequence[Upload]]) -> int:
        """Store run attachments (a name sent again replaces the earlier file); how many."""
        ra = run_attachments
        rows = []
        with self.store.write() as conn:
            for run_id, uploads in by_run.items():
                digests = self._put_blobs(conn, uploads)
                rid = str(as_uuid(run_id, "run id"))
                conn.execute(delete(ra).where(ra.c.tenant_id == self._tenant, ra.c.run_id == rid,
                                              ra.c.name.in_([u.name for u in uploads])))
                rows += [{"tenant_id": self._tenant, "run_id": rid, "name": u.name,
                          "sha256": digests[u.name], "mime_type": u.mime_type,
                          "size": len(u.data)} for u in uploads]
            if rows:
                conn.execute(insert(ra), rows)
        return len(rows)

    def of_runs(self, run_ids: Sequence[Any]) -> dict[str, dict[str, StoredAttachment]]:
        ids = [str(as_uuid(i, "run id")) for i in run_ids]
        ra = run_attachments
        out: dict[str, dict[str, StoredAttachment]] = {}
        with self.store.read() as conn:
            for i in range(0, len(ids), 500):
                for r in conn.execute(select(ra).where(ra.c.tenant_id == self._tenant,
                                                       ra.c.run_id.in_(ids[i:i + 500]))
                                      .order_by(ra.c.run_id, ra.c.name)):
                    out.setdefault(r.run_id, {})[r.name] = StoredAttachment(
                        r.name, r.sha256, r.mime_type, int(r.size))
        return out

    # -- blobs ----------------------------------------------------------------------------
    def blob_size(self, sha256: str) -> int:
        with self.store.read() as conn:
            size = conn.execute(select(blobs.c.size).where(
                blobs.c.tenant_id == self._tenant, blobs.c.sha256 == sha256)).scalar()
        if size is None:
            raise NotFoundError(f"attachment content {sha256[:12]} not found")
        return int(size)

    def read_blob(self, sha256: str, start: int = 0, length: int | None = None) -> bytes:
        """The blob's bytes ``[start, start + length)``, cut in SQL (``substr`` is 1-based)."""
        col = blobs.c.data if start == 0 and length is None else func.substr(
            blobs.c.data, start + 1, length if length is not None else func.length(blobs.c.data))
        with self.store.read() as conn:
            data = conn.execute(select(col).where(
                blobs.c.tenant_id == self._tenant, blobs.c.sha256 == sha256)).scalar()
        if data is None:
            raise NotFoundError(f"attachment content {sha256[:12]} not found")
        return bytes(data)

    def read_span(self, sha256: str, span: Any | None) -> tuple[int, bytes]:
        """(blob size, bytes) on one connection: ``span(size)`` gives the ``(start, end)`` to
        read, or None for all; ``span=None``: the whole blob, in one plain SQL statement (a
        download's only database work)."""
        with self.store.read() as conn:
            if span is None:  # the whole blob (the usual download): one statement
                row = conn.execute(_WHOLE, {"t": self._tenant, "h": sha256}).first()
                if row is None:
                    raise NotFoundError(f"attachment content {sha256[:12]} not found")
                return int(row[0]), bytes(row[1])
            size = conn.execute(select(blobs.c.size).where(
                blobs.c.tenant_id == self._tenant, blobs.c.sha256 == sha256)).scalar()
            if size is None:
                raise NotFoundError(f"attachment content {sha256[:12]} not found")
            cut = span(int(size))
            col = blobs.c.data if cut is None else func.substr(blobs.c.data, cut[0] + 1,
                                                                cut[1] - cut[0])
            data = conn.execute(select(col).where(blobs.c.tenant_id == self._tenant,
                                                  blobs.c.sha256 == sha256)).scalar()
        return int(size), bytes(data or b"")

    def reader(self, att: StoredAttachment) -> LazyReader:
        return LazyReader(lambda: self.read_blob(att.sha256), att.size)

    def forget_dataset(self, conn: Connection, dataset_id: str) -> int:
        """Before a dataset's examples are deleted: drop their attachment rows and the blobs
        nothing else names (``DatasetRepo.delete`` calls it in its transaction); how many."""
        ea, ex = example_attachments, examples
        rows = select(ex.c.row_id).where(ex.c.dataset_id == dataset_id)
        shas = list(conn.execute(select(ea.c.sha256).where(ea.c.example_row_id.in_(rows))
                                 .distinct()).scalars())
        if not shas:
            return 0
        conn.execute(delete(ea).where(ea.c.example_row_id.in_(rows)))
        return self._drop_unused(conn, shas)

    def _drop_unused(self, conn: Connection, shas: Sequence[str] | None) -> int:
        return _drop_unused_blobs(conn, self._tenant, shas)

    def collect(self) -> int:
        """Delete this workspace's blobs no attachment names (a sweep: deleting a dataset
        already drops its own)."""
        with self.store.write() as conn:
            return self._drop_unused(conn, None)

    def signing_secret(self) -> bytes:
        """The database's key for signed download URLs: made once, shared by all processes."""
        with self.store.read() as conn:
            secret = conn.execute(select(signing_keys.c.secret)
                                  .where(signing_keys.c.id == "attachments")).scalar()
        if secret is None:
            with self.store.write() as conn:  # another process may make it first: theirs wins
                conn.execute(_insert_new(conn, signing_keys).values(
                    id="attachments", secret=secrets.token_hex(32), created_at=utcnow()))
            with self.store.read() as conn:
                secret = conn.execute(select(signing_keys.c.secret)
                                      .where(signing_keys.c.id == "attachments")).scalar()
        return bytes.fromhex(str(secret))


def _drop_unused_blobs(conn: Connection, tenant_id: str, shas: Sequence[str] | None) -> int:
    """Delete the workspace's blobs (of ``shas``, or all) that no attachment names; how many."""
    ea, ra = example_attachments, run_attachments
    used = or_(
        select(ea.c.sha256).where(ea.c.tenant_id == blobs.c.tenant_id,
                                  ea.c.sha256 == blobs.c.sha256).exists(),
        select(ra.c.sha256).where(ra.c.tenant_id == blobs.c.tenant_id,
                                  ra.c.sha256 == blobs.c.sha256).exists())
    where = [blobs.c.tenant_id == tenant_id, ~used]
    if shas is None:
        return int(conn.execute(delete(blobs).where(*where)).rowcount or 0)
    n = 0
    for i in range(0, len(shas), 500):
        n += int(conn.execute(delete(blobs).where(
            *where, blobs.c.sha256.in_(shas[i:i + 500]))).rowcount or 0)
    return n


def forget_runs(conn: Connection, tenant_id: str,
                run_ids: Sequence[str] | ClauseElement) -> int:
    """Drop the attachments of deleted runs: their rows, and the blobs nothing else names.

    Whatever deletes runs calls it in its own transaction (``ProjectRepo.delete`` with the
    project's run ids as a SELECT, before the runs go; ``RunRepo.delete_traces`` with the ids
    it deleted), so a deleted trace leaves no file behind and a failed delete keeps them all.
    Returns how many attachment rows went.
    """
    ra = run_attachments
    mine = ra.c.tenant_id == tenant_id
    if isinstance(run_ids, ClauseElement):  # a SELECT of the ids (or its scalar_subquery)
        chunks: list[Any] = [run_ids]
    else:
        ids = sorted(str(i) for i in run_ids)
        chunks = [ids[i:i + 500] for i in range(0, len(ids), 500)]
    shas: set[str] = set()
    gone = 0
    for chunk in chunks:
        shas.update(conn.execute(select(ra.c.sha256).where(mine, ra.c.run_id.in_(chunk))
                                 .distinct()).scalars())
        if shas:  # nothing attached (the usual case): one SELECT, nothing deleted
            gone += int(conn.execute(delete(ra).where(mine, ra.c.run_id.in_(chunk))).rowcount
                        or 0)
    if shas:
        _drop_unused_blobs(conn, tenant_id, sorted(shas))
    return gone
