"""The journal: batches appended by assay's writers are folded, exactly once, before any read."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

from assay.client import Client
from assay.errors import NotFoundError, StoreError
from assay.store import Store
from assay.store._tables import journal, runs

from ._stored import journal_place
from .test_aggregates import _check_all

T0 = 1_700_000_000_000_000  # epoch microseconds


@pytest.fixture(autouse=True)
def _reads_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin what appends leave and what reads fold: no background folder in this
    process or the ones it starts (tests/store/test_fold_background.py tests that one)."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")


def _run(rid: str, *, parent: str | None = None, trace: str | None = None, start: int = T0,
         end: int | None = None, run_type: str = "chain", **extra: object) -> dict:
    run = {"id": rid, "trace_id": trace or rid, "parent_run_id": parent, "name": run_type,
           "run_type": run_type, "start_time": start, "inputs": {"q": rid[:4]}}
    if end is not None:
        run["end_time"] = end
        run["outputs"] = {"a": 1}
    run.update(extra)
    return run


@contextlib.contextmanager
def _no_fold(store: Store) -> Iterator[None]:
    """No fold runs inside the block: on PostgreSQL, the folders' advisory lock held (another
    test's server folds every workspace of the shared database); a SQLite file is the test's."""
    if store.dialect != "postgresql":
        yield
        return
    from assay.store._journal import _PG_LOCK

    with store.engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK})
            conn.commit()


def _same_as_recomputed(store: Store) -> None:
    """The aggregates the fold maintained equal a full scan of what it wrote."""
    assert _check_all([store]) > 0


def test_appended_runs_and_feedback_are_folded_before_reads(store: Store) -> None:
    root, llm = str(uuid.uuid4()), str(uuid.uuid4())
    store.journal.append_runs([
        _run(root, start=T0),
        _run(llm, parent=root, trace=root, start=T0 + 10, end=T0 + 900, run_type="llm",
             events=[{"name": "new_token", "time": "2023-11-14T22:13:20.000300+00:00"}],
             extra={"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"}},
             outputs={"usage_metadata": {"input_tokens": 30, "output_tokens": 12,
                                         "total_tokens": 42}}),
    ], default_project="journaled")
    # the root's end comes in a later batch, and feedback on it before the root is folded
    store.journal.append_runs(patches=[{"id": root, "end_time": T0 + 1000, "outputs": {"a": 2}}])
    store.journal.append_feedback([{"run_id": root, "key": "correct", "score": 1.0},
                                   {"run_id": root, "key": "label", "value": "good"}])
    assert store.journal.pending() == 5
    with store.read() as conn:  # nothing in runs yet: appending is all the writer paid for
        assert conn.execute(select(func.count()).select_from(runs).where(
            runs.c.tenant_id == store.tenant_id)).scalar() == 0

    got = {str(r.id): r for r in store.runs.list(trace_id=root)}
    assert store.journal.pending() == 0
    assert set(got) == {root, llm}
    assert got[root].status == "success" and got[root].outputs == {"a": 2}
    assert got[llm].prompt_tokens == 30 and got[llm].total_tokens == 42
    assert got[llm].first_token_time is not None and got[llm].total_cost is not None

    project = store.projects.read(project_name="journaled", include_stats=True)
    assert project.run_count == 1 and project.total_tokens == 42
    assert project.latency_p50 == pytest.approx(0.001)
    assert project.feedback_stats["correct"].avg == 1.0
    assert project.feedback_stats["label"].values == {"good": 1}
    fb = store.feedback.list(run_ids=[root])
    assert {f.key for f in fb} == {"correct", "label"}
    assert all(str(f.session_id) == str(project.id) for f in fb)  # adopted when the run came
    _same_as_recomputed(store)


def test_a_read_inside_a_transaction_folds_what_the_transaction_journaled(store: Store) -> None:
    """Whether the journal holds anything is asked on the transaction's own connection (on
    SQLite it is otherwise asked on another pooled one, which cannot see uncommitted rows)."""
    rid = str(uuid.uuid4())
    with store.transaction():
        store.journal.append_runs([_run(rid, end=T0 + 5)], default_project="in-txn")
        assert [str(r.id) for r in store.runs.list(trace_id=rid)] == [rid]
        assert store.journal.pending() == 0
    assert store.projects.read(project_name="in-txn", include_stats=True).run_count == 1


def test_a_journal_the_driver_cannot_read_is_reported_as_a_store_error(sqlite_url: str) -> None:
    """SQLite's quick look at the journal goes to the driver; what the driver refuses is asked
    again through the store, which names the problem as a StoreError."""
    base = Store.open(sqlite_url)
    try:
        base.journal.append_runs([_run(str(uuid.uuid4()), end=T0 + 5)])
        assert base.settle() == 1
        assert base.settle() == 0  # empty: nothing to fold, nothing opened for writing
        with base.engine.begin() as conn:
            conn.execute(text("DROP TABLE journal"))
        with pytest.raises(StoreError, match="journal"):
            base.settle()
    finally:
        base.close()


def test_evaluate_leaves_its_runs_journaled_and_the_first_read_folds_them(
        client: Client) -> None:
    """evaluate() returns once runs and feedback are durable, without indexing them: the store
    does that on the first read, and the figures are the same."""
    client.create_dataset("ds")
    client.create_examples(dataset_name="ds",
                           examples=[{"inputs": {"x": i}, "outputs": {"y": i}} for i in range(40)])
    from assay.evaluation import evaluate

    def correct(outputs: dict, reference_outputs: dict) -> bool:
        return outputs == reference_outputs

    res = evaluate(lambda inputs: {"y": inputs["x"] if inputs["x"] % 4 else -1}, data="ds",
                   evaluators=[correct], client=client)
    assert client.store.journal.pending() >= 80  # 40 runs + 40 feedback, not folded yet
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert client.store.journal.pending() == 0
    assert stats.run_count == 40
    assert stats.feedback_stats["correct"].avg == pytest.approx(30 / 40)
    _same_as_recomputed(client.store)


def test_concurrent_folds_apply_every_entry_exactly_once(store_url: str) -> None:
    base = Store.open(store_url)
    store = base.for_tenant(str(uuid.uuid4()))
    for b in range(30):
        posts = [_run(str(uuid.uuid4()), start=T0 + b * 100 + i, end=T0 + b * 100 + i + 7,
                      session_name="race") for i in range(20)]
        store.journal.append_runs(posts)
        # feedback gets its id when folded: a batch applied twice would count twice
        store.journal.append_feedback([{"run_id": p["id"], "key": "k", "score": 1}
                                       for p in posts])
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def settle() -> None:
        try:
            other = Store.open(store_url).for_tenant(store.tenant_id)  # its own engine
            barrier.wait()
            other.settle()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=settle) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    project = store.projects.read(project_name="race", include_stats=True)
    assert project.run_count == 600 and project.feedback_stats["k"].n == 600
    assert len(store.runs.list(project_ids=[project.id])) == 600
    assert store.journal.pending() == 0
    _same_as_recomputed(store)
    base.close()


def test_a_bad_item_is_dropped_loudly_and_its_batch_applied(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    good, bad = str(uuid.uuid4()), str(uuid.uuid4())
    no_start = {"id": bad, "name": "x", "run_type": "chain", "session_name": "p"}
    store.journal.append_runs([_run(good, end=T0 + 5, session_name="p"), no_start])
    store.journal.append_feedback([{"run_id": good, "key": "ok", "score": 1},
                                   {"run_id": good, "key": "ok2", "score": "not a number"}])
    with caplog.at_level(logging.WARNING, logger="assay.store"):
        assert [str(r.id) for r in store.runs.list(project_ids=None, trace_id=good)] == [good]
    assert bad in caplog.text and "start_time" in caplog.text
    assert "score" in caplog.text
    # counted by whichever folder applied the batch: this store's, or (on the shared
    # PostgreSQL database) a test server's background fold
    dropped = [line for line in caplog.text.splitlines() if "dropped journaled" in line]
    assert len([d for d in dropped if bad in d or "not a number" in d]) == 2, dropped
    assert store.journal.pending() == 0
    with pytest.raises(NotFoundError):
        store.runs.read(bad)
    assert [f.key for f in store.feedback.list(run_ids=[good])] == ["ok"]


def test_a_deleted_project_does_not_come_back_from_the_journal(store: Store) -> None:
    project = store.projects.create("short-lived")
    rid = str(uuid.uuid4())
    store.journal.append_runs([_run(rid, end=T0 + 5, session_id=str(project.id))])
    store.projects.delete(project_id=project.id)
    assert store.runs.list(trace_id=rid) == []
    assert [p.name for p in store.projects.list(name="short-lived")] == []


KILLED = r"""
import os, sys
from assay.client import Client
from assay.tracing import trace, tracing_context
client = Client(database_url=sys.argv[1])
with tracing_context(enabled=True, client=client, project_name="killed"):
    for i in range(25):
        with trace(f"r{i}"):
            pass
