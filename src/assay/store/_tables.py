"""The schema at head, as SQLAlchemy Core tables.

Migrations under ``migrations/versions`` build the same schema step by step; a test checks that
autogenerate finds no difference between the two. Every row carries ``tenant_id`` so one server
can hold several workspaces.

Examples are versioned as rows: an update closes the current row (``valid_to``) and adds a new
one, a delete only closes it. ``as_of`` T therefore reads rows with
``modified_at <= T < coalesce(valid_to, +inf)``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Index,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)

from ._types import PK, JSONType, Micros, RunJSONType

__all__ = [
    "metadata",
    "datasets",
    "examples",
    "dataset_tags",
    "sessions",
    "runs",
    "feedback",
    "comparative_experiments",
    "tenants",
    "api_keys",
    "session_aggregates",
    "trace_streams",
    "run_hours",
    "feedback_aggregates",
    "feedback_label_counts",
    "journal",
    "journal_mark",
    "blobs",
    "example_attachments",
    "run_attachments",
    "signing_keys",
    "annotation_queues",
    "annotation_queue_runs",
    "feedback_configs",
    "feedback_tokens",
    "shares",
    "DEFAULT_TENANT_ID",
]

DEFAULT_TENANT_ID = "00000000-0000-4000-8000-000000000000"

metadata = MetaData()

ID = String(36)

datasets = Table(
    "datasets",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("name", String(512), nullable=False),
    Column("description", Text),
    Column("data_type", String(32), nullable=False, server_default="kv"),
    Column("metadata", JSONType),
    Column("inputs_schema", JSONType),
    Column("outputs_schema", JSONType),
    Column("created_at", Micros, nullable=False),
    Column("modified_at", Micros, nullable=False),
    UniqueConstraint("tenant_id", "name", name="uq_datasets_tenant_name"),
)

examples = Table(
    "examples",
    metadata,
    Column("row_id", PK, primary_key=True, autoincrement=True),
    Column("id", ID, nullable=False),
    Column("dataset_id", ID, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("inputs", JSONType, nullable=False),
    Column("outputs", JSONType),
    Column("metadata", JSONType),
    Column("splits", JSONType),
    # ",base,test," so a split filter is a portable LIKE on one column
    Column("split_key", String(1024), nullable=False, server_default=",base,"),
    Column("source_run_id", ID),
    Column("created_at", Micros, nullable=False),
    Column("modified_at", Micros, nullable=False),
    Column("valid_to", Micros),
    # the current examples, with their splits: counted on the index alone
    Index("ix_examples_dataset_live", "dataset_id", "valid_to", "split_key"),
    Index("ix_examples_dataset_order", "dataset_id", "created_at", "id"),  # reading order
    Index(
        "uq_examples_current",
        "id",
        unique=True,
        sqlite_where=text("valid_to IS NULL"),
        postgresql_where=text("valid_to IS NULL"),
    ),
    Index("ix_examples_id", "id"),
)

dataset_tags = Table(
    "dataset_tags",
    metadata,
    Column("dataset_id", ID, ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True),
    Column("tag", String(256), primary_key=True),
    Column("as_of", Micros, nullable=False),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("name", String(512), nullable=False),
    Column("description", Text),
    Column("start_time", Micros, nullable=False),
    Column("end_time", Micros),
    Column("extra", JSONType),
    Column("reference_dataset_id", ID, ForeignKey("datasets.id", ondelete="SET NULL")),
    Column("default_dataset_id", ID),
    Column("trace_tier", String(32)),
    UniqueConstraint("tenant_id", "name", name="uq_sessions_tenant_name"),
    Index("ix_sessions_dataset", "reference_dataset_id", "start_time"),
)

# Runs carry derived columns (latency, first token, tokens, costs, flags) computed when written,
# so that session statistics are index-friendly SQL aggregates.
_UNPLACED = "dotted_order IS NULL AND parent_run_id IS NOT NULL"

runs = Table(
    "runs",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("session_id", ID, nullable=False),
    Column("trace_id", ID, nullable=False),
    Column("parent_run_id", ID),
    Column("dotted_order", String(4096)),
    Column("name", String(512), nullable=False),
    Column("run_type", String(32), nullable=False),
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("inputs", RunJSONType),
    Column("outputs", RunJSONType),
    Column("error", Text),
    Column("extra", RunJSONType),
    Column("events", RunJSONType),
    Column("tags", RunJSONType),
    Column("serialized", RunJSONType),
    Column("reference_example_id", ID),
    Column("start_time", Micros, nullable=False),
    Column("end_time", Micros),
    Column("first_token_time", Micros),
    Column("is_root", Boolean, nullable=False),
    Column("latency_us", BigInteger),
    Column("first_token_us", BigInteger),
    Column("prompt_tokens", BigInteger),
    Column("completion_tokens", BigInteger),
    Column("total_tokens", BigInteger),
    Column("prompt_cost", Double),
    Column("completion_cost", Double),
    Column("total_cost", Double),
    # partial (migration 0010): the root latency percentiles read roots only, so a child run
    # (most runs of a trace) pays for no entry here
    Index("ix_runs_session_root_latency", "session_id", "latency_us",
          sqlite_where=text("is_root IS 1"), postgresql_where=text("is_root IS true")),
    # partial (migration 0003): only the rows a statistic reads are indexed
    Index("ix_runs_session_first_token", "session_id", "first_token_us",
          sqlite_where=text("first_token_us IS NOT NULL"),
          postgresql_where=text("first_token_us IS NOT NULL")),
    Index("ix_runs_session_llm", "session_id", sqlite_where=text("run_type = 'llm'"),
          postgresql_where=text("run_type = 'llm'")),
    Index("ix_runs_example", "reference_example_id",
          sqlite_where=text("reference_example_id IS NOT NULL"),
          postgresql_where=text("reference_example_id IS NOT NULL")),
    Index("ix_runs_session_start", "session_id", "start_time"),
    Index("ix_runs_trace", "trace_id"),
    # partial (migration 0010): ``parent_run_id = x`` never looks for a root's NULL
    Index("ix_runs_parent", "parent_run_id", sqlite_where=text("parent_run_id IS NOT NULL"),
          postgresql_where=text("parent_run_id IS NOT NULL")),
    # runs stored before their parent, waiting for it to be placed (migration 0017,
    # _placing.py): nearly always empty, probed by every write of runs
    Index("ix_runs_unplaced", "tenant_id", "parent_run_id", sqlite_where=text(_UNPLACED),
          postgresql_where=text(_UNPLACED)),
)

feedback = Table(
    "feedback",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("run_id", ID),
    Column("session_id", ID),
    Column("trace_id", ID),
    Column("key", String(512), nullable=False),
    Column("score", Double),
    Column("value", JSONType),
    # the categorical label counted in feedback_stats.values (value rendered as text)
    Column("label", String(512)),
    Column("comment", Text),
    Column("correction", JSONType),
    Column("feedback_source", JSONType),
    Column("extra", JSONType),
    Column("created_at", Micros, nullable=False),
    Column("modified_at", Micros, nullable=False),
    # pairwise feedback (migration 0013): which comparison it belongs to, and the runs scored
    # together in one call of a comparative evaluator; such rows stay out of the experiments'
    # own feedback statistics
    Column("comparative_experiment_id", ID),
    Column("feedback_group_id", ID),
    Index("ix_feedback_session_key", "session_id", "key"),
    Index("ix_feedback_run", "run_id"),
    # feedback whose run is not stored yet (migration 0004): few rows, read by every statistic
    # and probed when runs arrive
    Index("ix_feedback_pending", "tenant_id", "run_id",
          sqlite_where=text("session_id IS NULL"), postgresql_where=text("session_id IS NULL")),
    Index("ix_feedback_comparative", "comparative_experiment_id",
          sqlite_where=text("comparative_experiment_id IS NOT NULL"),
          postgresql_where=text("comparative_experiment_id IS NOT NULL")),
)

# Added by migration 0013: LangSmith's comparative (pairwise) experiments - two or more
# experiments on one dataset, scored against each other by comparative evaluators.
comparative_experiments = Table(
    "comparative_experiments",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("name", String(1024)),
    Column("description", Text),
    Column("reference_dataset_id", ID, ForeignKey("datasets.id", ondelete="CASCADE"),
           nullable=False),
    Column("experiment_ids", JSONType, nullable=False),  # in the order given
    Column("extra", JSONType),
    Column("created_at", Micros, nullable=False),
    Column("modified_at", Micros, nullable=False),
    Index("ix_comparative_dataset", "tenant_id", "reference_dataset_id", "created_at"),
)

# Added by migration 0002 (team server).
tenants = Table(
    "tenants",
    metadata,
    Column("id", ID, primary_key=True),
    Column("name", String(256), nullable=False),
    Column("created_at", Micros, nullable=False),
    UniqueConstraint("name", name="uq_tenants_name"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
    Column("key_hash", String(128), nullable=False),
    Column("prefix", String(32), nullable=False),
    Column("description", Text),
    Column("created_at", Micros, nullable=False),
    Column("revoked_at", Micros),
    UniqueConstraint("key_hash", name="uq_api_keys_hash"),
)


# Added by migration 0004: session statistics kept up to date by every write (see _aggregates.py),
# so reading them does not scan a session's runs and feedback.
_COUNT: dict[str, Any] = {"nullable": False, "server_default": text("0")}

session_aggregates = Table(
    "session_aggregates",
    metadata,
    Column("session_id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("root_runs", BigInteger, **_COUNT),
    Column("root_latencies", BigInteger, **_COUNT),
    Column("root_errors", BigInteger, **_COUNT),
    Column("last_root_start", Micros),
    Column("streamed_runs", BigInteger, **_COUNT),
    Column("streamed_traces", BigInteger, **_COUNT),
    Column("total_tokens", BigInteger, **_COUNT),
    Column("prompt_tokens", BigInteger, **_COUNT),
    Column("completion_tokens", BigInteger, **_COUNT),
    Column("total_cost", Double, **_COUNT),
    Column("prompt_cost", Double, **_COUNT),
    Column("completion_cost", Double, **_COUNT),
    # llm runs with a known cost: a sum over none of them is null, not 0
    Column("total_cost_runs", BigInteger, **_COUNT),
    Column("prompt_cost_runs", BigInteger, **_COUNT),
    Column("completion_cost_runs", BigInteger, **_COUNT),
)

# Added by migration 0010: a session's root runs, root errors and llm tokens and cost per hour
# of start time (``hour``: epoch microseconds, floored to the hour), kept by every write of
# ``runs`` as session_aggregates is (``RunDeltas``), so the project charts (``_series``) read
# a row per hour instead of every run of the window. ``cost_runs``: llm runs with a known cost
# (none left: the sum is exactly 0, not float residue).
run_hours = Table(
    "run_hours",
    metadata,
    Column("session_id", ID, primary_key=True),
    Column("hour", BigInteger, primary_key=True, autoincrement=False),
    Column("tenant_id", ID, nullable=False),
    Column("root_runs", BigInteger, **_COUNT),
    Column("root_errors", BigInteger, **_COUNT),
    Column("total_tokens", BigInteger, **_COUNT),
    Column("total_cost", Double, **_COUNT),
    Column("cost_runs", BigInteger, **_COUNT),
)

# Streamed runs per (session, trace): streamed_traces above counts the rows above zero.
trace_streams = Table(
    "trace_streams",
    metadata,
    Column("session_id", ID, primary_key=True),
    Column("trace_id", ID, primary_key=True),
    Column("streamed_runs", BigInteger, **_COUNT),
)

# level: 'run' (feedback naming a run) or 'session' (summary feedback on the session itself).
# Keyed by the feedback's own tenant: another workspace's rows never reach a session's figures.
feedback_aggregates = Table(
    "feedback_aggregates",
    metadata,
    Column("session_id", ID, primary_key=True),
    Column("tenant_id", ID, primary_key=True),
    Column("level", String(8), primary_key=True),
    Column("key", String(512), primary_key=True),
    Column("n", BigInteger, **_COUNT),
    Column("n_scored", BigInteger, **_COUNT),
    Column("score_sum", Double, **_COUNT),
    Column("score_sq_sum", Double, **_COUNT),
)

feedback_label_counts = Table(
    "feedback_label_counts",
    metadata,
    Column("session_id", ID, primary_key=True),
    Column("tenant_id", ID, primary_key=True),
    Column("level", String(8), primary_key=True),
    Column("key", String(512), primary_key=True),
    Column("label", String(512), primary_key=True),
    Column("n", BigInteger, **_COUNT),
)


# Batches of runs or feedback that assay's own writers (the tracing writer, evaluate()'s
# feedback sink) made durable in one cheap insert; the store folds them into runs/feedback and
# the aggregates before anything reads those (see _journal.py). Empty most of the time.
journal = Table(
    "journal",
    metadata,
    Column("seq", PK, primary_key=True, autoincrement=True),
    Column("tenant_id", ID, nullable=False),
    Column("kind", String(16), nullable=False),  # "runs" | "feedback"
    Column("items", BigInteger, nullable=False),
    Column("payload", LargeBinary, nullable=False),  # JSON, zlib-compressed (see _journal)
    Column("created_at", Micros, nullable=False),
)


# Added by migration 0012. A SQLite file keeps its journal in a file of its own (``_queue``), so
# that appending and folding take different write locks; a fold then records here, in the same
# transaction as the rows it wrote, the last queue entry it applied (``seq``) and which queue
# that was (``epoch``: a queue file made anew restarts its numbers). One row, or none.
journal_mark = Table(
    "journal_mark",
    metadata,
    Column("id", PK, primary_key=True, autoincrement=False),
    Column("epoch", String(36), nullable=False),
    Column("seq", BigInteger, nullable=False),
)


# Added by migration 0009 (attachments, see _attachments.py). Blobs are content-addressed per
# workspace (sha256) and live in the database: written in the same transaction as the example
# version that names them, served to every server process of a team on PostgreSQL.
blobs = Table(
    "blobs",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("sha256", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", Micros, nullable=False),
)

# One row per attachment of one example VERSION (examples.row_id): as_of reads the attachments
# of the row it reads; an update copies the references (not the bytes) to the new row.
example_attachments = Table(
    "example_attachments",
    metadata,
    Column("example_row_id", PK, ForeignKey("examples.row_id", ondelete="CASCADE"),
           primary_key=True),
    Column("name", String(256), primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("mime_type", String(256), nullable=False),
    Column("size", BigInteger, nullable=False),
    Index("ix_example_attachments_blob", "tenant_id", "sha256"),  # is a blob still used?
)

# Run attachments, by run id (runs arrive through the journal: no foreign key to wait for).
run_attachments = Table(
    "run_attachments",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("run_id", ID, primary_key=True),
    Column("name", String(256), primary_key=True),
    Column("sha256", String(64), nullable=False),
    Column("mime_type", String(256), nullable=False),
    Column("size", BigInteger, nullable=False),
    Index("ix_run_attachments_blob", "tenant_id", "sha256"),
)

# The key that signs attachment download URLs, shared by every server process on the database.
signing_keys = Table(
    "signing_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("secret", String(128), nullable=False),
    Column("created_at", Micros, nullable=False),
)


# Added by migration 0010 (issue 23): annotation queues, the runs queued in them, and feedback
# configs (how a feedback key's values read), all per workspace.
annotation_queues = Table(
    "annotation_queues",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("name", String(512), nullable=False),
    Column("description", Text),
    Column("rubric_instructions", Text),
    Column("rubric_items", JSONType),
    Column("created_at", Micros, nullable=False),
    Column("updated_at", Micros, nullable=False),
    Index("ix_annotation_queues_tenant", "tenant_id", "created_at"),
)

annotation_queue_runs = Table(
    "annotation_queue_runs",
    metadata,
    Column("id", ID, primary_key=True),
    Column("queue_id", ID, ForeignKey("annotation_queues.id", ondelete="CASCADE"),
           nullable=False),
    Column("run_id", ID, nullable=False),
    Column("added_at", Micros, nullable=False),
    Column("last_reviewed_time", Micros),
    Column("completed_at", Micros),
    UniqueConstraint("queue_id", "run_id", name="uq_annotation_queue_runs"),
    Index("ix_annotation_queue_runs_order", "queue_id", "added_at", "id"),
)

feedback_configs = Table(
    "feedback_configs",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("feedback_key", String(512), nullable=False),
    Column("feedback_config", JSONType, nullable=False),
    Column("is_lower_score_better", Boolean),
    Column("is_deleted", Boolean, nullable=False, server_default=false()),
    Column("created_at", Micros, nullable=False),
    Column("modified_at", Micros, nullable=False),
    Index("ix_feedback_configs_key", "tenant_id", "feedback_key"),
)

# Added by migration 0014: presigned feedback tokens (LangSmith's
# ``create_presigned_feedback_token``): a URL that an app's browser code calls, without the API
# key, to score one run with one key.
feedback_tokens = Table(
    "feedback_tokens",
    metadata,
    Column("id", ID, primary_key=True),  # random (uuid4): the URL's only secret
    Column("tenant_id", ID, nullable=False),
    Column("run_id", ID, nullable=False),
    Column("feedback_key", String(512), nullable=False),
    Column("feedback_id", ID),  # the feedback it writes (a later use replaces it)
    Column("expires_at", Micros, nullable=False),
    Column("created_at", Micros, nullable=False),
    Index("ix_feedback_tokens_run", "tenant_id", "run_id"),
)

# Added by migration 0015: shared traces (LangSmith's ``share_run``): a link that opens one trace
# without the API key.
shares = Table(  # shared traces and datasets (store/_shares.py)
    "shares",
    metadata,
    Column("token", ID, primary_key=True),  # random (uuid4) unless the client chose it
    Column("tenant_id", ID, nullable=False),
    Column("kind", String(16), nullable=False),  # "trace" or "dataset"
    Column("target_id", ID, nullable=False),  # the trace's id or the dataset's
    Column("session_id", ID, nullable=True),  # a trace's project (deleting it unshares)
    Column("created_at", Micros, nullable=False),
    Index("ux_shares_target", "tenant_id", "kind", "target_id", unique=True),  # one token each
    Index("ix_shares_session", "tenant_id", "session_id"),
)
