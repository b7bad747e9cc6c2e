"""A fresh experiment runs its first examples while its project row is written (``Creation``).

The store is locked by another connection for the whole run, so the row cannot be written
before the last example: the examples still run, nothing naming the experiment is stored
before its row exists (a reader folding meanwhile makes no placeholder of it), and when the
row cannot be written at all the experiment fails and leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from assay import aevaluate, evaluate
from assay.client import Client
from assay.errors import NotFoundError
from assay.store import Store, sqlite_driver
from assay.store._queue import queue_path

# the stores' own SQLite: two copies of SQLite must not open one file in one process
sqlite3 = sqlite_driver()

N = 40


def _setup(sqlite_url: str) -> tuple[Store, Client, str, Path]:
    store = Store.open(sqlite_url)
    client = Client(store=store)
    ds = client.create_dataset("d")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i}, "outputs": {"y": i}} for i in range(N)])
    return store, client, str(ds.id), Path(sqlite_url.removeprefix("sqlite:///"))


def _target(all_called: threading.Event):  # type: ignore[no-untyped-def]
    calls = []

    async def target(inputs: dict) -> dict:
        calls.append(1)
        if len(calls) == N:
            all_called.set()
        await asyncio.sleep(0.002)
        return {"y": inputs["x"]}

    return target


def matches(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


def test_examples_run_while_the_row_is_written_and_nothing_names_it_early(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the other reader below folds, not this process's background folder
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    store, client, _, path = _setup(sqlite_url)
    all_called = threading.Event()
    lock = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    lock.execute("BEGIN IMMEDIATE")  # no one else writes until this commits
    seen: dict[str, int] = {}
    folds: list[int] = []
    stop = threading.Event()

    def release() -> None:
        assert all_called.wait(30)  # every example ran ...
        seen["projects"] = lock.execute(  # ... while its project did not exist yet
            "SELECT count(*) FROM sessions WHERE name LIKE 'exp-%'").fetchone()[0]
        seen["journal"] = lock.execute("SELECT count(*) FROM journal").fetchone()[0]
        if os.path.exists(queue_path(str(path))):  # a SQLite file's journal
            queue = sqlite3.connect(queue_path(str(path)))
            seen["journal"] += queue.execute("SELECT count(*) FROM journal").fetchone()[0]
            queue.close()
        lock.execute("COMMIT")

    def fold_meanwhile() -> None:  # another reader, folding whatever is journaled
        while not stop.is_set():
            folds.append(store.settle())
        folds.append(store.settle())  # what came after its last look (on a busy machine)

    threads = [threading.Thread(target=release), threading.Thread(target=fold_meanwhile)]
    for t in threads:
        t.start()
    try:
        res = asyncio.run(aevaluate(_target(all_called), data="d", evaluators=[matches],
                                    client=client, max_concurrency=8, experiment_prefix="exp"))
    finally:
        all_called.set()
        stop.set()
        for t in threads:
            t.join()
    assert seen == {"projects": 0, "journal": 0}
    assert sum(folds) > 0  # the other reader did fold this experiment's runs
    exp = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert exp.id == res.experiment_id and exp.run_count == N
    assert exp.feedback_stats["matches"].n == N  # type: ignore[index]
    assert exp.metadata["dataset_splits"] == ["base"] and exp.end_time is not None
    assert [p.name for p in client.list_projects()] == [res.experiment_name]  # no placeholder
    lock.close()
    store.close()


def test_a_row_that_cannot_be_written_fails_the_experiment_and_stores_nothing(
        sqlite_url: str) -> None:
    store, client, ds_id, path = _setup(sqlite_url)
    all_called = threading.Event()
    lock = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    lock.execute("BEGIN IMMEDIATE")

    def delete_the_dataset() -> None:  # once the examples ran, before the row is written
        assert all_called.wait(30)
        lock.execute("DELETE FROM examples WHERE dataset_id = ?", (ds_id,))
        lock.execute("DELETE FROM datasets WHERE id = ?", (ds_id,))
        lock.execute("COMMIT")

    t = threading.Thread(target=delete_the_dataset)
    t.start()
    try:
        with pytest.raises(NotFoundError, match=ds_id):
            asyncio.run(aevaluate(_target(all_called), data="d", evaluators=[matches],
                                  client=client, max_concurrency=8, experiment_prefix="exp"))
    finally:
        all_called.set()
        t.join()
    client.flush()
    store.settle()
    assert list(client.list_projects()) == []  # no experiment, no placeholder holding its runs
    assert store.journal.pending() == 0
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM runs").scalar() == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM feedback").scalar() == 0
    # and the client goes on storing other runs
    other = client.create_dataset("d2")
    client.create_examples(dataset_id=other.id, examples=[{"inputs": {"x": 1}}])
    ok = evaluate(lambda inputs: {"y": inputs["x"]}, data="d2", client=client)
    assert client.read_project(project_name=ok.experiment_name, include_stats=True).run_count == 1
    lock.close()
    store.close()


def test_a_cancelled_experiment_still_gets_its_row_and_its_runs(sqlite_url: str) -> None:
    """Cancelled mid-run (its row possibly not written yet): the row is written, the runs that
    started are stored (ended by the cancellation), nothing is left held or unfolded."""
    store, client, _, _ = _setup(sqlite_url)
    started = threading.Event()

    async def slow(inputs: dict) -> dict:
        started.set()
        await asyncio.sleep(30)
        return {}

    async def main() -> None:
        task = asyncio.ensure_future(aevaluate(slow, data="d", client=client, max_concurrency=4,
                                               experiment_prefix="cut"))
        while not started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    client.flush()
    (exp,) = list(client.list_projects())
    assert exp.name.startswith("cut-") and exp.end_time is None  # stopped, not ended
    roots = list(client.list_runs(project_id=exp.id, is_root=True))
    assert 1 <= len(roots) <= 4 and all("CancelledError" in (r.error or "") for r in roots)
    assert store.journal.pending() == 0
    store.close()


def test_an_earlier_experiment_is_folded_before_the_next_one_s_first_example(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its fold must not run beside the next experiment's examples (it would slow them and
    skew the latencies that experiment measures): what is left of it is folded first. (With
    the background folder off, so that something is left.)"""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    store, client, _, _ = _setup(sqlite_url)
    evaluate(lambda inputs: {"y": inputs["x"]}, data="d", evaluators=[matches], client=client)
    assert store.journal.pending() > 0  # the first experiment's runs wait to be folded
    pending_at_first_call: list[int] = []

    def target(inputs: dict) -> dict:
        if not pending_at_first_call:
            pending_at_first_call.append(store.journal.pending())
        return {"y": inputs["x"]}

    evaluate(target, data="d", evaluators=[matches], client=client)
    assert pending_at_first_call == [0]
    store.close()


