"""A posted run admitted in one C pass (``_cencode.admitted_post``) against the Python it stands
in for: ``plain_run`` (or ``RunIn``), then the store's ``_clean`` and ``_as_text``.

The C pass takes only runs in the usual form and declines (None) anything else, which Python
then checks and words the errors of. So for every run: when C gives a run, Python gives the
same keys in the same order with the same values, and does not refuse it. Checked on the SDKs'
runs, on hand-picked edge cases (times, ids, text), on ~4,000 runs mutated at random, and
through the server.
"""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any

import pytest
from compiled_paths import DROP, PURE, is_in_use, needs_c, posted_run

from assay.errors import AssayError
from assay.server import _ingest
from assay.server._errors import ApiError
from assay.server._wire import run_in
from assay.store._admitted import AdmittedPost
from assay.store._journal_admit import _as_text
from assay.store._runs import _clean


def test_the_compiled_admission_is_what_ingest_uses() -> None:
    if not is_in_use(_ingest._ADMIT, "assay.store._cencode"):
        return
    got = _ingest._ADMIT(posted_run(), None)
    assert got.__class__ is AdmittedPost and got["inputs"] == '{"q":"hi"}'


def _python(raw: Any) -> dict[str, Any] | None:
    """What ingest did before: the run checked by the server, then by ``Journal.admit``; None
    when either refuses it."""
    try:
        clean = _clean(run_in(copy.deepcopy(raw)))
    except (ApiError, AssayError, ValueError, TypeError):
        return None
    _as_text([clean])
    return clean


def _compare(raw: Any) -> bool:
    """Whether C took ``raw``; fails the test where C and Python disagree."""
    before = copy.deepcopy(raw)
    fast = _ingest._ADMIT(raw, None)  # type: ignore[misc]
    assert raw == before  # the sender's dict is left as it was
    if fast is None:
        return False
    slow = _python(raw)
    assert slow is not None, f"C admitted a run Python refuses: {raw!r}"
    assert list(fast.items()) == list(slow.items()), raw
    assert fast.raw is raw
    return True


@needs_c
@pytest.mark.parametrize("fields", [
    {},
    {"end_time": DROP, "outputs": DROP, "events": DROP},  # a post without its end
    {"parent_run_id": str(uuid.uuid4()), "run_type": "llm", "tags": []},
    {"error": "Boom: \x00 ünïcode \ud800", "name": "naïve\x00"},  # escaped as the store keeps it
    {"inputs": {"big": 2 ** 70}, "outputs": {"nul": "a\x00b", "esc": "\ufdd0"}},  # slow path
    {"inputs": {"k\ud800": 1}},  # orjson refuses a lone surrogate key: the slow path
    {"start_time": "2026-11-29T05:30:38Z", "end_time": "2026-11-29T05:30:38.5"},
    {"start_time": "2024-02-29T23:59:59.999999+00:00", "end_time": DROP},
    {"start_time": "0001-01-01T00:00:00", "end_time": "9999-12-31T23:59:59.999999Z"},
    {"start_time": "2026-11-29T05:30:38.001+00:00",
     "end_time": "2026-11-29T05:30:38.000500+00:00"},  # ends < 1 ms before it starts: start
    {"start_time": 1795930371704.25, "end_time": 1795930371999},  # epoch ms: the caller's parser
    {"start_time": "2026-11-29T05:30:38.1234567+00:00"},  # 7 digits: the caller's parser
    {"start_time": "2026-11-29T07:30:38+02:00"},  # another offset: the caller's parser
    {"start_time": "2026-11-29 05:30:38"},  # a space for the T: the caller's parser
    {"status": "success", "session_id": str(uuid.uuid4()), "unknown_key": {"x": 1}},
    {"extra": None, "tags": None, "serialized": None, "error": None},
])
def test_admitted_as_python_admits(fields: dict[str, Any]) -> None:
    assert _compare(posted_run(**fields))


