"""Alembic environment: always runs on a connection handed over by ``assay.store``."""

from __future__ import annotations

from alembic import context

from assay.store._tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - assay always passes a connection
    raise RuntimeError("assay migrations run through 'assay db upgrade' or Store.open()")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transactional_ddl=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
