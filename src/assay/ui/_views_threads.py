"""The web UI's conversation threads: a project's threads (root runs grouped by the thread id
their metadata names, ``store/_threads.py``) and one thread read as the conversation it was,
turn after turn, with what each turn cost and how it was scored."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["THREADS_PER_PAGE", "thread_page", "threads_page"]

THREADS_PER_PAGE = 50


def threads_page(store: Store, project_id: str, *, offset: int = 0,
                 where: str | None = None) -> dict[str, Any]:
    project = store.projects.read(project_id=project_id)
    offset = max(offset, 0)
    where = (where or "").strip() or None
    found = store.threads.list(project.id, filter=where, offset=offset,
                               limit=THREADS_PER_PAGE + 1)
    shown = found[:THREADS_PER_PAGE]
    keys = sorted({k for t in shown for k in (t.feedback_stats or {})})
    return {"project": project, "threads": shown, "offset": offset,
            "per_page": THREADS_PER_PAGE, "more": len(found) > THREADS_PER_PAGE,
            "where": where or "", "feedback_keys": keys}


def thread_page(store: Store, project_id: str, thread_id: str) -> dict[str, Any]:
    project = store.projects.read(project_id=project_id)
    summary = store.threads.stats(project.id, thread_id)
    if summary is None:
        raise NotFoundError(f"thread {thread_id!r} not found in project {project.name!r}")
    turns = store.threads.traces(project.id, thread_id)
    feedback: dict[str, list[Any]] = {}
    for fb in store.feedback.list(run_ids=[str(t.id) for t in turns]):
        feedback.setdefault(str(fb.run_id), []).append(fb)
    return {"project": project, "thread": summary, "turns": turns, "feedback": feedback,
            "usage": store.threads.usage_of([str(t.id) for t in turns])}
