"""Schema migrations: applied on open, recorded, and safe for data written by older versions."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
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
    assert stats.feedback_stats["correct"].n == 1 and stats.error_rate == 0.0
    assert stats.last_run_start_time is not None and stats.streaming_rate == 0.0
    # 0004 filled the aggregates these come from: they equal a full recomputation
    from .test_aggregates import _check_all

    assert _check_all([client.store]) == 1
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
                if not (isinstance(d, tuple) and d[0] == "remove_table"
                        and d[1].name == "alembic_version")
                # an expression index, on each backend's own JSON functions: made by
                # migration 0016 alone (tests/store/test_threads.py: the queries use it)
                and not (isinstance(d, tuple) and d[0] == "remove_index"
                         and d[1].name == "ix_runs_session_thread")]
    store.close()
    assert diff == []


def test_unsupported_url_is_named(tmp_path: Path) -> None:
    from assay.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="unsupported database URL 'mysql://x'"):
        Store.open("mysql://x")


@pytest.fixture(params=["sqlite", "postgres"])
def blank_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no schema yet) on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'blank.db'}"
        return
    import uuid

    import psycopg

    pg_url = request.getfixturevalue("pg_url")
    name = f"assay_blank_{uuid.uuid4().hex[:10]}"
    admin = psycopg.connect(pg_url, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield pg_url.rsplit("/", 1)[0] + "/" + name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _copy(src: Any, dst: Any, tables: tuple[Any, ...]) -> None:
    """Every row of ``tables`` from one store's connection into another's (an old schema's):
    columns added by later migrations are left out, and must be empty in the rows copied."""
    from sqlalchemy import inspect, select

    for table in tables:
        have = {c["name"] for c in inspect(src).get_columns(table.name)}
        known = {c["name"] for c in inspect(dst).get_columns(table.name)}
        rows = [dict(r._mapping) for r in src.execute(select(*(c for c in table.c
                                                              if c.name in have)))]
        for row in rows:
            later = [k for k in row if k not in known]
            assert all(row.pop(k) is None for k in later), f"{table.name}: {later}"
        if rows:
            dst.execute(table.insert(), rows)


def test_upgrade_to_0011_keeps_the_runs_json(blank_url: str) -> None:
    """Runs stored as JSONB before 0011 read back the same after it retypes their columns to
    ``json`` on PostgreSQL (SQLite's: unchanged), and the filters that read them still work."""
    from sqlalchemy import insert, text

    from assay.store._tables import DEFAULT_TENANT_ID, runs, sessions

    old = Store.open(blank_url, migrate=False)
    assert old.upgrade("0010") == "0010"
    doc = {"q": "é😀", "nested": {"b": [1, 2.5, None, True]}, "metadata": {"team": "qa"}}
    sid = "00000000-0000-4000-8000-0000000000a1"
    with old.engine.begin() as conn:
        conn.execute(insert(sessions).values(id=sid, tenant_id=DEFAULT_TENANT_ID, name="p",
                                             start_time=1))
        conn.execute(insert(runs), [
            {"id": f"00000000-0000-4000-8000-00000000000{i}", "tenant_id": DEFAULT_TENANT_ID,
             "session_id": sid, "trace_id": f"00000000-0000-4000-8000-00000000000{i}",
             "name": f"r{i}", "run_type": "chain", "status": "success", "inputs": doc,
             "outputs": {"i": i}, "extra": doc, "events": [], "tags": [f"t{i}"],
             "serialized": None, "start_time": 10 + i, "is_root": True} for i in range(3)])
    assert old.upgrade() == HEAD
    if old.engine.dialect.name == "postgresql":
        with old.engine.connect() as conn:
            kinds = conn.execute(text(
                "SELECT DISTINCT data_type FROM information_schema.columns WHERE table_name = "
                "'runs' AND column_name IN ('inputs', 'outputs', 'extra', 'events', 'tags', "
                "'serialized')")).scalars().all()
        assert kinds == ["json"]
    got = old.runs.read("00000000-0000-4000-8000-000000000001")
    assert got.inputs == doc and got.outputs == {"i": 1} and got.tags == ["t1"]
    assert [r.name for r in old.runs.list(filter='has(tags, "t2")')] == ["r2"]
    assert len(old.runs.list(filter='and(eq(metadata_key, "team"), eq(metadata_value, "qa"))'
                             )) == 3
    old.close()


def test_upgrade_to_0004_fills_the_aggregates_from_existing_rows(
        sqlite_url: str, blank_url: str, tmp_path: Path) -> None:
    """Rows written before 0004 (copied from a random workload, some feedback still waiting
    for its run) give the same statistics after the upgrade as a full recomputation."""
    import random

    from sqlalchemy import select, update

    from assay.store._stats import recompute_session_stats, session_stats
    from assay.store._tables import datasets, feedback, runs, sessions

    from .test_aggregates import World, _same

    store = Store.open(sqlite_url)  # the workload's source (written at head)
    world = World(store, seed=11)
    for _ in range(150):
        world.step()
    old = Store.open(blank_url, migrate=False)
    assert old.upgrade("0003") == "0003"
    with store.engine.connect() as src, old.engine.begin() as dst:
        _copy(src, dst, (datasets, sessions, runs, feedback))
        # before 0004 feedback sent ahead of its run kept session_id NULL even once it came
        ids = sorted(dst.execute(select(feedback.c.id).where(
            feedback.c.run_id.is_not(None))).scalars())
        waiting = random.Random(3).sample(ids, len(ids) // 2)
        dst.execute(update(feedback).where(feedback.c.id.in_(waiting)).values(session_id=None))
    # the full recomputation (head code) of exactly these rows, on a copy at head
    scratch = Store.open(tmp_path / "scratch.db")
    with old.engine.connect() as src, scratch.engine.begin() as dst:
        _copy(src, dst, (datasets, sessions, runs, feedback))
        expected = {}
        for row in dst.execute(select(sessions)):
            expected[row.id] = recompute_session_stats(dst, row)
    assert len(expected) >= 5
    assert old.upgrade() == HEAD
    with old.engine.connect() as conn:
        for row in conn.execute(select(sessions)):
            _same(session_stats(conn, row), expected[row.id], f"session {row.name}")
        # feedback whose run was posted now names the run's project; the rest still waits
        left = conn.execute(select(feedback.c.run_id, feedback.c.tenant_id).where(
            feedback.c.session_id.is_(None))).all()
        adopted = conn.execute(select(feedback.c.id).where(
            feedback.c.id.in_(waiting), feedback.c.session_id.is_not(None))).scalars().all()
        assert adopted  # and each one left has no stored run (below): nothing else waits
        for run_id, tenant in left:
            status = conn.execute(select(runs.c.status).where(
                runs.c.id == run_id, runs.c.tenant_id == tenant)).scalar()
            assert status in (None, "orphan")
    old.close()
    store.close()


def test_cli_db_check_detects_and_repairs_drift(tmp_path: Path) -> None:
    from sqlalchemy import update

    from assay.store._tables import session_aggregates

    path = tmp_path / "check.db"
    shutil.copy(FIXTURE, path)
    runner = CliRunner()
    ok = runner.invoke(app, ["db", "check", "--db", str(path), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["mismatched"] == []
    store = Store.open(path)
    with store.write() as conn:  # simulate drift (e.g. rows edited by hand)
        conn.execute(update(session_aggregates).values(root_runs=99))
    store.close()
    bad = runner.invoke(app, ["db", "check", "--db", str(path), "--json"])
    assert bad.exit_code == 1
    assert json.loads(bad.output)["mismatched"][0]["fields"] == ["run_count"]
    fixed = runner.invoke(app, ["db", "check", "--db", str(path), "--repair", "--json"])
    assert fixed.exit_code == 0 and json.loads(fixed.output)["mismatched"] == []


def test_upgrade_to_0010_fills_the_hourly_rollups_from_existing_runs(sqlite_url: str,
                                                                     blank_url: str) -> None:
    """Runs stored before 0010 (a random workload spread over days) give the same charts from
    the rollups the upgrade fills as from the runs, and the rewritten indexes serve reads."""

    from assay.store._tables import (
        datasets,
        feedback,
        feedback_aggregates,
        feedback_label_counts,
        runs,
        session_aggregates,
        sessions,
        trace_streams,
    )

    from .test_aggregates import _check_all
    from .test_run_hours import HourlyWorld, _check_series

    store = Store.open(sqlite_url)  # the workload's source (written at head)
    world = HourlyWorld(store, seed=5)
    for _ in range(120):
        world.step()
    old = Store.open(blank_url, migrate=False)
    assert old.upgrade("0009") == "0009"
    with store.engine.connect() as src, old.engine.begin() as dst:
        _copy(src, dst, (datasets, sessions, runs, feedback, session_aggregates, trace_streams,
                         feedback_aggregates, feedback_label_counts))
    assert old.upgrade() == HEAD
    migrated = [old.for_tenant(st.tenant_id) for st in world.stores]
    assert _check_all(migrated) >= 3
    assert sum(_check_series(st) for st in migrated) >= 10
    for st in migrated:  # reads through the partial indexes answer as before
        for project in st.projects.list(include_stats=True):
            for run in st.runs.list(project_ids=[project.id], is_root=False)[:5]:
                assert run.id in {r.id for r in st.runs.list(parent_run_id=run.parent_run_id)}
    old.close()
    store.close()
