"""Shared traces and datasets.

Revision ID: 0015
Revises: 0014

LangSmith's ``share_run(run_id)`` and ``share_dataset(dataset_id)`` return links that open the
run's trace, or the dataset with its examples and experiments, without the API key: the token
is the secret, the row names the workspace and what it opens (``kind``: trace or dataset, and
its id; a trace's project too). A trace or dataset has at most one token. A new table.
"""

import sqlalchemy as sa
from alembic import op

from assay.store._types import Micros

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shares",
        sa.Column("token", sa.String(36), primary_key=True),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("target_id", sa.String(36), nullable=False),
        sa.Column("session_id", sa.String(36), nullable=True),
        sa.Column("created_at", Micros, nullable=False),
    )
    op.create_index("ux_shares_target", "shares", ["tenant_id", "kind", "target_id"],
                    unique=True)
    op.create_index("ix_shares_session", "shares", ["tenant_id", "session_id"])


def downgrade() -> None:
    op.drop_index("ix_shares_session", table_name="shares")
    op.drop_index("ux_shares_target", table_name="shares")
    op.drop_table("shares")
