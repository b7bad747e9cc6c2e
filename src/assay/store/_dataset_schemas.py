"""A dataset's ``inputs_schema``/``outputs_schema`` (JSON Schema), enforced on every example
written, as LangSmith does.

A schema is checked against its own metaschema when set (one that is not valid JSON Schema is
refused, never stored). Every example created or updated in a dataset with a schema is
validated before anything is written; the first failure names the example, the side
(``inputs``/``outputs``), the path inside it and what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ExampleValidationError, InvalidInputError

__all__ = ["SchemaCheck", "check_schema"]


def _validator_class(schema: Mapping[str, Any]) -> Any:
    from jsonschema.validators import validator_for

    return validator_for(schema)


def check_schema(schema: Any, which: str) -> dict[str, Any] | None:
    """``schema`` if it is valid JSON Schema (None stays None); InvalidInputError otherwise."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise InvalidInputError(f"{which} must be a JSON Schema object, got "
                                f"{type(schema).__name__}")
    from jsonschema.exceptions import SchemaError

    checked: dict[str, Any] = dict(schema)
    try:
        _validator_class(checked).check_schema(checked)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise InvalidInputError(f"{which} is not valid JSON Schema at {where}: "
                                f"{exc.message}") from None
    return checked


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


class SchemaCheck:
    """The validators of one dataset's schemas, built once per write."""

    def __init__(self, inputs_schema: Mapping[str, Any] | None,
                 outputs_schema: Mapping[str, Any] | None) -> None:
        self._validators: dict[str, Any] = {}
        self._schemas = {"inputs": inputs_schema, "outputs": outputs_schema}
        for side, schema in self._schemas.items():
            if schema:
                cls = _validator_class(schema)
                self._validators[side] = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def __bool__(self) -> bool:
        return bool(self._validators)

    def example(self, index: int | None, ex_id: str, inputs: Any, outputs: Any) -> None:
        """Raise ExampleValidationError for the first way the example breaks a schema."""
        for side, value in (("inputs", inputs), ("outputs", outputs)):
            validator = self._validators.get(side)
            if validator is None or value is None:  # no outputs: nothing to check
                continue
            from jsonschema.exceptions import best_match

            error = best_match(validator.iter_errors(value))
            if error is not None:
                where = side + _path(error.absolute_path)
                problem = (f"example {ex_id}: {where} does not match the dataset's "
                           f"{side}_schema: {error.message}")
                if index is None:
                    raise InvalidInputError(problem)
                raise ExampleValidationError(index, problem)
