"""Session statistics read from the aggregates kept on write equal a full recomputation.

A seeded random mix of everything that writes runs or feedback (posts, separate patches,
patch-before-post, merged posts, errors, llm runs with usage/costs/new_token events, feedback
before and after its run, feedback replaced by id or updated, summary feedback, deletes, two
workspaces) runs on each backend; at checkpoints every session's statistics from
``session_stats`` must equal ``recompute_session_stats`` (which scans the rows) field by field.
"""

from __future__ import annotations

import math
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from assay.errors import InvalidInputError, NotFoundError
from assay.store import Store
from assay.store._stats import recompute_session_stats, session_stats
from assay.store._tables import feedback as feedback_table
from assay.store._tables import sessions

T0 = datetime(2025, 3, 1, tzinfo=UTC)


def _same(a: Any, b: Any, where: str) -> None:
    """Equal; floats up to rounding (sums added write by write vs in one pass). A stdev is
    compared as a variance: sqrt turns rounding noise of 1e-17 into 3e-9."""
    if where.endswith(".stdev") and a is not None and b is not None:
        assert math.isclose(a * a, b * b, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {a!r} != {b!r}"
    elif isinstance(b, dict):
        assert isinstance(a, dict) and set(a) == set(b), f"{where}: {a!r} != {b!r}"
        for k in b:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(b, float) and not isinstance(a, bool):
        assert a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), \
            f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _check_all(stores: list[Store]) -> int:
    """Compare both computations for every session of every workspace; return how many."""
    checked = 0
    for st in stores:
        with st.read() as conn:
            for row in conn.execute(select(sessions).where(sessions.c.tenant_id == st.tenant_id)):
                _same(session_stats(conn, row), recompute_session_stats(conn, row),
                      f"session {row.name}")
                checked += 1
            _check_hours(conn, st.tenant_id)
    return checked


def _check_hours(conn: Any, tenant: str) -> None:
    """The workspace's hourly rollups (``run_hours``) equal a GROUP BY over its runs: the same
    (session, hour) rows, zero rows aside, with the same sums."""
    from assay.store._aggregates import HOURLY, hourly_select
    from assay.store._tables import run_hours, runs

    def rows(result: Any) -> dict[tuple[str, int], tuple[Any, ...]]:
        out = {}
        for sid, hour, _tenant, roots, errors, tokens, cost, costed in result:
            if roots or errors or tokens or costed:
                out[(sid, int(hour))] = (int(roots), int(errors), int(tokens), int(costed),
                                         float(cost))
        return out

    kept = rows(conn.execute(select(*[run_hours.c[name] for name in HOURLY])
                             .where(run_hours.c.tenant_id == tenant)))
    wanted = rows(conn.execute(hourly_select(runs.c.tenant_id == tenant)))
    assert kept.keys() == wanted.keys(), sorted(kept.keys() ^ wanted.keys())
    for key, got in kept.items():
        _same(list(got[:4]), list(wanted[key][:4]), f"run_hours {key}")
        _same(got[4], wanted[key][4], f"run_hours {key}.total_cost")


