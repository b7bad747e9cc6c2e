"""A journal for batched writes that are folded into runs and feedback before they are read.

Revision ID: 0005
Revises: 0004

The tracing writer and evaluate()'s feedback sink append each batch as one JSON row, which
costs about a microsecond per run instead of the tens of microseconds that a row of ``runs``
with its indexes and the aggregates costs; the store folds the journal before any read of runs,
feedback or statistics (``assay/store/_journal.py``). A new, empty table: nothing to migrate.
"""

import sqlalchemy as sa
from alembic import op

from assay.store._types import Micros

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "journal",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("items", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", Micros(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("journal")
