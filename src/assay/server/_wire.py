"""Request shapes of the LangSmith REST API, validated before anything reaches the store.

Both SDKs send extra fields the server does not need (``num_examples``, ``child_runs``,
``extend_trace_retention``...): models allow them and the handlers pick what they use. Types are
checked, and a failure names the item and field (``post[3] (run 0192...): end_time: ...``).

Timestamps: Python sends ISO strings, JS sends ``end_time`` (and feedback ``start_time``) as
epoch **milliseconds**; numbers are always read as milliseconds.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from .._ids import is_canonical_uuid
from .._time import to_micros
from ._errors import ApiError, describe_validation

__all__ = [
    "FeedbackTokenIn",
    "ComparativeIn",
    "DatasetIn",
    "DatasetPatch",
    "ExampleIn",
    "IdList",
    "MAX_QUERY_IDS",
    "ExamplesWithRunsIn",
    "ExamplePatch",
    "FeedbackIn",
    "FeedbackPatch",
    "RunIn",
    "RunQuery",
    "RunQueryV2",
    "RunSelect",
    "SessionIn",
    "SessionPatch",
    "SplitsIn",
    "TagIn",
    "Timestamp",
    "TraceDelete",
    "epoch_ms",
    "events_in",
    "plain_run",
    "run_dict",
    "run_in",
    "validate",
]


def epoch_ms(value: Any) -> Any:
    """A JS epoch-millisecond number becomes an aware datetime; anything else passes through."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value / 1000.0, UTC)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"timestamp {value!r} (epoch milliseconds) is out of range") from None
    return value


Timestamp = Annotated[datetime, BeforeValidator(epoch_ms)]


class _In(BaseModel):
    model_config = ConfigDict(extra="allow")


def events_in(value: Any) -> Any:
    """Event times sent as JS epoch milliseconds become ISO strings, like Python's."""
    if isinstance(value, list):
        out = []
        for ev in value:
            if isinstance(ev, dict) and isinstance(ev.get("time"), (int, float)) \
                    and not isinstance(ev.get("time"), bool):
                ev = {**ev, "time": epoch_ms(ev["time"]).isoformat()}
            out.append(ev)
        return out
    return value


class RunIn(_In):
    """One run of a post or patch (``/runs``, ``/runs/batch``, ``post.<id>`` parts)."""

    id: uuid.UUID
    name: str | None = None
    run_type: str | None = None
    start_time: Timestamp | None = None
    end_time: Timestamp | None = None
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    error: str | None = None
    extra: dict[str, Any] | None = None
    events: Annotated[list[dict[str, Any]] | None, BeforeValidator(events_in)] = None
    tags: list[str] | None = None
    serialized: dict[str, Any] | None = None
    trace_id: uuid.UUID | None = None
    parent_run_id: uuid.UUID | None = None
    dotted_order: str | None = None
    reference_example_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    session_name: str | None = None
    status: str | None = None

    @model_validator(mode="after")
    def _precision(self) -> RunIn:
        # JS stamps start_time with made-up microseconds (for ordering) but end_time in whole
        # milliseconds, so a run faster than 1 ms can "end" up to 1 ms before it started
        start, end = self.start_time, self.end_time
        if start is not None and end is not None:
            if (start.tzinfo is None) != (end.tzinfo is None):
                start, end = _aware(start), _aware(end)
            if end < start and start - end < _ONE_MS:
                self.end_time = self.start_time
            elif end < start:  # a negative latency would skew every statistic
                raise ValueError(f"run {self.id}: end_time {end.isoformat()} is before its "
                                 f"start_time {start.isoformat()}")
        return self


_ONE_MS = timedelta(milliseconds=1)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def run_dict(run: RunIn) -> dict[str, Any]:
    """The fields the client actually sent (a patch's missing field means unchanged)."""
    return run.model_dump(exclude_unset=True)


_ID_KEYS = ("id", "trace_id", "parent_run_id", "reference_example_id", "session_id")
_TEXT_KEYS = ("name", "run_type", "error", "dotted_order", "session_name", "status")
_OBJECT_KEYS = ("inputs", "outputs", "extra", "serialized")
_NOT_PLAIN = object()


def _micros(value: Any) -> Any:
    """An ISO string or JS epoch milliseconds as epoch microseconds (``_NOT_PLAIN``: let
    pydantic judge it); numbers go through ``epoch_ms`` as RunIn's validator sends them."""
    try:
        if value.__class__ is str:
            # ISO 8601's extended form only (YYYY-MM-DD...), as pydantic reads times: the basic
            # and week forms that fromisoformat also takes go to RunIn, which refuses them
            if value[4:5] != "-" or value[7:8] != "-":
                return _NOT_PLAIN
            return to_micros(value)
        if value.__class__ is int or value.__class__ is float:
            return to_micros(epoch_ms(value))
    except ValueError:
        pass
    return _NOT_PLAIN


