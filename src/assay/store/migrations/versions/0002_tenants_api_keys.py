"""Workspaces and API keys for the team server.

Revision ID: 0002
Revises: 0001

Existing rows all belong to the default workspace, which this migration creates.
"""

import time

import sqlalchemy as sa
from alembic import op

from assay.store._types import Micros

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(36)
DEFAULT_TENANT_ID = "00000000-0000-4000-8000-000000000000"


def upgrade() -> None:
    tenants = op.create_table(
        "tenants",
        sa.Column("id", ID, primary_key=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("created_at", Micros, nullable=False),
        sa.UniqueConstraint("name", name="uq_tenants_name"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", ID, primary_key=True),
        sa.Column(
            "tenant_id", ID, sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("key_hash", sa.String(128), nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("created_at", Micros, nullable=False),
        sa.Column("revoked_at", Micros),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_hash"),
    )
    op.bulk_insert(
        tenants,
        [{"id": DEFAULT_TENANT_ID, "name": "default", "created_at": int(time.time() * 1e6)}],
    )


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_table("tenants")
