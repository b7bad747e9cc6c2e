"""Reading JSON out of model replies, and JSON schemas that strict endpoints accept.

Models that do not support structured output still usually answer with a JSON object, but wrap
it in code fences or a sentence of prose. ``extract_json_object`` finds that object; anything
else is a clear ``ValueError`` the caller can send back to the model.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["describe_validation_error", "extract_json_object", "snippet", "strict_json_schema"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def snippet(text: str, limit: int = 200) -> str:
    """A short, single-line excerpt of a reply for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _first_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a reply: the whole text, a fenced block, or the first object in prose."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the reply was empty, expected a JSON object")
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    if value is not None:
        raise ValueError(f"the reply is JSON but not an object: {snippet(stripped)!r}")
    for block in _FENCE.findall(stripped):
        found = _first_object(block)
        if found is not None:
            return found
    found = _first_object(stripped)
    if found is not None:
        return found
    raise ValueError(f"no JSON object found in the reply: {snippet(stripped)!r}")


def describe_validation_error(exc: ValidationError) -> str:
    """``score: Input should be less than or equal to 10 (got 11)``, one clause per problem."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        got = err.get("input")
        tail = "" if err.get("type") == "missing" else f" (got {snippet(repr(got), 60)})"
        parts.append(f"{loc}: {err.get('msg')}{tail}")
    return "; ".join(parts)


_DROP = ("title", "default", "examples")
_UNSUPPORTED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
                "maxLength", "pattern", "format", "multipleOf")


def _tighten(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _tighten(v) for k, v in node.items() if k not in _DROP}
        bounds = {k: out.pop(k) for k in _UNSUPPORTED if k in out}
        if bounds:  # strict modes reject many keywords; say it in words, validation enforces it
            note = ", ".join(f"{k}={v}" for k, v in bounds.items())
            out["description"] = (out.get("description", "") + f" ({note})").strip()
        if out.get("type") == "object" and isinstance(out.get("properties"), dict):
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_tighten(v) for v in node]
    return node


def strict_json_schema(model: type[BaseModel], *, order: list[str] | None = None) -> dict[str, Any]:
    """The model's JSON schema in the subset strict structured-output modes accept.

    Every property required, no additional properties, numeric/string constraints moved into the
    description (pydantic validation still enforces them and a violation is re-asked).
    ``order`` puts some properties first, e.g. reasoning before the score it justifies.
    """
    schema: dict[str, Any] = _tighten(copy.deepcopy(model.model_json_schema()))
    if order and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        ordered = {k: props[k] for k in order if k in props}
        ordered.update({k: v for k, v in props.items() if k not in ordered})
        schema["properties"] = ordered
        schema["required"] = list(ordered)
    return schema
