"""Annotation queue and feedback config methods of ``Client`` (LangSmith names and keywords),
and their remote repositories (``RemoteBackend.queues`` / ``.feedback_configs``)."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..store._feedback_configs import FeedbackConfigRecord
from ..store._queues import AnnotationQueueRecord, QueuedRun
from ._args import refuse_unknown

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["QueueMethods", "RemoteFeedbackConfigs", "RemoteQueues"]

ID = uuid.UUID | str


class QueueMethods:
    _backend: Store

    # -- feedback configs --------------------------------------------------------------------
    def create_feedback_config(self, feedback_key: str, *, feedback_config: Mapping[str, Any],
                               is_lower_score_better: bool | None = None,
                               is_enforced: bool = False) -> FeedbackConfigRecord:
        return self._backend.feedback_configs.create(
            feedback_key, feedback_config, is_lower_score_better=is_lower_score_better,
            is_enforced=is_enforced)

    def list_feedback_configs(self, *, feedback_key: Sequence[str] | None = None,
                              name_contains: str | None = None, limit: int | None = None,
                              offset: int = 0, include_all_configs: bool = False,
                              is_enforced: bool | None = None) -> Iterator[FeedbackConfigRecord]:
        yield from self._backend.feedback_configs.list(
            feedback_keys=feedback_key, name_contains=name_contains,
            include_all_configs=include_all_configs, is_enforced=is_enforced, offset=offset,
            limit=limit)

    def update_feedback_config(self, feedback_key: str, *,
                               feedback_config: Mapping[str, Any] | None = None,
                               is_lower_score_better: bool | None = None,
                               config_id: ID | None = None) -> FeedbackConfigRecord:
        return self._backend.feedback_configs.update(
            feedback_key, feedback_config=feedback_config,
            is_lower_score_better=is_lower_score_better, config_id=config_id)

    def add_feedback_categories(self, feedback_key: str, categories: Sequence[Mapping[str, Any]],
                                *, config_id: ID | None = None) -> FeedbackConfigRecord:
        return self._backend.feedback_configs.update(feedback_key, config_id=config_id,
                                                     add_categories=categories)

    def remove_feedback_categories(self, feedback_key: str, values: Sequence[float], *,
                                   config_id: ID | None = None) -> FeedbackConfigRecord:
        return self._backend.feedback_configs.update(feedback_key, config_id=config_id,
                                                     remove_categories=values)

    def delete_feedback_config(self, feedback_key: str | None = None, *,
                               config_id: ID | None = None) -> None:
        self._backend.feedback_configs.delete(feedback_key, config_id=config_id)

    # -- annotation queues -------------------------------------------------------------------
    def create_annotation_queue(self, *, name: str, description: str | None = None,
                                queue_id: ID | None = None,
                                rubric_instructions: str | None = None,
                                rubric_items: Sequence[Mapping[str, Any]] | None = None
                                ) -> AnnotationQueueRecord:
        return self._backend.queues.create(name, description=description,
                                           rubric_instructions=rubric_instructions,
                                           rubric_items=rubric_items, id=queue_id)

    def read_annotation_queue(self, queue_id: ID) -> AnnotationQueueRecord:
        return self._backend.queues.read(queue_id)

    def list_annotation_queues(self, *, queue_ids: Sequence[ID] | None = None,
                               name: str | None = None, name_contains: str | None = None,
                               limit: int | None = None) -> Iterator[AnnotationQueueRecord]:
        yield from self._backend.queues.list(queue_ids=queue_ids, name=name,
                                             name_contains=name_contains, limit=limit)

    def update_annotation_queue(self, queue_id: ID, *, name: str | None = None,
                                description: str | None = None,
                                rubric_instructions: str | None = None,
                                rubric_items: Sequence[Mapping[str, Any]] | None = None) -> None:
        self._backend.queues.update(queue_id, name=name, description=description,
                                    rubric_instructions=rubric_instructions,
                                    rubric_items=rubric_items)

    def delete_annotation_queue(self, queue_id: ID) -> None:
        self._backend.queues.delete(queue_id)

    def add_runs_to_annotation_queue(self, queue_id: ID, *, run_ids: Sequence[ID] | None = None,
                                     runs: Sequence[Mapping[str, Any]] | None = None) -> None:
        """Queue runs by id (``runs``: LangSmith's run keys; only their ``run_id`` is used)."""
        if (run_ids is None) == (runs is None):
            raise InvalidInputError("give exactly one of run_ids or runs")
        ids = list(run_ids) if run_ids is not None else [r["run_id"] for r in runs or ()]
        self._backend.queues.add_runs(queue_id, ids)

    def list_runs_from_annotation_queue(self, queue_id: ID, *, status: str | None = None,
                                        limit: int | None = None) -> Iterator[QueuedRun]:
        yield from self._backend.queues.list_runs(queue_id, status=status, limit=limit)

    def get_run_from_annotation_queue(self, queue_id: ID, *, index: int) -> QueuedRun:
        return self._backend.queues.get_run(queue_id, index)

    def delete_run_from_annotation_queue(self, queue_id: ID, *, run_id: ID) -> None:
        self._backend.queues.remove_run(queue_id, run_id)

    def get_size_from_annotation_queue(self, queue_id: ID, *, status: str | None = None,
                                       **unknown: Any) -> int:
        """How many runs still need review (``status``: how many in that state)."""
        refuse_unknown("get_size_from_annotation_queue", unknown)
        return self._backend.queues.size(queue_id, status=status or "needs_my_review")


class RemoteFeedbackConfigs:
    """``store.feedback_configs`` over an assay server's ``/feedback-configs``."""

    def __init__(self, http: Any) -> None:
        self.http = http

    def create(self, feedback_key: str, feedback_config: Mapping[str, Any], *,
               is_lower_score_better: bool | None = None,
               is_enforced: bool = False) -> FeedbackConfigRecord:
        body = {"feedback_key": feedback_key, "feedback_config": dict(feedback_config),
                "is_enforced": is_enforced}
        if is_lower_score_better is not None:
            body["is_lower_score_better"] = is_lower_score_better
        return FeedbackConfigRecord.model_validate(
            self.http.request("POST", "/feedback-configs", body=body))

    def list(self, *, feedback_keys: Sequence[str] | None = None,
             name_contains: str | None = None, include_all_configs: bool = False,
             is_enforced: bool | None = None, offset: int = 0,
             limit: int | None = None) -> builtins.list[FeedbackConfigRecord]:
        if feedback_keys is not None and not feedback_keys:
            return []
        params = {"key": list(feedback_keys) if feedback_keys is not None else None,
                  "name_contains": name_contains,
                  "include_all_configs": include_all_configs or None, "is_enforced": is_enforced}
        return [FeedbackConfigRecord.model_validate(c)
                for c in self.http.pages("/feedback-configs", params, offset, limit)]

    def update(self, feedback_key: str, *, feedback_config: Mapping[str, Any] | None = None,
               is_lower_score_better: bool | None = None, config_id: ID | None = None,
               add_categories: Sequence[Mapping[str, Any]] | None = None,
               remove_categories: Sequence[float] | None = None) -> FeedbackConfigRecord:
        body = {"feedback_key": feedback_key, "id": str(config_id) if config_id else None,
                "feedback_config": dict(feedback_config) if feedback_config is not None else None,
                "is_lower_score_better": is_lower_score_better,
                "add_categories": [dict(c) for c in add_categories] if add_categories else None,
                "remove_categories": list(remove_categories) if remove_categories else None}
        return FeedbackConfigRecord.model_validate(self.http.request(
            "PATCH", "/feedback-configs", body={k: v for k, v in body.items() if v is not None}))

    def delete(self, feedback_key: str | None = None, *, config_id: ID | None = None) -> int:
        if (feedback_key is None) == (config_id is None):
            raise InvalidInputError("give exactly one of feedback_key or config id")
        data = self.http.request("DELETE", "/feedback-configs", params={
            "feedback_key": feedback_key, "id": str(config_id) if config_id else None})
        return int(data["deleted"])


class RemoteQueues:
    """``store.queues`` over an assay server's ``/annotation-queues``."""

    def __init__(self, http: Any) -> None:
        self.http = http

    def create(self, name: str, *, description: str | None = None,
               rubric_instructions: str | None = None,
               rubric_items: Sequence[Mapping[str, Any]] | None = None,
               id: ID | None = None) -> AnnotationQueueRecord:
        body = {"name": name, "description": description, "id": str(id) if id else None,
                "rubric_instructions": rubric_instructions,
                "rubric_items": [dict(i) for i in rubric_items] if rubric_items is not None
                else None}
        return AnnotationQueueRecord.model_validate(self.http.request(
            "POST", "/annotation-queues", body={k: v for k, v in body.items() if v is not None}))

    def read(self, queue_id: ID) -> AnnotationQueueRecord:
        return AnnotationQueueRecord.model_validate(
            self.http.request("GET", f"/annotation-queues/{queue_id}"))

    def list(self, *, queue_ids: Sequence[ID] | None = None, name: str | None = None,
             name_contains: str | None = None, offset: int = 0,
             limit: int | None = None) -> builtins.list[AnnotationQueueRecord]:
        if queue_ids is not None and not queue_ids:
            return []
        params = {"ids": [str(i) for i in queue_ids] if queue_ids is not None else None,
                  "name": name, "name_contains": name_contains}
        return [AnnotationQueueRecord.model_validate(q)
                for q in self.http.pages("/annotation-queues", params, offset, limit)]

    def update(self, queue_id: ID, *, name: str | None = None, description: str | None = None,
               rubric_instructions: str | None = None,
               rubric_items: Sequence[Mapping[str, Any]] | None = None) -> AnnotationQueueRecord:
        body = {"name": name, "description": description,
                "rubric_instructions": rubric_instructions,
                "rubric_items": [dict(i) for i in rubric_items] if rubric_items is not None
                else None}
        return AnnotationQueueRecord.model_validate(self.http.request(
            "PATCH", f"/annotation-queues/{queue_id}",
            body={k: v for k, v in body.items() if v is not None}))

    def delete(self, queue_id: ID) -> None:
        self.http.request("DELETE", f"/annotation-queues/{queue_id}")

    def add_runs(self, queue_id: ID, run_ids: Sequence[ID]) -> int:
        data = self.http.request("POST", f"/annotation-queues/{queue_id}/runs",
                                 body=[str(r) for r in run_ids])
        return len(data)

    def list_runs(self, queue_id: ID, *, status: str | None = None, offset: int = 0,
                  limit: int | None = None) -> builtins.list[QueuedRun]:
        return [QueuedRun.model_validate(r) for r in self.http.pages(
            f"/annotation-queues/{queue_id}/runs", {"status": status}, offset, limit)]

    def get_run(self, queue_id: ID, index: int) -> QueuedRun:
        return QueuedRun.model_validate(
            self.http.request("GET", f"/annotation-queues/{queue_id}/run/{index}"))

    def size(self, queue_id: ID, *, status: str | None = "needs_my_review") -> int:
        if status is None:
            data = self.http.request("GET", f"/annotation-queues/{queue_id}/total_size")
        else:
            data = self.http.request("GET", f"/annotation-queues/{queue_id}/size",
                                     params={"status": status})
        return int(data["size"])

    def remove_run(self, queue_id: ID, run_id: ID) -> None:
        self.http.request("DELETE", f"/annotation-queues/{queue_id}/runs/{run_id}")

    def set_status(self, queue_run_id: ID, status: str) -> None:
        self.http.request("POST", f"/annotation-queues/status/{queue_run_id}",
                          body={"status": status})
