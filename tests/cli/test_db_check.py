"""``assay db check`` compares the hourly rollups (``run_hours``) with a recount of the runs."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from typer.testing import CliRunner

from assay.cli import app
from assay.store import Store
from assay.store._tables import run_hours, sessions

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


def _trace(project: str, hours: float, tokens: int, error: bool = False) -> list[dict[str, Any]]:
    """A root chain with one costed llm child, ``hours`` after T0, in ``project``."""
    t = T0 + timedelta(hours=hours)
    root_id, llm_id = str(uuid.uuid4()), str(uuid.uuid4())
    seg = t.strftime("%Y%m%dT%H%M%S%fZ")
    root = {"id": root_id, "trace_id": root_id, "name": "agent", "run_type": "chain",
            "session_name": project, "start_time": t, "end_time": t + timedelta(seconds=2),
            "dotted_order": seg + root_id, **({"error": "boom"} if error else {})}
    llm = {"id": llm_id, "trace_id": root_id, "parent_run_id": root_id, "name": "chat",
           "run_type": "llm", "session_name": project, "start_time": t,
           "end_time": t + timedelta(seconds=1), "dotted_order": f"{seg}{root_id}.{seg}{llm_id}",
           "extra": {"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                                  "usage_metadata": {"input_tokens": tokens - 10,
                                                     "output_tokens": 10,
                                                     "total_tokens": tokens}}}}
    return [root, llm]


def _check(url: str, *extra: str) -> tuple[int, dict[str, Any]]:
    out = CliRunner().invoke(app, ["db", "check", "--db", url, "--json", *extra])
    return out.exit_code, json.loads(out.output)


def test_db_check_compares_run_hours_with_a_recount(sqlite_url: str) -> None:
    posts: list[dict[str, Any]] = []
    for i in range(6):  # two projects, runs over three hours, one error
        posts += _trace("alpha" if i % 2 else "beta", hours=i * 0.6, tokens=100 + i, error=i == 3)
    with Store.open(sqlite_url) as store:
        store.runs.upsert(posts=posts)
        store.settle()
        with store.read() as conn:
            ids = {r.name: r.id for r in conn.execute(select(sessions.c.name, sessions.c.id))}
            n_hours = len(conn.execute(select(run_hours)).all())
    assert n_hours >= 4  # the data really spreads over several (project, hour) rows

    code, report = _check(sqlite_url)
    assert code == 0 and report["mismatched"] == [] and report["checked"] == 2

    with Store.open(sqlite_url) as store, store.write() as conn:  # drift in one project's hours
        conn.execute(update(run_hours).where(run_hours.c.session_id == ids["alpha"])
                     .values(total_tokens=run_hours.c.total_tokens + 7))
    code, report = _check(sqlite_url)
    assert code == 1
    assert report["mismatched"] == [{"project": "alpha", "id": ids["alpha"],
                                     "fields": ["run_hours"]}]

    code, report = _check(sqlite_url, "--repair")
    assert code == 0 and report["mismatched"] == []
    assert report["found_before_repair"] == [{"project": "alpha", "id": ids["alpha"],
                                              "fields": ["run_hours"]}]  # what was rebuilt

    with Store.open(sqlite_url) as store, store.write() as conn:  # a missing hour row
        first = conn.execute(select(run_hours.c.hour).where(
            run_hours.c.session_id == ids["beta"]).order_by(run_hours.c.hour)).scalars().first()
        conn.execute(delete(run_hours).where(run_hours.c.session_id == ids["beta"],
                                             run_hours.c.hour == first))
    code, report = _check(sqlite_url)
    assert code == 1 and [b["project"] for b in report["mismatched"]] == ["beta"]
    assert report["mismatched"][0]["fields"] == ["run_hours"]
    assert _check(sqlite_url, "--repair")[0] == 0


def test_db_check_ignores_emptied_hours_but_not_extra_ones(sqlite_url: str) -> None:
    """An hour whose sums all went back to 0 reads like no row; one with counts does not."""
    with Store.open(sqlite_url) as store:
        store.runs.upsert(posts=_trace("gamma", hours=0, tokens=50))
        store.settle()
        with store.write() as conn:
            sid, tenant = conn.execute(select(sessions.c.id, sessions.c.tenant_id)).one()
            far = 10 * 3_600_000_000 + conn.execute(select(run_hours.c.hour)).scalar_one()
            conn.execute(run_hours.insert().values(session_id=sid, hour=far, tenant_id=tenant))
    assert _check(sqlite_url) == (0, {"checked": 1, "mismatched": [], "repaired": False})
    with Store.open(sqlite_url) as store, store.write() as conn:
        conn.execute(update(run_hours).where(run_hours.c.hour == far).values(root_runs=1))
    code, report = _check(sqlite_url)
    assert code == 1 and report["mismatched"][0]["fields"] == ["run_hours"]


def test_hour_comparison_on_each_backend(store: Store) -> None:
    """The recount and the comparison on SQLite and PostgreSQL (whose database other tests
    share: only this workspace's projects are asserted)."""
    from assay.cli._db import _hours_differing

    project = f"hours-{uuid.uuid4().hex[:8]}"
    posts: list[dict[str, Any]] = []
    for i in range(5):
        posts += _trace(project, hours=i * 0.7, tokens=1000 + 37 * i, error=i == 2)
    store.runs.upsert(posts=posts)
    store.settle()
    with store.read() as conn:
        sid = conn.execute(select(sessions.c.id).where(sessions.c.name == project,
                                                       sessions.c.tenant_id == store.tenant_id)
                           ).scalar_one()
        assert sid not in _hours_differing(conn)
    with store.write() as conn:
        conn.execute(update(run_hours).where(run_hours.c.session_id == sid)
                     .values(total_cost=run_hours.c.total_cost + 0.5))
    with store.read() as conn:
        assert _hours_differing(conn)[sid] == 3  # traces at 9:00, 9:42, 10:24, 11:06, 11:48


def test_db_check_lists_feedback_on_a_run_never_stored(sqlite_url: str) -> None:
    """Feedback posted for a run that never arrived waits in no project (its session unknown):
    db check listed only feedback of a project and said all was consistent."""
    from assay import Client

    client = Client(database_url=sqlite_url)
    client.create_feedback(run_id=uuid.uuid4(), key="orphan", score=1)
    client.flush()
    code, report = _check(sqlite_url)
    assert code == 1
    assert report["mismatched"] == [{"project": None, "id": None,
                                     "fields": ["feedback_without_run"],
                                     "feedback_without_run": 1}]
    out = CliRunner().invoke(app, ["db", "check", "--db", sqlite_url])
    assert "(no project): feedback_without_run (1 rows)" in out.output
