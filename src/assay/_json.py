"""JSON encoding used for stored fields: tolerant of datetimes, UUIDs, pydantic models, sets.

Stored JSON reads back exactly as it was written, including what the databases refuse: lone
UTF-16 surrogates (JSON allows ``"\\ud800"``; the JS SDK sends them, Python's ``json`` reads
them into ``str``) cannot be encoded as UTF-8, and PostgreSQL's JSONB refuses ``\\u0000``. Such
strings are stored escaped (``escape``): each of NUL, a lone surrogate and the escape character
U+FDD0 (a Unicode noncharacter, reserved for internal use) becomes U+FDD0 and one more
character; ``unescape`` (the engines' JSON deserializer) undoes it on every read. Strings
without them, nearly all, are stored as they are and only cost a substring search.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pydantic
import pydantic_core

__all__ = ["Deferred", "dumpb", "dumps", "dumps_column", "escape", "escape_text",
           "from_json_column", "jsonable", "model_jsonable",
           "loads", "loads_column", "settled", "unescape", "unescape_text"]

_ESC = "\ufdd0"
_ESC_UTF8 = _ESC.encode()
_SPECIAL = re.compile("[\x00\ud800-\udfff\ufdd0]")
_ESCAPED = re.compile("\ufdd0(.)", re.DOTALL)
_REPLACEMENT = "\ufffd".encode()  # what pydantic writes for a key it cannot encode
_SURROGATE_BASE, _PRIVATE_BASE = 0xD800, 0xE000  # a surrogate's stand-in: U+E000 + its offset


class Deferred:
    """A value stored as ``convert(value)``, converted when it is written, not when it is
    recorded: an integration whose steps carry large framework objects (a LangGraph state's
    messages) hands the conversion to the writer's thread instead of the agent's. ``value``
    should be the recorder's own copy of what may change later (see ``_lc_capture._snapshot``).
    Every encoder here (``jsonable``, and pydantic-core's fallback) converts it. ``encode``:
    what the writer's JSON columns take instead (``_cencode.c``'s ``column``), the same data
    with parts of it already JSON text (``orjson.Fragment``s of values many runs share)."""

    __slots__ = ("value", "convert", "encode")

    def __init__(self, value: Any, convert: Any, encode: Any = None) -> None:
        self.value = value
        self.convert = convert
        self.encode = encode

    def resolved(self) -> Any:
        """The value as it is written: ``convert(value)``."""
        return self.convert(self.value)

    def __repr__(self) -> str:
        return f"Deferred({self.value!r})"


def settled(value: Any) -> Any:
    """``value`` with a ``Deferred`` (itself, or one of its values when it is a dict) converted:
    what an in-process reader of a run's inputs or outputs (``RunTree.to_run``) is given."""
    if value.__class__ is Deferred:
        return value.resolved()
    if value.__class__ is dict and any(v.__class__ is Deferred for v in value.values()):
        return {k: v.resolved() if v.__class__ is Deferred else v for k, v in value.items()}
    return value


def _fallback(value: Any) -> Any:
    if value.__class__ is Deferred:
        return value.resolved()
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not lose the run that holds it
        return f"<{type(value).__qualname__} object (its repr failed)>"


_BAD_BYTES = "invalid utf-8 sequence"  # pydantic-core's words for bytes that are not text


_SCALARS = frozenset((str, int, float, bool, type(None)))


