"""data=: dataset name / id / Dataset / examples / dicts; as_of and splits pin what runs."""

from __future__ import annotations

import pytest

from assay import evaluate
from assay.client import Client
from assay.errors import InvalidInputError, NotFoundError


def _echo(inputs: dict) -> dict:
    return {"x": inputs["x"]}


def _xs(res) -> list[int]:
    return [r["example"].inputs["x"] for r in res]


def test_dataset_by_name_id_object_and_examples(client: Client) -> None:
    ds = client.create_dataset("d")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"x": i}} for i in range(3)])
    examples = list(client.list_examples(dataset_id=ds.id))
    for data, want in [("d", [0, 1, 2]), (str(ds.id), [0, 1, 2]), (ds.id, [0, 1, 2]),
                       (ds, [0, 1, 2]), (examples, [0, 1, 2]), (examples[1:], [1, 2])]:
        res = evaluate(_echo, data=data, client=client)
        assert _xs(res) == want
        exp = client.read_project(project_id=res.experiment_id)
        assert str(exp.reference_dataset_id) == str(ds.id)


def test_dicts_become_a_stored_dataset(client: Client) -> None:
    res = evaluate(_echo, data=({"inputs": {"x": i}, "outputs": {"x": i}} for i in (5, 3, 9)),
                   client=client, experiment_prefix="gen")
    assert _xs(res) == [5, 3, 9]  # in the order given
    exp = client.read_project(project_id=res.experiment_id)
    stored = list(client.list_examples(dataset_id=exp.reference_dataset_id))
    assert sorted(e.inputs["x"] for e in stored) == [3, 5, 9]
    assert all(r["run"].reference_example_id == r["example"].id for r in res)


def test_as_of_and_splits(client: Client) -> None:
    ds = client.create_dataset("v")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": 0}, "split": "train"}, {"inputs": {"x": 1}, "split": "test"},
        {"inputs": {"x": 2}, "split": ["train", "test"]}])
    v1 = client.update_dataset_tag(dataset_id=ds.id, tag="v1")
    ex = list(client.list_examples(dataset_id=ds.id))
    client.update_example(ex[0].id, inputs={"x": 100})
    client.create_example({"x": 3}, dataset_id=ds.id, split="test")

    now = evaluate(_echo, data="v", client=client)
    assert _xs(now) == [100, 1, 2, 3]
    old = evaluate(_echo, data="v", client=client, as_of="v1")
    assert _xs(old) == [0, 1, 2]
    meta = client.read_project(project_id=old.experiment_id).metadata
    assert meta["dataset_version"] == v1.as_of.isoformat()
    assert meta["dataset_splits"] == ["test", "train"]
    at_time = evaluate(_echo, data="v", client=client, as_of=v1.as_of)
    assert _xs(at_time) == [0, 1, 2]
    test = evaluate(_echo, data="v", client=client, splits=["test"], num_repetitions=2)
    assert _xs(test) == [1, 2, 3] * 2
    meta = client.read_project(project_id=test.experiment_id).metadata
    assert meta["dataset_splits"] == ["test"] and meta["num_repetitions"] == 2
    with pytest.raises(InvalidInputError, match="no examples in split"):
        evaluate(_echo, data="v", client=client, splits=["nope"])
    with pytest.raises(NotFoundError, match="v9"):
        evaluate(_echo, data="v", client=client, as_of="v9")


def test_bad_data(client: Client) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        evaluate(_echo, data=[], client=client)
    with pytest.raises(InvalidInputError, match="'inputs'"):
        evaluate(_echo, data=[{"x": 1}], client=client)
    with pytest.raises(InvalidInputError, match="dataset name or id"):
        evaluate(_echo, data={"inputs": {}}, client=client)
    with pytest.raises(InvalidInputError, match="as_of and splits"):
        evaluate(_echo, data=[{"inputs": {"x": 1}}], client=client, splits=["a"])
    with pytest.raises(InvalidInputError, match="give data"):
        evaluate(_echo, client=client)
    with pytest.raises(NotFoundError, match="'missing'"):
        evaluate(_echo, data="missing", client=client)


def test_a_stored_dataset_streams_in_order_with_its_splits(client: Client) -> None:
    """A fresh experiment starts while the examples are still read (``ExampleStream``): every
    example runs once, rows keep dataset order across pages and repetitions, and the split
    names recorded come from the store as the full list would give them."""
    from assay.evaluation._data import _split_names, load_dataset
    from assay.evaluation._stream import ExampleStream

    ds = client.create_dataset("big")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i}, "split": ["train"] if i % 3 else ["test", "hard"]}
        for i in range(700)])
    streamed = load_dataset(client, str(ds.id), as_of=None, splits=None, stream=True)
    assert isinstance(streamed.examples, ExampleStream) and len(streamed.examples) == 700
    listed = load_dataset(client, str(ds.id), as_of=None, splits=None)
    assert streamed.splits == _split_names(listed.examples) == ["hard", "test", "train"]
    assert [e.id for e in streamed.examples] == [e.id for e in listed.examples]
    assert streamed.examples[699].id == listed.examples[699].id
    with pytest.raises(IndexError):
        streamed.examples[700]

    res = evaluate(_echo, data="big", client=client, num_repetitions=2, max_concurrency=8)
    assert _xs(res) == list(range(700)) * 2
    exp = client.read_project(project_id=res.experiment_id, include_stats=True)
    assert exp.run_count == 1400 and exp.metadata["dataset_splits"] == ["hard", "test", "train"]
    only = load_dataset(client, str(ds.id), as_of=None, splits=["hard"], stream=True)
    assert len(only.examples) == 234 and only.splits == ["hard"]


