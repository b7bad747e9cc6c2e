"""Ingest's run validation without pydantic (``plain_run``) against RunIn, and the multipart
parts' JSON shortcut against the reference ``loads``.

The fast path must change nothing a client can see: the store gets the same row, and anything
not in the plain wire form goes to RunIn, whose error names the field.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assay.errors import InvalidInputError
from assay.server._body import loads, parse_multipart
from assay.server._errors import ApiError
from assay.server._wire import RunIn, plain_run, run_dict, run_in
from assay.store._runs import _clean

from ._wire import BOUNDARY, make_run, ms, multipart
from .conftest import Workspace

T0 = datetime(2026, 3, 4, 5, 6, 7, 654321, tzinfo=UTC)


def _js_run() -> dict[str, Any]:
    """As the JS SDK sends a finished run: end_time and event times in epoch milliseconds."""
    run = make_run("js", start=T0, end_time=ms(T0 + timedelta(seconds=2)), tags=["a", "b"],
                   events=[{"name": "new_token", "time": ms(T0 + timedelta(milliseconds=90))}],
                   outputs={"o": 1}, extra={"metadata": {"k": "v"}}, serialized={"n": 1})
    return run


PLAIN = {
    "python post": make_run("py", start=T0, extra={"metadata": {"x": 1}}),
    "js finished run": _js_run(),
    "child with every id": make_run("child", parent=make_run("p", start=T0), start=T0,
                                    reference_example_id=str(uuid.uuid4()),
                                    session_id=str(uuid.uuid4()), status="success"),
    "naive and Z times": {**make_run("tz", start=T0), "start_time": "2026-03-04T05:06:07.5",
                          "end_time": "2026-03-04T05:06:08Z"},
    # JS: start_time with made-up microseconds, end_time in whole ms, up to 1 ms "before" it
    "sub-millisecond run": {**make_run("fast", start=T0), "end_time": ms(T0)},
    "patch": {"id": str(uuid.uuid4()), "end_time": (T0 + timedelta(seconds=1)).isoformat(),
              "outputs": {"a": 1}, "error": None},
    "extras and nulls": {**make_run("x", start=T0), "child_runs": None, "num_examples": 3,
                         "outputs": None, "tags": None, "events": None},
    "float epoch ms": {**make_run("f", start=T0), "end_time": ms(T0) + 1500.25},
}


@pytest.mark.parametrize("name", list(PLAIN))
def test_plain_runs_store_exactly_what_runin_gives(name: str) -> None:
    raw = json.loads(json.dumps(PLAIN[name]))  # as parsed off the wire
    fast = plain_run(raw)
    assert fast is not None, "a run in the plain wire form takes the fast path"
    reference = run_dict(RunIn.model_validate(raw))
    assert _clean(fast) == _clean(reference)
    assert set(fast) == set(reference)  # extras and explicit nulls kept, as exclude_unset does
    assert raw == json.loads(json.dumps(PLAIN[name]))  # the caller's dict is not changed


def test_sub_millisecond_end_is_clamped_to_start() -> None:
    raw = {**make_run("fast", start=T0), "end_time": ms(T0)}
    row = _clean(plain_run(raw))  # type: ignore[arg-type]
    assert row["end_time"] == row["start_time"]
    far = {**raw, "end_time": ms(T0) - 5}  # 5 ms before: a real error (a negative latency
    assert plain_run(far) is None             # in every statistic), refused in words
    with pytest.raises(ApiError, match=r"end_time .* is before its start_time"):
        run_in(far)
    with pytest.raises(InvalidInputError, match="end_time is before its start_time"):
        _clean({**make_run("local", start=T0), "end_time": T0 - timedelta(seconds=10)})


def test_a_run_that_ends_before_it_starts_is_refused_by_every_ingest_path(
        ws: Workspace) -> None:
    """/runs, /runs/batch and /runs/multipart (its C pass and the Python one): 422 naming the
    run, nothing stored; the project's latency never goes negative."""
    def bad() -> dict[str, Any]:
        run = make_run("backwards", session="backwards", start=T0 + timedelta(seconds=10))
        run["end_time"] = T0.isoformat()
        return run

    one = bad()
    resp = ws.http.post("/runs", json=one)
    assert resp.status_code == 422 and "is before its start_time" in resp.text, resp.text
    resp = ws.http.post("/runs/batch", json={"post": [bad()]})
    assert resp.status_code == 422 and "is before its start_time" in resp.text, resp.text
    for encoding in ("zstd", None):
        run = bad()
        body, headers = multipart([(f"post.{run['id']}", run)], encoding=encoding)
        resp = ws.http.post("/runs/multipart", content=body, headers=headers)
        assert resp.status_code == 422 and "is before its start_time" in resp.text, resp.text
    from assay import Client

    assert "backwards" not in {p.name for p in Client(store=ws.store).list_projects()}


_UPPER = object()  # the run's own value in capitals