class World:
    """Random operations on two workspaces of one database."""

    def __init__(self, store: Store, seed: int) -> None:
        self.rng = random.Random(seed)
        self.stores = [store, store.for_tenant(str(uuid.UUID(int=self.rng.getrandbits(128))))]
        self.projects = {0: ["p-a", "p-b", "p-c"], 1: ["q-a", "q-b"]}
        self.pending: list[tuple[int, str, dict]] = []  # (tenant, "post"|"patch", run)
        self.runs: dict[int, list[dict]] = {0: [], 1: []}  # every run made (sent or not)
        self.feedback: dict[int, list[str]] = {0: [], 1: []}
        self.clock = 0

    def _id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _time(self) -> datetime:
        self.clock += self.rng.randint(1, 5000)
        return T0 + timedelta(microseconds=self.clock * 1000 + self.rng.randint(0, 999))

    def _llm_extra(self) -> dict:
        r = self.rng
        usage: dict[str, Any] = {"input_tokens": r.randint(1, 500),
                                 "output_tokens": r.randint(0, 90)}
        pick = r.random()
        if pick < 0.4:
            usage["input_cost"] = r.choice([0.0, 0.25, 1e-6 * r.randint(1, 999)])
            if r.random() < 0.5:
                usage["output_cost"] = 1e-6 * r.randint(0, 999)
        meta: dict[str, Any] = {"usage_metadata": usage}
        if pick >= 0.7:  # no explicit cost: priced by genai-prices when the model is known
            meta.update(ls_provider="openai",
                        ls_model_name=r.choice(["gpt-4o-mini", "no-such-model-xyz"]))
        return {"metadata": meta}

    def new_trace(self) -> None:
        r = self.rng
        tenant = 0 if r.random() < 0.75 else 1
        project = r.choice(self.projects[tenant])
        root_id = self._id()
        start = self._time()
        root: dict[str, Any] = {"id": root_id, "trace_id": root_id, "name": "target",
                                "run_type": "chain", "start_time": start,
                                "inputs": {"q": root_id[:4]}, "session_name": project}
        runs = [root]
        for _ in range(r.randint(0, 3)):
            kind = r.choice(["llm", "llm", "tool", "chain"])
            cid = self._id()
            child: dict[str, Any] = {
                "id": cid, "trace_id": root_id, "parent_run_id": r.choice(runs)["id"],
                "name": kind, "run_type": kind,
                "start_time": start + timedelta(microseconds=r.randint(0, 5000)),
                "inputs": {}, "session_name": project}
            if kind == "llm":
                child["extra"] = self._llm_extra()
            elif r.random() < 0.3:  # usage on a non-llm run: never summed
                child["extra"] = {"metadata": {"usage_metadata": {"input_tokens": 7}}}
            if r.random() < 0.5:
                first = child["start_time"] + timedelta(microseconds=r.randint(1, 90_000))
                child["events"] = [{"name": "new_token", "time": first.isoformat()}]
            runs.append(child)
        for run in runs:
            end = run["start_time"] + timedelta(microseconds=r.randint(1, 3_000_000))
            done = {"end_time": end, "outputs": {"o": 1}}
            if r.random() < 0.1:
                done["error"] = r.choice(["boom", ""])
            mode = r.random()
            if mode < 0.4:  # merged post
                self.pending.append((tenant, "post", {**run, **done}))
            elif mode < 0.75:  # post, patch later
                self.pending.append((tenant, "post", run))
                self.pending.append((tenant, "patch", {"id": run["id"], "trace_id": root_id,
                                                       **done}))
            elif mode < 0.9:  # patch first (maybe naming another project), post later
                patch = {"id": run["id"], "trace_id": root_id, **done}
                if "parent_run_id" in run and r.random() < 0.5:
                    patch["parent_run_id"] = run["parent_run_id"]
                if r.random() < 0.6:
                    patch["session_name"] = r.choice(self.projects[tenant])
                self.pending.insert(0, (tenant, "patch", patch))
                self.pending.append((tenant, "post", run))
            elif mode < 0.95:  # a patch whose post never comes
                self.pending.append((tenant, "patch", {"id": run["id"], "trace_id": root_id,
                                                       "start_time": run["start_time"], **done}))
            else:  # a post that is never completed
                self.pending.append((tenant, "post", run))
            self.runs[tenant].append(run)

    def deliver(self) -> None:
        r = self.rng
        if not self.pending:
            return
        k = r.randint(1, min(len(self.pending), 12))
        picked = [self.pending.pop(r.randrange(len(self.pending))) for _ in range(k)]
        for tenant in (0, 1):
            posts = [run for t, kind, run in picked if t == tenant and kind == "post"]
            patches = [run for t, kind, run in picked if t == tenant and kind == "patch"]
            if posts or patches:  # a post and its patch in one call are merged
                self.stores[tenant].runs.upsert(posts=posts, patches=patches)

    def _feedback_item(self, tenant: int) -> dict[str, Any]:
        r = self.rng
        item: dict[str, Any] = {"key": r.choice(["correct", "grade", "note"]),
                                "score": r.choice([None, 0, 1, 0.5, True, 0.1 * r.randint(0, 10)]),
                                "value": r.choice([None, "A", "B", True, 3, {"x": 1}])}
        pick = r.random()
        runs = self.runs[tenant] or self.runs[0]
        if pick < 0.7 and runs:
            item["run_id"] = r.choice(runs)["id"]  # sent or not yet
            if r.random() < 0.1:
                item["project_id"] = self._project_id(tenant)
        elif pick < 0.8:
            item["run_id"] = self._id()  # a run that never comes
        else:
            item["project_id"] = self._project_id(tenant)  # summary feedback
        if item.get("project_id") is None and "run_id" not in item:
            item["run_id"] = self._id()
        if r.random() < 0.15 and self.feedback[tenant]:
            item["id"] = r.choice(self.feedback[tenant])  # replaced by id
        return item

    def _project_id(self, tenant: int) -> str | None:
        found = self.stores[tenant].projects.list()
        return str(self.rng.choice(found).id) if found else None

    def add_feedback(self) -> None:
        r = self.rng
        tenant = 0 if r.random() < 0.8 else 1
        items = [self._feedback_item(tenant) for _ in range(r.randint(1, 4))]
        if r.random() < 0.1:  # another workspace naming this one's runs and projects
            other = 1 - tenant
            items = [{**self._feedback_item(other), "id": None}]
        ids: set[str] = set()
        batch = []
        for it in items:
            it = {k: v for k, v in it.items() if v is not None or k in ("score", "value")}
            it["id"] = it.get("id") or self._id()
            if it["id"] in ids:
                continue
            ids.add(it["id"])
            batch.append(it)
        created = self.stores[tenant].feedback.create_many(batch, return_records=False)
        assert created == []
        for it in batch:
            if it["id"] not in self.feedback[tenant]:
                self.feedback[tenant].append(it["id"])

    def delete_feedback(self) -> None:
        tenant = 0 if self.rng.random() < 0.8 else 1
        if not self.feedback[tenant]:
            return
        fid = self.feedback[tenant].pop(self.rng.randrange(len(self.feedback[tenant])))
        st = self.stores[tenant]
        with st.read() as conn:
            exists = conn.execute(select(feedback_table.c.id).where(
                feedback_table.c.id == fid, feedback_table.c.tenant_id == st.tenant_id)).first()
        if exists:
            st.feedback.delete(fid)

    def update_feedback(self) -> None:
        r = self.rng
        tenant = 0 if r.random() < 0.8 else 1
        if not self.feedback[tenant]:
            return
        fid = r.choice(self.feedback[tenant])
        st = self.stores[tenant]
        with st.read() as conn:
            exists = conn.execute(select(feedback_table.c.id).where(
                feedback_table.c.id == fid, feedback_table.c.tenant_id == st.tenant_id)).first()
        if exists:  # a score, a label, both or neither change
            fields = r.sample([("score", r.choice([None, 0, 1, r.random(), True])),
                               ("value", r.choice([None, "A", "B", 3, {"x": 1}])),
                               ("comment", r.choice([None, "ok"]))], r.randint(0, 3))
            st.feedback.update(fid, **dict(fields))

    def delete_traces(self) -> None:
        r = self.rng
        tenant = 0 if r.random() < 0.8 else 1
        st = self.stores[tenant]
        projects = st.projects.list()
        if not projects:
            return
        project = r.choice(projects)
        traces = sorted({str(x.trace_id) for x in st.runs.list(project_ids=[project.id])})
        if not traces:
            return
        if r.random() < 0.5:
            st.runs.delete_traces(project.id, trace_ids=r.sample(traces, r.randint(1, len(traces))))
        else:
            st.runs.delete_traces(project.id, keep=r.sample(traces, r.randint(0, len(traces))))

    def delete_project(self) -> None:
        tenant = 0 if self.rng.random() < 0.8 else 1
        projects = self.stores[tenant].projects.list()
        if projects:
            self.stores[tenant].projects.delete(project_id=self.rng.choice(projects).id)

    def ingest_together(self) -> None:
        """Runs and feedback in one transaction, as the server's multipart ingest writes them."""
        st = self.stores[0]
        with st.transaction():
            self.new_trace()
            self.deliver()
            self.add_feedback()

    def step(self) -> None:
        ops = [(self.new_trace, 30), (self.deliver, 30), (self.add_feedback, 25),
               (self.delete_feedback, 4), (self.update_feedback, 5), (self.delete_traces, 4),
               (self.delete_project, 1),
               (self.ingest_together, 4)]
        fn = self.rng.choices([f for f, _ in ops], weights=[w for _, w in ops])[0]
        fn()


