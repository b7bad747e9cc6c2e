"""JSON encoding used for stored fields: tolerant of datetimes, UUIDs, pydantic models, sets."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pydantic_core

__all__ = ["dumps", "dumpb", "loads", "jsonable"]


def _fallback(value: Any) -> Any:
    return repr(value)


_SCALARS = frozenset((str, int, float, bool, type(None)))


def jsonable(value: Any) -> Any:
    """Turn arbitrary Python values (models, dataclasses, datetimes...) into plain JSON data."""
    if value.__class__ in _SCALARS:  # the common case: nothing to convert
        return value
    return pydantic_core.to_jsonable_python(value, fallback=_fallback, serialize_unknown=True)


def dumps(value: Any) -> str:
    return pydantic_core.to_json(value, fallback=_fallback, serialize_unknown=True).decode()


def dumpb(value: Any) -> bytes:
    """``dumps`` as UTF-8 bytes, for payloads stored as blobs (the run journal).

    orjson first (about twice as fast on run dicts), with ``jsonable`` for the types it does not
    know; what it refuses outright (integers past 64 bits, non-string keys) goes through
    pydantic-core as ``dumps`` does."""
    try:
        return orjson.dumps(value, default=jsonable)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return pydantic_core.to_json(value, fallback=_fallback, serialize_unknown=True)


def loads(text: str | bytes) -> Any:
    return json.loads(text)
