"""Partial indexes on runs: only the rows a statistic reads are indexed.

Revision ID: 0003
Revises: 0002

First-token percentiles read streamed runs only, token and cost sums read llm runs only, and the
example link is set only on experiment roots. Indexing just those rows keeps the indexes small
and every other run's insert cheaper.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_runs_session_first_token", table_name="runs")
    op.drop_index("ix_runs_session_type", table_name="runs")
    op.drop_index("ix_runs_example", table_name="runs")
    op.create_index(
        "ix_runs_session_first_token", "runs", ["session_id", "first_token_us"],
        sqlite_where=sa.text("first_token_us IS NOT NULL"),
        postgresql_where=sa.text("first_token_us IS NOT NULL"),
    )
    op.create_index(
        "ix_runs_session_llm", "runs", ["session_id"],
        sqlite_where=sa.text("run_type = 'llm'"),
        postgresql_where=sa.text("run_type = 'llm'"),
    )
    op.create_index(
        "ix_runs_example", "runs", ["reference_example_id"],
        sqlite_where=sa.text("reference_example_id IS NOT NULL"),
        postgresql_where=sa.text("reference_example_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_example", table_name="runs")
    op.drop_index("ix_runs_session_llm", table_name="runs")
    op.drop_index("ix_runs_session_first_token", table_name="runs")
    op.create_index("ix_runs_example", "runs", ["reference_example_id"])
    op.create_index("ix_runs_session_type", "runs", ["session_id", "run_type"])
    op.create_index("ix_runs_session_first_token", "runs", ["session_id", "first_token_us"])
