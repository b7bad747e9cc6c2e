"""Identifiers: the fast dotted-order segment agrees with strftime's everywhere."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from assay import _ids
from assay._compiled import compiled
from assay._ids import _all_canonical_py, all_canonical_uuids, dotted_segment_us, is_canonical_uuid

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dotted_segment(start: datetime, run_id: str) -> str:
    """LangSmith's own definition of a segment, with strftime."""
    return start.strftime("%Y%m%dT%H%M%S%fZ") + run_id


@pytest.mark.parametrize("us", [0, 7, 999_999, 1_000_000, 1_000_001, 123_456_789, -1, -1_500_000,
                                1_795_361_072_087_265, 4_102_444_799_999_999])
def test_segment_from_microseconds_is_strftime_s(us: int) -> None:
    """The tracing writer and the journal's fold derive orders with ``dotted_segment_us``; a
    stored run's order must read as LangSmith's ``%Y%m%dT%H%M%S%fZ<id>`` would, before 1970 and
    in its first second (where the digits of the microseconds alone are not ``%f``) too."""
    run_id = "01a203db-e3d7-77c5-a4e5-a3dbcc1ce8c1"
    assert dotted_segment_us(us, run_id) == dotted_segment(_EPOCH + timedelta(microseconds=us),
                                                           run_id)


def test_segment_cache_follows_the_second() -> None:
    """The per-second prefix is cached: consecutive calls across a second boundary still
    format each second of their own."""
    base = 1_795_361_072_000_000
    got = [dotted_segment_us(base + d, "x") for d in (999_999, 1_000_000, 999_998, 2_000_001)]
    want = [dotted_segment(_EPOCH + timedelta(microseconds=base + d), "x")
            for d in (999_999, 1_000_000, 999_998, 2_000_001)]
    assert got == want


@pytest.mark.parametrize("check", ["c", "python"])
def test_all_canonical_uuids_agrees_with_the_check_of_one(check: str) -> None:
    """The batch check, in C and in Python (joined, counted, one character class), against
    ``is_canonical_uuid`` run by run, on ids that are canonical and on near misses that keep
    the total length, the hyphen count or the line count right."""
    if check == "c":
        cencode = compiled("assay.store._cencode")
        if cencode is None:
            pytest.skip("the C module is not built (ASSAY_PURE_PYTHON or no compiler)")
        all_canonical_uuids = cencode.all_canonical
    else:
        all_canonical_uuids = _all_canonical_py
    good = [str(uuid.uuid4()) for _ in range(50)] + [str(uuid.UUID(int=0))]
    assert all_canonical_uuids(good) and all_canonical_uuids([]) is True
    one = good[0]
    misses = [
        one.upper(), one.replace("-", ""), "{" + one + "}", one[:-1], one + "0",
        one[:8] + one[9] + "-" + one[10:],  # a hyphen moved, the length kept
        one[:-1] + "g", one[:-1] + "\u0661",  # not hex: a letter, an Arabic-Indic digit
        one[:-1] + "\n", one[:35] + "-",  # a newline, a fifth hyphen
        one[:18] + one[19:] + "0",  # a hyphen missing, the length kept
    ]
    for miss in misses:
        assert not is_canonical_uuid(miss), miss
        assert not all_canonical_uuids([*good[:3], miss, *good[3:6]]), miss
    # two lines off by one each: the total length, the hyphens and the lines all right
    pair = [one[:-1], one + "a"]
    assert len("\n".join(pair)) == len("\n".join([one, one]))
    assert not all_canonical_uuids(pair)
    assert not all_canonical_uuids([one, None]) and not all_canonical_uuids([one, 5])
    assert not all_canonical_uuids([uuid.UUID(one)])  # a UUID object is not its text

    class Text(str):
        pass

    assert all_canonical_uuids((Text(one), *good[:2]))  # a str subclass and a tuple, as join
    assert all_canonical_uuids(good) is True and all_canonical_uuids([one[:-1]]) is False


def test_all_canonical_uuids_uses_the_c_test_where_built() -> None:
    """The fold's entry point is the C test where the module is built, the Python one where
    not (``ASSAY_PURE_PYTHON``: CI's stdlib-driver pass), and answers as they do."""
    one = str(uuid.uuid4())
    assert all_canonical_uuids([one, one]) is True
    assert all_canonical_uuids([one, one.upper()]) is False
    cencode = compiled("assay.store._cencode")
    assert _ids._native("all_canonical") is (None if cencode is None else cencode.all_canonical)


def test_new_ids_are_distinct_v7_ids_of_now_in_the_order_made() -> None:
    """The fold names a batch of scores with ``new_ids_text``: canonical version 7 ids, none
    twice, sorting as made (feedback of one batch lists in that order), of the current time."""
    import time

    from assay._ids import new_ids_text

    before = time.time_ns() // 1_000_000
    first = new_ids_text(50_000)
    time.sleep(0.002)
    later = new_ids_text(3)
    after = time.time_ns() // 1_000_000
    assert len(set(first + later)) == 50_003
    assert all(is_canonical_uuid(i) for i in first + later)
    assert first == sorted(first) and max(first) < min(later)
    for text in (first[0], later[-1]):
        parsed = uuid.UUID(text)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert before <= parsed.int >> 80 <= after  # its 48 bits of Unix milliseconds
    assert new_ids_text(0) == []
