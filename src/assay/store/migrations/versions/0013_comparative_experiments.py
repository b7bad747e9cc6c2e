"""Comparative (pairwise) experiments, and pairwise feedback on runs.

Revision ID: 0013
Revises: 0012

LangSmith's ``evaluate((experiment_a, experiment_b), evaluators=[...])`` creates a comparative
experiment (``POST /datasets/comparative``) and scores the two experiments' runs on each example
against each other: feedback that names the comparison (``comparative_experiment_id``) and the
runs scored together (``feedback_group_id``). A new table, and two nullable feedback columns
(existing rows: not pairwise) with a partial index on the first.
"""

import sqlalchemy as sa
from alembic import op

from assay.store._types import JSONType, Micros

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "comparative_experiments",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(1024)),
        sa.Column("description", sa.Text()),
        sa.Column("reference_dataset_id", sa.String(36),
                  sa.ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
        sa.Column("experiment_ids", JSONType, nullable=False),
        sa.Column("extra", JSONType),
        sa.Column("created_at", Micros, nullable=False),
        sa.Column("modified_at", Micros, nullable=False),
    )
    op.create_index("ix_comparative_dataset", "comparative_experiments",
                    ["tenant_id", "reference_dataset_id", "created_at"])
    # plain ADD COLUMN on both backends: the feedback table is not copied
    op.add_column("feedback", sa.Column("comparative_experiment_id", sa.String(36)))
    op.add_column("feedback", sa.Column("feedback_group_id", sa.String(36)))
    op.create_index("ix_feedback_comparative", "feedback", ["comparative_experiment_id"],
                    sqlite_where=sa.text("comparative_experiment_id IS NOT NULL"),
                    postgresql_where=sa.text("comparative_experiment_id IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_feedback_comparative", table_name="feedback")
    with op.batch_alter_table("feedback") as batch:  # SQLite copies the table here
        batch.drop_column("feedback_group_id")
        batch.drop_column("comparative_experiment_id")
    op.drop_index("ix_comparative_dataset", table_name="comparative_experiments")
    op.drop_table("comparative_experiments")
