"""Project (experiment) and feedback methods of ``Client``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..schemas import ComparativeExperiment, Feedback, TracerSession
from ._args import refuse_unknown

if TYPE_CHECKING:
    from ..store import Store
    from ..store._feedback_tokens import FeedbackToken

__all__ = ["ProjectMethods", "FeedbackMethods"]

ID = uuid.UUID | str


class ProjectMethods:
    _backend: Store

    def create_project(
        self,
        project_name: str,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        upsert: bool = False,
        project_extra: Mapping[str, Any] | None = None,
        reference_dataset_id: ID | None = None,
        **unknown: Any,
    ) -> TracerSession:
        refuse_unknown("create_project", unknown)
        return self._backend.projects.create(
            project_name, description=description, metadata=metadata, extra=project_extra,
            reference_dataset_id=reference_dataset_id, upsert=upsert,
        )

    def read_project(
        self,
        *,
        project_id: ID | None = None,
        project_name: str | None = None,
        include_stats: bool = False,
    ) -> TracerSession:
        """The project; with ``include_stats=True`` a TracerSessionResult with its statistics."""
        return self._backend.projects.read(
            project_id=project_id, project_name=project_name, include_stats=include_stats)

    def has_project(self, project_name: str, *, project_id: ID | None = None) -> bool:
        try:
            self.read_project(project_name=project_name, project_id=project_id)
        except NotFoundError:
            return False
        return True

    def list_projects(
        self,
        project_ids: Sequence[ID] | None = None,
        name: str | None = None,
        name_contains: str | None = None,
        reference_dataset_id: ID | None = None,
        reference_dataset_name: str | None = None,
        reference_free: bool | None = None,
        include_stats: bool | None = None,
        limit: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        offset: int = 0,
        **unknown: Any,
    ) -> Iterator[TracerSession]:
        refuse_unknown("list_projects", unknown)
        yield from self._backend.projects.list(
            project_ids=project_ids, name=name, name_contains=name_contains,
            reference_dataset_id=reference_dataset_id,
            reference_dataset_name=reference_dataset_name, reference_free=reference_free,
            metadata=metadata, include_stats=bool(include_stats), offset=offset, limit=limit,
        )

    def update_project(
        self,
        project_id: ID,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        project_extra: Mapping[str, Any] | None = None,
        end_time: datetime | None = None,
    ) -> TracerSession:
        return self._backend.projects.update(
            project_id, name=name, description=description, metadata=metadata,
            extra=project_extra, end_time=end_time)

    def delete_project(self, *, project_name: str | None = None,
                       project_id: ID | None = None) -> None:
        self._backend.projects.delete(project_id=project_id, project_name=project_name)


_UNSET: Any = object()  # update_feedback: a field not given (None clears it)


class FeedbackMethods:
    _backend: Store

    def create_feedback(
        self,
        run_id: ID | None = None,
        key: str = "",
        *,
        score: float | bool | None = None,
        value: Any = None,
        correction: Any = None,
        comment: str | None = None,
        source_info: Mapping[str, Any] | None = None,
        feedback_source_type: str = "api",
        source_run_id: ID | None = None,
        feedback_id: ID | None = None,
        project_id: ID | None = None,
        trace_id: ID | None = None,
        extra: Mapping[str, Any] | None = None,
        comparative_experiment_id: ID | None = None,
        feedback_group_id: ID | None = None,
        session_id: ID | None = None,
        **_: Any,
    ) -> Feedback:
        """Score a run (``run_id``) or, with ``project_id`` and no run, the project itself.

        ``comparative_experiment_id`` makes it pairwise feedback (``feedback_group_id``: the
        runs scored together): counted in that comparison, not in the run's experiment."""
        meta: dict[str, Any] = dict(source_info or {})
        if source_run_id is not None:
            meta["__run"] = {"run_id": str(source_run_id)}
        source_type = getattr(feedback_source_type, "value", feedback_source_type)
        return self._backend.feedback.create(
            id=feedback_id, run_id=run_id, key=key, score=score, value=value,
            correction=correction, comment=comment, session_id=project_id or session_id,
            trace_id=trace_id, feedback_source={"type": source_type, "metadata": meta or None},
            extra=extra, comparative_experiment_id=comparative_experiment_id,
            feedback_group_id=feedback_group_id,
        )

    def create_presigned_feedback_token(
        self,
        run_id: ID,
        feedback_key: str,
        *,
        expiration: datetime | timedelta | None = None,
        feedback_config: Mapping[str, Any] | None = None,
        feedback_id: ID | None = None,
    ) -> FeedbackToken:
        """A URL that scores ``run_id`` with ``feedback_key`` without the API key (for an app's
        front end: ``GET <url>?score=1&comment=...``), valid 3 hours unless ``expiration`` (a
        time or a duration) says otherwise. Remote, ``url`` is the server's; local, it is the
        path to append to the address ``assay serve`` serves this store at."""
        at, within = ((expiration, None) if isinstance(expiration, datetime)
                      else (None, expiration))
        return self._backend.feedback_tokens.create(
            run_id, feedback_key, expires_at=at, expires_in=within,
            feedback_config=feedback_config, feedback_id=feedback_id)

    def create_feedback_from_token(
        self,
        token_or_url: str | uuid.UUID,
        score: float | int | bool | None = None,
        *,
        value: Any = None,
        correction: Any = None,
        comment: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Feedback:
        """Score through a presigned token (its id or URL): what the app's front end does."""
        token = str(token_or_url).rstrip("/").rsplit("/", 1)[-1]
        return self._backend.feedback_tokens.use(
            token, score=score, value=value, correction=correction, comment=comment,
            metadata=metadata)

    def create_comparative_experiment(
        self,
        name: str,
        experiments: Sequence[ID],
        *,
        reference_dataset: ID | None = None,
        description: str | None = None,
        created_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: ID | None = None,
    ) -> ComparativeExperiment:
        """Record a comparison of experiments on one dataset (LangSmith's signature); pairwise
        feedback then names it. ``evaluate((a, b), evaluators=[...])`` does both."""
        return self._backend.comparative.create(
            name=name, experiment_ids=list(experiments), reference_dataset_id=reference_dataset,
            description=description, created_at=created_at, id=id,
            extra={"metadata": dict(metadata)} if metadata is not None else {})

    def read_comparative_experiment(self, comparative_experiment_id: ID) -> ComparativeExperiment:
        return self._backend.comparative.read(comparative_experiment_id)

    def list_comparative_experiments(
        self, *, dataset_id: ID | None = None, dataset_name: str | None = None,
        name_contains: str | None = None, limit: int | None = None,
    ) -> Iterator[ComparativeExperiment]:
        """A dataset's comparisons, newest first, each with per-experiment feedback stats."""
        if dataset_id is None:
            dataset_id = self._backend.datasets.read(dataset_name=dataset_name).id
        yield from self._backend.comparative.list(dataset_id=dataset_id,
                                                  name_contains=name_contains, limit=limit)

    def delete_comparative_experiment(self, comparative_experiment_id: ID) -> None:
        """Forget a comparison and its pairwise feedback; the experiments stay."""
        self._backend.comparative.delete(comparative_experiment_id)

    def read_feedback(self, feedback_id: ID) -> Feedback:
        return self._backend.feedback.read(feedback_id)

    def list_feedback(
        self,
        *,
        run_ids: Sequence[ID] | None = None,
        feedback_key: Sequence[str] | None = None,
        project_ids: Sequence[ID] | None = None,
        feedback_source_type: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
        **unknown: Any,
    ) -> Iterator[Feedback]:
        """Feedback matching every filter given (LangSmith's ``list_feedback``);
        ``feedback_source_type``: ``api``, ``model`` (evaluators), ``app`` (presigned
        tokens)."""
        refuse_unknown("list_feedback", unknown)
        yield from self._backend.feedback.list(
            run_ids=run_ids, project_ids=project_ids, feedback_key=feedback_key,
            source_types=feedback_source_type, offset=offset, limit=limit)

    def update_feedback(
        self,
        feedback_id: ID,
        *,
        score: float | bool | None = _UNSET,
        value: Any = _UNSET,
        correction: Any = _UNSET,
        comment: str | None = _UNSET,
    ) -> Feedback:
        """Change only the fields given; ``None`` clears one (as LangSmith's). The project's
        feedback statistics follow. Returns the feedback as stored now."""
        changes = {k: v for k, v in (("score", score), ("value", value),
                                     ("correction", correction), ("comment", comment))
                   if v is not _UNSET}
        return self._backend.feedback.update(feedback_id, **changes)

    def delete_feedback(self, feedback_id: ID) -> None:
        self._backend.feedback.delete(feedback_id)
