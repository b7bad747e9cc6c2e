"""Shared traces: a link a teammate opens without an API key (LangSmith's ``share_run``).

Sharing any run shares its whole trace, as LangSmith does: the row holds the workspace, project
and trace, and its token (a uuid, random unless the client picks one) is the link's only
secret. A trace has at most one token; sharing it again returns that token. The public reads
(``resolve`` and what the server and web UI build on it) are answered from the base store: the
token says whose trace it is, and they see nothing outside that trace.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from .._ids import as_uuid
from .._time import utcnow
from ..errors import ConflictError, NotFoundError, StoreError
from ..schemas import Run
from ._tables import run_shares as shares

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["RunShare", "ShareRepo"]


class RunShare(BaseModel):
    """A shared trace: ``run_id`` is its root (what ``read_shared_run(token)`` returns).
    Over the REST API only the token and root are known (LangSmith's answer)."""

    share_token: uuid.UUID
    run_id: uuid.UUID
    trace_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    created_at: datetime | None = None


class ShareRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    def share_run(self, run_id: uuid.UUID | str,
                  share_token: uuid.UUID | str | None = None) -> RunShare:
        """Share the trace of a stored run of this workspace; the trace's token (its existing
        one when it is shared already, else ``share_token`` or a new random one)."""
        run = self.store.runs.read(run_id)  # NotFoundError names the run
        token = str(as_uuid(share_token, "share_token")) if share_token else str(uuid.uuid4())
        trace = str(run.trace_id)
        try:
            with self.store.write() as conn:
                found = self._of_trace(conn, trace)
                if found is not None:
                    return found
                conn.execute(shares.insert().values(
                    token=token, tenant_id=self.store.tenant_id, trace_id=trace,
                    session_id=str(run.session_id), created_at=utcnow()))
        except StoreError as exc:  # the store's wrap of the database's error
            if not isinstance(exc.__cause__, IntegrityError):
                raise
            # the token is another trace's (a client that picks its own), or another writer
            # shared this trace at the same moment: its token is the answer
            with self.store.read() as conn:
                found = self._of_trace(conn, trace)
            if found is None:
                raise ConflictError(f"share token {token} is already in use") from None
            return found
        with self.store.read() as conn:
            made = self._of_trace(conn, trace)
        assert made is not None
        return made

    def of_run(self, run_id: uuid.UUID | str) -> RunShare | None:
        """The share of the run's trace, or None when it is not shared."""
        run = self.store.runs.read(run_id)
        with self.store.read() as conn:
            return self._of_trace(conn, str(run.trace_id))

    def unshare_trace(self, trace_id: uuid.UUID | str) -> bool:
        """Stop sharing a trace of this workspace; whether it was shared (idempotent)."""
        trace = str(as_uuid(trace_id, "trace_id"))
        with self.store.write() as conn:
            gone = conn.execute(delete(shares).where(
                shares.c.tenant_id == self.store.tenant_id, shares.c.trace_id == trace))
        return bool(gone.rowcount)

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
                    select(shares.c.trace_id, shares.c.token).where(
                        shares.c.tenant_id == self.store.tenant_id,
                        shares.c.trace_id.in_(wanted[i: i + 500]))))
        return out

    def _of_trace(self, conn: Connection, trace: str) -> RunShare | None:
        row = conn.execute(select(shares).where(
            shares.c.tenant_id == self.store.tenant_id, shares.c.trace_id == trace)).first()
        return None if row is None else _model(row)

    # --- the public side: on the base store, no key ---------------------------------------

    def resolve(self, share_token: uuid.UUID | str) -> tuple[Store, RunShare]:
        """The workspace view and share a token opens (any workspace); NotFoundError when the
        token is unknown, unshared, or its trace is no longer stored."""
        token = str(as_uuid(share_token, "share_token"))
        with self.store.read() as conn:
            row = conn.execute(select(shares).where(shares.c.token == token)).first()
        if row is None:
            raise NotFoundError(f"shared trace {token} not found")
        view = self.store.for_tenant(row.tenant_id)
        return view, _model(row)

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


def _model(row: Any) -> RunShare:
    return RunShare(share_token=row.token, run_id=row.trace_id, trace_id=row.trace_id,
                    session_id=row.session_id, created_at=row.created_at)
