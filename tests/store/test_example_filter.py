"""LangSmith's filter language on examples (``store.examples.list(filter=...)``), on SQLite and
PostgreSQL: what each function selects, versions and pagination with a filter, and filters
refused with the place of the mistake."""

from __future__ import annotations

import pytest

from assay.store import Store
from assay.store._run_filter import FilterError

ROWS = [
    {"inputs": {"q": "a", "n": 1}, "outputs": {"a": "x"}, "metadata": {"foo": "bar", "baz": 1,
                                                                       "deep": {"k": [1, 2]}}},
    {"inputs": {"q": "b", "n": 5}, "metadata": {"foo": "qux", "baz": 2.5, "flag": True}},
    {"inputs": {"q": "Refund please"}, "metadata": {"foo": "bar"}, "split": "test"},
    {"inputs": {"q": "d"}, "outputs": {"a": None}},
]


@pytest.fixture
def ds_id(store: Store) -> str:
    ds = store.datasets.create("f")
    store.examples.create_many(ROWS, dataset_id=ds.id)
    return str(ds.id)


@pytest.mark.parametrize(("flt", "want"), [
    ('exists(metadata, "baz")', ["a", "b"]),
    ("exists(metadata.deep.k)", ["a"]),
    ('exists(outputs, "a")', ["a", "d"]),
    ('eq(metadata.foo, "bar")', ["Refund please", "a"]),
    ('neq(metadata.foo, "bar")', ["b", "d"]),
    ("eq(metadata.foo, null)", ["d"]),
    ("eq(metadata.flag, true)", ["b"]),
    ("eq(metadata.baz, 1)", ["a"]),  # 1 is not true, nor 1.0 a string
    ("gt(metadata.baz, 1)", ["b"]),
    ("lte(inputs.n, 5)", ["a", "b"]),
    ('in(metadata.foo, ["qux", "nope"])', ["b"]),
    ('has(metadata, \'{"foo": "bar", "deep": {"k": [2]}}\')', ["a"]),
    ('not(has(metadata, \'{"foo": "bar"}\'))', ["b", "d"]),
    ('and(not(has(metadata, \'{"foo": "bar"}\')), exists(metadata, "baz"))', ["b"]),
    ('or(eq(inputs.q, "d"), search("REFUND"))', ["Refund please", "d"]),
    ('gt(created_at, "2000-01-01T00:00:00Z")', ["Refund please", "a", "b", "d"]),
])
def test_each_function_selects_what_it_says(store: Store, ds_id: str, flt: str,
                                            want: list[str]) -> None:
    got = store.examples.list(dataset_id=ds_id, filter=flt)
    assert sorted(e.inputs["q"] for e in got) == want


def test_filter_with_splits_versions_and_pages(store: Store, ds_id: str) -> None:
    assert [e.inputs["q"] for e in store.examples.list(
        dataset_id=ds_id, splits=["test"], filter='eq(metadata.foo, "bar")')] == ["Refund please"]
    before = store.datasets.version(ds_id).as_of
    (a,) = store.examples.list(dataset_id=ds_id, filter='eq(inputs.q, "a")')
    store.examples.update_many([{"id": a.id, "metadata": {"foo": "changed"}}])
    assert [e.inputs["q"] for e in store.examples.list(
        dataset_id=ds_id, filter='eq(metadata.foo, "bar")')] == ["Refund please"]
    assert sorted(e.inputs["q"] for e in store.examples.list(
        dataset_id=ds_id, filter='eq(metadata.foo, "bar")', as_of=before)) == [
            "Refund please", "a"]
    every = store.examples.list(dataset_id=ds_id, filter='exists(inputs, "q")')
    pages = [store.examples.list(dataset_id=ds_id, filter='exists(inputs, "q")', offset=o,
                                 limit=2) for o in (0, 2, 4)]
    assert [e.id for p in pages for e in p] == [e.id for e in every] and len(every) == 4


