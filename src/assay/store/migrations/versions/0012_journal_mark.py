"""The fold's mark on a SQLite file's journal queue (``store/_queue.py``).

Revision ID: 0012
Revises: 0011

A SQLite file's journal moved to a file of its own beside it (``<db>-queue``): appends take
that file's write lock and folds the database's, so the server's ingest no longer waits for
the fold's transactions (bench/README.md, stop 49). A fold cannot delete the queue's entries
in the transaction that writes their rows (two files commit apart), so it records here, in that
transaction, the last entry it applied; entries up to it are skipped and deleted afterwards.
A new, empty table; the old ``journal`` table stays (PostgreSQL and in-memory databases keep
their journal there, and entries a SQLite file held before are folded from it first).
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "journal_mark",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  primary_key=True, autoincrement=False),
        sa.Column("epoch", sa.String(36), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("journal_mark")
