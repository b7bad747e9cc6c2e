"""The fold of this process takes the copy of a batch it journaled, and stores the same rows."""

from __future__ import annotations

import datetime as dt
import gc
import math
import os
import random
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from assay import _json
from assay.store import Store, _recent
from assay.store._fold_columns import WRITER_COLUMNS
from assay.store._journal import _payload, _unpack, decode

from ._stored import journal_place

pytestmark = pytest.mark.skipif(_recent._PLAIN is None, reason="the C module is not built "
                                "(ASSAY_PURE_PYTHON): nothing is kept, every batch is decoded")

T0 = 1_700_000_000_000_000


@pytest.fixture(autouse=True)
def _reads_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reads fold (no background folder), and each test starts with nothing kept."""
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    _recent.clear()


def _decoded(value: Any) -> Any:
    """``value`` through the journal's JSON, as a fold in another process reads it."""
    return _payload(_unpack(_json.dumpb(value)))


def _plain_value(rng: random.Random, depth: int = 0) -> Any:
    scalars = [None, True, False, 0, -1, 2**63 - 1, -(2**63), 0.1, -0.0, 5e-324, 1e308,
               rng.uniform(-1e6, 1e6), rng.random(), "", "plain", "ünï©ødé 🎉", "nul\x00in",
               "lone \ud800 surrogate", "\u2028\ufdd0", 'quote " back \\ slash']
    if depth > 3 or rng.random() < 0.5:
        return rng.choice(scalars)
    if rng.random() < 0.5:
        return [_plain_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["a", "b", "ключ", "\x00k", "k\ud800"]
    return {rng.choice(keys) + str(i): _plain_value(rng, depth + 1)
            for i in range(rng.randrange(4))}


def _random_float(rng: random.Random) -> float:
    """A float from random bits: every finite double the JSON must carry exactly."""
    while True:
        (f,) = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))
        if math.isfinite(f):
            return float(f)


def test_a_plain_copy_is_what_its_json_decodes_to() -> None:
    rng = random.Random(52)
    for _ in range(500):
        value = {"v": _plain_value(rng), "f": _random_float(rng)}
        copy = _recent.plain(value)
        assert copy is not None
        assert repr(copy) == repr(_decoded(value)) == repr(value)  # -0.0 and key order too


@pytest.mark.parametrize("value", [
    {"t": (1, 2)}, {1: "int key"}, {"nan": math.nan}, {"inf": -math.inf}, {"big": 2**63},
    {"small": -(2**63) - 1}, {"when": dt.datetime(2024, 1, 1)}, {"id": uuid.uuid4()},
    {"set": {1}}, {"b": b"x"},
    {"sub": type("D", (dict,), {})(a=1)}, [type("L", (list,), {})()],
], ids=lambda v: type(next(iter(v.values())) if isinstance(v, dict) else v[0]).__name__)
def test_a_batch_holding_what_json_changes_is_not_copied(value: Any) -> None:
    """A tuple comes back a list, NaN as null, a datetime as text...: such a batch is decoded."""
    assert _recent.plain({"posts": [value]}) is None


def test_a_copy_shares_no_container_with_the_batch() -> None:
    meta = {"m": [1, {"deep": "x"}]}
    batch = {"posts": [[1, meta]]}
    copy = _recent.plain(batch)
    meta["m"][1]["deep"] = "changed after the append"
    meta["new"] = 1
    assert copy == {"posts": [[1, {"m": [1, {"deep": "x"}]}]]}


def _containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in _containers(v))]
    return []


def test_every_container_is_a_new_one_and_untracked_by_the_collector() -> None:
    """Kept until the fold takes it, a copy is a tree of atoms: the collector need not walk it
    (it walked every kept copy at each full collection), and no container is the caller's."""
    rng = random.Random(55)
    for _ in range(300):
        value = {"posts": [[_plain_value(rng), "x", 1] for _ in range(3)], "v": _plain_value(rng)}
        copy = _recent.plain(value)
        assert copy == value
        originals = {id(c) for c in _containers(value)}
        for c in _containers(copy):
            assert id(c) not in originals
            assert not gc.is_tracked(c)
    copy = _recent.plain({"runs": [1, 2]})
    copy["more"] = [3]  # the fold gives a copy a container: CPython tracks the dict again
    assert gc.is_tracked(copy)


