"""The tracing writer's dotted orders derived in C (``_cencode.fill_orders``, through
``_fold_columns.fill_orders``) against the Python loop it stands in for (``_FILL`` None).

C takes the usual items and hands the first it does not take back to the loop, so for every
batch both must leave the same orders in the same items and the same runs without one (their
parents looked up in the store, or warned about): checked on a traced batch as the writer
journals it, on hand-picked items C must decline, and on ~2,000 batches mutated at random.
"""

from __future__ import annotations

import copy
import logging
import random
import uuid
from typing import Any

import pytest
from compiled_paths import is_in_use, needs_c

from assay._ids import dotted_segment_us, new_id_text
from assay.store import Store
from assay.store import _fold_columns as fc

_NOW = 1_764_420_000_123_456  # 2025-11-29, epoch microseconds
_C = fc._FILL  # taken before any test sets it to None


def _item(rid: Any, parent: str | None, start: Any = _NOW, dotted: Any = None) -> list[Any]:
    item: list[Any] = [None] * fc._WIDTH
    item[fc._ID], item[fc._PARENT], item[fc._DOTTED], item[fc._START] = rid, parent, dotted, start
    item[fc.WRITER_COLUMNS.index("trace_id")] = rid if parent is None else "t"
    return item


def _trace_batch(roots: int = 50) -> list[list[Any]]:
    """Roots each with a child and a grandchild, in the writer's order (a parent first)."""
    out = []
    for k in range(roots):
        r, c, g = new_id_text(), new_id_text(), new_id_text()
        out += [_item(r, None, _NOW + k * 1_000), _item(c, r, _NOW + k * 1_000 + 7),
                _item(g, c, _NOW + k * 1_000 + 9)]
    return out


def _order_of(item: Any) -> Any:
    if isinstance(item, dict):
        return item.get("dotted_order")
    return item[fc._DOTTED] if len(item) == fc._WIDTH else None


def _both(store: Store, batch: list[Any], monkeypatch: pytest.MonkeyPatch,
          caplog: pytest.LogCaptureFixture) -> tuple[Any, Any]:
    """(items, warnings, error) after fill_orders with C, then without, each on a copy (an
    error the loop raises, on a parent id of another type among those to look up or a start
    past what ``time.gmtime`` takes, must be raised either way)."""
    got = []
    for fill in (_C, None):
        monkeypatch.setattr(fc, "_FILL", fill)
        items = copy.deepcopy(batch)
        caplog.clear()
        error = None
        with caplog.at_level(logging.WARNING, logger="assay.store"), store.read() as conn:
            try:
                fc.fill_orders(conn, store.tenant_id, items)
            except (TypeError, OverflowError) as exc:
                error = f"{type(exc).__name__}: {exc}"
        # the orders' UTF-8 too: a str C built wrong can still compare equal to the right one
        encoded = [_order_of(item).encode() if isinstance(_order_of(item), str) else None
                   for item in items]
        got.append((items, [r.getMessage() for r in caplog.records], error, encoded))
    return got[0], got[1]


