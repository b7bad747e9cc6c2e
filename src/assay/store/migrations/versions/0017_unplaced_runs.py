"""An index of the runs stored before their parent, without a dotted order.

Revision ID: 0017
Revises: 0016

A run created with ``parent_run_id`` before its parent is stored without a dotted order; when
the parent arrives the store gives it one (``store/_placing.py``), so a grandparent's roll-up,
which reads by dotted order, counts it. Every write of runs probes for such runs: this partial
index holds only them (nearly always none), so the probe costs one look at an empty index.
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_UNPLACED = sa.text("dotted_order IS NULL AND parent_run_id IS NOT NULL")


def upgrade() -> None:
    op.create_index("ix_runs_unplaced", "runs", ["tenant_id", "parent_run_id"],
                    sqlite_where=_UNPLACED, postgresql_where=_UNPLACED)


def downgrade() -> None:
    op.drop_index("ix_runs_unplaced", table_name="runs")
