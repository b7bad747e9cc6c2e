"""Session statistics kept up to date on write (session, trace-stream and feedback aggregates).

Revision ID: 0004
Revises: 0003

Reading a session's statistics scanned all its runs and feedback (seconds at a million runs).
The store now keeps the sums in four small tables, changed in the same transaction as the rows
they sum (see ``assay/store/_aggregates.py``). This migration fills them from the rows already
stored, so an old store answers the same figures right after the upgrade. Feedback that waited
for its run (``session_id`` NULL) and whose run has since been posted gets that run's session,
as a post now does; a partial index finds the feedback still waiting.
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

from assay.store._types import Micros

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ID = sa.String(36)


def _count(name: str, type_: type[sa.types.TypeEngine[Any]] = sa.BigInteger) -> sa.Column[Any]:
    return sa.Column(name, type_(), nullable=False, server_default=sa.text("0"))


def upgrade() -> None:
    op.create_table(
        "session_aggregates",
        sa.Column("session_id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        _count("root_runs"),
        _count("root_latencies"),
        _count("root_errors"),
        sa.Column("last_root_start", Micros),
        _count("streamed_runs"),
        _count("streamed_traces"),
        _count("total_tokens"),
        _count("prompt_tokens"),
        _count("completion_tokens"),
        _count("total_cost", sa.Double),
        _count("prompt_cost", sa.Double),
        _count("completion_cost", sa.Double),
        _count("total_cost_runs"),
        _count("prompt_cost_runs"),
        _count("completion_cost_runs"),
    )
    op.create_table(
        "trace_streams",
        sa.Column("session_id", ID, primary_key=True),
        sa.Column("trace_id", ID, primary_key=True),
        _count("streamed_runs"),
    )
    op.create_table(
        "feedback_aggregates",
        sa.Column("session_id", ID, primary_key=True),
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("level", sa.String(8), primary_key=True),
        sa.Column("key", sa.String(512), primary_key=True),
        _count("n"),
        _count("n_scored"),
        _count("score_sum", sa.Double),
        _count("score_sq_sum", sa.Double),
    )
    op.create_table(
        "feedback_label_counts",
        sa.Column("session_id", ID, primary_key=True),
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("level", sa.String(8), primary_key=True),
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("label", sa.String(512), primary_key=True),
        _count("n"),
    )

    posted_run = ("FROM runs r WHERE r.id = feedback.run_id AND r.tenant_id = feedback.tenant_id "
                  "AND r.status <> 'orphan'")
    op.execute(
        f"UPDATE feedback SET session_id = (SELECT r.session_id {posted_run}) "
        f"WHERE session_id IS NULL AND run_id IS NOT NULL AND EXISTS (SELECT 1 {posted_run})"
    )
    op.execute(
        "INSERT INTO trace_streams (session_id, trace_id, streamed_runs) "
        "SELECT session_id, trace_id, COUNT(*) FROM runs WHERE first_token_us IS NOT NULL "
        "GROUP BY session_id, trace_id"
    )
    llm = "run_type = 'llm'"
    op.execute(
        "INSERT INTO session_aggregates (session_id, tenant_id, root_runs, root_latencies, "
        "root_errors, last_root_start, streamed_runs, streamed_traces, total_tokens, "
        "prompt_tokens, completion_tokens, total_cost, prompt_cost, completion_cost, "
        "total_cost_runs, prompt_cost_runs, completion_cost_runs) "
        "SELECT session_id, MAX(tenant_id), "
        "SUM(CASE WHEN is_root THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN is_root AND latency_us IS NOT NULL THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN is_root AND error IS NOT NULL THEN 1 ELSE 0 END), "
        "MAX(CASE WHEN is_root THEN start_time END), "
        "COUNT(first_token_us), "
        "(SELECT COUNT(*) FROM trace_streams t WHERE t.session_id = runs.session_id), "
        + ", ".join(f"COALESCE(SUM(CASE WHEN {llm} THEN {c} END), 0)" for c in (
            "total_tokens", "prompt_tokens", "completion_tokens",
            "total_cost", "prompt_cost", "completion_cost"))
        + ", "
        + ", ".join(f"SUM(CASE WHEN {llm} AND {c} IS NOT NULL THEN 1 ELSE 0 END)" for c in (
            "total_cost", "prompt_cost", "completion_cost"))
        + " FROM runs GROUP BY session_id"
    )
    level = "CASE WHEN run_id IS NULL THEN 'session' ELSE 'run' END"
    op.execute(
        "INSERT INTO feedback_aggregates (session_id, tenant_id, level, \"key\", n, n_scored, "
        "score_sum, score_sq_sum) "
        f"SELECT session_id, tenant_id, {level}, \"key\", COUNT(*), COUNT(score), "
        "COALESCE(SUM(score), 0), COALESCE(SUM(score * score), 0) "
        "FROM feedback WHERE session_id IS NOT NULL "
        f"GROUP BY session_id, tenant_id, {level}, \"key\""
    )
    op.execute(
        "INSERT INTO feedback_label_counts (session_id, tenant_id, level, \"key\", label, n) "
        f"SELECT session_id, tenant_id, {level}, \"key\", label, COUNT(*) "
        "FROM feedback WHERE session_id IS NOT NULL AND label IS NOT NULL "
        f"GROUP BY session_id, tenant_id, {level}, \"key\", label"
    )
    op.create_index(
        "ix_feedback_pending", "feedback", ["tenant_id", "run_id"],
        sqlite_where=sa.text("session_id IS NULL"),
        postgresql_where=sa.text("session_id IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_feedback_pending", table_name="feedback")
    op.drop_table("feedback_label_counts")
    op.drop_table("feedback_aggregates")
    op.drop_table("trace_streams")
    op.drop_table("session_aggregates")
