"""Run methods of ``Client``: create/update (LangSmith's post/patch), list and read."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._ids import new_id, utcnow
from ..schemas import Run
from ._args import refuse_unknown

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["RunMethods"]

ID = uuid.UUID | str


class RunMethods:
    _backend: Store
    _remote: bool

    def _project_ids(self, project_id: Any, project_name: Any) -> list[str] | None:
        if project_id is None and project_name is None:
            return None
        ids = project_id if isinstance(project_id, (list, tuple)) else (
            [project_id] if project_id is not None else [])
        names = project_name if isinstance(project_name, (list, tuple)) else (
            [project_name] if project_name is not None else [])
        out = [str(self._backend.projects.read(project_id=p).id) for p in ids]
        out += [str(self._backend.projects.read(project_name=n).id) for n in names]
        return out

    def create_run(
        self,
        name: str,
        inputs: Mapping[str, Any],
        run_type: str,
        *,
        project_name: str | None = None,
        id: ID | None = None,
        **kwargs: Any,
    ) -> None:
        run = {"id": id or new_id(), "name": name, "inputs": dict(inputs), "run_type": run_type,
               "start_time": kwargs.pop("start_time", None) or utcnow(), **kwargs}
        if project_name is not None:
            run["session_name"] = project_name
        self._backend.runs.upsert(posts=[run])

    def update_run(self, run_id: ID, *, end_time: datetime | None = None, **kwargs: Any) -> None:
        self._backend.runs.upsert(patches=[{"id": run_id, "end_time": end_time or utcnow(),
                                            **kwargs}])

    def read_run(self, run_id: ID, load_child_runs: bool = False) -> Run:
        """The run (with its tree under ``child_runs`` when asked); a chain's tokens, cost and
        first token are those of the llm calls under it, as LangSmith's reads give them."""
        run = self._backend.runs.read(run_id, load_child_runs=load_child_runs)
        return run if self._remote else self._backend.runs.roll_up_usage([run])[0]

    def list_runs(
        self,
        *,
        project_id: ID | Sequence[ID] | None = None,
        project_name: str | Sequence[str] | None = None,
        run_type: str | None = None,
        trace_id: ID | None = None,
        reference_example_id: ID | None = None,
        is_root: bool | None = None,
        parent_run_id: ID | None = None,
        error: bool | None = None,
        run_ids: Sequence[ID] | None = None,
        start_time: datetime | str | None = None,
        filter: str | None = None,
        trace_filter: str | None = None,
        tree_filter: str | None = None,
        query: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        order: str = "asc",
        **unknown: Any,
    ) -> Iterator[Run]:
        """Runs matching every given filter (a trace's runs come in execution order).

        ``filter`` / ``trace_filter`` / ``tree_filter`` take LangSmith's filter language, on
        the run, the root of its trace, or any run of its trace: ``and(eq(run_type, "llm"),
        gt(latency, "2s"))``, ``and(eq(feedback_key, "correctness"), eq(feedback_score, 1))``,
        ``has(tags, "beta")``, ``search("refund")``; ``query`` searches the name, error,
        inputs and outputs. ``start_time``: runs that started at or after it.
        """
        refuse_unknown("list_runs", unknown, ("select",))
        found = self._backend.runs.list(
            project_ids=self._project_ids(project_id, project_name), run_type=run_type,
            trace_id=trace_id, parent_run_id=parent_run_id, is_root=is_root, error=error,
            reference_example_ids=[reference_example_id] if reference_example_id else None,
            run_ids=run_ids, start_time=start_time, filter=filter, trace_filter=trace_filter,
            tree_filter=tree_filter, query=query, order=order, offset=offset, limit=limit,
        )
        yield from found if self._remote else self._backend.runs.roll_up_usage(found)

    def get_run_stats(
        self,
        *,
        id: Sequence[ID] | None = None,
        trace: ID | None = None,
        parent_run: ID | None = None,
        run_type: str | None = None,
        project_names: Sequence[str] | None = None,
        project_ids: Sequence[ID] | None = None,
        reference_example_ids: Sequence[ID] | None = None,
        start_time: datetime | str | None = None,
        end_time: datetime | str | None = None,
        error: bool | None = None,
        query: str | None = None,
        filter: str | None = None,
        trace_filter: str | None = None,
        tree_filter: str | None = None,
        is_root: bool | None = None,
        data_source_type: str | None = None,
    ) -> dict[str, Any]:
        """Statistics of the runs ``list_runs`` would give for the same filters (LangSmith's
        ``get_run_stats``): run_count, latency and first-token percentiles (seconds), tokens
        and costs (each run counting its subtree's llm calls), error_rate, feedback_stats...
        ``end_time``: runs that started at or before it. ``data_source_type`` (a LangSmith
        storage tier) changes nothing."""
        del data_source_type
        ids = [*(project_ids or ())]
        if not ids and not project_names:
            raise ValueError("At least one of project_names or project_ids must be provided.")
        projects = self._project_ids(ids or None, list(project_names) if project_names else None)
        return self._backend.runs.stats(
            project_ids=projects, run_ids=list(id) if id is not None else None, trace_id=trace,
            parent_run_id=parent_run, run_type=run_type,
            reference_example_ids=(list(reference_example_ids)
                                   if reference_example_ids is not None else None),
            start_time=start_time, start_before=end_time, error=error, query=query,
            filter=filter, trace_filter=trace_filter, tree_filter=tree_filter, is_root=is_root)
