"""The project charts from the hourly rollups (``run_hours``) equal the charts counted from the
runs, on every write path: posts, patches (errors, ends, tokens), patch before post, duplicate
and out-of-order writes, journaled batches (the fold's fast and general paths, ``admit``),
deleted traces and projects."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay._ids import dotted_segment_us
from assay.store import Store
from assay.store._aggregates import HOUR_US
from assay.store._series import Bucket, scan_series, series
from assay.tracing import RunTree

from .test_aggregates import World, _check_all

T0 = datetime(2025, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _same_buckets(got: list[Bucket], want: list[Bucket], where: str) -> None:
    assert [b.start for b in got] == [b.start for b in want], where
    for g, w in zip(got, want, strict=True):
        at = f"{where} @ {w.start.isoformat()}"
        assert (g.runs, g.errors, g.tokens) == (w.runs, w.errors, w.tokens), at
        assert math.isclose(g.cost, w.cost, rel_tol=1e-9, abs_tol=1e-12), (at, g.cost, w.cost)


def _check_series(st: Store) -> int:
    """For every project of ``st``: hourly, two-hourly and daily charts from the rollups equal
    those from the runs, over a window ending mid-hour (as the project page's "now" does).
    Returns the buckets with runs compared."""
    compared = 0
    for project in st.projects.list():
        runs = st.runs.list(project_ids=[project.id])
        if not runs:
            continue
        first = min(r.start_time for r in runs)
        last = max(r.start_time for r in runs)
        for width in (3600, 7200, 86400):
            lo = datetime.fromtimestamp(first.timestamp() // width * width, tz=UTC)
            hi = last + timedelta(minutes=7, microseconds=1)  # mid-hour: the tail is scanned
            got = series(st, str(project.id), start=lo, end=hi, bucket_seconds=width)
            want = scan_series(st, str(project.id), start=lo, end=hi, bucket_seconds=width)
            _same_buckets(got, want, f"{project.name} / {width}s")
            compared += sum(1 for b in want if b.runs or b.tokens)
    return compared


class HourlyWorld(World):
    """``World`` with runs spread over days, out of order, and some posts sent twice."""

    def __init__(self, store: Store, seed: int) -> None:
        super().__init__(store, seed)
        self.sent: list[tuple[int, dict[str, Any]]] = []

    def _time(self) -> datetime:
        # about a trace every 40 minutes, some far back (out of order)
        self.clock += self.rng.randint(1, 5000)
        back = self.rng.random() < 0.2
        minutes = self.clock * 0.9 - (self.rng.randint(60, 3000) if back else 0)
        return T0 + timedelta(minutes=minutes, microseconds=self.rng.randint(0, 999_999))

    def deliver(self) -> None:
        before = list(self.pending)
        super().deliver()
        self.sent += [(t, run) for t, kind, run in before
                      if kind == "post" and (t, kind, run) not in self.pending]

    def resend(self) -> None:
        """A post delivered again (a retried request): nothing may count twice."""
        if self.sent:
            tenant, run = self.rng.choice(self.sent)
            self.stores[tenant].runs.upsert(posts=[run])

    def step(self) -> None:
        if self.rng.random() < 0.08:
            self.resend()
        else:
            super().step()


@pytest.mark.parametrize("seed", [3, 4])
def test_charts_from_rollups_equal_charts_from_runs(store: Store, seed: int) -> None:
    world = HourlyWorld(store, seed)
    compared = 0
    for i in range(1, 161):
        world.step()
        if i % 80 == 0:
            _check_all(world.stores)
            compared += sum(_check_series(st) for st in world.stores)
    while world.pending:
        world.deliver()
    _check_all(world.stores)
    compared += sum(_check_series(st) for st in world.stores)
    assert compared >= 20  # many hours with runs were compared


def _row(values: dict[str, Any]) -> list[Any]:
    return [values.get(c) for c in RunTree.ROW_COLUMNS]


def test_journaled_runs_keep_the_rollups(store: Store) -> None:
    """Runs folded from the journal (the tracing writer's rows on the fast path; llm runs with
    usage and patches on the general path; the server's admitted batches) and then deleted."""
    t0 = int(T0.timestamp() * 1_000_000)
    rows, children = [], []
    for i in range(300):
        rid = str(uuid.uuid4())
        start = t0 + i * 97_000_000  # ~8 hours
        rows.append(_row({"id": rid, "trace_id": rid, "name": "r", "run_type": "chain",
                          "start_time": start, "end_time": start + 5,
                          "error": "boom" if i % 7 == 0 else None, "inputs": {"i": i},
                          "session_name": "journaled"}))
        cid = str(uuid.uuid4())
        children.append({"id": cid, "trace_id": rid, "parent_run_id": rid, "name": "m",
                         "run_type": "llm", "start_time": start + 10, "end_time": start + 20,
                         "dotted_order": None, "session_name": "journaled",
                         "extra": {"metadata": {"usage_metadata": {
                             "input_tokens": i, "output_tokens": 3,
                             "input_cost": 0.001 * (i % 5)}}}})
    store.journal.append_runs(rows, columns=RunTree.ROW_COLUMNS, extra=RunTree.ROW_EXTRA)
    store.settle()
    for c in children:  # their parents are stored: posted with a dotted order of their own
        parent = store.runs.read(c["parent_run_id"])
        c["dotted_order"] = f"{parent.dotted_order}.{dotted_segment_us(c['start_time'], c['id'])}"
        c["start_time"] = datetime.fromtimestamp(c["start_time"] / 1e6, tz=UTC)
        c["end_time"] = datetime.fromtimestamp(c["end_time"] / 1e6, tz=UTC)
    store.journal.admit(posts=children[:150])
    store.journal.append_runs(posts=children[150:])
    # patches: an error set late on some roots, and an end on others
    patches = [{"id": r[RunTree.ROW_COLUMNS.index("id")], "error": "late"} for r in rows[1:40:3]]
    store.journal.append_runs(patches=patches)
    project = store.projects.read(project_name="journaled", include_stats=True)
    assert project.run_count == 300 and project.total_tokens == sum(range(300)) + 900
    assert _check_series(store) >= 8
    _check_all([store])
    traces = [r[RunTree.ROW_COLUMNS.index("id")] for r in rows[::4]]
    store.runs.delete_traces(project.id, trace_ids=traces)
    assert _check_series(store) >= 8
    _check_all([store])
    store.projects.delete(project_id=project.id)
    _check_all([store])  # no rollup row of the deleted project is left


def test_a_window_not_made_of_whole_hours_is_counted_from_the_runs(store: Store) -> None:
    rid = str(uuid.uuid4())
    start = T0 + timedelta(minutes=90)
    store.runs.upsert(posts=[{"id": rid, "trace_id": rid, "name": "t", "run_type": "chain",
                              "start_time": start, "end_time": start + timedelta(seconds=3),
                              "session_name": "odd"}])
    pid = str(store.projects.read(project_name="odd").id)
    for lo, width in ((T0 + timedelta(minutes=30), 3600), (T0, 1800), (T0, 5400)):
        hi = lo + timedelta(hours=4)
        got = series(store, pid, start=lo, end=hi, bucket_seconds=width)
        want = scan_series(store, pid, start=lo, end=hi, bucket_seconds=width)
        _same_buckets(got, want, f"{lo} / {width}")
        assert sum(b.runs for b in got) == 1
        assert sum(len(b.latencies) for b in got) == 1
    # a run an hour before the window is in no bucket
    got = series(store, pid, start=T0 + 2 * HOUR, end=T0 + 3 * HOUR, bucket_seconds=3600)
    assert [b.runs for b in got] == [0]
    assert HOUR_US == 3600 * 1_000_000