client.flush()       # durable: journaled
os._exit(0)          # no read, no clean exit: nothing folded
"""


def test_runs_journaled_by_a_killed_process_are_read_by_the_next(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    proc = subprocess.run([sys.executable, "-c", KILLED, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    client = Client(database_url=path)
    assert client.store.journal.pending() == 25
    names = sorted(r.name for r in client.list_runs(project_name="killed"))
    assert names == sorted(f"r{i}" for i in range(25))
    assert client.store.journal.pending() == 0


def test_a_batch_too_large_for_one_row_is_split_in_order_and_folded_whole(store: Store) -> None:
    store.journal.max_payload = 20_000  # ~20 runs of 1 KB inputs per row
    root = str(uuid.uuid4())
    posts = [_run(str(uuid.uuid4()), parent=root, trace=root, start=T0 + i, end=T0 + i + 1,
                  session_name="big", inputs={"blob": "x" * 1000, "i": i}) for i in range(100)]
    store.journal.append_runs([_run(root, session_name="big"), *posts],
                              patches=[{"id": root, "end_time": T0 + 500}])
    with journal_place(store).read() as conn:
        rows = conn.execute(select(journal.c["items"]).where(
            journal.c.tenant_id == store.tenant_id).order_by(journal.c.seq)).scalars().all()
    assert len(rows) > 4 and sum(rows) == 102  # several rows, every run in exactly one
    got = store.runs.list(trace_id=root)
    assert len(got) == 101 and sorted(r.inputs.get("i", -1) for r in got) == list(range(-1, 100))
    root_run = next(r for r in got if str(r.id) == root)
    assert root_run.status == "success"  # its patch, in the last row, came after its post


def test_admit_checks_now_what_a_direct_write_would_refuse(store: Store) -> None:
    """The server's ingest path: refused batches leave nothing; accepted ones are journaled."""
    from assay.errors import ConflictError, InvalidInputError, NotFoundError

    other = store.for_tenant(str(uuid.uuid4()))
    theirs = other.projects.create("theirs")
    taken = str(uuid.uuid4())
    other.runs.upsert(posts=[_run(taken, end=T0 + 5, session_id=str(theirs.id))])
    mine = str(uuid.uuid4())
    before = store.journal.pending()
    with pytest.raises(NotFoundError, match=str(theirs.id)):
        store.journal.admit([_run(mine, session_id=str(theirs.id))])
    with pytest.raises(ConflictError, match=taken):
        store.journal.admit([_run(mine, session_name="new-one")],
                            [{"id": taken, "end_time": T0 + 9}])
    nameless = {k: v for k, v in _run(mine).items() if k != "run_type"}
    with pytest.raises(InvalidInputError, match="run_type"):
        store.journal.admit([nameless])
    with pytest.raises(InvalidInputError, match="score"):
        store.journal.admit([_run(mine)], feedback=[{"run_id": mine, "key": "k", "score": "x"}])
    assert store.journal.pending() == before
    assert [p.name for p in store.projects.list(name="new-one")] == []  # rolled back with it
    # a post without a run type is fine when it completes a stored run
    store.runs.upsert(posts=[_run(mine, session_name="new-one")])
    assert store.journal.admit([nameless]) == 1
    assert other.runs.read(taken).outputs == {"a": 1}