def jsonable(value: Any) -> Any:
    """Turn arbitrary Python values (models, dataclasses, datetimes...) into plain JSON data."""
    if value.__class__ in _SCALARS:  # the common case: nothing to convert
        return value
    if value.__class__ is Deferred:
        return value.resolved()
    try:
        return pydantic_core.to_jsonable_python(value, fallback=_fallback, serialize_unknown=True)
    except UnicodeEncodeError:  # a key with a lone surrogate: containers by hand
        if isinstance(value, dict):
            return {k if isinstance(k, str) else str(jsonable(k)): jsonable(v)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [jsonable(v) for v in value]
        raise
    except ValueError as exc:
        if _BAD_BYTES in str(exc):  # binary data (an image's bytes): as base64 text
            return pydantic_core.to_jsonable_python(value, fallback=_fallback,
                                                    serialize_unknown=True, bytes_mode="base64")
        # past pydantic-core's depth (~250 levels): containers by hand
        if "serialization depth" not in str(exc) or not isinstance(value, (dict, list, tuple)):
            raise
        return _plain(value)


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\x00":
        return _ESC + "0"
    if char == _ESC:
        return _ESC + _ESC
    return _ESC + chr(ord(char) - _SURROGATE_BASE + _PRIVATE_BASE)


def escape_text(text: str) -> str:
    """``text`` in its storable form (itself unless it holds NUL, lone surrogates or U+FDD0)."""
    return _SPECIAL.sub(_escape_char, text)


def _unescape_char(match: re.Match[str]) -> str:
    char = match.group(1)
    if char == "0":
        return "\x00"
    if char == _ESC:
        return _ESC
    code = ord(char) - _PRIVATE_BASE
    return chr(_SURROGATE_BASE + code) if 0 <= code < 0x800 else match.group()


def unescape_text(text: str) -> str:
    return _ESCAPED.sub(_unescape_char, text) if _ESC in text else text


def escape(value: Any) -> Any:
    """``value`` with every string (keys too) in its storable form (see the module doc)."""
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, dict):
        return {escape(k) if isinstance(k, str) else k: escape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escape(v) for v in value]
    if value.__class__ is Deferred:
        return escape(value.resolved())
    return value


