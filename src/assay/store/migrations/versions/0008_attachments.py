"""Attachments of examples and runs, and the key that signs their download URLs.

Revision ID: 0008
Revises: 0007

Blobs are content-addressed (sha256) per workspace and stored in the database (BLOB on SQLite,
bytea on PostgreSQL): written in the same transaction as the example version naming them, so a
refused request leaves nothing behind, and served alike by every process of a team server.
``example_attachments`` hangs off ``examples.row_id`` (one example version), so ``as_of`` reads
the attachments of the version it reads. New, empty tables: nothing to migrate.
"""

import sqlalchemy as sa
from alembic import op

from assay.store._types import Micros

revision = "0008"


down_revision = "0007"
branch_labels = None
depends_on = None

_ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("tenant_id", sa.String(36), primary_key=True),
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", Micros(), nullable=False),
    )
    op.create_table(
        "example_attachments",
        sa.Column("example_row_id", _ROW_ID,
                  sa.ForeignKey("examples.row_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("mime_type", sa.String(256), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "run_attachments",
        sa.Column("tenant_id", sa.String(36), primary_key=True),
        sa.Column("run_id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("mime_type", sa.String(256), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_example_attachments_blob", "example_attachments", ["tenant_id", "sha256"])
    op.create_index("ix_run_attachments_blob", "run_attachments", ["tenant_id", "sha256"])
    op.create_table(
        "signing_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("created_at", Micros(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("signing_keys")
    op.drop_index("ix_run_attachments_blob", table_name="run_attachments")
    op.drop_table("run_attachments")
    op.drop_index("ix_example_attachments_blob", table_name="example_attachments")
    op.drop_table("example_attachments")
    op.drop_table("blobs")
