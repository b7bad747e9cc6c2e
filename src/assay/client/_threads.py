"""Thread methods of ``Client`` (LangSmith's ``list_threads`` and ``read_thread``): a project's
traces grouped into conversations by the thread id their metadata names (``session_id``,
``thread_id`` or ``conversation_id``), locally and against ``assay serve``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..schemas import Run

if TYPE_CHECKING:
    from ..store import Store
    from ..store._threads import ThreadSummary

__all__ = ["ThreadMethods"]

ID = uuid.UUID | str
_PAGE = 100


class ThreadMethods:
    _backend: Store

    def _one_project(self, project_id: ID | None, project_name: str | None) -> str:
        if (project_id is None) == (project_name is None):
            raise InvalidInputError("give project_id or project_name (one of them)")
        return str(self._backend.projects.read(project_id=project_id,
                                               project_name=project_name).id)

    def list_thread_summaries(self, *, project_id: ID | None = None,
                              project_name: str | None = None, filter: str | None = None,
                              start_time: datetime | str | None = None, offset: int = 0,
                              limit: int | None = None) -> list[ThreadSummary]:
        """The project's threads, most recently active first, each summed up: turns, first
        input and last output, tokens, cost, latency p50/p99, errored turns, feedback.
        ``filter`` (the filter language) picks the turns that count; ``start_time``: turns
        that started at or after it."""
        pid = self._one_project(project_id, project_name)
        out: list[ThreadSummary] = []
        while limit is None or len(out) < limit:
            size = _PAGE if limit is None else min(_PAGE, limit - len(out))
            page = self._backend.threads.list(pid, filter=filter, min_start_time=start_time,
                                              offset=offset + len(out), limit=size)
            out += page
            if len(page) < size:
                break
        return out

    def list_threads(self, *, project_id: ID | None = None, project_name: str | None = None,
                     limit: int | None = None, offset: int = 0, filter: str | None = None,
                     start_time: datetime | str | None = None) -> list[dict[str, Any]]:
        """LangSmith's ``list_threads``: ``{"thread_id", "runs" (its turns, oldest first),
        "count", "min_start_time", "max_start_time"}`` a thread, most recently active first,
        with the summary of ``list_thread_summaries`` beside them."""
        pid = self._one_project(project_id, project_name)
        found = self.list_thread_summaries(project_id=pid, filter=filter,
                                           start_time=start_time, offset=offset, limit=limit)
        return [{**t.model_dump(), "runs": list(self.read_thread(thread_id=t.thread_id,
                                                                 project_id=pid))}
                for t in found]

    def read_thread(self, *, thread_id: str, project_id: ID | Sequence[ID] | None = None,
                    project_name: str | Sequence[str] | None = None, is_root: bool = True,
                    limit: int | None = None, filter: str | None = None,
                    order: str = "asc", **_: Any) -> Iterator[Run]:
        """A thread's turns (root runs) in time order; ``is_root=False``: the runs below them
        (those of the turns' traces that are not roots)."""
        if project_id is None and project_name is None:
            raise InvalidInputError("read_thread needs project_id or project_name")
        mine = f"eq(thread_id, {json.dumps(str(thread_id))})"
        if is_root:
            yield from self.list_runs(  # type: ignore[attr-defined]  # RunMethods, in Client
                project_id=project_id, project_name=project_name, is_root=True,
                filter=f"and({mine}, {filter})" if filter else mine, order=order, limit=limit)
        else:
            yield from self.list_runs(  # type: ignore[attr-defined]
                project_id=project_id, project_name=project_name, is_root=False,
                trace_filter=mine, filter=filter, order=order, limit=limit)