@pytest.mark.parametrize("seed", [1, 2])
def test_maintained_statistics_equal_a_recomputation(store: Store, seed: int) -> None:
    world = World(store, seed)
    checked = 0
    for i in range(1, 181):
        world.step()
        if i % 45 == 0:
            checked += _check_all(world.stores)
    while world.pending:
        world.deliver()
    checked += _check_all(world.stores)
    assert checked >= 10
    # the run exercised what it is meant to: streamed runs, costs, labels, summary feedback
    seen = {"stream": False, "cost": False, "labels": False, "summary": False}
    for st in world.stores:
        for p in st.projects.list(include_stats=True):
            seen["stream"] |= bool(p.streaming_rate)
            seen["cost"] |= p.total_cost is not None
            seen["labels"] |= any(fs.values for fs in (p.feedback_stats or {}).values())
            seen["summary"] |= bool(p.session_feedback_stats)
    assert all(seen.values()), seen


def test_feedback_before_its_run_is_counted_and_follows_the_run(store: Store) -> None:
    """Feedback sent before its run (the SDKs send them from different threads) counts once the
    run is stored, in the project the run's post names, even after a patch placed it elsewhere."""
    rid = str(uuid.uuid4())
    store.feedback.create_many([{"run_id": rid, "key": "correct", "score": 1, "value": "yes"}])
    store.runs.upsert(patches=[{"id": rid, "trace_id": rid, "start_time": T0,
                                "end_time": T0 + timedelta(seconds=2), "session_name": "early"}])
    early = store.projects.read(project_name="early", include_stats=True)
    assert early.run_count == 1 and early.feedback_stats["correct"].n == 1
    store.runs.upsert(posts=[{"id": rid, "trace_id": rid, "name": "t", "run_type": "chain",
                              "start_time": T0, "session_name": "late"}])
    early = store.projects.read(project_name="early", include_stats=True)
    late = store.projects.read(project_name="late", include_stats=True)
    assert early.run_count == 0 and early.feedback_stats == {}
    assert late.run_count == 1 and late.latency_p50 == 2.0
    assert late.feedback_stats["correct"].n == 1 and late.feedback_stats["correct"].avg == 1.0
    assert late.feedback_stats["correct"].values == {"yes": 1}
    # the post adopted it: the row now names the run's project
    assert [str(f.session_id) for f in store.feedback.list(run_ids=[rid])] == [str(late.id)]
    _check_all([store])


