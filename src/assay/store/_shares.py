"""Shared traces and datasets: links a teammate opens without an API key (LangSmith's
``share_run`` and ``share_dataset``).

Sharing any run shares its whole trace, as LangSmith does; sharing a dataset shares its examples
and the experiments run on it. A row holds the workspace, what it opens (``kind`` and id; a
trace's project too) and its token (a uuid, random unless the client picks one), the link's only
secret. Each trace or dataset has at most one token; sharing it again returns that token. The
public reads (``resolve`` and what the server and web UI build on it) are answered from the base
store: the token says whose data it is, and they see nothing outside what it opens.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from .._ids import as_uuid
from .._time import utcnow
from ..errors import ConflictError, NotFoundError, StoreError
from ..schemas import Dataset, Example, Run, TracerSession
from ._tables import shares

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["DatasetShare", "RunShare", "ShareRepo"]

Kind = Literal["trace", "dataset"]
_WHAT = {"trace": "shared trace", "dataset": "shared dataset"}


class RunShare(BaseModel):
    """A shared trace: ``run_id`` is its root (what ``read_shared_run(token)`` returns).
    Over the REST API only the token and root are known (LangSmith's answer)."""

    share_token: uuid.UUID
    run_id: uuid.UUID
    trace_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    created_at: datetime | None = None


class DatasetShare(BaseModel):
    """A shared dataset (LangSmith's ``DatasetShareSchema`` less the ``url`` its SDKs add)."""

    share_token: uuid.UUID
    dataset_id: uuid.UUID
    created_at: datetime | None = None


class ShareRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    # --- one token per trace or dataset -----------------------------------------------------

    def _share(self, kind: Kind, target: str, session: str | None,
               share_token: uuid.UUID | str | None) -> Any:
        """The target's token: its existing one, else ``share_token`` or a new random one."""
        token = str(as_uuid(share_token, "share_token")) if share_token else str(uuid.uuid4())
        try:
            with self.store.write() as conn:
                found = self._of(conn, kind, target)
                if found is not None:
                    return found
                conn.execute(shares.insert().values(
                    token=token, tenant_id=self.store.tenant_id, kind=kind, target_id=target,
                    session_id=session, created_at=utcnow()))
        except StoreError as exc:  # the store's wrap of the database's error
            if not isinstance(exc.__cause__, IntegrityError):
                raise
            # the token is taken (a client that picks its own), or another writer shared this
            # target at the same moment: its token is the answer
            with self.store.read() as conn:
                found = self._of(conn, kind, target)
            if found is None:
                raise ConflictError(f"share token {token} is already in use") from None
            return found
        with self.store.read() as conn:
            return self._of(conn, kind, target)

    def _of(self, conn: Connection, kind: Kind, target: str) -> Any:
        row = conn.execute(select(shares).where(
            shares.c.tenant_id == self.store.tenant_id, shares.c.kind == kind,
            shares.c.target_id == target)).first()
        return None if row is None else _model(row)

    def _unshare(self, kind: Kind, target: str) -> bool:
        with self.store.write() as conn:
            gone = conn.execute(delete(shares).where(
                shares.c.tenant_id == self.store.tenant_id, shares.c.kind == kind,
                shares.c.target_id == target))
        return bool(gone.rowcount)

    # --- traces ---------------------------------------------------------------------------

    def share_run(self, run_id: uuid.UUID | str,
                  share_token: uuid.UUID | str | None = None) -> RunShare:
        """Share the trace of a stored run of this workspace; the trace's token (its existing
        one when it is shared already, else ``share_token`` or a new random one)."""
        run = self.store.runs.read(run_id)  # NotFoundError names the run
        made: RunShare = self._share("trace", str(run.trace_id), str(run.session_id),
                                     share_token)
        return made

    def of_run(self, run_id: uuid.UUID | str) -> RunShare | None:
        """The share of the run's trace, or None when it is not shared."""
        run = self.store.runs.read(run_id)
        with self.store.read() as conn:
            found: RunShare | None = self._of(conn, "trace", str(run.trace_id))
        return found

    def unshare_trace(self, trace_id: uuid.UUID | str) -> bool:
        """Stop sharing a trace of this workspace; whether it was shared (idempotent)."""
        return self._unshare("trace", str(as_uuid(trace_id, "trace_id")))

    def unshare_run(self, run_id: uuid.UUID | str) -> bool:
        """Stop sharing the trace of a stored run; whether it was shared."""
        run = self.store.runs.read(run_id)
        return self.unshare_trace(run.trace_id)

    def tokens_of_traces(self, trace_ids: Iterable[uuid.UUID | str]) -> dict[str, str]:
        """``{trace id: token}`` for those of ``trace_ids`` that are shared."""
        wanted = sorted({str(as_uuid(t, "trace_id")) for t in trace_ids})
        out: dict[str, str] = {}
        with self.store.read() as conn:
            for i in range(0, len(wanted), 500):
                out.update((str(t), str(k)) for t, k in conn.execute(
                    select(shares.c.target_id, shares.c.token).where(
                        shares.c.tenant_id == self.store.tenant_id, shares.c.kind == "trace",
                        shares.c.target_id.in_(wanted[i: i + 500]))))
        return out

    # --- datasets -------------------------------------------------------------------------

    def share_dataset(self, dataset_id: uuid.UUID | str | None = None, *,
                      dataset_name: str | None = None,
                      share_token: uuid.UUID | str | None = None) -> DatasetShare:
        """Share a dataset of this workspace (its examples and its experiments); its token."""
        ds = self.store.datasets.read(dataset_id=dataset_id, dataset_name=dataset_name)
        made: DatasetShare = self._share("dataset", str(ds.id), None, share_token)
        return made

    def of_dataset(self, dataset_id: uuid.UUID | str | None = None, *,
                   dataset_name: str | None = None) -> DatasetShare | None:
        """The dataset's share, or None when it is not shared."""
        ds = self.store.datasets.read(dataset_id=dataset_id, dataset_name=dataset_name)
        with self.store.read() as conn:
            found: DatasetShare | None = self._of(conn, "dataset", str(ds.id))
        return found

    def unshare_dataset(self, dataset_id: uuid.UUID | str) -> bool:
        """Stop sharing a dataset of this workspace; whether it was shared (idempotent)."""
        ds = self.store.datasets.read(dataset_id=dataset_id)
        return self._unshare("dataset", str(ds.id))

    # --- the public side: on the base store, no key ---------------------------------------

    def resolve(self, share_token: uuid.UUID | str,
                kind: Kind = "trace") -> tuple[Store, Any]:
        """The workspace view and share a token of ``kind`` opens (any workspace);
        NotFoundError when the token is unknown, unshared or of another kind."""
        token = str(as_uuid(share_token, "share_token"))
        with self.store.read() as conn:
            row = conn.execute(select(shares).where(shares.c.token == token,
                                                    shares.c.kind == kind)).first()
        if row is None:
            raise NotFoundError(f"{_WHAT[kind]} {token} not found")
        return self.store.for_tenant(row.tenant_id), _model(row)

    def shared_run(self, share_token: uuid.UUID | str,
                   run_id: uuid.UUID | str | None = None) -> tuple[Store, Run]:
        """The shared trace's root (with its workspace view), or ``run_id`` when it is a run
        of that trace."""
        view, share = self.resolve(share_token)
        wanted = share.run_id if run_id is None else as_uuid(run_id, "run_id")
        found = view.runs.list(project_ids=[str(share.session_id)], trace_id=share.trace_id,
                               run_ids=[wanted])
        if not found:
            raise NotFoundError(f"run {wanted} not found in shared trace {share.share_token}")
        return view, found[0]

    def shared_runs(self, share_token: uuid.UUID | str,
                    run_ids: list[uuid.UUID | str] | None = None, *, offset: int = 0,
                    limit: int | None = None) -> tuple[Store, list[Run]]:
        """The shared trace's runs (those of ``run_ids`` only, when given), in start order."""
        view, share = self.resolve(share_token)
        if not offset:
            self.shared_run(share_token)  # NotFoundError once the trace is gone
        return view, view.runs.list(project_ids=[str(share.session_id)], trace_id=share.trace_id,
                                    run_ids=run_ids or None, order="asc", offset=offset,
                                    limit=limit)


    def read_shared(self, share_token: uuid.UUID | str,
                    run_id: uuid.UUID | str | None = None) -> Run:
        """``shared_run`` without the view: what ``Client.read_shared_run`` gives."""
        return self.shared_run(share_token, run_id)[1]

    def list_shared(self, share_token: uuid.UUID | str,
                    run_ids: list[uuid.UUID | str] | None = None) -> list[Run]:
        return self.shared_runs(share_token, run_ids)[1]

    def shared_dataset(self, share_token: uuid.UUID | str) -> tuple[Store, Dataset]:
        """The shared dataset, with its workspace view."""
        view, share = self.resolve(share_token, "dataset")
        return view, view.datasets.read(dataset_id=share.dataset_id)

    def shared_examples(self, share_token: uuid.UUID | str,
                        example_ids: list[uuid.UUID | str] | None = None, *, offset: int = 0,
                        limit: int | None = None) -> tuple[Store, list[Example]]:
        """The shared dataset's examples (those of ``example_ids`` only, when given)."""
        view, ds = self.shared_dataset(share_token)
        return view, view.examples.list(dataset_id=ds.id, example_ids=example_ids or None,
                                        offset=offset, limit=limit)

    def shared_experiments(self, share_token: uuid.UUID | str, *,
                           project_ids: list[uuid.UUID | str] | None = None,
                           name: str | None = None, name_contains: str | None = None,
                           offset: int = 0,
                           limit: int | None = None) -> tuple[Store, list[TracerSession]]:
        """The experiments run on the shared dataset, with their statistics."""
        view, ds = self.shared_dataset(share_token)
        return view, view.projects.list(reference_dataset_id=ds.id, project_ids=project_ids,
                                        name=name, name_contains=name_contains,
                                        include_stats=True, offset=offset, limit=limit)


def _model(row: Any) -> RunShare | DatasetShare:
    if row.kind == "dataset":
        return DatasetShare(share_token=row.token, dataset_id=row.target_id,
                            created_at=row.created_at)
    return RunShare(share_token=row.token, run_id=row.target_id, trace_id=row.target_id,
                    session_id=row.session_id, created_at=row.created_at)