def test_an_admitted_llm_run_whose_event_time_is_not_a_time_is_stored(store: Store) -> None:
    """Accepted means kept: admit takes events as they come, and the fold read a
    ``new_token`` time that is a list as an AttributeError and dropped the run (a 202 the
    server had already given). Now its first token is unknown and everything else stored."""
    rid = str(uuid.uuid4())
    post = {**_run(rid, end=T0 + 5, session_name="bad-times"), "run_type": "llm",
            "events": [{"name": "new_token", "time": [1]}, {"name": "new_token", "time": {}}],
            "extra": {"metadata": {"usage_metadata": {"input_tokens": 3, "output_tokens": 4}}}}
    assert store.journal.admit([post]) == 1
    run = store.runs.read(rid)
    assert run.total_tokens == 7 and run.first_token_time is None
    assert [e["time"] for e in run.events] == [[1], {}]  # kept as sent
    assert store.journal.dropped == 0


def test_admit_refuses_a_time_no_datetime_holds_and_keeps_a_token_time_out(store: Store
                                                                            ) -> None:
    """A start or end past the years 1-9999 is refused now, by name, with nothing kept (the
    fold could not insert it, nor a read turn it back into a datetime); an event time like it
    only leaves the first token unknown."""
    from assay.errors import InvalidInputError

    before = store.journal.pending()
    for field in ("start_time", "end_time"):
        rid = str(uuid.uuid4())
        with pytest.raises(InvalidInputError, match=f"{rid}: {field} is not a timestamp"):
            store.journal.admit([{**_run(rid, end=T0 + 5), field: 10**20}])
    assert store.journal.pending() == before
    rid = str(uuid.uuid4())
    post = {**_run(rid, end=T0 + 5), "run_type": "llm",
            "events": [{"name": "new_token", "time": 1e30}]}
    assert store.journal.admit([post]) == 1
    assert store.runs.read(rid).first_token_time is None
    assert store.journal.dropped == 0