def test_nesting_past_the_limit_is_decoded() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(100):
        inner.append([])
        inner = inner[0]
    assert _recent.plain(deep) is None
    assert _recent.plain([[[]]]) == [[[]]]


def _writer_rows(n: int, trace: int) -> list[list[Any]]:
    """Value lists in the tracing writer's order: a root, an llm child with usage and events,
    a tool child with an error, texts of every kind."""
    out = []
    for i in range(n):
        root, llm, tool = (str(uuid.UUID(int=(trace << 64) + 3 * i + k)) for k in (1, 2, 3))
        start = T0 + 1000 * i
        base = dict.fromkeys(WRITER_COLUMNS)
        out.append({**base, "id": root, "trace_id": root, "name": f"root ü{i}",
                    "run_type": "chain", "start_time": start, "inputs": {"q": f"nul\x00{i}"},
                    "metadata": {"repetition": i % 2}, "tags": ["t"], "end_time": start + 900,
                    "outputs": {"a": "lone \ud800"}, "session_name": "kept"})
        out.append({**base, "id": llm, "trace_id": root, "parent_run_id": root, "name": "llm",
                    "run_type": "llm", "start_time": start + 10,
                    "inputs": {"messages": [{"role": "user", "content": "hi"}]},
                    "metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"},
                    "events": [{"name": "new_token", "time": "2023-11-14T22:13:20.000300+00:00"}],
                    "end_time": start + 500, "session_name": "kept",
                    "outputs": {"usage_metadata": {"input_tokens": 30 + i, "output_tokens": 12,
                                                   "total_tokens": 42 + i}}})
        out.append({**base, "id": tool, "trace_id": root, "parent_run_id": root, "name": "tool",
                    "run_type": "tool", "start_time": start + 20, "inputs": {"x": 0.1 * i},
                    "end_time": start + 30, "error": "boom", "session_name": "kept"})
    return [[r[c] for c in WRITER_COLUMNS] for r in out]


def _journal_batches(store: Store) -> None:
    for trace in range(3):
        store.journal.append_runs(_writer_rows(40, trace), columns=WRITER_COLUMNS,
                                  extra={"runtime": {"sdk": "assay"}})
    store.journal.fold()
    project = store.projects.read(project_name="kept")
    rows = [[str(uuid.UUID(int=(trace << 64) + 3 * i + 1)), None, "correct", i % 3 / 2]
            for trace in range(3) for i in range(40)]
    for r in rows:
        r[1] = r[0]
    store.journal.append_feedback(rows, columns=["run_id", "trace_id", "key", "score"],
                                  defaults={"session_id": str(project.id),
                                            "feedback_source": {"type": "model"}})


def _everything(store: Store) -> tuple[list[Any], list[Any], Any]:
    store.journal.fold()
    with store.read() as conn:
        runs = conn.execute(text("SELECT * FROM runs ORDER BY id")).all()
        feedback = conn.execute(text(
            "SELECT run_id, trace_id, key, score, value, comment, feedback_source, extra "
            "FROM feedback ORDER BY run_id, key")).all()
    stats = store.projects.read(project_name="kept", include_stats=True)
    # every column but the project's id, which each store makes its own
    return ([{k: v for k, v in r._mapping.items() if k != "session_id"} for r in runs],
            [tuple(f) for f in feedback],
            (stats.run_count, stats.total_tokens, stats.error_rate, stats.feedback_stats))