def test_replaced_and_deleted_feedback_and_deleted_traces_leave_no_trace(store: Store) -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    posts = [{"id": i, "trace_id": i, "name": "t", "run_type": "chain", "session_name": "x",
              "start_time": T0 + timedelta(seconds=n), "end_time": T0 + timedelta(seconds=n + 1),
              "error": "bad" if n == 2 else None} for n, i in enumerate(ids)]
    store.runs.upsert(posts=posts)
    fid = str(uuid.uuid4())
    store.feedback.create_many([{"id": fid, "run_id": ids[0], "key": "k", "score": 0.0,
                                 "value": "B"}])
    store.feedback.create_many([{"id": fid, "run_id": ids[0], "key": "k", "score": 1.0,
                                 "value": "A"}])
    s = store.projects.read(project_name="x", include_stats=True)
    assert s.feedback_stats["k"].n == 1 and s.feedback_stats["k"].values == {"A": 1}
    assert s.error_rate == pytest.approx(1 / 3)
    assert s.last_run_start_time == T0 + timedelta(seconds=2)
    store.runs.delete_traces(s.id, trace_ids=[ids[2]])  # the latest root goes
    s = store.projects.read(project_name="x", include_stats=True)
    assert s.run_count == 2 and s.error_rate == 0.0
    assert s.last_run_start_time == T0 + timedelta(seconds=1)
    store.feedback.delete(fid)
    s = store.projects.read(project_name="x", include_stats=True)
    assert s.feedback_stats == {}
    store.runs.delete_traces(s.id, keep=[])
    s = store.projects.read(project_name="x", include_stats=True)
    assert s.run_count == 0 and s.last_run_start_time is None and s.error_rate is None
    _check_all([store])


