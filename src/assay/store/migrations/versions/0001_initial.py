"""Initial schema: datasets, versioned examples, tags, sessions, runs, feedback.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from assay.store._types import PK, JSONType, Micros

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(36)


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("data_type", sa.String(32), nullable=False, server_default="kv"),
        sa.Column("metadata", JSONType),
        sa.Column("inputs_schema", JSONType),
        sa.Column("outputs_schema", JSONType),
        sa.Column("created_at", Micros, nullable=False),
        sa.Column("modified_at", Micros, nullable=False),
        sa.UniqueConstraint("tenant_id", "name", name="uq_datasets_tenant_name"),
    )
    op.create_table(
        "examples",
        sa.Column("row_id", PK, primary_key=True, autoincrement=True),
        sa.Column("id", ID, nullable=False),
        sa.Column(
            "dataset_id", ID, sa.ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("inputs", JSONType, nullable=False),
        sa.Column("outputs", JSONType),
        sa.Column("metadata", JSONType),
        sa.Column("splits", JSONType),
        sa.Column("split_key", sa.String(1024), nullable=False, server_default=",base,"),
        sa.Column("source_run_id", ID),
        sa.Column("created_at", Micros, nullable=False),
        sa.Column("modified_at", Micros, nullable=False),
        sa.Column("valid_to", Micros),
    )
    op.create_index("ix_examples_dataset_valid", "examples", ["dataset_id", "valid_to"])
    op.create_index(
        "uq_examples_current",
        "examples",
        ["id"],
        unique=True,
        sqlite_where=sa.text("valid_to IS NULL"),
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_index("ix_examples_id", "examples", ["id"])
    op.create_table(
        "dataset_tags",
        sa.Column(
            "dataset_id", ID, sa.ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("tag", sa.String(256), primary_key=True),
        sa.Column("as_of", Micros, nullable=False),
    )
    op.create_table(
        "sessions",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("start_time", Micros, nullable=False),
        sa.Column("end_time", Micros),
        sa.Column("extra", JSONType),
        sa.Column(
            "reference_dataset_id", ID, sa.ForeignKey("datasets.id", ondelete="SET NULL")
        ),
        sa.Column("default_dataset_id", ID),
        sa.Column("trace_tier", sa.String(32)),
        sa.UniqueConstraint("tenant_id", "name", name="uq_sessions_tenant_name"),
    )
    op.create_index("ix_sessions_dataset", "sessions", ["reference_dataset_id", "start_time"])
    op.create_table(
        "runs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("trace_id", ID, nullable=False),
        sa.Column("parent_run_id", ID),
        sa.Column("dotted_order", sa.String(4096)),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("run_type", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("inputs", JSONType),
        sa.Column("outputs", JSONType),
        sa.Column("error", sa.Text),
        sa.Column("extra", JSONType),
        sa.Column("events", JSONType),
        sa.Column("tags", JSONType),
        sa.Column("serialized", JSONType),
        sa.Column("reference_example_id", ID),
        sa.Column("start_time", Micros, nullable=False),
        sa.Column("end_time", Micros),
        sa.Column("first_token_time", Micros),
        sa.Column("is_root", sa.Boolean, nullable=False),
        sa.Column("latency_us", sa.BigInteger),
        sa.Column("first_token_us", sa.BigInteger),
        sa.Column("prompt_tokens", sa.BigInteger),
        sa.Column("completion_tokens", sa.BigInteger),
        sa.Column("total_tokens", sa.BigInteger),
        sa.Column("prompt_cost", sa.Double),
        sa.Column("completion_cost", sa.Double),
        sa.Column("total_cost", sa.Double),
    )
    op.create_index(
        "ix_runs_session_root_latency", "runs", ["session_id", "is_root", "latency_us"]
    )
    op.create_index("ix_runs_session_first_token", "runs", ["session_id", "first_token_us"])
    op.create_index("ix_runs_session_type", "runs", ["session_id", "run_type"])
    op.create_index("ix_runs_session_start", "runs", ["session_id", "start_time"])
    op.create_index("ix_runs_trace", "runs", ["trace_id"])
    op.create_index("ix_runs_parent", "runs", ["parent_run_id"])
    op.create_index("ix_runs_example", "runs", ["reference_example_id"])
    op.create_table(
        "feedback",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("run_id", ID),
        sa.Column("session_id", ID),
        sa.Column("trace_id", ID),
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("score", sa.Double),
        sa.Column("value", JSONType),
        sa.Column("label", sa.String(512)),
        sa.Column("comment", sa.Text),
        sa.Column("correction", JSONType),
        sa.Column("feedback_source", JSONType),
        sa.Column("extra", JSONType),
        sa.Column("created_at", Micros, nullable=False),
        sa.Column("modified_at", Micros, nullable=False),
    )
    op.create_index("ix_feedback_session_key", "feedback", ["session_id", "key"])
    op.create_index("ix_feedback_run", "feedback", ["run_id"])


def downgrade() -> None:
    for name in ("feedback", "runs", "sessions", "dataset_tags", "examples", "datasets"):
        op.drop_table(name)
