"""Presigned feedback tokens.

Revision ID: 0014
Revises: 0013

LangSmith's ``create_presigned_feedback_token(run_id, key)`` returns a URL that an application's
front end calls (GET with query parameters, or POST) to score that run with that key, without
the API key: the token's id is its secret, its workspace and run come from the row. A new table.
"""

import sqlalchemy as sa
from alembic import op

from assay.store._types import Micros

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "feedback_tokens",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("feedback_key", sa.String(512), nullable=False),
        sa.Column("feedback_id", sa.String(36)),
        sa.Column("expires_at", Micros, nullable=False),
        sa.Column("created_at", Micros, nullable=False),
    )
    op.create_index("ix_feedback_tokens_run", "feedback_tokens", ["tenant_id", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_feedback_tokens_run", table_name="feedback_tokens")
    op.drop_table("feedback_tokens")
