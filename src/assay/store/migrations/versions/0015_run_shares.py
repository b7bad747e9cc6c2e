"""Shared traces.

Revision ID: 0015
Revises: 0014

LangSmith's ``share_run(run_id)`` returns a link that opens the run's trace without the API key:
the token is its secret, the row names the workspace, project and trace it opens. A trace has
at most one token. A new table.
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
        "run_shares",
        sa.Column("token", sa.String(36), primary_key=True),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("session_id", sa.String(36), nullable=False),
        sa.Column("created_at", Micros, nullable=False),
    )
    op.create_index("ux_run_shares_trace", "run_shares", ["tenant_id", "trace_id"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_run_shares_trace", table_name="run_shares")
    op.drop_table("run_shares")