def test_the_row_and_the_rest_of_the_dataset_follow_the_launch_of_the_first_examples(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What can follow the first examples does: when every worker has started its first
    example, the experiment's row is not written yet and no example past the first page has
    been read (neither competed with their launch); both come after, and the experiment is
    complete."""
    from assay.evaluation import _data, _stream

    streams: list[_stream.ExampleStream] = []

    class Recorded(_stream.ExampleStream):  # the real stream, only remembered
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)
            streams.append(self)

    monkeypatch.setattr(_data, "ExampleStream", Recorded)
    store, client, ds_id, path = _setup(sqlite_url)
    client.create_examples(dataset_id=ds_id, examples=[
        {"inputs": {"x": i}, "outputs": {"y": i}} for i in range(N, 400)])  # > one page
    bound = 8
    seen_at_launch: list[tuple[int, int]] = []
    started = 0

    async def target(inputs: dict) -> dict:
        nonlocal started
        started += 1
        if started == 1:
            time.sleep(0.3)  # the loop held, the interpreter free: other threads could run
        if started == bound:  # the last worker's first example
            raw = sqlite3.connect(path)  # not through the store: a read there would fold
            (rows,) = raw.execute("SELECT count(*) FROM sessions").fetchone()
            raw.close()
            seen_at_launch.append((rows, len(streams[0]._items)))
        await asyncio.sleep(0.001)
        return {"y": inputs["x"]}

    results = asyncio.run(aevaluate(target, data="d", evaluators=[matches], client=client,
                                    max_concurrency=bound))
    assert seen_at_launch == [(0, 128)]
    stats = client.read_project(project_name=results.experiment_name, include_stats=True)
    assert stats.run_count == 400 and stats.feedback_stats["matches"].n == 400
    store.close()