NOT_PLAIN = {
    # (what differs, field a failure names or None when RunIn accepts it)
    "upper-case id": ({"id": _UPPER}, None),  # (its dotted order names it in lower case)
    "id missing": ({"id": None}, "id"),
    "id not a UUID": ({"id": "run-1"}, "id"),
    "parent id a number": ({"parent_run_id": 7}, "parent_run_id"),
    "name a number": ({"name": 3}, "name"),
    "tags not strings": ({"tags": ["a", 1]}, "tags"),
    "inputs a list": ({"inputs": [1]}, "inputs"),
    "events not objects": ({"events": ["x"]}, "events"),
    "start_time a boolean": ({"start_time": True}, "start_time"),
    "start_time not a time": ({"start_time": "yesterday"}, "start_time"),
    "start_time in ISO basic form": ({"start_time": "20260304T050607"}, "start_time"),
    "start_time as an ISO week": ({"start_time": "2026-W10-3T05:06"}, "start_time"),
    "start_time unix seconds text": ({"start_time": "1772600767"}, None),
    "end_time out of range": ({"end_time": 1e300}, "end_time"),
}


@pytest.mark.parametrize("name", list(NOT_PLAIN))
def test_other_forms_go_to_runin(name: str) -> None:
    change, field = NOT_PLAIN[name]
    base = make_run("odd", start=T0)
    raw = {**base, **{k: base[k].upper() if v is _UPPER else v for k, v in change.items()}}
    assert plain_run(raw) is None
    if field is None:  # RunIn accepts it, and gives the canonical form
        assert _clean(run_in(raw)) == _clean(run_dict(RunIn.model_validate(raw)))
        assert str(run_in(raw)["id"]) == raw["id"].lower()
        return
    with pytest.raises(ApiError) as err:
        run_in(raw, "post[0]")
    assert err.value.status == 422 and "post[0]" in err.value.detail and field in err.value.detail


def _parts(values: list[bytes]) -> list[Any]:
    body, headers = multipart([(f"post.{uuid.uuid4()}", v) for v in values])
    return parse_multipart(body, headers["content-type"])


@pytest.mark.parametrize("payload", [
    b'{"n": 123456789012345678901234567890}',  # past 64 bits: orjson would give a float
    b'{"s": "a\\u0000b"}',  # NUL, which PostgreSQL's JSONB cannot store (the store escapes it)
    b'{"n": 18446744073709551615, "m": -9223372036854775808}',
])
def test_part_json_matches_the_reference_loads(payload: bytes) -> None:
    for parts in (_parts([payload]), _parts([b'{"other": 1}', payload])):
        assert [p.json() for p in parts][-1] == loads(payload)
        assert not any(p.plain for p in parts)  # one such part sends the whole body the safe way
    assert loads(b'{"n": 123456789012345678901234567890}')["n"] == 123456789012345678901234567890


def test_plain_parts_parse_with_orjson_and_say_so() -> None:
    parts = _parts([b'{"a": [1, 2.5, "x"]}', b'{"b": null}'])
    assert all(p.plain for p in parts)
    assert [p.json() for p in parts] == [{"a": [1, 2.5, "x"]}, {"b": None}]
    assert BOUNDARY.encode() not in parts[0].data


def test_big_ints_and_nul_arrive_intact_through_ingest(ws: Workspace) -> None:
    run = make_run("exact", session="exact", start=T0)
    rid = run["id"]
    body, headers = multipart([(f"post.{rid}", run),
                               (f"post.{rid}.outputs", {"n": 2**70, "s": "a\x00b"})],
                              encoding="zstd")
    resp = ws.http.post("/runs/multipart", content=body, headers=headers)
    assert resp.status_code == 202, resp.text
    assert ws.store.runs.read(rid).outputs == {"n": 2**70, "s": "a\x00b"}


@pytest.mark.parametrize(("change", "says"), [
    ({"run_type": "banana"}, "run_type 'banana' is not one of chain, llm"),
    ({"dotted_order": "garbage"}, "dotted_order 'garbage' is not a dotted order"),
    # another run's segment last: the tree read by dotted order would put it elsewhere
    ({"dotted_order": "20260304T050607654321Z" + str(uuid.uuid4())}, "is not a dotted order"),
])
def test_a_run_type_or_dotted_order_that_is_not_one_is_refused_by_every_ingest_path(
        ws: Workspace, change: dict[str, Any], says: str) -> None:
    """LangSmith's run types are an enum, and a dotted order names its run last: /runs,
    /runs/batch and /runs/multipart (its C pass and the Python one) answer 422 naming the
    field (a 202 stored them, and a tree read by dotted order lost such a run)."""
    def bad() -> dict[str, Any]:
        return {**make_run("odd", session="odd-fields", start=T0), **change}

    resp = ws.http.post("/runs", json=bad())
    assert resp.status_code == 422 and says in resp.text, resp.text
    resp = ws.http.post("/runs/batch", json={"post": [bad()]})
    assert resp.status_code == 422 and says in resp.text, resp.text
    for encoding in ("zstd", None):
        run = bad()
        body, headers = multipart([(f"post.{run['id']}", run)], encoding=encoding)
        resp = ws.http.post("/runs/multipart", content=body, headers=headers)
        assert resp.status_code == 422 and says in resp.text, resp.text
    from assay import Client

    assert "odd-fields" not in {p.name for p in Client(store=ws.store).list_projects()}