def test_the_fold_stores_the_same_from_the_copy_as_from_the_bytes(tmp_path: Path) -> None:
    """The same batches into two stores: one folds the copies it kept, the other (everything
    forgotten first, as a fold in another process) decodes: every stored column is the same."""
    kept = Store.open(tmp_path / "kept.db")
    decoded = Store.open(tmp_path / "decoded.db")
    taken: list[bytes] = []
    original_take = _recent.take

    def counting(packed: bytes) -> Any:
        got = original_take(packed)
        if got is not None:
            taken.append(packed)
        return got

    _journal_batches(kept)  # folded as it goes: the copies
    try:
        _recent.take = counting  # type: ignore[assignment]
        expected = _everything(kept)
    finally:
        _recent.take = original_take  # type: ignore[assignment]
    assert taken, "the fold took no copy"
    assert not _recent._kept

    original_keep = _recent.keep
    _recent.keep = lambda *a: None  # type: ignore[assignment]  # as another process: nothing
    try:
        _journal_batches(decoded)
        got = _everything(decoded)
    finally:
        _recent.keep = original_keep  # type: ignore[assignment]
    assert len(expected[0]) == 360 and len(expected[1]) == 120
    assert got == expected
    kept.close()
    decoded.close()


def test_a_copy_is_taken_once_and_the_bytes_still_decode(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "once.db")
    store.journal.append_runs(_writer_rows(2, 0), columns=WRITER_COLUMNS)
    with journal_place(store).read() as conn:
        (payload,) = conn.execute(text("SELECT payload FROM journal")).scalars().all()
    first = decode(payload)  # the copy
    assert _recent.take(payload) is None
    again = decode(payload)  # the bytes: a fold retried after a rollback starts from them
    assert again == first and again is not first
    store.close()


def test_what_is_kept_is_bounded_and_the_oldest_go_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path / "bounded.db")
    monkeypatch.setattr(_recent, "MAX_BYTES", 20_000)
    for trace in range(12):
        store.journal.append_runs(_writer_rows(4, trace), columns=WRITER_COLUMNS)
        assert _recent._size <= 20_000
    assert 0 < len(_recent._kept) < 12
    assert _recent._size == sum(size for _, size in _recent._kept.values())
    with journal_place(store).read() as conn:
        payloads = conn.execute(text("SELECT payload FROM journal ORDER BY seq")).scalars().all()
    assert payloads[0] not in _recent._kept and payloads[-1] in _recent._kept
    assert store.projects.read(project_name="kept", include_stats=True).run_count == 48
    assert not _recent._kept  # the fold took those still kept, decoded the others
    store.close()


def test_a_kept_copy_folds_on_each_backend(store: Store) -> None:
    """PostgreSQL's fold (a stream of batches) takes the copies too."""
    store.journal.append_runs(_writer_rows(10, 0), columns=WRITER_COLUMNS)
    assert _recent._kept
    stats = store.projects.read(project_name="kept", include_stats=True)
    assert not _recent._kept
    assert stats.run_count == 10 and stats.error_rate == 0
    assert stats.total_tokens == sum(42 + i for i in range(10))
    assert len(store.runs.list(error=True)) == 10


def test_a_batch_with_a_tuple_folds_from_its_bytes(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "tuple.db")
    rows = _writer_rows(1, 0)
    rows[0][WRITER_COLUMNS.index("tags")] = ("a", "b")  # JSON gives it back as a list
    store.journal.append_runs(rows, columns=WRITER_COLUMNS)
    assert not _recent._kept
    (root,) = store.runs.list(is_root=True)
    assert root.tags == ["a", "b"]
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_keeps_nothing(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "fork.db")
    store.journal.append_runs(_writer_rows(1, 0), columns=WRITER_COLUMNS)
    assert _recent._kept
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit code
        os._exit(0 if not _recent._kept and _recent._size == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _recent._kept  # the parent's are the parent's
    store.close()


def test_nothing_is_kept_where_a_fold_process_takes_the_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ASSAY_BACKGROUND_FOLD=process`` and a server's workers: another process folds, so a
    copy would only cost the append and memory."""
    from assay.store import _background

    store = Store.open(tmp_path / "elsewhere.db")
    _background.claim(store.engine)  # as ``create_app(fold="process")`` does
    try:
        store.journal.append_runs(_writer_rows(1, 0), columns=WRITER_COLUMNS)
        assert not _recent._kept
    finally:
        _background.release(store.engine)
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "process")
    assert not _background.folds_here(store.engine)
    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")  # reads fold here
    store.journal.append_runs(_writer_rows(1, 1), columns=WRITER_COLUMNS)
    assert _recent._kept
    assert store.projects.read(project_name="kept", include_stats=True).run_count == 2
    store.close()