_USAGE = {"input_tokens": 3, "output_tokens": 4}
# what senders put in an llm run's extra that admit takes as it comes (free-form metadata),
# and the tokens and whether a cost the stored run then has; each of these made the fold
# raise and drop the run after the server had accepted it
HOSTILE_EXTRAS: dict[str, tuple[dict[str, Any], int | None, bool]] = {
    "model name a list": ({"metadata": {"ls_provider": "openai", "ls_model_name": ["gpt-4o"],
                                        "usage_metadata": _USAGE}}, 7, False),
    "provider a dict": ({"metadata": {"ls_provider": {"a": 1}, "ls_model_name": "gpt-4o",
                                      "usage_metadata": _USAGE}}, 7, True),
    "invocation params a list": ({"metadata": {"usage_metadata": _USAGE},
                                  "invocation_params": ["x"]}, 7, False),
    "a count past 64 bits": ({"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o",
                                           "usage_metadata": {"input_tokens": 10**30,
                                                              "output_tokens": 4}}}, 4, True),
    "counts huge and negative": ({"metadata": {"usage_metadata": {"input_tokens": 1e308,
                                                                   "output_tokens": -5}}},
                                 None, False),
    "a cost that is not finite": ({"metadata": {"usage_metadata": {**_USAGE,
                                                                   "total_cost": 1e400}}},
                                  7, False),
}


@pytest.mark.parametrize("case", list(HOSTILE_EXTRAS))
def test_an_admitted_llm_run_with_odd_usage_is_stored_not_dropped(store: Store,
                                                                  case: str) -> None:
    extra, tokens, priced = HOSTILE_EXTRAS[case]
    rid = str(uuid.uuid4())
    post = {**_run(rid, end=T0 + 5, session_name="odd-usage"), "run_type": "llm",
            "extra": extra}
    assert store.journal.admit([post]) == 1
    run = store.runs.read(rid)
    assert run.total_tokens == tokens
    assert (run.total_cost is not None) == priced
    assert store.journal.dropped == 0