def unescape(value: Any) -> Any:
    if isinstance(value, str):
        return unescape_text(value)
    if isinstance(value, dict):
        return {unescape_text(k) if isinstance(k, str) else k: unescape(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [unescape(v) for v in value]
    return value


def _escape_model(value: Any) -> Any:
    """``escape`` that also reaches into pydantic models (a copy, fields set kept)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_copy(update={name: _escape_model(getattr(value, name))
                                        for name in type(value).model_fields})
    if isinstance(value, dict):
        return {escape_text(k) if isinstance(k, str) else k: _escape_model(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_escape_model(v) for v in value]
    return escape_text(value) if isinstance(value, str) else value


TOO_DEEP = "a value nests objects or arrays too deeply to be stored"


def _plain(value: Any) -> Any:
    """``jsonable`` for a value past pydantic-core's serialization depth (~250 levels, which
    stored values may be): containers walked here, anything else converted as usual."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return jsonable(value)


def model_jsonable(model: pydantic.BaseModel, **kwargs: Any) -> Any:
    """``model.model_dump(mode="json", **kwargs)`` that keeps lone surrogates exact, keys too.

    pydantic writes a ``dict[str, Any]`` key holding a lone surrogate as U+FFFD and refuses one
    deeper down (``UnicodeEncodeError``); those models (rare) are dumped in their ``escape``d
    form and unescaped after, so the wire gets back the strings that were sent.
    """
    try:
        data = model.model_dump(mode="json", **kwargs)
        try:  # orjson: ~10x cheaper than pydantic's encoder for this look; refuses surrogates
            encoded = orjson.dumps(data)
        except orjson.JSONEncodeError:
            encoded = _to_json(data)  # a lone surrogate in a value (kept): look the slow way
        if _REPLACEMENT not in encoded:  # nothing replaced: the common case
            return data
    except (UnicodeEncodeError, ValueError) as exc:
        if "serialization depth" in str(exc):  # a stored value nested past pydantic-core's
            return _plain(model.model_dump(**kwargs))
        if not isinstance(exc, (UnicodeEncodeError, pydantic_core.PydanticSerializationError)):
            raise
        # else a lone surrogate somewhere
    return unescape(_escape_model(model).model_dump(mode="json", **kwargs))


def _to_json(value: Any) -> bytes:
    try:
        out = pydantic_core.to_json(value, fallback=_fallback, serialize_unknown=True)
    except pydantic_core.PydanticSerializationError as exc:
        if _BAD_BYTES not in str(exc):
            raise
        # binary data (an image's bytes) as base64 text: the run is kept (it was refused)
        out = pydantic_core.to_json(value, fallback=_fallback, serialize_unknown=True,
                                    bytes_mode="base64")
    if b'"..."' in out:  # maybe a value past pydantic-core's depth, which it writes as "..."
        return _exact(value, out)
    return out


def _exact(value: Any, out: bytes) -> bytes:
    """The text of a value pydantic-core cut short at its depth (~250 levels) with ``"..."``:
    ``json``'s, whole (a stored example or feedback value was silently truncated before). A
    cycle stays pydantic-core's ``"..."``; a value past the interpreter's depth is refused."""
    try:
        return json.dumps(value, default=jsonable, ensure_ascii=True,
                          separators=(",", ":")).encode()
    except ValueError:  # a circular reference: nothing to write whole
        return out
    except RecursionError:
        from .errors import InvalidInputError

        raise InvalidInputError(TOO_DEEP) from None


def dumps(value: Any) -> str:
    """JSON text of ``value``; lone surrogates as ``\\ud800`` escapes (``json`` reads them
    back), which pydantic-core cannot write."""
    try:
        return _to_json(value).decode()
    except pydantic_core.PydanticSerializationError as exc:
        if "surrogates not allowed" not in str(exc):
            raise
        return json.dumps(value, default=jsonable, ensure_ascii=True)


def dumps_column(value: Any) -> str:
    """JSON text of ``value`` as stored in a JSON column (the engines' serializer): strings
    holding NUL, lone surrogates or U+FDD0 in their ``escape``d form."""
    try:
        out = _to_json(value)
    except pydantic_core.PydanticSerializationError as exc:
        if "surrogates not allowed" not in str(exc):
            raise
        return _to_json(escape(value)).decode()
    if b"\\u0000" in out or (not out.isascii() and _ESC_UTF8 in out):
        out = _to_json(escape(value))
    return out.decode()


def loads_column(data: str | bytes) -> Any:
    """A JSON column's value as it was written (the engines' deserializer; see
    ``dumps_column``).

    pydantic-core's parser first: it reads a run's small JSON values about 3.5x faster than
    ``json``, and they were a third of ``list_runs``. What it refuses and ``json`` reads (a
    lone surrogate escape written by an earlier version, nesting past its depth limit) goes
    through ``json`` as before; for everything both read, the values are the same."""
    try:
        value = pydantic_core.from_json(data)
    except ValueError:
        value = json.loads(data)
    if _ESC in data if isinstance(data, str) else _ESC_UTF8 in data:
        value = unescape(value)
    return value


# JSON text read by raw SQL (which bypasses the engines' deserializer): read as the engines
# read it (a value nested past pydantic-core's depth, ~200 levels, goes through ``json``)
from_json_column = loads_column


def dumpb(value: Any) -> bytes:
    """``dumps`` as UTF-8 bytes, for payloads stored as blobs (the run journal).

    orjson first (about twice as fast on run dicts), with ``jsonable`` for the types it does not
    know; what it refuses outright (integers past 64 bits, non-string keys) goes through
    pydantic-core as ``dumps`` does, and lone surrogates through ``json`` (as ``\\ud800``
    escapes, which ``loads`` reads back; they are escaped where they are stored).
    """
    try:
        return orjson.dumps(value, default=jsonable)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        try:
            return _to_json(value)
        except pydantic_core.PydanticSerializationError as exc:
            if "surrogates not allowed" not in str(exc):
                raise
            return json.dumps(value, default=jsonable, ensure_ascii=True).encode()


def loads(text: str | bytes) -> Any:
    return json.loads(text)
