"""Attribute values as the OTel mappings read them: JSON text back to data, counts as ints."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["as_dict", "parse_json", "parse_result", "to_int"]


def parse_json(value: Any) -> Any:
    """Attribute values that hold JSON (messages, arguments) back to data."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, tuple):
        return [parse_json(v) for v in value]
    return value


def as_dict(value: Any, key: str) -> dict[str, Any]:
    """An attribute holding a JSON object as that object, anything else under ``key``."""
    value = parse_json(value)
    return value if isinstance(value, dict) else {key: value}


def parse_result(value: Any) -> Any:
    """A tool call's result attribute: JSON as ``parse_json`` reads it, and a JSON string
    literal (``"\\"2.1 million\\""``: the AI SDK and others serialize every result) as its
    text."""
    if isinstance(value, str) and len(value) > 1 and value[0] == value[-1] == '"':
        try:
            return json.loads(value)
        except ValueError:
            return value
    return parse_json(value)


def to_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