def test_c_takes_a_traced_batch_whole_with_the_orders_python_gives(
        store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    batch = _trace_batch()
    if is_in_use(_C, "assay.store._cencode"):
        known: dict[str, str] = {}
        items = copy.deepcopy(batch)
        assert _C(items, known, 0, fc._WIDTH, fc._ID, fc._PARENT, fc._DOTTED,
                        fc._START) == len(items)  # none handed back
        root, child, grandchild = items[:3]
        seg = dotted_segment_us(_NOW, root[fc._ID])
        assert root[fc._DOTTED] == seg and known[root[fc._ID]] == seg
        assert grandchild[fc._DOTTED] == ".".join((
            seg, dotted_segment_us(_NOW + 7, child[fc._ID]),
            dotted_segment_us(_NOW + 9, grandchild[fc._ID])))
    c, py = _both(store, batch, monkeypatch, caplog)
    assert c == py and c[2] is None and all(item[fc._DOTTED] for item in c[0])


def test_from_an_index_on_and_back_at_the_first_it_does_not_take() -> None:
    fill = _C
    if not is_in_use(fill, "assay.store._cencode"):
        return
    batch = _trace_batch(2)
    batch.insert(3, _item(new_id_text(), None, 1.5))  # a float start: the loop's to settle
    known: dict[str, str] = {}
    args = (fc._WIDTH, fc._ID, fc._PARENT, fc._DOTTED, fc._START)
    assert fill(batch, known, 0, *args) == 3
    assert batch[3][fc._DOTTED] is None and batch[4][fc._DOTTED] is None
    assert fill(batch, known, 4, *args) == len(batch)
    assert batch[6][fc._DOTTED].startswith(batch[4][fc._DOTTED] + ".")
    with pytest.raises(TypeError):
        fill(tuple(batch), known, 0, *args)
    with pytest.raises(ValueError):
        fill(batch, known, 0, 3, fc._ID, fc._PARENT, fc._DOTTED, fc._START)


def test_c_keeps_the_orders_a_framework_gave_and_knows_them(
        store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """LangGraph's runs (and the other frameworks') come with their orders (``RunTree``
    makes them): C takes such a batch whole, leaves each order as it is and knows it, so a
    later item of the writer's (order None) extends it."""
    batch = _trace_batch(20)
    for item in batch:
        parent = item[fc._PARENT]
        seg = dotted_segment_us(item[fc._START], item[fc._ID])
        item[fc._DOTTED] = seg if parent is None else f"{_by_id(batch, parent)[fc._DOTTED]}.{seg}"
    given = [item[fc._DOTTED] for item in batch]
    late = _item(new_id_text(), batch[-1][fc._ID], _NOW + 11)  # a child journaled without one
    batch.append(late)
    if is_in_use(_C, "assay.store._cencode"):
        known: dict[str, str] = {}
        items = copy.deepcopy(batch)
        assert _C(items, known, 0, fc._WIDTH, fc._ID, fc._PARENT, fc._DOTTED,
                  fc._START) == len(items)  # none handed back
        assert [item[fc._DOTTED] for item in items[:-1]] == given
        assert all(known[item[fc._ID]] is item[fc._DOTTED] for item in items)
        assert items[-1][fc._DOTTED] == f"{given[-1]}.{dotted_segment_us(_NOW + 11, late[fc._ID])}"
    c, py = _both(store, batch, monkeypatch, caplog)
    assert c == py and c[2] is None and c[1] == []


def _by_id(batch: list[Any], rid: str) -> list[Any]:
    return next(item for item in batch if item[fc._ID] == rid)


# unusual items: C hands back all but a given order (which it keeps and knows, as the loop
# does); the loop settles each as before
_ODD: list[Any] = [
    lambda r, p: _item(r, None, True),  # a bool start: not an int to the loop either
    lambda r, p: _item(r, None, 1.5),
    lambda r, p: _item(r, None, None),
    lambda r, p: _item(r, None, "2026-01-01T00:00:00"),
    lambda r, p: _item(r, None, -5),  # before 1970
    lambda r, p: _item(r, None, 999_999),  # the first second of 1970
    lambda r, p: _item(r, None, 253_402_300_800_000_000),  # year 10000
    lambda r, p: _item(r, None, 10 ** 30),  # past 64 bits
    lambda r, p: _item(uuid.UUID(r), None),  # an id that is not text (JSON has none: C's care)
    lambda r, p: _item("é-" + r, None),  # non-ASCII id
    lambda r, p: _item(r, p, dotted=f"20250101T000000000000Z{p}.x"),  # given: kept, known
    lambda r, p: _item(r, p, dotted="ünïcode"),  # a non-ASCII order its children extend
    lambda r, p: _item(r, p, dotted=5),  # given, not text: kept; its children the loop's
    lambda r, p: _item(uuid.UUID(r), p, dotted="x"),  # given, an id not text: the loop's
    lambda r, p: _item(r, str(uuid.uuid4())),  # a parent nowhere: looked up, then warned
    lambda r, p: _item(r, "stored-parent"),  # a parent in the store
    lambda r, p: [r, None],  # not the writer's width
    lambda r, p: {"id": r, "parent_run_id": p, "start_time": _NOW},  # a post dict
]


def _mutated(rng: random.Random) -> list[Any]:
    batch = _trace_batch(rng.randint(1, 6))
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(batch) + 1)
        parent = str(fc._id_of(batch[rng.randrange(len(batch))]))  # an earlier item's id
        odd = rng.choice(_ODD)(new_id_text(), parent)
        batch.insert(at, odd)
        if rng.random() < 0.5 and isinstance(odd, list) and len(odd) == fc._WIDTH \
                and isinstance(odd[fc._ID], str):  # a child of the odd one, after it
            batch.insert(at + 1, _item(new_id_text(), odd[fc._ID], _NOW + 3))
    if rng.random() < 0.2:
        rng.shuffle(batch)  # children before their parents: the loop's waiting list
    return batch


@needs_c
def test_c_and_python_leave_the_same_orders_on_mutated_batches(
        store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    stored = str(uuid.uuid4())
    store.runs.upsert(posts=[{"id": stored, "name": "stored", "run_type": "chain",
                              "start_time": "2026-11-29T05:30:38.123456+00:00"}])
    rng = random.Random(45)
    for _ in range(2000):
        batch = _mutated(rng)
        for item in batch:  # "stored-parent" stands for the stored run's id
            if isinstance(item, list) and len(item) == fc._WIDTH \
                    and item[fc._PARENT] == "stored-parent":
                item[fc._PARENT] = stored
        c, py = _both(store, batch, monkeypatch, caplog)
        assert c == py, batch
