"""The shared records, shaped like LangSmith's wire format.

The client, the store, the server and the UI all speak these models, so nothing translates between
dialects. Field names follow LangSmith's REST payloads; unknown fields sent by other clients are
kept (``extra="allow"``) rather than dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "RUN_TYPES",
    "RunType",
    "Record",
    "Dataset",
    "DatasetVersion",
    "Example",
    "TracerSession",
    "TracerSessionResult",
    "FeedbackStats",
    "Run",
    "Feedback",
    "FeedbackSource",
    "ComparativeExperiment",
]

RunType = Literal["chain", "llm", "tool", "retriever", "embedding", "prompt", "parser"]
RUN_TYPES: tuple[str, ...] = ("chain", "llm", "tool", "retriever", "embedding", "prompt", "parser")


class Record(BaseModel):
    """Base of every record: keeps unknown wire fields, and ``json(indent=2)`` works as in v1."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, from_attributes=True)

    def json(self, *, indent: int | None = None, **kwargs: Any) -> str:
        """pydantic v1 spelling kept on purpose: LangSmith docs call ``resp.json(indent=2)``."""
        return self.model_dump_json(indent=indent, **kwargs)


class Dataset(Record):
    id: uuid.UUID
    name: str
    description: str | None = None
    data_type: str | None = "kv"
    created_at: datetime
    modified_at: datetime | None = None
    tenant_id: uuid.UUID | None = None
    metadata: dict[str, Any] | None = None
    inputs_schema_definition: dict[str, Any] | None = None
    outputs_schema_definition: dict[str, Any] | None = None
    transformations: list[dict[str, Any]] | None = None
    externally_managed: bool = False
    example_count: int | None = None
    session_count: int | None = None
    last_session_start_time: datetime | None = None


class DatasetVersion(Record):
    as_of: datetime
    tags: list[str] = Field(default_factory=list)


class Example(Record):
    id: uuid.UUID
    dataset_id: uuid.UUID
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    split: list[str] | None = None
    source_run_id: uuid.UUID | None = None
    created_at: datetime
    modified_at: datetime | None = None
    attachment_urls: dict[str, Any] | None = None
    # LangSmith's shape: {name: {"presigned_url", "mime_type", "reader"}}; filled by the local
    # Client's read_example (and list_examples(include_attachments=True)). Never on the wire:
    # the SDK builds it from ``attachment_urls`` and refuses a second one.
    attachments: dict[str, Any] | None = Field(default=None, exclude=True)


class TracerSession(Record):
    """A project; an experiment is a project with a ``reference_dataset_id``."""

    id: uuid.UUID
    name: str
    description: str | None = None
    start_time: datetime
    end_time: datetime | None = None
    extra: dict[str, Any] | None = None
    reference_dataset_id: uuid.UUID | None = None
    default_dataset_id: uuid.UUID | None = None
    tenant_id: uuid.UUID | None = None
    trace_tier: str | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        return dict((self.extra or {}).get("metadata") or {})


class FeedbackStats(Record):
    """Aggregate of one feedback key: numeric scores averaged, categorical values counted."""

    n: int
    avg: float | None = None
    stdev: float | None = None
    values: dict[str, int] = Field(default_factory=dict)


class TracerSessionResult(TracerSession):
    """A project with the statistics of ``read_project(include_stats=True)``.

    Latencies are seconds (floats), as on the wire; see ``latency`` helpers for timedeltas.
    """

    run_count: int | None = None
    latency_p50: float | None = None
    latency_p99: float | None = None
    first_token_p50: float | None = None
    first_token_p99: float | None = None
    total_tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_cost: float | None = None
    prompt_cost: float | None = None
    completion_cost: float | None = None
    last_run_start_time: datetime | None = None
    last_run_start_time_live: datetime | None = None
    feedback_stats: dict[str, FeedbackStats] | None = None
    session_feedback_stats: dict[str, FeedbackStats] | None = None
    run_facets: list[dict[str, Any]] | None = None
    error_rate: float | None = None
    streaming_rate: float | None = None
    test_run_number: int | None = None


class Run(Record):
    id: uuid.UUID
    name: str
    run_type: str
    start_time: datetime
    end_time: datetime | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    error: str | None = None
    extra: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    tags: list[str] | None = None
    serialized: dict[str, Any] | None = None
    trace_id: uuid.UUID
    parent_run_id: uuid.UUID | None = None
    dotted_order: str | None = None
    session_id: uuid.UUID | None = None
    reference_example_id: uuid.UUID | None = None
    status: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_cost: float | None = None
    completion_cost: float | None = None
    total_cost: float | None = None
    first_token_time: datetime | None = None
    child_runs: list[Run] | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        return dict((self.extra or {}).get("metadata") or {})

    @property
    def latency(self) -> timedelta | None:
        return None if self.end_time is None else self.end_time - self.start_time

    @property
    def url(self) -> str | None:  # LangSmith clients read it; assay has no hosted UI link
        return None


class FeedbackSource(Record):
    type: str | None = None
    metadata: dict[str, Any] | None = None


class Feedback(Record):
    id: uuid.UUID
    key: str
    score: float | None = None
    value: Any = None
    comment: str | None = None
    correction: Any = None
    run_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    trace_id: uuid.UUID | None = None
    feedback_source: FeedbackSource | None = None
    created_at: datetime
    modified_at: datetime | None = None
    extra: dict[str, Any] | None = None
    comparative_experiment_id: uuid.UUID | None = None  # pairwise feedback: its comparison
    feedback_group_id: uuid.UUID | None = None  # ... and the runs scored together with it


class ComparativeExperiment(Record):
    """Two or more experiments on one dataset scored against each other (pairwise evaluation).

    ``experiments_info`` lists the experiments compared (``id``, ``name``), in the order given;
    ``feedback_stats`` holds, per feedback key, each experiment's share of the comparison's
    scores: ``{key: {experiment_id: {"n": ..., "avg": ...}}}`` (with 1/0 preference scores,
    ``avg`` is that experiment's win rate).
    """

    id: uuid.UUID
    name: str | None = None
    description: str | None = None
    tenant_id: uuid.UUID | None = None
    created_at: datetime
    modified_at: datetime
    reference_dataset_id: uuid.UUID
    extra: dict[str, Any] | None = None
    experiments_info: list[dict[str, Any]] | None = None
    feedback_stats: dict[str, Any] | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        return dict((self.extra or {}).get("metadata") or {})

    def compares_two_of(self, experiment_ids: Iterable[uuid.UUID | str]) -> bool:
        """Whether two or more of ``experiment_ids`` are among those compared: the comparisons a
        look at those experiments shows beside their differences (web UI, CLI)."""
        chosen = {str(e) for e in experiment_ids}
        return len({str(e["id"]) for e in self.experiments_info or []} & chosen) >= 2