def plain_run(raw: dict[str, Any], *, copy: bool = True) -> dict[str, Any] | None:
    """``run_dict(RunIn)`` of ``raw`` without pydantic, when every field RunIn types has its
    plain wire form: canonical UUID text, ISO (extended form) or epoch-ms times, strings, a
    list of strings, objects, a list of event objects. None otherwise, and RunIn judges (and
    words the error).

    Ingest is CPU-bound on validation: pydantic parsed ids and times into objects that the
    store turned back into text and microseconds (~12 us a run). Here ids stay text and times
    become the store's microseconds; the store's ``_clean`` checks both again, cheaply.
    ``copy=False``: ``raw`` is the caller's to change (a multipart run merged from its parts),
    and becomes the result (only when the result is not None: else it is left as it was).
    """
    if raw.get("id") is None:
        return None
    get = raw.get
    for key in _ID_KEYS:
        value = get(key)
        if value is not None and (value.__class__ is not str or not is_canonical_uuid(value)):
            return None
    for key in _TEXT_KEYS:
        value = get(key)
        if value is not None and value.__class__ is not str:
            return None
    for key in _OBJECT_KEYS:
        value = get(key)
        if value is not None and value.__class__ is not dict:
            return None
    tags = get("tags")
    if tags is not None and (tags.__class__ is not list
                             or any(t.__class__ is not str for t in tags)):
        return None
    events = get("events")
    if events is not None and (events.__class__ is not list
                               or any(e.__class__ is not dict for e in events)):
        return None
    start = end = None
    if get("start_time") is not None:
        start = _micros(raw["start_time"])
        if start is _NOT_PLAIN:
            return None
    if get("end_time") is not None:
        end = _micros(raw["end_time"])
        if end is _NOT_PLAIN:
            return None
    if start is not None and end is not None and end < start:
        if start - end >= 1000:
            return None  # an end before the start: RunIn refuses it, in words
        end = start  # as RunIn._precision
    # judged plain: only now is anything changed (``raw`` itself when ``copy`` is False)
    out = dict(raw) if copy else raw
    if events is not None:
        out["events"] = events_in(events)
    if start is not None:
        out["start_time"] = start
    if end is not None:
        out["end_time"] = end
    return out


def run_in(raw: Any, where: str = "body", *, copy: bool = True) -> dict[str, Any]:
    """One wire run validated as RunIn, as the dict of the fields it sent (see ``plain_run``;
    ``copy=False``: ``raw`` is the caller's to change)."""
    if raw.__class__ is dict:
        out = plain_run(raw, copy=copy)
        if out is not None:
            return out
    return run_dict(validate(RunIn, raw, where))


