"""The writers' journal rows encoded in C (``store/_cencode.c``) against the Python loop it
stands in for (``_fold_columns.encoded_rows``): the same text, byte for byte, for every kind of
value the JSON columns meet, and the same rows passed through untouched."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from compiled_paths import is_in_use, needs_c

from assay import _json
from assay.store import _fold_columns as fc

INPUTS, OUTPUTS = fc._TEXT_AT

VALUES: list[Any] = [
    {"x": 1}, {}, {"s": "plain"}, {"s": "é😀"}, {"nul": "a\x00b"}, {"esc": "\ufdd0"},
    {"both": "é\ufdd0"}, {"surrogate": "x\ud800y"}, {"big": 2**70}, {1: "int key"},
    {"when": dt.datetime(2026, 11, 29, 3, 4, 5, 678901, tzinfo=dt.UTC)},
    {"id": uuid.UUID(int=7)}, {"set": {1}}, {"nested": [{"a": [None, True, 2.5]}]},
    {"deferred": _json.Deferred([1, "\x00"], lambda v: {"v": v})}, {"obj": object()},
    {"float": float("nan")}, {"text": "\\u0000 literally"},
    # backslashes near an escaped NUL (found by each backslash, not by a scan of every byte)
    {"end": "\x00"}, {"slashes": "\\\\\\"}, {"near": "\\u000"}, {"u": "\\\x00"},
    {"late": "é" * 40 + "\ufdd0"}, ["\x00", "\\"],
    # a whole column deferred (a LangChain step's state): resolved in C, not by orjson's default
    _json.Deferred({"m": [1, "é"]}, dict), _json.Deferred({"big": 2**70}, dict),
    _json.Deferred({"nul": "a\x00", "esc": "\ufdd0"}, dict),
    _json.Deferred(["x"], lambda v: {"k": v, "inner": _json.Deferred(v, list)}),
]


def _rows() -> list[Any]:
    rows: list[Any] = []
    for i, value in enumerate(VALUES):
        row: list[Any] = [None] * fc._WIDTH
        row[INPUTS] = value
        row[OUTPUTS] = VALUES[-1 - i] if i % 3 else None
        rows.append(tuple(row) if i % 2 else row)
    rows.append({"id": "a dict post", "inputs": {"x": 1}})
    rows.append((None,) * (fc._WIDTH - 1))  # not the writer's width: as it is
    return rows


def test_the_compiled_encoder_is_what_the_journal_uses() -> None:
    is_in_use(fc._CENCODE, "assay.store._cencode")


@needs_c
def test_c_encodes_every_value_as_the_python_loop_does(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    rows = _rows()
    fast = fc.encoded_rows(rows)
    with monkeypatch.context() as m:
        m.setattr(fc, "_CENCODE", None)
        slow = fc.encoded_rows(rows)
    assert len(fast) == len(slow) == len(rows)
    for f, s, r in zip(fast, slow, rows, strict=True):
        assert f == s
        assert type(f) is type(s)
        if isinstance(r, (list, tuple)) and len(r) == fc._WIDTH:
            assert f is not r and type(f) is list  # a copy: the caller's rows are not changed
            assert all(v is None or isinstance(v, str) for v in (f[INPUTS], f[OUTPUTS]))
        else:
            assert f is r
    assert rows[0][INPUTS] == {"x": 1}  # unchanged
    # the texts read back as the values (the store's reader), hard strings included
    assert _json.loads_column(fast[4][INPUTS]) == {"nul": "a\x00b"}
    assert _json.loads_column(fast[7][INPUTS]) == {"surrogate": "x\ud800y"}


@needs_c
def test_an_error_of_the_slow_path_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(value: Any) -> str:
        raise RuntimeError("slow path failed")

    monkeypatch.setattr(fc, "column_text", boom)
    row: list[Any] = [None] * fc._WIDTH
    row[INPUTS] = {"big": 2**70}  # orjson refuses it: the slow path
    with pytest.raises(RuntimeError, match="slow path failed"):
        fc.encoded_rows([row])


@needs_c
def test_an_error_resolving_a_deferred_column_reaches_the_caller() -> None:
    def boom(value: Any) -> Any:
        raise RuntimeError("convert failed")

    row: list[Any] = [None] * fc._WIDTH
    row[INPUTS] = _json.Deferred({"x": 1}, boom)
    with pytest.raises(RuntimeError, match="convert failed"):
        fc.encoded_rows([row])


class _Text(str):
    pass


@needs_c
def test_the_batch_lanes_types_in_c_are_set_map_type() -> None:
    from assay.store import _fold_batch

    assert is_in_use(getattr(_fold_batch.types_of, "__self__", None), "assay.store._cencode")
    columns: list[Any] = [(), ("a",), ["a", None, 1, 1.0, True, "b", None], tuple(range(500)),
                          ("x", _Text("y"), "z"), [b"", bytearray(), {}, [], ()], VALUES]
    for column in columns:
        assert _fold_batch.types_of(column) == _fold_batch._types_py(column), column
    with pytest.raises(TypeError):
        _fold_batch.types_of(3)  # type: ignore[arg-type]
