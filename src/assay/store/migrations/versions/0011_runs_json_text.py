"""The runs' JSON columns as ``json`` on PostgreSQL (JSON text, as on SQLite).

Revision ID: 0011
Revises: 0010

PostgreSQL parsed every run row's six JSON columns into JSONB's binary form as the fold
COPYed them in: a third of the server's own work a row, and once the fold's COPY text was
written in C, what the fold waited for (bench/README, stop 44). ``json`` checks the text and
keeps it as written, key order included, as SQLite keeps it. The queries that need JSONB's
operators (tags containment) cast in the query. One ``ALTER TABLE``: the table is rewritten
once. SQLite's columns are JSON text already: nothing to do there.
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_COLUMNS = ("inputs", "outputs", "extra", "events", "tags", "serialized")


def _retype(to: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    changes = ", ".join(f"ALTER COLUMN {c} TYPE {to} USING {c}::{to}" for c in _COLUMNS)
    op.execute(f"ALTER TABLE runs {changes}")


def upgrade() -> None:
    _retype("json")


def downgrade() -> None:
    _retype("jsonb")
