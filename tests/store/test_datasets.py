"""Datasets and examples on SQLite and PostgreSQL: CRUD, filters, atomic batches, versions."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import event

from assay.client import Client
from assay.errors import ConflictError, ExampleValidationError, InvalidInputError, NotFoundError


def _make(client: Client, name: str = "HelloDataset", n: int = 3):
    ds = client.create_dataset(name, description="greetings")
    client.create_examples(
        dataset_id=ds.id,
        examples=[{"inputs": {"input": f"n{i}"}, "outputs": {"expected": f"Hello n{i}"},
                   "metadata": {"idx": i, "lang": "en" if i % 2 == 0 else "fr"},
                   "split": "train" if i < n - 1 else "test"} for i in range(n)],
    )
    return ds


def test_dataset_crud(client: Client) -> None:
    ds = client.create_dataset("HelloDataset", description="d", metadata={"team": "qa"})
    assert ds.name == "HelloDataset" and ds.example_count == 0
    assert client.read_dataset(dataset_name="HelloDataset").id == ds.id
    assert client.read_dataset(dataset_id=str(ds.id)).description == "d"
    assert [d.name for d in client.list_datasets()] == ["HelloDataset"]
    assert list(client.list_datasets(dataset_name_contains="Nope")) == []
    updated = client.update_dataset(ds.id, name="Renamed", description="new")
    assert (updated.name, updated.description, updated.metadata) == ("Renamed", "new",
                                                                     {"team": "qa"})
    client.delete_dataset(dataset_name="Renamed")
    assert not client.has_dataset(dataset_name="Renamed")
    with pytest.raises(NotFoundError, match="Renamed"):
        client.read_dataset(dataset_name="Renamed")


def test_duplicate_dataset_name_is_a_conflict(client: Client) -> None:
    client.create_dataset("dup")
    with pytest.raises(ConflictError, match="'dup' already exists"):
        client.create_dataset("dup")
    other = client.create_dataset("other")
    with pytest.raises(ConflictError, match="'dup'"):
        client.update_dataset(other.id, name="dup")


def test_list_examples_by_name_id_split_metadata_and_pages(client: Client) -> None:
    ds = _make(client, n=5)
    by_id = list(client.list_examples(dataset_id=ds.id))
    by_name = list(client.list_examples(dataset_name="HelloDataset"))
    assert [e.id for e in by_id] == [e.id for e in by_name]
    assert [e.inputs["input"] for e in by_id] == [f"n{i}" for i in range(5)]
    assert [e.inputs["input"] for e in client.list_examples(dataset_id=ds.id,
                                                            splits=["test"])] == ["n4"]
    assert len(list(client.list_examples(dataset_id=ds.id, splits=["train", "test"]))) == 5
    assert [e.inputs["input"] for e in client.list_examples(
        dataset_id=ds.id, metadata={"lang": "fr"})] == ["n1", "n3"]
    assert [e.inputs["input"] for e in client.list_examples(
        dataset_id=ds.id, metadata={"idx": 2})] == ["n2"]
    page = list(client.list_examples(dataset_id=ds.id, offset=1, limit=2))
    assert [e.inputs["input"] for e in page] == ["n1", "n2"]
    assert client.read_dataset(dataset_id=ds.id).example_count == 5
    one = client.read_example(by_id[0].id)
    assert one.outputs == {"expected": "Hello n0"} and one.split == ["train"]


def test_create_examples_is_atomic_and_names_the_bad_index(client: Client) -> None:
    ds = client.create_dataset("atomic")
    batch = [{"inputs": {"q": i}, "outputs": {"a": i}} for i in range(1000)]
    batch[537] = {"inputs": "not a mapping", "outputs": {}}
    with pytest.raises(ExampleValidationError) as info:
        client.create_examples(dataset_id=ds.id, examples=batch)
    assert info.value.index == 537
    assert "index 537" in str(info.value) and "'inputs' must be a mapping" in str(info.value)
    assert list(client.list_examples(dataset_id=ds.id)) == []

    batch[537] = {"inputs": {"q": 537}, "split": ["ok", 3]}
    with pytest.raises(ExampleValidationError, match="index 537.*split"):
        client.create_examples(dataset_id=ds.id, examples=batch)
    assert list(client.list_examples(dataset_id=ds.id)) == []

    batch[537] = {"inputs": {"q": 537}}
    assert client.create_examples(dataset_id=ds.id, examples=batch)["count"] == 1000
    assert client.read_dataset(dataset_id=ds.id).example_count == 1000


def test_duplicate_example_ids_rejected_without_partial_write(client: Client) -> None:
    ds = client.create_dataset("ids")
    ex_id = str(uuid.uuid4())
    client.create_example({"q": 1}, dataset_id=ds.id, example_id=ex_id)
    with pytest.raises(ExampleValidationError, match="index 1.*already exists"):
        client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"q": 2}},
                                                           {"inputs": {"q": 3}, "id": ex_id}])
    assert len(list(client.list_examples(dataset_id=ds.id))) == 1


def test_unknown_dataset_and_bad_ids_are_clear_errors(client: Client) -> None:
    with pytest.raises(NotFoundError, match="'missing' not found"):
        client.create_examples(dataset_name="missing", examples=[{"inputs": {}}])
    with pytest.raises(InvalidInputError, match="dataset_id must be a UUID"):
        list(client.list_examples(dataset_id="not-a-uuid"))
    with pytest.raises(InvalidInputError, match="give dataset_id or dataset_name"):
        client.read_dataset()


def test_as_of_returns_the_dataset_as_it_was(client: Client) -> None:
    ds = _make(client, n=3)
    v1 = client.read_dataset_version(dataset_id=ds.id, as_of=datetime.now(UTC))
    client.update_dataset_tag(dataset_id=ds.id, tag="v1")
    before = {str(e.id): e.inputs for e in client.list_examples(dataset_id=ds.id)}
    first, second, third = list(client.list_examples(dataset_id=ds.id))

    client.update_example(first.id, inputs={"input": "changed"}, split="test")
    client.delete_example(second.id)
    client.create_example({"input": "new"}, dataset_id=ds.id)

    now = {e.inputs["input"] for e in client.list_examples(dataset_id=ds.id)}
    assert now == {"changed", "n2", "new"}
    for as_of in ("v1", v1.as_of):
        then = {str(e.id): e.inputs for e in client.list_examples(dataset_id=ds.id, as_of=as_of)}
        assert then == before
    assert [e.inputs["input"] for e in client.list_examples(
        dataset_id=ds.id, as_of="v1", splits=["test"])] == ["n2"]
    assert client.read_example(first.id, as_of="v1").inputs == {"input": "n0"}
    assert client.read_example(first.id).inputs == {"input": "changed"}
    with pytest.raises(NotFoundError):
        client.read_example(second.id)
    assert client.read_example(second.id, as_of="v1").inputs == {"input": "n1"}

    versions = list(client.list_dataset_versions(dataset_id=ds.id))
    assert versions[0].as_of > v1.as_of
    assert [v.tags for v in versions if v.as_of == v1.as_of] == [["v1"]]
    latest = client.read_dataset_version(dataset_id=ds.id, tag="v1")
    assert latest.as_of == v1.as_of and latest.tags == ["v1"]
    with pytest.raises(NotFoundError, match="tag 'nope'"):
        list(client.list_examples(dataset_id=ds.id, as_of="nope"))


def test_stream_gives_each_version_its_time_count_and_splits_in_one_pass(client: Client) -> None:
    """``stream`` reads a version's time, example count and split names in one statement (an
    experiment waits for it): each must equal what the separate reads give, at every version
    of a history with edits, a split change, a delete and an addition, with and without a
    split filter."""
    store = client._backend
    ds = _make(client, n=4)  # train: n0 n1 n2, test: n3
    versions = [client.read_dataset_version(dataset_id=ds.id, tag="latest").as_of]
    first, second, third, _ = list(client.list_examples(dataset_id=ds.id))
    client.update_example(first.id, inputs={"input": "changed"}, split="test")
    versions.append(client.read_dataset_version(dataset_id=ds.id, tag="latest").as_of)
    client.delete_example(second.id)
    versions.append(client.read_dataset_version(dataset_id=ds.id, tag="latest").as_of)
    client.create_example({"input": "new"}, dataset_id=ds.id, split=["dev", "test"])
    client.update_example(third.id, metadata={"edited": True})
    versions.append(client.read_dataset_version(dataset_id=ds.id, tag="latest").as_of)
    assert len(set(versions)) == 4

    for version in [*versions, None, "latest"]:
        for splits in (None, ["test"], ["train", "dev"], ["nope"]):
            at, count, names, pages = store.examples.stream(ds.id, version=version,
                                                            splits=splits)
            stored = [ex for page in pages for ex in page]
            # what an experiment reads of each at once, then the whole Example when asked
            streamed = [ex.model() for ex in stored]
            expected = list(client.list_examples(dataset_id=ds.id, as_of=at, splits=splits))
            assert [(s.id_text, s.inputs, s.outputs) for s in stored] == [
                (str(e.id), e.inputs, e.outputs) for e in expected]
            want_at = client.read_dataset_version(
                dataset_id=ds.id, as_of=version if isinstance(version, datetime) else None,
                tag=None if isinstance(version, datetime) else "latest").as_of
            assert at == want_at, (version, splits)
            assert count == len(expected) == len(streamed), (version, splits)
            assert streamed == expected
            assert names == sorted({s for ex in expected for s in ex.split or ['base']})


def test_moving_a_tag_repoints_it(client: Client) -> None:
    ds = _make(client, n=1)
    client.update_dataset_tag(dataset_id=ds.id, tag="prod")
    client.create_example({"input": "second"}, dataset_id=ds.id)
    assert len(list(client.list_examples(dataset_id=ds.id, as_of="prod"))) == 1
    client.update_dataset_tag(dataset_id=ds.id, tag="prod")
    assert len(list(client.list_examples(dataset_id=ds.id, as_of="prod"))) == 2


def test_versions_never_collide_on_fast_changes(client: Client) -> None:
    ds = client.create_dataset("fast")
    stamps = []
    for i in range(5):
        ex = client.create_example({"i": i}, dataset_id=ds.id)
        stamps.append(ex.modified_at)
    assert stamps == sorted(set(stamps))
    for i, t in enumerate(stamps):
        assert len(list(client.list_examples(dataset_id=ds.id, as_of=t))) == i + 1


def test_workspaces_do_not_see_each_other(store) -> None:  # type: ignore[no-untyped-def]
    a = Client(store=store)
    b = Client(store=store.for_tenant(str(uuid.uuid4())))
    ds = a.create_dataset("shared-name")
    b.create_dataset("shared-name")  # same name in another workspace is fine
    with pytest.raises(NotFoundError):
        b.read_dataset(dataset_id=ds.id)
    with pytest.raises(NotFoundError):
        b.create_examples(dataset_id=ds.id, examples=[{"inputs": {}}])
    ex = a.create_example({"x": 1}, dataset_id=ds.id)
    with pytest.raises(NotFoundError):
        b.read_example(ex.id)
    with pytest.raises(NotFoundError):
        b.delete_example(ex.id)
    assert a.read_example(ex.id).inputs == {"x": 1}


def test_timestamps_are_utc_and_ordered(client: Client) -> None:
    ds = client.create_dataset("times")
    t0 = time.time()
    ex = client.create_example({"x": 1}, dataset_id=ds.id)
    assert ex.created_at.tzinfo is not None
    assert abs(ex.created_at.timestamp() - t0) < 5


def test_a_dataset_streams_in_index_order_without_sorting_it_first(sqlite_url: str) -> None:
    """The examples' reading order has an index: SQLite returns the first page without
    sorting the whole dataset (an experiment starts on it), and the pages are in ``list``
    order at the version they were asked for."""
    from sqlalchemy.dialects import sqlite

    from assay.store import Store

    store = Store.open(sqlite_url)
    client = Client(store=store)
    ds = client.create_dataset("order")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"i": i}} for i in range(300)])
    first = client.read_dataset_version(dataset_id=ds.id, tag="latest").as_of
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"i": 300}}])
    at, count, names, pages = store.examples.stream(ds.id, version=first)
    assert (at, count, names) == (first, 300, ["base"])
    streamed = [ex.model() for page in pages for ex in page]
    assert streamed == list(client.list_examples(dataset_id=ds.id, as_of=first))

    q = store.examples._query(str(ds.id), as_of_us=2**62).compile(dialect=sqlite.dialect())
    with store.engine.connect() as conn:
        plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {q}", tuple(q.params[k] for k in q.positiontup)))
    assert "ix_examples_dataset_order" in plan and "TEMP B-TREE" not in plan, plan

    # what an experiment runs before its first example: the current version's size and
    # splits from an index alone, then the first page in index order
    seen: list[tuple[str, tuple]] = []

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        seen.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", record)
    at, count, names, pages = store.examples.stream(ds.id, version="latest", checked=True)
    assert len(next(pages)) == 128
    pages.close()
    event.remove(store.engine, "before_cursor_execute", record)
    assert (count, names) == (301, ["base"])

    def plan_of(sql: str, params: tuple) -> str:
        with store.engine.connect() as conn:
            return " ".join(str(row[-1]) for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {sql}", params))

    (page_sql, page_params), = [x for x in seen if "ORDER BY" in x[0]]
    plan = plan_of(page_sql, page_params)
    assert "ix_examples_dataset_order" in plan and "TEMP B-TREE" not in plan, plan
    (statement, params), = [x for x in seen if "count(" in x[0]]
    plan = plan_of(statement, params)
    assert "COVERING INDEX ix_examples_dataset_live" in plan and "TEMP B-TREE" not in plan, plan
    store.close()


def test_dataset_splits_listed_and_updated_as_new_versions(client: Client) -> None:
    ds = _make(client, n=4)  # train x3, test x1
    assert client.list_dataset_splits(dataset_id=ds.id) == ["test", "train"]
    client.update_dataset_tag(dataset_id=ds.id, tag="before")
    first, second, *_ = list(client.list_examples(dataset_id=ds.id))

    client.update_dataset_splits(dataset_id=ds.id, split_name="hard",
                                 example_ids=[first.id, second.id, first.id])
    assert client.list_dataset_splits(dataset_name=ds.name) == ["hard", "test", "train"]
    assert client.read_example(first.id).split == ["train", "hard"]
    assert {e.id for e in client.list_examples(dataset_id=ds.id, splits=["hard"])} == \
        {first.id, second.id}
    assert client.list_dataset_splits(dataset_id=ds.id, as_of="before") == ["test", "train"]

    client.update_dataset_splits(dataset_id=ds.id, split_name="train", example_ids=[first.id],
                                 remove=True)
    assert client.read_example(first.id).split == ["hard"]
    client.update_dataset_splits(dataset_id=ds.id, split_name="hard", example_ids=[first.id],
                                 remove=True)
    assert client.read_example(first.id).split == ["base"]  # in no split: base, as new ones
    versions = len(list(client.list_dataset_versions(dataset_id=ds.id)))
    client.update_dataset_splits(dataset_id=ds.id, split_name="hard", example_ids=[second.id])
    assert len(list(client.list_dataset_versions(dataset_id=ds.id))) == versions  # no change

    other = _make(client, "Other", n=1)
    stranger = next(iter(client.list_examples(dataset_id=other.id)))
    with pytest.raises(NotFoundError, match=str(stranger.id)):  # all or nothing
        client.update_dataset_splits(dataset_id=ds.id, split_name="x",
                                     example_ids=[second.id, stranger.id])
    assert "x" not in client.read_example(second.id).split
    with pytest.raises(InvalidInputError, match="split_name"):
        client.update_dataset_splits(dataset_id=ds.id, split_name=" ", example_ids=[second.id])
    with pytest.raises(NotFoundError):
        client.list_dataset_splits(dataset_name="nope")


def test_langsmith_arguments_assay_cannot_honour_are_refused_by_name(client: Client) -> None:
    ds = _make(client, n=2)
    client.update_dataset_tag(dataset_id=ds.id, tag="t")
    # arguments that would change what is returned or stored: refused, never dropped
    for call, words in (
        (lambda: list(client.list_examples(dataset_id=ds.id, foo=1)),
         r"list_examples\(\) in assay does not support foo="),
        (lambda: client.create_dataset("x", transformations=[{"path": ["a"]}]), "transformations="),
        (lambda: list(client.list_datasets(data_type="chat")), "data_type="),
        (lambda: list(client.list_projects(dataset_version="latest")), "dataset_version="),
        (lambda: client.update_examples(updates=[], example_ids=["x"], inputs=[{}]),
         "example_ids=, inputs="),
        (lambda: list(client.list_runs(project_name="p", thread_id="t")), "thread_id="),
    ):
        with pytest.raises(InvalidInputError, match=words):
            call()
    assert [d.name for d in client.list_datasets()] == [ds.name]  # nothing was created
    # arguments that only shape the answer pass; None is as if not given
    assert len(list(client.list_examples(dataset_id=ds.id, include_attachments=True))) == 2
    client.create_project("runs-here")
    assert list(client.list_runs(project_name="runs-here", select=["id"], filter=None)) == []
    assert len(list(client.list_dataset_versions(dataset_id=ds.id))) >= 1
    assert len(list(client.list_dataset_versions(dataset_id=ds.id, limit=1))) == 1
    # feedback by its source's type (a judge's "model", the API's "api": none recorded)
    run_id = str(uuid.uuid4())
    client.create_run("scored", {"q": 1}, "chain", id=run_id, project_name="runs-here")
    client.flush()
    client.create_feedback(run_id, "judge", score=1, feedback_source_type="model")
    client.create_feedback(run_id, "human", score=0)
    assert [f.key for f in client.list_feedback(feedback_source_type="model")] == ["judge"]
    assert [f.key for f in client.list_feedback(run_ids=[run_id],
                                                feedback_source_type=["api"])] == ["human"]