def test_updated_feedback_changes_only_what_is_given_and_the_statistics_follow(
        store: Store) -> None:
    rid = str(uuid.uuid4())
    store.runs.upsert(posts=[{"id": rid, "trace_id": rid, "name": "t", "run_type": "chain",
                              "session_name": "u", "start_time": T0,
                              "end_time": T0 + timedelta(seconds=1)}])
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    store.feedback.create_many([
        {"id": a, "run_id": rid, "key": "k", "score": 0.0, "value": "bad", "comment": "first",
         "correction": {"want": 1}},
        {"id": b, "run_id": rid, "key": "k", "score": 1.0, "value": "good"}])
    before = store.feedback.read(a)

    after = store.feedback.update(a, score=True)  # only the score
    assert after.score == 1.0 and after.value == "bad" and after.comment == "first"
    assert after.correction == {"want": 1} and after.created_at == before.created_at
    assert after.modified_at >= before.modified_at and after.key == "k"
    stats = store.projects.read(project_name="u", include_stats=True).feedback_stats["k"]
    assert stats.n == 2 and stats.avg == 1.0 and stats.values == {"bad": 1, "good": 1}

    store.feedback.update(a, value="good", comment=None, correction=None)  # None clears
    after = store.feedback.read(a)
    assert after.value == "good" and after.comment is None and after.correction is None
    assert after.score == 1.0
    stats = store.projects.read(project_name="u", include_stats=True).feedback_stats["k"]
    assert stats.values == {"good": 2}

    store.feedback.update(a, score=0)
    stats = store.projects.read(project_name="u", include_stats=True).feedback_stats["k"]
    assert stats.avg == 0.5
    after = store.feedback.update(b, score=None)  # a cleared score leaves the average
    assert after.score is None and after.value == "good"
    stats = store.projects.read(project_name="u", include_stats=True).feedback_stats["k"]
    assert stats.n == 2 and stats.avg == 0.0
    after = store.feedback.read(a)

    # bad input names what is wrong, and nothing changes
    for changes, words in (({"key": "other"}, "'key'"), ({"score": "high"}, "score"),
                           ({"comment": 3}, "comment")):
        with pytest.raises(InvalidInputError, match=words):
            store.feedback.update(a, **changes)
    assert store.feedback.read(a) == after
    with pytest.raises(NotFoundError):
        store.feedback.update(str(uuid.uuid4()), score=1)
    other = store.for_tenant(f"other-{uuid.uuid4().hex[:8]}")
    with pytest.raises(NotFoundError):  # another workspace's feedback is not found there
        other.feedback.update(a, score=0)
    assert store.feedback.read(a).score == 0.0
    _check_all([store])


def test_feedback_updated_before_its_run_counts_as_updated(store: Store) -> None:
    rid, fid = str(uuid.uuid4()), str(uuid.uuid4())
    store.feedback.create_many([{"id": fid, "run_id": rid, "key": "k", "score": 0, "value": "x"}])
    store.feedback.update(fid, score=1, value="y")
    store.runs.upsert(posts=[{"id": rid, "trace_id": rid, "name": "t", "run_type": "chain",
                              "session_name": "late-u", "start_time": T0}])
    stats = store.projects.read(project_name="late-u", include_stats=True).feedback_stats["k"]
    assert stats.n == 1 and stats.avg == 1.0 and stats.values == {"y": 1}
    _check_all([store])


def test_concurrent_writers_keep_the_aggregates_exact(store: Store) -> None:
    """Posts, patches of the same runs, feedback before/after its run and deletes from several
    threads at once (PostgreSQL runs them truly concurrently) end with exact statistics."""
    import threading

    rng = random.Random(7)
    traces = [[str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(2)]
              for _ in range(60)]
    errors: list[BaseException] = []

    def post(part: list[list[str]]) -> None:
        for root, child in part:
            start = T0 + timedelta(seconds=rng.random() * 100)
            store.runs.upsert(posts=[
                {"id": root, "trace_id": root, "name": "t", "run_type": "chain",
                 "start_time": start, "session_name": "race"},
                {"id": child, "trace_id": root, "parent_run_id": root, "name": "m",
                 "run_type": "llm", "start_time": start, "session_name": "race",
                 "events": [{"name": "new_token",
                             "time": (start + timedelta(milliseconds=5)).isoformat()}],
                 "extra": {"metadata": {"usage_metadata": {
                     "input_tokens": 3, "output_tokens": 2, "input_cost": 0.5}}}}])

    def patch(part: list[list[str]]) -> None:
        for root, child in part:
            store.runs.upsert(patches=[
                {"id": i, "trace_id": root, "end_time": T0 + timedelta(seconds=200),
                 "start_time": T0, "session_name": "race", "error": "x" if i == child else None}
                for i in (root, child)])

    def rate(part: list[list[str]]) -> None:
        for root, _ in part:
            fid = str(uuid.uuid5(uuid.NAMESPACE_URL, root))
            store.feedback.create_many([{"id": fid, "run_id": root, "key": "ok", "score": 0.5,
                                         "value": "mid"}], return_records=False)
            store.feedback.create_many([{"id": fid, "run_id": root, "key": "ok", "score": 1,
                                         "value": "hi"}], return_records=False)

    def guard(fn: Any, part: list[list[str]]) -> None:
        try:
            fn(part)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(fn, traces[k::2]))
               for fn in (post, patch, rate) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    s = store.projects.read(project_name="race", include_stats=True)
    assert s.run_count == 60 and s.streaming_rate == 1.0
    assert s.feedback_stats["ok"].n == 60 and s.feedback_stats["ok"].values == {"hi": 60}
    assert s.total_cost == pytest.approx(30.0) and s.total_tokens == 300
    _check_all([store])
