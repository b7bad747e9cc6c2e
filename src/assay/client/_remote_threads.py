"""Remote mode's ``store.threads``: a project's threads over ``POST /api/v2/threads/query``
(the v2 API the official SDK's ``client.threads.query`` calls)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store._threads import ThreadSummary
    from ._remote import _Http

__all__ = ["RemoteThreads"]

_ALL_TIME = "1970-01-01T00:00:00Z"  # the server, as LangSmith, looks back one day by default
_PAGE = 100


class RemoteThreads:
    def __init__(self, http: _Http) -> None:
        self.http = http

    def list(self, project_id: uuid.UUID | str, *, filter: str | None = None,
             min_start_time: datetime | str | None = None,
             max_start_time: datetime | str | None = None, offset: int = 0,
             limit: int = 20) -> list[ThreadSummary]:
        from ..store._threads import ThreadSummary

        def iso(value: datetime | str | None) -> str | None:
            return value.isoformat() if isinstance(value, datetime) else value

        body: dict[str, Any] = {"project_id": str(project_id), "filter": filter,
                                "min_start_time": iso(min_start_time) or _ALL_TIME,
                                "max_start_time": iso(max_start_time), "page_size": _PAGE}
        body = {k: v for k, v in body.items() if v is not None}
        out: list[ThreadSummary] = []
        skipped = 0
        while len(out) < limit:
            page = self.http.request("POST", "/api/v2/threads/query", body=body)
            items = page.get("items") or []
            take = items[max(offset - skipped, 0):]
            skipped += len(items) - len(take)
            out += [ThreadSummary.model_validate(t) for t in take]
            if not page.get("next_cursor"):
                break
            body["cursor"] = page["next_cursor"]
        return out[:limit]