def test_an_id_another_workspace_stores_before_the_fold_is_dropped_loudly(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """The race admit cannot see: the late item is dropped at fold time, the owner's run and
    the rest of the late batch land."""
    other = store.for_tenant(str(uuid.uuid4()))
    contested, fine = str(uuid.uuid4()), str(uuid.uuid4())
    with _no_fold(store):  # (a background folder on a shared database must not come first)
        store.journal.admit([_run(contested, end=T0 + 5), _run(fine, end=T0 + 5)],
                            default_project="late")
        other.runs.upsert(posts=[_run(contested, end=T0 + 7, session_name="owner")])
    with caplog.at_level(logging.WARNING, logger="assay.store"):
        store.settle()
    # (logged by whichever folder applied it: on the shared PostgreSQL database that may be a
    # test server's background fold)
    assert any(contested in line and "dropped journaled" in line
               for line in caplog.text.splitlines())
    assert [str(r.id) for r in store.runs.list()] == [fine]
    assert other.runs.read(contested).end_time is not None
    assert other.projects.read(project_name="owner", include_stats=True).run_count == 1


def test_admitted_patches_keep_runs_where_their_post_put_them(store: Store) -> None:
    """A patch naming another project neither moves its run nor creates that project; a patch
    that comes before its post keeps the project it names for the run."""
    done, early = str(uuid.uuid4()), str(uuid.uuid4())
    store.journal.admit([_run(done, session_name="home")])
    store.journal.admit(patches=[{"id": done, "end_time": T0 + 9, "outputs": {"a": 2},
                                  "session_name": "elsewhere"}])
    store.journal.admit(patches=[{"id": early, "end_time": T0 + 9, "session_name": "late-post"}])
    store.journal.admit([_run(early, session_name="late-post")])
    home = store.projects.read(project_name="home", include_stats=True)
    assert home.run_count == 1 and store.runs.read(done).outputs == {"a": 2}
    assert store.projects.list(name="elsewhere") == []
    late = store.projects.read(project_name="late-post")
    assert store.runs.read(early).session_id == late.id and store.runs.read(early).end_time


def test_batches_are_stored_compressed_and_rows_of_older_versions_still_fold(
        store: Store) -> None:
    """Batches are zstd frames; rows older versions wrote (zlib-compressed, plain JSON) fold
    the same."""
    import json
    import zlib

    from sqlalchemy import insert

    rids = [str(uuid.uuid4()) for _ in range(300)]
    store.journal.append_runs([_run(r, end=T0 + 5, session_name="packed") for r in rids[:100]])
    with journal_place(store).read() as conn:
        stored = conn.execute(select(journal.c.payload).where(
            journal.c.tenant_id == store.tenant_id)).scalars().all()

    def plain(ids: list[str]) -> bytes:
        return json.dumps({"posts": [_run(r, end=T0 + 5, session_name="packed") for r in ids],
                           "patches": [], "default_project": "default"}).encode()

    assert len(stored) == 1 and stored[0][:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame
    assert len(stored[0]) * 5 < len(plain(rids[:100]))  # compressed
    with store.write() as conn:  # rows as previous versions wrote them
        for payload in (zlib.compress(plain(rids[100:200]), 1), plain(rids[200:])):
            conn.execute(insert(journal).values(tenant_id=store.tenant_id, kind="runs",
                                                items=100, created_at=T0, payload=payload))
    assert store.projects.read(project_name="packed", include_stats=True).run_count == 300
    assert store.journal.pending() == 0


def test_posts_journaled_as_lists_of_values_fold_like_the_dicts(store: Store) -> None:
    """A batch may carry posts as value lists with the column names once (the tracing
    writer's finished runs), mixed with dict posts: they are stored exactly as the dicts."""
    columns = ["id", "trace_id", "parent_run_id", "name", "run_type", "start_time", "inputs",
               "end_time", "outputs", "error", "tags", "extra", "session_name"]
    as_dicts, as_lists, mixed = [], [], []
    for kind, out in (("dicts", as_dicts), ("lists", as_lists), ("mixed", mixed)):
        root, child = str(uuid.uuid4()), str(uuid.uuid4())
        posts = [_run(root, end=T0 + 1000, error=None, tags=["t"], session_name=f"p-{kind}",
                      extra={"metadata": {"m": 1}}),
                 _run(child, parent=root, trace=root, start=T0 + 10, end=T0 + 500,
                      run_type="llm", error="boom", tags=[], session_name=f"p-{kind}",
                      extra={"metadata": {}})]
        rows = [[p.get(c) for c in columns] for p in posts]
        if kind == "dicts":
            store.journal.append_runs(posts)
        elif kind == "lists":
            store.journal.append_runs(rows, columns=columns)
        else:
            store.journal.append_runs([posts[0], rows[1]], columns=columns)
        out.extend([root, child])

    def stored(ids: list[str]) -> list[tuple]:
        got = {str(r.id): r for r in store.runs.list(trace_id=ids[0])}
        return [(r.name, r.run_type, r.status, r.error, r.tags, r.outputs, sorted(r.inputs),
                 r.metadata, r.latency, r.parent_run_id is not None)
                for r in (got[ids[0]], got[ids[1]])]

    expected = stored(as_dicts)
    assert expected[1][2] == "error" and expected[0][4] == ["t"] and expected[1][-1]
    assert stored(as_lists) == expected
    assert stored(mixed) == expected
    for kind in ("dicts", "lists", "mixed"):
        assert store.projects.read(project_name=f"p-{kind}", include_stats=True).run_count == 1
    _same_as_recomputed(store)


def test_feedback_journaled_as_lists_of_values_folds_like_the_dicts(store: Store) -> None:
    """An experiment's plain scores are journaled as value lists, what they share given once
    per batch, mixed with full rows: each is stored exactly as the same feedback as a dict."""
    from assay.evaluation._sink import SCORE_COLUMNS

    stored: dict[str, list[tuple]] = {}
    for kind in ("dicts", "lists", "mixed"):
        root, other = str(uuid.uuid4()), str(uuid.uuid4())
        store.journal.append_runs([_run(root, end=T0 + 1000, session_name=f"f-{kind}"),
                                   _run(other, end=T0 + 900, session_name=f"f-{kind}")])
        store.journal.fold()  # the project exists: its id is what the rows share
        project = store.projects.read(project_name=f"f-{kind}")
        shared = {"session_id": str(project.id), "feedback_source": {"type": "model"}}
        values = [[root, root, "correct", True], [other, other, "correct", 0.25]]
        rich = {"run_id": other, "trace_id": other, "session_id": str(project.id),
                "key": "note", "comment": "kept whole", "feedback_source": {"type": "model"}}
        if kind == "dicts":
            store.journal.append_feedback(
                [{**shared, **dict(zip(SCORE_COLUMNS, v, strict=True))} for v in values] + [rich])
        elif kind == "lists":
            store.journal.append_feedback(values, columns=SCORE_COLUMNS, defaults=shared)
            store.journal.append_feedback([rich])
        else:
            store.journal.append_feedback([values[0], rich, values[1]], columns=SCORE_COLUMNS,
                                          defaults=shared)
        rows = store.feedback.list(project_ids=[project.id])
        by_run = {root: 0, other: 1}
        stored[kind] = sorted(
            (by_run[str(f.run_id)], by_run[str(f.trace_id)], str(f.session_id) == str(project.id),
             f.key, f.score, f.comment, f.feedback_source.type if f.feedback_source else None)
            for f in rows)
        stats = store.projects.read(project_name=f"f-{kind}", include_stats=True)
        assert stats.feedback_stats["correct"].n == 2
        assert stats.feedback_stats["correct"].avg == pytest.approx(0.625)
    assert len(stored["dicts"]) == 3 and all(s[2] for s in stored["dicts"])
    assert stored["lists"] == stored["dicts"] and stored["mixed"] == stored["dicts"]