def feedback_key(value: Any) -> Any:
    """A feedback key must be valid Unicode: it names scores in statistics, filters and
    columns. One with a lone UTF-16 surrogate (JSON allows ``"\\ud800"``; the langsmith
    Python SDK drops them before sending, the JS SDK does not) is refused by name."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"feedback key {value!r} holds a lone UTF-16 surrogate "
                f"(U+{ord(value[exc.start]):04X}); feedback keys must be valid Unicode") from None
    return value


class FeedbackIn(_In):
    id: uuid.UUID | None = None
    key: Annotated[str, BeforeValidator(feedback_key), Field(min_length=1)]
    score: float | bool | None = None
    value: Any = None
    comment: str | None = None
    correction: Any = None
    run_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    project_id: uuid.UUID | None = None
    trace_id: uuid.UUID | None = None
    feedback_source: dict[str, Any] | None = None
    created_at: Timestamp | None = None
    modified_at: Timestamp | None = None
    start_time: Timestamp | None = None
    extra: dict[str, Any] | None = None
    comparative_experiment_id: uuid.UUID | None = None  # pairwise feedback
    feedback_group_id: uuid.UUID | None = None

    def item(self) -> dict[str, Any]:
        return {
            "id": self.id, "key": self.key, "score": self.score, "value": self.value,
            "comment": self.comment, "correction": self.correction, "run_id": self.run_id,
            "session_id": self.session_id or self.project_id, "trace_id": self.trace_id,
            "feedback_source": self.feedback_source, "created_at": self.created_at,
            "modified_at": self.modified_at, "extra": self.extra,
            "comparative_experiment_id": self.comparative_experiment_id,
            "feedback_group_id": self.feedback_group_id,
        }


class ComparativeIn(_In):
    """``POST /datasets/comparative``: what ``create_comparative_experiment`` sends."""

    experiment_ids: list[uuid.UUID] = Field(min_length=1, max_length=50)
    name: str | None = None
    id: uuid.UUID | None = None
    reference_dataset_id: uuid.UUID | None = None
    description: str | None = None
    created_at: Timestamp | None = None
    extra: dict[str, Any] | None = None


class FeedbackTokenIn(_In):
    """``POST /feedback/tokens``: what ``create_presigned_feedback_token(s)`` sends (``id`` is
    the feedback's that the token writes)."""

    run_id: uuid.UUID
    feedback_key: str = Field(min_length=1)
    id: uuid.UUID | None = None
    expires_at: Timestamp | None = None
    expires_in: dict[str, Any] | None = None
    feedback_config: dict[str, Any] | None = None


class FeedbackPatch(_In):
    """``PATCH /feedback/{id}``: what is sent changes, null clears it (other fields, such as
    LangSmith's ``feedback_config``, are accepted and ignored)."""

    score: float | bool | None = None
    value: Any = None
    correction: Any = None
    comment: str | None = None


class DatasetIn(_In):
    name: str = Field(min_length=1)
    id: uuid.UUID | None = None
    description: str | None = None
    data_type: str | None = "kv"
    extra: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    inputs_schema_definition: dict[str, Any] | None = None
    outputs_schema_definition: dict[str, Any] | None = None

    def meta(self) -> dict[str, Any] | None:
        if self.metadata is not None:
            return self.metadata
        inner = (self.extra or {}).get("metadata")
        return inner if isinstance(inner, dict) else None


class ExamplesWithRunsIn(_In):
    """``POST /datasets/{id}/runs``: examples with the runs of experiments on them."""

    session_ids: list[uuid.UUID] = Field(min_length=1, max_length=50)
    offset: int = Field(default=0, ge=0)
    limit: int = Field(default=100, ge=1, le=100)
    preview: bool = False  # LangSmith shortens inputs and outputs then; they come whole here
    comparative_experiment_id: uuid.UUID | None = None
    filters: dict[uuid.UUID, list[str]] | None = None  # per session, LangSmith's filter language


class SplitsIn(_In):
    """``PUT /datasets/{id}/splits``: ``update_dataset_splits``."""

    split_name: str = Field(min_length=1)
    examples: list[uuid.UUID]
    remove: bool = False


class DatasetPatch(_In):
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


class SessionIn(_In):
    name: str = Field(min_length=1)
    id: uuid.UUID | None = None
    description: str | None = None
    extra: dict[str, Any] | None = None
    reference_dataset_id: uuid.UUID | None = None
    start_time: Timestamp | None = None
    end_time: Timestamp | None = None


class SessionPatch(_In):
    """``null`` (or absent) means unchanged, as in LangSmith's PATCH /sessions/{id}."""

    name: str | None = None
    description: str | None = None
    extra: dict[str, Any] | None = None
    end_time: Timestamp | None = None


class ExampleIn(_In):
    id: uuid.UUID | None = None
    dataset_id: uuid.UUID | None = None
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    split: str | list[str] | None = None
    source_run_id: uuid.UUID | None = None
    use_source_run_io: bool = False
    created_at: Timestamp | None = None
    attachments: dict[str, Any] | None = None

    def item(self) -> dict[str, Any]:
        if self.attachments:
            raise ApiError(422, "unsupported", f"example {self.id}: attachments in a JSON body "
                           "are not supported: send them as '<example id>.attachment.<name>' "
                           "parts to POST /v1/platform/datasets/{dataset_id}/examples")
        return {"id": self.id, "inputs": self.inputs if self.inputs is not None else {},
                "outputs": self.outputs, "metadata": self.metadata, "split": self.split,
                "source_run_id": self.source_run_id}


class ExamplePatch(_In):
    id: uuid.UUID | None = None
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    split: str | list[str] | None = None
    attachments: dict[str, Any] | None = None
    attachments_operations: dict[str, Any] | None = None

    def update(self, example_id: Any) -> dict[str, Any]:
        if self.attachments or (self.attachments_operations and any(
                self.attachments_operations.values())):
            raise ApiError(422, "unsupported", f"example {example_id}: attachments in a JSON "
                           "body are not supported: send them (and attachments_operations) as "
                           "multipart parts to PATCH /v1/platform/datasets/{dataset_id}/examples")
        upd: dict[str, Any] = {"id": example_id}
        for key in ("inputs", "outputs", "metadata", "split"):
            value = getattr(self, key)
            if value is not None:
                upd[key] = value
        return upd


class TagIn(_In):
    tag: str = Field(min_length=1)
    as_of: Timestamp | str | None = None


# ids a query may name at once: each is one bound parameter (SQLite allows 32,766, PostgreSQL
# 65,535 in a statement); past that a clear 422 instead of the database's error
MAX_QUERY_IDS = 10_000
IdList = Annotated[list[uuid.UUID], Field(max_length=MAX_QUERY_IDS)]
# one id or a list: the JS SDK's listRuns sends ``referenceExampleId`` (a string) bare
IdOrIds = Annotated[list[uuid.UUID], BeforeValidator(
    lambda v: [v] if isinstance(v, (str, uuid.UUID)) else v), Field(max_length=MAX_QUERY_IDS)]


class RunQuery(_In):
    """``POST /runs/query``; filters the store cannot apply are refused, never ignored."""

    session: IdList | None = None
    id: IdList | None = None
    trace: uuid.UUID | None = None
    parent_run: uuid.UUID | None = None
    run_type: str | None = None
    is_root: bool | None = None
    error: bool | None = None
    reference_example: IdOrIds | None = None
    start_time: Timestamp | None = None
    select: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)
    cursor: str | None = None
    order: str | None = None
    query: str | None = None
    filter: str | None = None
    trace_filter: str | None = None
    tree_filter: str | None = None