@pytest.mark.parametrize(("flt", "words"), [
    ("eq(metadata.foo", "ends where"),
    ('eq(size, 3)', "unknown attribute 'size'"),
    ('exists(tags, "x")', "works on metadata, inputs or outputs"),
    ('exists(metadata)', "takes a field and a key"),
    ('has(metadata, "not json")', "takes a JSON object"),
    ('gt(metadata.x, null)', "cannot compare with null"),
    ('eq(created_at, "yesterday")', "not an ISO 8601 time"),
    ('like(metadata.foo, "b%")', "unknown function 'like'"),
    ('eq(metadata.foo, "bar") extra', "unexpected text"),
])
def test_bad_filters_are_refused_before_reading(store: Store, ds_id: str, flt: str,
                                                words: str) -> None:
    with pytest.raises(FilterError, match=words) as err:
        store.examples.list(dataset_id=ds_id, filter=flt)
    assert "at character" in str(err.value)


HARD_META = [  # values a naive SQL comparison gets wrong: the predicate must still decide
    {"k": "plain"}, {"k": "a\x00b"}, {"k": "x\ud800y"}, {"k": "\ufdd0z"}, {"k": None},
    {"k": 1}, {"k": "1"}, {"k": True}, {"k": ["plain"]}, {"k": {"plain": 1}}, {"other": "plain"},
    {"a.b": "plain"}, {"dataset_split": "plain"}, {},
]


@pytest.mark.parametrize("flt", [
    'eq(metadata.k, "plain")', 'eq(metadata.k, "a\x00b")', 'eq(metadata.k, "x\ud800y")',
    'eq(metadata.k, "\ufdd0z")', 'eq(metadata.k, "1")', 'exists(metadata, "k")',
    "exists(metadata.k)", 'exists(metadata, "a.b")', 'eq(metadata.dataset_split, "plain")',
    'and(exists(metadata, "k"), neq(metadata.k, "plain"), eq(metadata.k, "1"))',
    'and(eq(metadata.other, "plain"), exists(metadata, "other"))',
])
def test_sql_prefilter_never_changes_the_result(store: Store, flt: str) -> None:
    """The conditions checked in SQL first (``metadata_prefilter``) give what the predicate
    alone gives (the same filter wrapped in ``or(...)``, which is never pushed down), through
    NUL, lone surrogates, the store's escape character, JSON null, numbers vs strings."""
    from assay.store._example_filter import metadata_prefilter

    ds = store.datasets.create("hard-meta")
    store.examples.create_many([{"inputs": {"i": i}, "metadata": m}
                                for i, m in enumerate(HARD_META)], dataset_id=ds.id)
    pushed = store.examples.list(dataset_id=ds.id, filter=flt)
    assert metadata_prefilter(f"or({flt})") == []
    alone = store.examples.list(dataset_id=ds.id, filter=f"or({flt})")
    assert [e.inputs["i"] for e in pushed] == [e.inputs["i"] for e in alone]
    assert pushed or flt.startswith('exists(metadata, "a.b")')  # each one matches something
    page = store.examples.list(dataset_id=ds.id, filter=flt, offset=1, limit=1)
    assert [e.inputs["i"] for e in page] == [e.inputs["i"] for e in alone][1:2]


def test_sql_prefilter_picks_the_top_level_metadata_conditions() -> None:
    from assay.store._example_filter import metadata_prefilter

    assert metadata_prefilter('and(eq(metadata.foo, "bar"), exists(metadata.x), '
                              'gt(outputs.s, 1), eq(metadata.n, 1), exists(metadata, "y"))') == [
        ("eq", "foo", "bar"), ("exists", "x", None), ("exists", "y", None)]
    for flt in ('or(eq(metadata.foo, "bar"))', 'not(exists(metadata, "k"))',
                'eq(metadata.a.b, "c")', 'exists(metadata, "a.b")', "eq(metadata.k, null)",
                'eq(metadata.dataset_split, "base")', 'eq(inputs.k, "v")'):
        assert metadata_prefilter(flt) == [], flt