@needs_c
@pytest.mark.parametrize("fields", [
    {"id": None}, {"id": str(uuid.uuid4()).upper()}, {"trace_id": "{" + str(uuid.uuid4()) + "}"},
    {"parent_run_id": 7}, {"session_id": "not-a-uuid"}, {"name": 3}, {"status": ["x"]},
    {"dotted_order": "2026é"}, {"inputs": [1]}, {"extra": "text"}, {"tags": ["a", 1]},
    {"tags": "a"}, {"events": [1]}, {"events": {"a": 1}},
    {"events": [{"name": "new_token", "time": 1795930371704}]},  # made ISO by events_in
    {"start_time": True}, {"start_time": "yesterday"},
    {"start_time": "2026-02-29T00:00:00"}, {"start_time": "2026-11-29T24:00:00"},
    {"start_time": float("nan")}, {"start_time": 10 ** 20}, {"end_time": [1]},
])
def test_declined_to_python(fields: dict[str, Any]) -> None:
    """Each of these is one C does not take as it is: Python canonicalises or refuses it."""
    assert not _compare(posted_run(**fields))


def test_a_body_id_other_than_the_parts_is_worded_by_python() -> None:
    raw = posted_run()
    if not PURE:
        assert _ingest._ADMIT(raw, str(uuid.uuid4())) is None  # type: ignore[misc]
        assert _ingest._ADMIT(raw, raw["id"]) is not None  # type: ignore[misc]


_VALUES: list[Any] = [
    None, 0, -1, 2 ** 63, 2 ** 64 + 1, 1.5, float("inf"), True, "", "x", "é", "\x00", "\ud800",
    "\ufdd0", [], [1], ["a"], [{}], {}, {"a": None}, {"t": "\ud83d"},
    str(uuid.uuid4()), str(uuid.uuid4()).upper(), "2026-11-29T05:30:38", "2026-13-01T00:00:00",
    "2026-11-29T05:30:38.5Z", "2026-11-29T05:30:38.Z", "2026-11-29T05:30:38+00:00x",
    "1999-12-31T23:59:60", "2000-02-29T12:00:00.000001+00:00", "2100-02-29T00:00:00",
    1795930371704, -5.0, [{"time": "2026-11-29T05:30:38Z"}], [{"time": 1.0}], [{"time": True}],
]
_FIELDS = ["id", "trace_id", "parent_run_id", "reference_example_id", "session_id",
           "session_name", "name", "run_type", "status", "error", "dotted_order", "start_time",
           "end_time", "inputs", "outputs", "extra", "serialized", "events", "tags", "other"]


@needs_c
def test_mutated_runs_agree() -> None:
    rng = random.Random(42)
    taken = 0
    for _ in range(4000):
        raw = posted_run()
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(_FIELDS)
            if rng.random() < 0.15:
                raw.pop(key, None)
            else:
                raw[key] = copy.deepcopy(rng.choice(_VALUES))
        taken += _compare(raw)
    assert taken > 500  # C took a good share of them: this compared something


@needs_c
def test_times_read_as_python_reads_them() -> None:
    """The C reading of the usual ISO form (any date of years 1-9999, 0-7 fraction digits,
    ``Z``, ``+00:00`` or naive) gives the microseconds ``_time.to_micros`` gives."""
    rng = random.Random(7)
    taken = 0
    for _ in range(3000):
        year = rng.choice([1, 4, 100, 400, 1600, 1900, 1969, 1970, 2000, 2024, 2100, 9999,
                           rng.randint(1, 9999)])
        stamp = (f"{year:04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}"
                 f"T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}")
        digits = rng.randint(0, 7)
        if digits:
            stamp += "." + "".join(rng.choice("0123456789") for _ in range(digits))
        stamp += rng.choice(["", "Z", "+00:00"])
        taken += _compare(posted_run(start_time=stamp, end_time=DROP))
    assert taken > 2000  # all but the days a month does not have


@needs_c
def test_a_field_kept_as_bytes_is_the_column_text_or_declined() -> None:
    """A post's object field kept as its text (``_csplit.runs``: bytes orjson wrote) is the
    column text as it is; bytes that are not UTF-8 (``_csplit`` checks them first; here as a
    last guard) decline the run instead of failing the request."""
    fast = _ingest._ADMIT(posted_run(inputs=b'{"q":"h\xc3\xa9"}'), None)  # type: ignore[misc]
    assert fast is not None and fast["inputs"] == '{"q":"hé"}'
    assert _ingest._ADMIT(posted_run(inputs=b'{"q":"\xff"}'), None) is None  # type: ignore[misc]
