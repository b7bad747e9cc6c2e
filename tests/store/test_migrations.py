"""Schema migrations: applied on open, recorded, and safe for data written by older versions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from typer.testing import CliRunner

from assay.cli import app
from assay.client import Client
from assay.store import HEAD, Store
from assay.store._tables import DEFAULT_TENANT_ID, metadata

FIXTURE = Path(__file__).parent.parent / "fixtures" / "schema_0001.db"


def test_old_store_is_migrated_on_open_with_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    assert Store.open(path, migrate=False).schema_version() == "0001"

    client = Client(database_url=path)
    assert client.store.schema_version() == HEAD
    ds = client.read_dataset(dataset_name="legacy")
    assert ds.description == "made by migration 0001" and ds.metadata == {"owner": "qa"}
    examples = list(client.list_examples(dataset_id=ds.id))
    assert [e.inputs for e in examples] == [{"question": f"q{i}"} for i in range(3)]
    assert [e.outputs for e in examples] == [{"answer": f"a{i}"} for i in range(3)]
    stats = client.read_project(project_name="legacy-exp", include_stats=True)
    assert stats.run_count == 1 and stats.latency_p50 == 2.5
    assert stats.feedback_stats["correct"].avg == 1.0
    assert stats.reference_dataset_id == ds.id
    # the new tables work on the migrated file
    key = client.store.keys.create(tenant="default")
    assert client.store.keys.authenticate(key.key) == DEFAULT_TENANT_ID
    client.create_example({"question": "q3"}, dataset_id=ds.id)
    assert client.read_dataset(dataset_id=ds.id).example_count == 4


def test_cli_db_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    shutil.copy(FIXTURE, path)
    result = CliRunner().invoke(app, ["db", "upgrade", "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert f"schema 0001 -> {HEAD}" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["db", "version", "--db", str(path), "--json"])
    assert json.loads(result.output)["version"] == HEAD
    result = CliRunner().invoke(app, ["db", "upgrade", "--db", str(path), "--json"])
    assert json.loads(result.output) == {"url": f"sqlite:///{path}", "from": HEAD, "to": HEAD,
                                         "head": HEAD}


def test_migrations_build_exactly_the_declared_schema(store_url: str) -> None:
    """Alembic's autogenerate finds no difference between head and ``_tables.py``."""
    store = Store.open(store_url)
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = [d for d in compare_metadata(ctx, metadata)
                if not (isinstance(d, tuple) and d[0] == "remove_table" and d[1].name == "alembic_version")]
    store.close()
    assert diff == []


def test_unsupported_url_is_named(tmp_path: Path) -> None:
    import pytest

    from assay.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="unsupported database URL 'mysql://x'"):
        Store.open("mysql://x")
