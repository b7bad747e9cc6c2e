"""Annotation queues (with the runs queued for review) and feedback configs.

Revision ID: 0009
Revises: 0008

LangSmith's ``/annotation-queues`` and ``/feedback-configs``: a queue holds runs for people to
review against a rubric (feedback keys, each with the config that says how its values read);
a feedback config tells how a key's feedback is scored (continuous bounds, categories, or
free-form). Both are per workspace. (A dataset's ``inputs_schema``/``outputs_schema`` columns
exist since 0001; this migration needs no change there.)
"""

import sqlalchemy as sa
from alembic import op

from assay.store._types import JSONType, Micros

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

ID = sa.String(36)


def upgrade() -> None:
    op.create_table(
        "annotation_queues",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("rubric_instructions", sa.Text),
        sa.Column("rubric_items", JSONType),
        sa.Column("created_at", Micros, nullable=False),
        sa.Column("updated_at", Micros, nullable=False),
    )
    op.create_index("ix_annotation_queues_tenant", "annotation_queues",
                    ["tenant_id", "created_at"])
    op.create_table(
        "annotation_queue_runs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("queue_id", ID, sa.ForeignKey("annotation_queues.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("added_at", Micros, nullable=False),
        sa.Column("last_reviewed_time", Micros),
        sa.Column("completed_at", Micros),
        sa.UniqueConstraint("queue_id", "run_id", name="uq_annotation_queue_runs"),
    )
    op.create_index("ix_annotation_queue_runs_order", "annotation_queue_runs",
                    ["queue_id", "added_at", "id"])
    op.create_table(
        "feedback_configs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("feedback_key", sa.String(512), nullable=False),
        sa.Column("feedback_config", JSONType, nullable=False),
        sa.Column("is_lower_score_better", sa.Boolean),
        sa.Column("is_deleted", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", Micros, nullable=False),
        sa.Column("modified_at", Micros, nullable=False),
    )
    op.create_index("ix_feedback_configs_key", "feedback_configs", ["tenant_id", "feedback_key"])


def downgrade() -> None:
    op.drop_index("ix_feedback_configs_key", table_name="feedback_configs")
    op.drop_table("feedback_configs")
    op.drop_index("ix_annotation_queue_runs_order", table_name="annotation_queue_runs")
    op.drop_table("annotation_queue_runs")
    op.drop_index("ix_annotation_queues_tenant", table_name="annotation_queues")
    op.drop_table("annotation_queues")
