"""An index of root runs by conversation thread.

Revision ID: 0016
Revises: 0015

A thread is the root runs whose metadata names the same ``session_id``, ``thread_id`` or
``conversation_id`` (``store/_threads.py``); the id was read from every root's JSON at each
query, so one thread's page cost as much as listing the whole project (bench/threads.py: 48 ms
SQLite, 80 ms PostgreSQL at 40,000 roots, linear). This indexes ``(session_id, thread id,
start_time)`` of the roots that name a thread, on the expression the queries spell
(``_run_filter.thread_id_of``): one thread's turns and statistics are a range of it, and the
threads list reads it instead of the roots' JSON. A run that is no root, or names no thread,
has no entry (partial): its condition looks for a thread key in the root's ``extra`` text
before any JSON is parsed, so the fold pays little for a root that names no thread.
"""

import sqlalchemy as sa
from alembic import op

from assay.store._run_filter import names_a_thread, thread_id_of

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    thread = thread_id_of(sa.column("extra"), dialect)
    root = sa.text("is_root IS true" if dialect == "postgresql" else "is_root IS 1")
    named = sa.and_(root, names_a_thread(sa.column("extra"), dialect))
    op.create_index("ix_runs_session_thread", "runs",
                    [sa.column("session_id"), thread, sa.column("start_time")],
                    sqlite_where=named, postgresql_where=named)


def downgrade() -> None:
    op.drop_index("ix_runs_session_thread", table_name="runs")