def test_a_failing_example_reader_fails_the_consumer_not_silently() -> None:
    from assay.errors import StoreError
    from assay.evaluation._stream import ExampleStream
    from assay.schemas import Example

    def pages():
        yield [Example(id="00000000-0000-0000-0000-000000000001", inputs={"x": 1},
                       dataset_id="00000000-0000-0000-0000-000000000002",
                       created_at="2026-01-01T00:00:00Z")]
        raise RuntimeError("disk gone")

    stream = ExampleStream(3, pages())
    assert stream[0].inputs == {"x": 1}
    with pytest.raises(StoreError, match="disk gone"):
        list(stream)


def _pages(n_pages: int, taken: list[int]):  # type: ignore[no-untyped-def]
    """One example per page; ``taken`` records the pages read."""
    from assay.schemas import Example

    for p in range(n_pages):
        taken.append(p)
        yield [Example(id=f"00000000-0000-0000-0000-{p:012d}", inputs={"page": p},
                       dataset_id="00000000-0000-0000-0000-000000000009",
                       created_at="2026-01-01T00:00:00Z")]


def test_the_reader_waits_after_the_first_page_until_started_or_outrun(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Set-up after the first page (which the caller reads), and the launch of the first
    examples, run without the reader: examples of the first page are handed out without
    waking it; ``start()`` (or asking past what is read) sends it on. A stream nobody reads
    still ends, and gives its connection back, after ``_START_WAIT``."""
    import threading
    import time

    from assay.evaluation import _stream

    taken: list[int] = []
    it = _pages(3, taken)
    stream = _stream.ExampleStream(3, it, next(it))  # the caller reads the first page
    assert stream[0].inputs == {"page": 0}
    time.sleep(0.2)
    assert taken == [0]  # nothing more while only the first page is asked for
    stream.start()
    assert [e.inputs["page"] for e in stream] == [0, 1, 2] and taken == [0, 1, 2]

    taken = []
    it = _pages(3, taken)
    outrun = _stream.ExampleStream(3, it, next(it))
    assert outrun[2].inputs == {"page": 2} and taken == [0, 1, 2]  # past the first page

    monkeypatch.setattr(_stream, "_START_WAIT", 0.05)
    closed = threading.Event()

    def then_closed():  # type: ignore[no-untyped-def]
        yield from _pages(2, [])
        closed.set()

    _stream.ExampleStream(2, then_closed())  # never read
    assert closed.wait(5)


def test_the_reader_keeps_a_window_ready_and_reads_the_rest_after_a_long_pause(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Started, the reader keeps ``AHEAD`` examples ready beyond the last asked for, a page
    at a time as the consumer comes closer (its work spread over the experiment, not all at
    its start); a pause of ``_START_WAIT`` without a request ends the pacing."""
    import time

    from assay.evaluation import _stream

    def settled(taken: list[int]) -> int:  # pages read once the reader has paused
        before = -1
        while len(taken) != before:
            before = len(taken)
            time.sleep(0.1)
        return len(taken)

    monkeypatch.setattr(_stream, "AHEAD", 4)
    monkeypatch.setattr(_stream, "_START_WAIT", 3.0)
    taken: list[int] = []
    it = _pages(40, taken)
    stream = _stream.ExampleStream(40, it, next(it))
    stream.start()
    assert settled(taken) == 4  # AHEAD ready beyond index 0: paused
    for i in range(10):  # the consumer comes closer: a page at a time, about AHEAD ahead
        assert stream[i].inputs["page"] == i
    assert 10 + 4 // 2 <= settled(taken) <= 10 + 4
    assert [e.inputs["page"] for e in stream] == list(range(40)) and len(taken) == 40

    monkeypatch.setattr(_stream, "_START_WAIT", 0.1)
    taken = []
    it = _pages(40, taken)
    idle = _stream.ExampleStream(40, it, next(it))
    idle.start()
    deadline = time.monotonic() + 5
    while len(taken) < 40 and time.monotonic() < deadline:  # nobody asks: read at once
        time.sleep(0.01)
    assert len(taken) == 40 and len(idle) == 40


def test_a_consumer_wakes_the_paused_reader_once_per_page_not_once_per_example(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the paused reader's mark, the first request wakes it; the examples handed out
    before it gets to run must not each notify it again (a lock and a notify per example)."""
    from assay.evaluation import _stream

    monkeypatch.setattr(_stream, "AHEAD", 64)
    stream = _stream.ExampleStream(640, _pages(640, []))
    asks = []
    real_ask = stream._ask

    def counted(i: int) -> None:
        asks.append(i)
        real_ask(i)

    stream._ask = counted  # type: ignore[method-assign]
    assert [e.inputs["page"] for e in stream] == list(range(640))
    # a pause per AHEAD/2 examples, each ended by one request (plus one when the consumer
    # runs out of what is read): about 40; one per example past each mark would be ~600
    assert len(asks) < 100, len(asks)
