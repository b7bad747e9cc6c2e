"""Identifiers and LangSmith's dotted order, shared by tracing, the store and the server."""

from __future__ import annotations

import functools
import re
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import uuid_utils
import uuid_utils.compat as _uu

from ._time import to_micros, to_utc, utcnow

__all__ = [
    "all_canonical_uuids",
    "as_uuid",
    "dotted_segment",
    "dotted_segment_us",
    "is_canonical_uuid",
    "new_id",
    "new_id_text",
    "new_ids_text",
    "to_utc",
    "utcnow",
    "uuid_text",
]


def new_id() -> uuid.UUID:
    """A time-ordered UUID (v7): ids sort by creation time, which keeps indexes compact."""
    return _uu.uuid7()


def new_id_text() -> str:
    """``str(new_id())`` without the stdlib UUID in between (3x faster: rows get text ids)."""
    return str(uuid_utils.uuid7())


@functools.cache
def _native(name: str) -> Any:
    """A C function of assay's for this module, or None where not built (``_compiled``),
    looked up at the first call: the tracing core's ``new_ids`` (its generator seeded by
    ``_run_tree``) and the store's ``all_canonical``, both in packages that import this one."""
    if name == "new_ids":
        from .tracing._run_tree import SPEEDUPS

        return getattr(SPEEDUPS, name, None)
    from ._compiled import compiled

    return getattr(compiled("assay.store._cencode"), name, None)


def new_ids_text(n: int) -> list[str]:
    """``n`` of ``new_id_text``, in the order made: in C where built (the tracing core's id
    generator, ~7x fewer instructions an id)."""
    many = _native("new_ids")
    if many is not None:
        out: list[str] = many(n)
        return out
    return [str(uuid_utils.uuid7()) for _ in range(n)]


def as_uuid(value: uuid.UUID | str, what: str = "id") -> uuid.UUID:
    """Parse a UUID or raise InvalidInputError naming the field."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, AttributeError, TypeError):
        from .errors import InvalidInputError

        raise InvalidInputError(f"{what} must be a UUID, got {value!r}") from None


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_canonical_uuid(text: str) -> bool:
    """True for UUID text already in ``str(UUID)``'s form (lower-case, hyphenated)."""
    return _CANONICAL_UUID.fullmatch(text) is not None


# what canonical UUID lines may hold: deleted by ``bytes.translate``, nothing may be left (a
# C loop over a table, twice as fast as a regex's fullmatch of the same set)
_HEXISH = b"0123456789abcdef-\n"


def all_canonical_uuids(ids: Sequence[Any]) -> bool:
    """Every one of ``ids`` canonical UUID text: the fold asks it of each batch's ids. In C
    where built (~60 instructions an id), else ``_all_canonical_py``."""
    check = _native("all_canonical")
    return _all_canonical_py(ids) if check is None else bool(check(ids))


def _all_canonical_py(ids: Sequence[Any]) -> bool:
    """``all_canonical_uuids`` over the ids joined: ~30 ns an id where a regex per id took
    ~190 (and a regex over the joined lines ~45). Each line is 36 characters with its four
    hyphens in place and nothing but hex digits besides; anything that is not text fails the
    join."""
    n = len(ids)
    if not n:
        return True
    try:
        joined = "\n".join(ids) + "\n"
    except TypeError:
        return False
    if len(joined) != 37 * n or joined.count("-") != 4 * n or joined.count("\n") != n:
        return False
    if joined[36::37].count("\n") != n:
        return False
    for at in (8, 13, 18, 23):
        if joined[at::37].count("-") != n:
            return False
    return joined.isascii() and not joined.encode("ascii").translate(None, _HEXISH)


def uuid_text(value: uuid.UUID | str, what: str = "id") -> str:
    """Canonical UUID text; canonical strings and UUID objects skip parsing (ingest hot path)."""
    if value.__class__ is str and _CANONICAL_UUID.fullmatch(value):
        return value
    if value.__class__ is uuid.UUID:
        return str(value)
    return str(as_uuid(value, what))


_last_second: tuple[int, str] = (-1, "")  # runs come in bursts: format each second once


def dotted_segment_us(us: int, run_id: str) -> str:
    """One segment of LangSmith's dotted order, ``%Y%m%dT%H%M%S%fZ<id>``, from epoch
    microseconds, without strftime (~0.15 us): the tracing writer, the journal's fold and the
    store all derive orders with it, so they agree."""
    global _last_second
    secs = us // 1_000_000
    cached_secs, prefix = _last_second  # one tuple: read and replaced atomically
    if cached_secs != secs:
        t = time.gmtime(secs)
        prefix = (f"{t.tm_year:04d}{t.tm_mon:02d}{t.tm_mday:02d}T{t.tm_hour:02d}"
                  f"{t.tm_min:02d}{t.tm_sec:02d}")
        _last_second = (secs, prefix)
    if us >= 1_000_000:  # after the first second of 1970: the last six digits are %f
        return f"{prefix}{str(us)[-6:]}Z{run_id}"
    return f"{prefix}{us % 1_000_000:06d}Z{run_id}"


def dotted_segment(start_time: datetime, run_id: uuid.UUID | str) -> str:
    """``dotted_segment_us`` for a datetime (naive: UTC) and an id of either form."""
    return dotted_segment_us(to_micros(start_time), str(run_id))  # type: ignore[arg-type]  # a datetime: never None