class RunGroupQuery(_In):
    """``POST /runs/group`` (the JS SDK's ``listGroupRuns``): a project's turns grouped."""

    session_id: uuid.UUID
    group_by: str
    filter: str | None = None
    start_time: Timestamp | None = None
    end_time: Timestamp | None = None
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


RunSelect = Literal[
    "ID", "NAME", "RUN_TYPE", "STATUS", "START_TIME", "END_TIME", "LATENCY_SECONDS",
    "FIRST_TOKEN_TIME", "ERROR", "ERROR_PREVIEW", "EXTRA", "METADATA", "EVENTS", "INPUTS",
    "INPUTS_PREVIEW", "OUTPUTS", "OUTPUTS_PREVIEW", "MANIFEST", "PARENT_RUN_IDS", "PROJECT_ID",
    "TRACE_ID", "THREAD_ID", "DOTTED_ORDER", "IS_ROOT", "REFERENCE_EXAMPLE_ID",
    "REFERENCE_DATASET_ID", "TOTAL_TOKENS", "PROMPT_TOKENS", "COMPLETION_TOKENS", "TOTAL_COST",
    "PROMPT_COST", "COMPLETION_COST", "PROMPT_TOKEN_DETAILS", "COMPLETION_TOKEN_DETAILS",
    "PROMPT_COST_DETAILS", "COMPLETION_COST_DETAILS", "PRICE_MODEL_ID", "TAGS", "APP_PATH",
    "ATTACHMENTS", "THREAD_EVALUATION_TIME", "IS_IN_DATASET", "LAST_QUEUED_AT", "SHARE_URL",
    "FEEDBACK_STATS", "LS_USER_ID",
]


class RunQueryV2(_In):
    """``POST /api/v2/runs/query`` (``client.runs.query``); see ``_routes_runs_v2``."""

    project_ids: IdList | None = None
    reference_dataset_id: uuid.UUID | None = None
    filter: str | None = None
    trace_filter: str | None = None
    tree_filter: str | None = None
    has_error: bool | None = None
    ids: IdList | None = None
    is_root: bool | None = None
    reference_examples: IdList | None = None
    run_type: str | None = None
    trace_id: uuid.UUID | None = None
    min_start_time: Timestamp | None = None
    max_start_time: Timestamp | None = None
    page_size: int = Field(default=100, ge=1, le=1000)
    selects: list[RunSelect] | None = None
    include_subtree_usage: bool = False
    cursor: str | None = None
    ai_search: str | None = None
    sem_filter: str | None = None
    min_feedback_modified_at: Timestamp | None = None
    max_feedback_modified_at: Timestamp | None = None


class TraceDelete(_In):
    session_id: uuid.UUID
    trace_ids: list[uuid.UUID] | None = None
    keep_trace_ids: list[uuid.UUID] | None = None


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Any, where: str = "body") -> M:
    """``model.model_validate`` with a 422 naming ``where`` and the fields at fault."""
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_input",
                       f"{where} must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, "invalid_input", describe_validation(exc.errors(), where)) from None
