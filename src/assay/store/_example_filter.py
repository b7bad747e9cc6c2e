"""LangSmith's filter language on examples (``list_examples(filter=...)``).

    exists(metadata, "tenant_id")
    and(not(has(metadata, '{"foo": "bar"}')), exists(metadata, "tenant_id"))
    or(eq(metadata.foo, "bar"), gt(outputs.score, 0.5), search("refund"))

The text is parsed by the run filter's parser (``_run_filter.parse_filter``: same tokens,
quoting, nesting limits and error messages) and compiled, completely and before anything is
read, into a predicate on examples; anything unknown raises ``FilterError`` naming it and its
place in the text. Functions: ``and``, ``or``, ``not``; ``eq``, ``neq``, ``gt``, ``gte``,
``lt``, ``lte``, ``in`` on an attribute; ``exists(field, "key")`` (the key is set in
``metadata``/``inputs``/``outputs``; dotted keys reach inside); ``has(field, '<json object>')``
(the field holds every key and value of that object, nested objects compared the same way);
``search("text")`` (case-insensitive, in the inputs, outputs and metadata). Attributes: ``id``,
``created_at``, ``modified_at``, and ``metadata.<key>``, ``inputs.<key>``, ``outputs.<key>``
(dotted for nested keys). A missing key compares unequal: ``eq`` is false and ``neq`` true.

The predicate runs on the examples the other arguments (dataset, version, splits, metadata)
select. The common conditions ANDed at the top, ``eq(metadata.key, "text")`` and
``exists(metadata, "key")`` on a plain top-level key (``metadata_prefilter``), are checked in
SQL first, so only the rows that can match are read and decoded; the predicate still decides
(the SQL check is necessary for a match, never sufficient: types and escapes stay exact).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from .._time import to_micros
from ._run_filter import NULL, Attr, Call, FilterError, parse_filter

__all__ = ["Predicate", "compile_example_filter", "metadata_prefilter"]

Predicate = Callable[[Any], bool]
_MISSING = object()
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,200}")
_FIELDS = ("metadata", "inputs", "outputs")
_TIMES = ("created_at", "modified_at")
_ORDER = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}
_COMPARE = ("eq", "neq", "gt", "gte", "lt", "lte", "in")
_FUNCTIONS = "and, or, not, eq, neq, gt, gte, lt, lte, in, exists, has, search"
_ATTRIBUTES = "id, created_at, modified_at, metadata.<key>, inputs.<key>, outputs.<key>"


def metadata_prefilter(text: str) -> list[tuple[str, str, str | None]]:
    """The conditions of ``text`` that SQL can check before the predicate runs: ``("eq", key,
    text)`` for ``eq(metadata.key, "text")`` and ``("exists", key, None)`` for
    ``exists(metadata, "key")`` / ``exists(metadata.key)``, when they are ANDed at the top (the
    whole filter, or an ``and``'s direct arguments) on a plain key (letters, digits, ``_``,
    ``-``; not the ``dataset_split`` every example reads back). Each is true of every example
    the filter keeps, so selecting by them first narrows what is read, never the result."""
    node = parse_filter(text)
    parts = node.args if isinstance(node, Call) and node.name == "and" else (node,)
    out: list[tuple[str, str, str | None]] = []
    for part in parts:
        args: tuple[Any, ...] = part.args if isinstance(part, Call) else ()
        if not args or not isinstance(args[0], Attr):
            continue
        field, _, key = args[0].name.partition(".")
        value = args[1] if len(args) == 2 else None
        if field != "metadata":
            continue
        if part.name == "exists" and len(args) == 2 and not key:
            key = value if isinstance(value, str) else ""
        elif not (part.name == "exists" and len(args) == 1
                  or part.name == "eq" and isinstance(value, str)):
            continue
        if _PLAIN_KEY.fullmatch(key) and key != "dataset_split":
            out.append(("eq", key, value) if part.name == "eq" else ("exists", key, None))
    return out


def compile_example_filter(text: str) -> Predicate:
    """The predicate of ``text`` on an Example (anything with the Example's attributes)."""
    return _Compiler(text).node(parse_filter(text))


def _dig(value: Any, path: list[str]) -> Any:
    for part in path:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _contains(have: Any, want: Any) -> bool:
    """JSON containment (PostgreSQL's ``@>``): every key and value of ``want`` is in ``have``."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(
            k in have and _contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and all(any(_contains(h, w) for h in have) for w in want)
    return _same(have, want)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _ordered(a: Any, b: Any, op: str) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if not ((isinstance(a, numbers) and isinstance(b, numbers))
            or (isinstance(a, str) and isinstance(b, str))):
        return False
    return bool(_ORDER[op](a, b))


class _Compiler:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, at: int, problem: str) -> FilterError:
        from ._run_filter import _fail

        return _fail(self.text, at, problem)

    def node(self, node: Any) -> Predicate:
        if not isinstance(node, Call):
            at = getattr(node, "at", 0)
            raise self.fail(at, f"expected a call such as eq(metadata.key, \"x\"), got {node!r}")
        name, args = node.name, node.args
        if name in ("and", "or"):
            if not args:
                raise self.fail(node.at, f"{name}() needs at least one argument")
            parts = [self.node(a) for a in args]
            if name == "and":
                return lambda ex: all(p(ex) for p in parts)
            return lambda ex: any(p(ex) for p in parts)
        if name == "not":
            if len(args) != 1:
                raise self.fail(node.at, "not() takes exactly one argument")
            inner = self.node(args[0])
            return lambda ex: not inner(ex)
        if name in _COMPARE:
            return self.compare(node)
        if name == "exists":
            return self.exists(node)
        if name == "has":
            return self.has(node)
        if name == "search":
            return self.search(node)
        raise self.fail(node.at, f"unknown function {name!r}: use {_FUNCTIONS}")

    def getter(self, attr: Any, node: Call) -> tuple[str, Callable[[Any], Any]]:
        """(kind, read) of an attribute; kind: 'id', 'time' or 'json'."""
        if not isinstance(attr, Attr):
            raise self.fail(node.at, f"{node.name}() takes an attribute first, got {attr!r}")
        name = attr.name
        if name == "id":
            return "id", lambda ex: str(ex.id)
        if name in _TIMES:
            return "time", lambda ex: to_micros(getattr(ex, name))
        field, _, rest = name.partition(".")
        if field in _FIELDS and rest:
            path = rest.split(".")
            return "json", lambda ex: _dig(getattr(ex, field) or {}, path)
        raise self.fail(attr.at, f"unknown attribute {name!r} for examples: use {_ATTRIBUTES}")

    def literal(self, kind: str, value: Any, node: Call) -> Any:
        if isinstance(value, (Attr, Call, tuple)) and node.name != "in":
            raise self.fail(node.at, f"{node.name}() compares with a value, got {value!r}")
        if value is NULL:
            return None
        if kind == "time":
            if not isinstance(value, (str, datetime)):
                raise self.fail(node.at, f"{node.name}(): a time must be an ISO 8601 string")
            try:
                return to_micros(value)
            except (ValueError, TypeError):
                raise self.fail(node.at, f"{node.name}(): {value!r} is not an ISO 8601 "
                                "time") from None
        if kind == "id":
            return str(value)
        return value

    def compare(self, node: Call) -> Predicate:
        if len(node.args) != 2:
            raise self.fail(node.at, f"{node.name}() takes an attribute and a value")
        kind, read = self.getter(node.args[0], node)
        op, raw = node.name, node.args[1]
        if op == "in":
            if not isinstance(raw, tuple):
                raise self.fail(node.at, "in() takes an attribute and a list [..] of values")
            values = [self.literal(kind, v, Call("eq", (), node.at)) for v in raw]
            return lambda ex: any(_same(_none(read(ex)), v) for v in values)
        want = self.literal(kind, raw, node)
        if op == "eq":
            return lambda ex: _same(_none(read(ex)), want)
        if op == "neq":
            return lambda ex: not _same(_none(read(ex)), want)
        if want is None:
            raise self.fail(node.at, f"{op}() cannot compare with null")
        return lambda ex: _ordered(read(ex), want, op)

    def _field(self, node: Call) -> tuple[str, list[str]]:
        first = node.args[0] if node.args else None
        if not isinstance(first, Attr):
            raise self.fail(node.at, f"{node.name}() takes metadata, inputs or outputs first")
        field, _, rest = first.name.partition(".")
        if field not in _FIELDS:
            raise self.fail(first.at, f"{node.name}() works on metadata, inputs or outputs, "
                            f"not {first.name!r}")
        return field, rest.split(".") if rest else []

    def exists(self, node: Call) -> Predicate:
        field, base = self._field(node)
        if len(node.args) == 1 and base:  # exists(metadata.foo)
            path = base
        elif len(node.args) == 2 and isinstance(node.args[1], str) and node.args[1]:
            path = base + node.args[1].split(".")
        else:
            raise self.fail(node.at, 'exists() takes a field and a key: exists(metadata, "k")')
        return lambda ex: _dig(getattr(ex, field) or {}, path) is not _MISSING

    def has(self, node: Call) -> Predicate:
        field, base = self._field(node)
        if len(node.args) != 2:
            raise self.fail(node.at, "has() takes a field and a JSON object: "
                            "has(metadata, '{\"k\": \"v\"}')")
        raw = node.args[1]
        want = raw
        if isinstance(raw, str):
            try:
                want = json.loads(raw)
            except ValueError:
                want = raw
        if isinstance(want, (Attr, Call, tuple)):
            raise self.fail(node.at, "has() takes a JSON object as its second argument")
        if not isinstance(want, Mapping) and not base:
            raise self.fail(node.at, f"has({field}, ...) takes a JSON object such as "
                            "'{\"k\": \"v\"}'")
        return lambda ex: _contains(_dig(getattr(ex, field) or {}, base), want)

    def search(self, node: Call) -> Predicate:
        if len(node.args) != 1 or not isinstance(node.args[0], str):
            raise self.fail(node.at, 'search() takes the text to find: search("refund")')
        needle = node.args[0].casefold()

        def found(ex: Any) -> bool:
            return any(needle in json.dumps(getattr(ex, f) or {}, ensure_ascii=False).casefold()
                       for f in _FIELDS)
        return found


def _none(value: Any) -> Any:
    """A missing key reads as null: ``eq(metadata.k, null)`` matches it, ``eq`` with a value
    does not, ``neq`` does."""
    return None if value is _MISSING else value
