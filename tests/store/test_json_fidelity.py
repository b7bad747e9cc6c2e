"""Stored JSON reads back exactly as written, on SQLite and PostgreSQL: strings outside the BMP,
lone surrogates (which UTF-8 cannot encode), NUL (which PostgreSQL refuses) and the store's own
escape character, in keys and values, through direct writes and the journal's fold."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from assay import _json
from assay.store import Store

HARD = ["a😀b", "x\ud800y", "\udfff", "a\x00b", "😀\udc00\x00", "\ufdd0", "\ufdd0\ufdd00",
        "\ue400 private use", "plain", ""]


def _value(tag: str) -> dict[str, Any]:
    return {"tag": tag, "list": HARD, "nested": {s: s for s in HARD}, "n": [1, 2.5, None]}


@pytest.mark.parametrize("text", HARD)
def test_codec_round_trips_each_string(text: str) -> None:
    value = {text: [text, {"k": text}]}
    stored = _json.dumps_column(value)
    assert "\x00" not in stored and "\\u0000" not in stored
    stored.encode()  # no lone surrogate: storable as UTF-8 anywhere
    assert _json.loads_column(stored) == value
    assert _json.loads_column(stored.encode()) == value
    assert _json.unescape_text(_json.escape_text(text)) == text
    assert _json.loads(_json.dumps(value)) == value  # the wire form: \ud800 escapes
    assert _json.loads(_json.dumpb(value)) == value  # the journal's


def test_plain_json_is_stored_as_is() -> None:
    value = {"a": "é😀", "b": [1, 2.5, True, None]}
    assert _json.dumps_column(value) == _json.dumps(value)


def test_runs_feedback_and_examples_keep_hard_strings(store: Store) -> None:
    direct, journaled = str(uuid.uuid4()), str(uuid.uuid4())
    run = {"name": "n\x00\ud800😀", "run_type": "chain", "start_time": "2026-01-01T00:00:00Z",
           "inputs": _value("in"), "outputs": _value("out"), "error": "boom\x00\udc00",
           "extra": {"metadata": _value("meta")}, "tags": HARD, "session_name": "hard"}
    store.runs.upsert(posts=[{**run, "id": direct}])
    store.journal.append_runs([{**run, "id": journaled}], default_project="hard")
    for rid in (direct, journaled):
        got = store.runs.read(rid)
        assert got.name == run["name"] and got.error == run["error"]
        assert got.inputs == _value("in") and got.outputs == _value("out")
        assert got.metadata == _value("meta") and got.tags == HARD
    assert {r.name for r in store.runs.list(project_ids=[str(got.session_id)])} == {run["name"]}

    fb = store.feedback.create(run_id=direct, key="k", value=HARD[4], comment=HARD[3],
                               correction=_value("fix"))
    again = store.feedback.read(fb.id)
    assert (again.value, again.comment, again.correction) == (HARD[4], HARD[3], _value("fix"))
    store.feedback.update(fb.id, comment=HARD[1], value=HARD[1])
    assert (store.feedback.read(fb.id).comment, store.feedback.read(fb.id).value) == (
        HARD[1], HARD[1])

    ds = store.datasets.create("hard-ds")
    made = store.examples.create_many([{"inputs": _value("ex-in"), "outputs": _value("ex-out"),
                                        "metadata": _value("ex-meta")}], dataset_id=ds.id)
    ex = store.examples.read(made[0].id)
    assert ex.inputs == _value("ex-in") and ex.outputs == _value("ex-out")
    assert {k: v for k, v in ex.metadata.items() if k != "dataset_split"} == _value("ex-meta")
    listed = store.examples.list(dataset_id=ds.id)  # the raw-SQL page reader
    assert listed[0].inputs == _value("ex-in") and listed[0].outputs == _value("ex-out")


def test_feedback_key_with_a_lone_surrogate_is_refused_by_name(store: Store) -> None:
    """A feedback key names scores in statistics and filters: valid Unicode only (the langsmith
    Python SDK drops lone surrogates before sending; the server refuses them the same way)."""
    from assay.errors import InvalidInputError

    rid = str(uuid.uuid4())
    store.runs.upsert(posts=[{"id": rid, "name": "n", "run_type": "chain",
                              "start_time": "2026-01-01T00:00:00Z", "session_name": "p"}])
    with pytest.raises(InvalidInputError, match=r"key 'f\\ud800' holds a lone UTF-16 surrogate"):
        store.feedback.create(run_id=rid, key="f\ud800", score=1)
    assert store.feedback.list(run_ids=[rid]) == []
    assert store.feedback.create(run_id=rid, key="f😀\ufdd0", score=1).key == "f😀\ufdd0"


def test_model_jsonable_keeps_lone_surrogates_in_keys() -> None:
    """The server's answers: pydantic's JSON dump writes a lone surrogate in a top-level key of a
    ``dict[str, Any]`` as U+FFFD and refuses one deeper; ``model_jsonable`` keeps both exact."""
    from assay.schemas import Run

    value = {s: {s: [s, {s: 1}]} for s in HARD}
    tid = uuid.uuid4()
    child = Run(id=uuid.uuid4(), trace_id=tid, name="c", run_type="llm",
                start_time="2026-01-01T00:00:01Z", outputs=value)
    run = Run(id=tid, trace_id=tid, name="n\ud800", run_type="chain", child_runs=[child],
              start_time="2026-01-01T00:00:00Z", inputs=value, extra={"metadata": value})
    got = _json.model_jsonable(run)
    assert got["inputs"] == value and got["extra"] == {"metadata": value}
    assert got["child_runs"][0]["outputs"] == value  # nested records too
    assert got["name"] == "n\ud800" and got["start_time"] == "2026-01-01T00:00:00Z"
    plain = Run(id=tid, trace_id=tid, name="n", run_type="chain",
                start_time="2026-01-01T00:00:00Z",
                inputs={"\ufffd": "\ufffd"})  # a real U+FFFD is kept as well
    assert _json.model_jsonable(plain) == plain.model_dump(mode="json")
    assert _json.model_jsonable(run, include={"inputs"}) == {"inputs": value}


def test_column_reader_reads_what_json_reads() -> None:
    """The engines' deserializer parses with pydantic-core and falls back to ``json`` for what
    pydantic-core refuses: text an earlier version stored with a lone surrogate escape, nesting
    past pydantic-core's depth limit. Either way the value is ``json``'s."""
    import json
    import math

    texts = ['{"a": 1, "a": 2}', "-0", "-0.0", "1e400", "NaN", "[1.5, -2, null, true]",
             "123456789012345678901234567890", "5e-324", '"\\u00e9\\ud83d\\ude00"',
             '"\\ud800 lone"', '{"k": "\\udfff"}', "[" * 300 + "]" * 300,
             '{"x": ' * 250 + "1" + "}" * 250]
    for text in texts:
        expected = json.loads(text)
        for data in (text, text.encode("utf-8", "surrogatepass")):
            got = _json.loads_column(data)
            if isinstance(expected, float) and math.isnan(expected):
                assert isinstance(got, float) and math.isnan(got)
            else:
                assert repr(got) == repr(expected), text[:40]
    with pytest.raises(ValueError):
        _json.loads_column("{broken")


def test_a_deferred_value_is_written_as_its_conversion_by_every_encoder() -> None:
    """``Deferred`` (an integration's state converted on the writer's thread) is written as
    ``convert(value)`` wherever it sits, by each encoder a run's fields go through, hard
    strings included (the conversion's result is escaped like any other value)."""
    from assay.store._fold_columns import column_text, encoded_rows

    def convert(value: Any) -> Any:
        return {"converted": value["raw"]}

    value = {"state": _json.Deferred({"raw": HARD}, convert), "n": 1}
    expected = {"state": {"converted": HARD}, "n": 1}
    assert _json.loads(_json.dumps(value)) == expected
    assert _json.loads(_json.dumpb(value)) == expected
    assert _json.loads_column(_json.dumps_column(value)) == expected
    assert _json.jsonable(value["state"]) == {"converted": HARD}
    assert _json.loads_column(column_text(value)) == expected
    # the tracing writer's rows: the value lists' inputs and outputs as column text
    from assay.store._fold_columns import WRITER_COLUMNS

    row = [None] * len(WRITER_COLUMNS)
    row[WRITER_COLUMNS.index("inputs")] = value
    row[WRITER_COLUMNS.index("outputs")] = {"plain": _json.Deferred({"raw": "x"}, convert)}
    (out,) = encoded_rows([row])
    assert _json.loads_column(out[WRITER_COLUMNS.index("inputs")]) == expected
    assert _json.loads_column(out[WRITER_COLUMNS.index("outputs")]) == {
        "plain": {"converted": "x"}}
    # a whole column deferred (a LangGraph step's state): written as its conversion too
    whole = _json.Deferred({"raw": HARD}, convert)
    row[WRITER_COLUMNS.index("inputs")] = whole
    (out,) = encoded_rows([row])
    assert _json.loads_column(out[WRITER_COLUMNS.index("inputs")]) == {"converted": HARD}
    assert _json.loads_column(column_text(whole)) == {"converted": HARD}
    # and an in-process reader gets the conversion, whole or per value, never the wrapper
    assert _json.settled(whole) == {"converted": HARD}
    assert _json.settled(value) == expected and _json.settled({"a": 1}) == {"a": 1}


def test_runs_keep_their_json_as_written(store: Store) -> None:
    """A run's JSON reads back with its keys in the order written, on PostgreSQL as on SQLite
    (its run columns are ``json``, not JSONB, which reorders keys: migration 0011)."""
    value = {"zeta": 1, "alpha": {"b": 2, "a": [3, {"y": 1, "x": 0}]}, "mid": None}
    direct, journaled = str(uuid.uuid4()), str(uuid.uuid4())
    run = {"name": "order", "run_type": "chain", "start_time": "2026-01-01T00:00:00Z",
           "inputs": value, "outputs": value, "extra": {"metadata": value}, "tags": ["b", "a"],
           "session_name": "order"}
    store.runs.upsert(posts=[{**run, "id": direct}])
    store.journal.append_runs([{**run, "id": journaled}], default_project="order")
    for rid in (direct, journaled):
        got = store.runs.read(rid)
        for doc in (got.inputs, got.outputs, got.metadata):
            assert _json.dumps(doc) == _json.dumps(value)  # the same keys in the same order
        assert got.tags == ["b", "a"]
