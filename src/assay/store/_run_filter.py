"""LangSmith's run filter language (``list_runs(filter=, trace_filter=, tree_filter=)``) as SQL
over the ``runs`` table, the same on SQLite and PostgreSQL.

    and(eq(run_type, "llm"), gt(latency, "2s"), has(tags, "beta"))
    and(eq(feedback_key, "correctness"), gte(feedback_score, 0.8))
    or(neq(error, null), and(eq(metadata_key, "user"), eq(metadata_value, "42")))
    search("refund")

Functions: ``and``, ``or``, ``not``; comparators ``eq``, ``neq``, ``gt``, ``gte``, ``lt``,
``lte`` and ``in`` (a list), ``has(tags, "x")`` and ``search([attribute,] "text")``
(case-insensitive substring; alone: the name, error, inputs and outputs). Keyed attributes come
in families whose key and value pair up inside one ``and``: ``and(eq(feedback_key, "k"),
gt(feedback_score, 0.5))`` asks for ONE feedback with that key and such a score, as LangSmith
reads it; likewise ``metadata_key``/``metadata_value`` (``extra.metadata``), ``input_key``/
``input_value`` and ``output_key``/``output_value`` (the top-level keys of inputs/outputs).

A filter is parsed completely before any SQL is made; anything unknown or mistyped raises
``InvalidInputError`` naming it and where it is in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Boolean,
    Text,
    and_,
    case,
    cast,
    false,
    func,
    literal,
    literal_column,
    not_,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

from .._ids import as_uuid
from .._thread_keys import THREAD_KEYS
from .._time import to_micros
from ..errors import InvalidInputError
from ._run_usage import USAGE_COLUMNS, llm_runs_under
from ._tables import feedback, runs

__all__ = ["THREAD_KEYS", "FilterError", "compile_filter", "parse_filter", "text_search",
           "names_a_thread", "thread_id_of", "thread_id_sql"]

MAX_LENGTH = 20_000  # characters in one filter


def thread_id_sql(table: Any, dialect: str) -> ColumnElement[Any]:
    """The thread id of a row of ``runs`` (or an alias), NULL when its metadata names none
    (``store/_threads.py``); the filter language's ``thread_id``."""
    return thread_id_of(table.c.extra, dialect)


def names_a_thread(extra: Any, dialect: str) -> ColumnElement[Any]:
    """Whether a run's ``extra`` text holds one of the thread keys at all: a substring test
    that is cheap beside parsing the JSON, made by the thread index's condition (migration
    0016) for every root the fold stores, so that a root that names no thread costs no parse.
    A query that reads the index says it too (its terms, literally, imply the index's)."""
    text = cast(extra, Text) if dialect == "postgresql" else extra
    find = func.strpos if dialect == "postgresql" else func.instr
    zero: ColumnElement[Any] = literal_column("0")
    return or_(*[find(text, literal_column(f"'\"{k}\"'")) > zero for k in THREAD_KEYS])


def thread_id_of(extra: Any, dialect: str) -> ColumnElement[Any]:
    """``thread_id_sql`` of a run's ``extra`` column. Its paths are literals, not bound
    parameters: the expression is the one the thread index holds (migration 0016), which the
    database uses only for a query that spells it the same way."""
    parts: list[ColumnElement[Any]]
    if dialect == "postgresql":
        parts = [func.json_extract_path_text(extra, literal_column("'metadata'"),
                                             literal_column(f"'{k}'")) for k in THREAD_KEYS]
    else:
        parts = [cast(func.json_extract(extra, literal_column(f"'$.metadata.{k}'")), Text)
                 for k in THREAD_KEYS]
    return func.coalesce(*parts)
MAX_DEPTH = 32  # nested calls


class FilterError(InvalidInputError):
    """A filter that cannot be read or applied; the message quotes the filter's text."""


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Any, ...]
    at: int  # where it starts in the text (for messages)


@dataclass(frozen=True)
class Attr:
    name: str
    at: int


class _Null:
    def __repr__(self) -> str:
        return "null"


NULL: Any = _Null()

_TOKEN = re.compile(r"""\s*(?:
    (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)  # dotted: metadata.foo (examples)
  | (?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<punct>[(),\[\]])
)""", re.VERBOSE | re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_WORDS = {"true": True, "false": False, "null": NULL}
_LIMIT = 2**63


def _fail(text: str, at: int, problem: str) -> FilterError:
    shown = text if len(text) <= 120 else text[:117] + "..."
    return FilterError(f"filter {shown!r}: {problem} (at character {at + 1})")


def parse_filter(text: str) -> Call:
    """The filter as a tree of calls (attributes and literals as leaves)."""
    if not isinstance(text, str):
        raise FilterError(f"a filter must be a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise FilterError(f"a filter may hold at most {MAX_LENGTH} characters, got {len(text)}")
    tokens: list[tuple[str, Any, int]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            at = len(text) - len(text[pos:].lstrip())
            raise _fail(text, at, f"unexpected character {text[at]!r}")
        kind = m.lastgroup or ""
        raw = m.group(kind)
        start = m.start(kind)
        if kind == "num":
            value: Any = float(raw) if any(c in raw for c in ".eE") else int(raw)
            if not -_LIMIT < value < _LIMIT:  # a database's 64-bit integers and doubles
                raise _fail(text, start, f"the number {raw} is out of range")
        elif kind == "str":
            value = _ESCAPE.sub(lambda e: _ESCAPES.get(e.group(1), e.group(1)), raw[1:-1])
        else:
            value = raw
        tokens.append((kind, value, start))
        pos = m.end()
    if not tokens:
        raise FilterError("a filter cannot be empty")
    parser = _Parser(text, tokens)
    node = parser.value(0)
    if parser.i != len(tokens):
        raise _fail(text, tokens[parser.i][2], "unexpected text after the expression")
    if not isinstance(node, Call):
        raise _fail(text, 0, "a filter must be a call such as eq(name, \"x\")")
    return node


class _Parser:
    def __init__(self, text: str, tokens: list[tuple[str, Any, int]]) -> None:
        self.text, self.tokens, self.i = text, tokens, 0

    def _next(self, what: str) -> tuple[str, Any, int]:
        if self.i >= len(self.tokens):
            raise _fail(self.text, len(self.text), f"the filter ends where {what} was expected")
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _expect(self, punct: str) -> None:
        kind, value, at = self._next(repr(punct))
        if kind != "punct" or value != punct:
            raise _fail(self.text, at, f"expected {punct!r}, found {value!r}")

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _fail(self.text, self.tokens[self.i][2], f"nested deeper than {MAX_DEPTH}")
        kind, value, at = self._next("a value")
        if kind in ("num", "str"):
            return value
        if kind == "punct":
            if value != "[":
                raise _fail(self.text, at, f"unexpected {value!r}")
            return self._items("]", depth)
        if self.i < len(self.tokens) and self.tokens[self.i][1] == "(" \
                and self.tokens[self.i][0] == "punct":
            self.i += 1
            return Call(value, self._items(")", depth), at)
        if value in _WORDS:
            return _WORDS[value]
        return Attr(value, at)

    def _items(self, close: str, depth: int) -> tuple[Any, ...]:
        items: list[Any] = []
        if self.i < len(self.tokens) and self.tokens[self.i][1] == close:
            self.i += 1
            return ()
        while True:
            items.append(self.value(depth + 1))
            kind, value, at = self._next(f"',' or {close!r}")
            if kind == "punct" and value == close:
                return tuple(items)
            if kind != "punct" or value != ",":
                raise _fail(self.text, at, f"expected ',' or {close!r}, found {value!r}")


# -- attributes -------------------------------------------------------------------------------
# name -> (column, kind); kinds decide which values and comparators an attribute takes
_COLUMNS: dict[str, tuple[str, str]] = {
    "id": ("id", "uuid"), "trace_id": ("trace_id", "uuid"),
    "parent_run_id": ("parent_run_id", "uuid"), "session_id": ("session_id", "uuid"),
    "project_id": ("session_id", "uuid"), "reference_example_id": ("reference_example_id", "uuid"),
    "name": ("name", "text"), "run_type": ("run_type", "text"), "status": ("status", "text"),
    "error": ("error", "text"), "start_time": ("start_time", "time"),
    "end_time": ("end_time", "time"), "first_token_time": ("first_token_time", "time"),
    "latency": ("latency_us", "duration"), "total_tokens": ("total_tokens", "number"),
    "prompt_tokens": ("prompt_tokens", "number"),
    "completion_tokens": ("completion_tokens", "number"),
    "total_cost": ("total_cost", "number"), "prompt_cost": ("prompt_cost", "number"),
    "completion_cost": ("completion_cost", "number"), "is_root": ("is_root", "bool"),
    "thread_id": ("thread_id", "text"),  # read from the metadata (thread_id_sql)
}
# keyed families: attribute -> (family, part)
_FAMILY = {
    "feedback_key": ("feedback", "key"), "feedback_score": ("feedback", "score"),
    "feedback_value": ("feedback", "value"), "metadata_key": ("metadata", "key"),
    "metadata_value": ("metadata", "value"), "input_key": ("inputs", "key"),
    "input_value": ("inputs", "value"), "output_key": ("outputs", "key"),
    "output_value": ("outputs", "value"),
}
_COMPARE = {"eq", "neq", "gt", "gte", "lt", "lte", "in"}
_ORDERED = {"gt", "gte", "lt", "lte"}
_FUNCTIONS = "and, or, not, eq, neq, gt, gte, lt, lte, in, has, search"
_UNITS = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|ms|s|m|h)?\s*")


def compile_filter(text: str, table: Any, dialect: str) -> ColumnElement[bool]:
    """The SQL condition of ``text`` on ``table`` (``runs`` or an alias of it)."""
    return _Compiler(text, table, dialect).cond(parse_filter(text))


class _Compiler:
    def __init__(self, text: str, table: Any, dialect: str) -> None:
        self.text, self.t, self.pg = text, table, dialect == "postgresql"

    def fail(self, at: int, problem: str) -> FilterError:
        return _fail(self.text, at, problem)

    def cond(self, node: Any) -> ColumnElement[bool]:
        if not isinstance(node, Call):
            raise self.fail(getattr(node, "at", 0), f"expected a condition, found {node!r}")
        name, args = node.name, node.args
        if name in ("and", "or"):
            if not args:
                raise self.fail(node.at, f"{name}() needs at least one condition")
            if name == "or":
                return or_(*(self.cond(a) for a in args))
            return self._and(args)
        if name == "not":
            if len(args) != 1:
                raise self.fail(node.at, "not() takes one condition")
            return not_(self.cond(args[0]))
        if name == "search":
            return self._search(node)
        if name == "has":
            return self._has(node)
        if name in _COMPARE:
            attr = self._attr(node)
            if attr.name in _FAMILY:
                return self._family(_FAMILY[attr.name][0], [node])
            return self._compare(node, attr)
        raise self.fail(node.at, f"unknown function {name!r}: use {_FUNCTIONS}")

    def _and(self, args: tuple[Any, ...]) -> ColumnElement[bool]:
        """Comparisons on one keyed family inside one ``and`` describe one entry of it."""
        families: dict[str, list[Call]] = {}
        rest: list[ColumnElement[bool]] = []
        for arg in args:
            if isinstance(arg, Call) and arg.name in _COMPARE | {"search"} and arg.args \
                    and isinstance(arg.args[0], Attr) and arg.args[0].name in _FAMILY:
                families.setdefault(_FAMILY[arg.args[0].name][0], []).append(arg)
            else:
                rest.append(self.cond(arg))
        rest += [self._family(fam, calls) for fam, calls in families.items()]
        return and_(*rest)

    def _attr(self, node: Call) -> Attr:
        if len(node.args) != 2 or not isinstance(node.args[0], Attr):
            raise self.fail(node.at, f"{node.name}() takes an attribute and a value, as in "
                                     f"{node.name}(name, \"x\")")
        attr = node.args[0]
        if attr.name not in _COLUMNS and attr.name not in _FAMILY:
            if attr.name == "tags":
                raise self.fail(attr.at, "tags are matched with has(tags, \"x\")")
            known = ", ".join(sorted([*_COLUMNS, *_FAMILY, "tags"]))
            raise self.fail(attr.at, f"unknown attribute {attr.name!r}: use {known}")
        return attr

    # -- plain columns ------------------------------------------------------------------------
    def _value(self, attr: Attr, kind: str, value: Any, op: str) -> Any:
        """``value`` as the column holds it, or a clear error."""
        if value is NULL:
            if op not in ("eq", "neq"):
                raise self.fail(attr.at, f"{attr.name} compares with null only by eq or neq")
            return NULL
        if isinstance(value, (Attr, Call, tuple)):
            raise self.fail(attr.at, f"{attr.name} is compared with a literal value")
        try:
            if kind == "uuid":
                return str(as_uuid(value, attr.name)) if isinstance(value, str) else _bad()
            if kind == "text":
                return value if isinstance(value, str) else _bad()
            if kind == "time":
                return to_micros(value) if isinstance(value, str) else _bad()
            if kind == "duration":
                micros = _duration(value)
                return micros if -_LIMIT < micros < _LIMIT else _bad()
            if kind == "number":
                return value if isinstance(value, (int, float)) and not isinstance(
                    value, bool) else _bad()
            if kind == "bool":
                return value if isinstance(value, bool) else _bad()
        except (ValueError, TypeError, OverflowError, InvalidInputError):
            pass
        wanted = {"uuid": "a UUID string", "text": "a string", "time": "an ISO time string",
                  "duration": "seconds, or a string such as \"2s\" or \"150ms\"",
                  "number": "a number", "bool": "true or false"}[kind]
        raise self.fail(attr.at, f"{attr.name} takes {wanted}, got {_show(value)}")

    def _compare(self, node: Call, attr: Attr) -> ColumnElement[bool]:
        column, kind = _COLUMNS[attr.name]
        col = self._column(column)
        op, raw = node.name, node.args[1]
        if kind == "bool" and op not in ("eq", "neq"):
            raise self.fail(node.at, f"{attr.name} is true or false: use eq or neq")
        if op == "in":
            if not isinstance(raw, tuple) or not raw:
                raise self.fail(node.at, f"in({attr.name}, [...]) takes a non-empty list")
            return col.in_([self._value(attr, kind, v, "in") for v in raw])
        if attr.name == "error" and isinstance(raw, bool) and op in ("eq", "neq"):
            # eq(error, true): the runs that failed, as list_runs(error=True) gives them
            return col.is_not(None) if raw == (op == "eq") else col.is_(None)
        value = self._value(attr, kind, raw, op)
        return _apply(col, op, value)

    def _column(self, name: str) -> ColumnElement[Any]:
        if name == "thread_id":
            return thread_id_sql(self.t, "postgresql" if self.pg else "sqlite")
        column: ColumnElement[Any] = self.t.c[name]
        if name in _USAGE:
            return _with_subtree(self.t, column, name)
        return column

    # -- has, search --------------------------------------------------------------------------
    def _has(self, node: Call) -> ColumnElement[bool]:
        if len(node.args) != 2 or not isinstance(node.args[0], Attr) \
                or node.args[0].name != "tags" or not isinstance(node.args[1], str):
            raise self.fail(node.at, "has() takes the tags and a string: has(tags, \"x\")")
        tag = node.args[1]
        if self.pg:
            # a NULL tags column holds no tag: not(has(...)) keeps its run, as on SQLite
            contains = cast(self.t.c.tags, JSONB).op("@>", is_comparison=True)(
                func.jsonb_build_array(cast(tag, Text)))  # runs' JSON is json text: cast
            return func.coalesce(contains, false(), type_=Boolean)
        each = func.json_each(self.t.c.tags).table_valued("value")
        return select(literal(1)).select_from(each).where(each.c.value == tag).exists()

    def _search(self, node: Call) -> ColumnElement[bool]:
        args = node.args
        if len(args) == 1 and isinstance(args[0], str):
            return text_search(args[0], self.t, "postgresql" if self.pg else "sqlite")
        if len(args) == 2 and isinstance(args[0], Attr) and isinstance(args[1], str):
            if args[0].name in _FAMILY:
                return self._family(_FAMILY[args[0].name][0], [node])
            if args[0].name in _COLUMNS and _COLUMNS[args[0].name][1] == "text":
                found: ColumnElement[bool] = self._column(_COLUMNS[args[0].name][0]).icontains(
                    args[1], autoescape=True)
                return found
        raise self.fail(node.at, "search() takes a string, or a text attribute and a string: "
                                 "search(\"x\"), search(name, \"x\")")

    # -- keyed families -----------------------------------------------------------------------
    def _family(self, family: str, calls: list[Call]) -> ColumnElement[bool]:
        """One entry of the family (a feedback row, a metadata key) meeting every call."""
        if family == "feedback":
            f = feedback.alias()
            cols: dict[str, tuple[ColumnElement[Any], str]] = {
                "key": (f.c.key, "text"), "score": (f.c.score, "number"),
                "value": (f.c.label, "text")}
            conds = [self._part(c, cols) for c in calls]
            return select(literal(1)).select_from(f).where(
                f.c.run_id == self.t.c.id, f.c.tenant_id == self.t.c.tenant_id, *conds).exists()
        column = self.t.c.extra if family == "metadata" else self.t.c[family]
        if self.pg:
            doc = column["metadata"] if family == "metadata" else column
            each = func.json_each_text(
                case((func.json_typeof(doc) == "object", doc))).table_valued("key", "value")
            value: ColumnElement[Any] = each.c.value
        else:
            each = func.json_each(column, "$.metadata" if family == "metadata" else "$"
                                  ).table_valued("key", "value", "type")
            # JSON true/false read as 1/0 in SQLite: spelled as PostgreSQL's text gives them
            value = case((each.c.type == "true", "true"), (each.c.type == "false", "false"),
                         else_=cast(each.c.value, Text))
        cols = {"key": (each.c.key, "text"), "value": (value, "text")}
        conds = [self._part(c, cols) for c in calls]
        return select(literal(1)).select_from(each).where(
            and_(*conds)).exists()

    def _part(self, node: Call, cols: dict[str, tuple[ColumnElement[Any], str]]
              ) -> ColumnElement[bool]:
        attr = node.args[0]
        part = _FAMILY[attr.name][1]
        col, kind = cols[part]
        if len(node.args) != 2:
            raise self.fail(node.at, f"{node.name}() takes an attribute and a value")
        if node.name == "search":
            if not isinstance(node.args[1], str) or kind != "text":
                raise self.fail(node.at, f"search({attr.name}, ...) takes a string, on a key "
                                         "or a value that is text")
            return col.icontains(node.args[1], autoescape=True)
        op, raw = node.name, node.args[1]
        if kind == "text" and op in _ORDERED:
            raise self.fail(node.at, f"{attr.name} compares as text: use eq, neq, in or search")
        if kind == "text" and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            raw = _number_text(raw)  # metadata_value 42 matches the stored 42
        elif kind == "text" and isinstance(raw, bool):
            raw = "true" if raw else "false"
        if op == "in":
            if not isinstance(raw, tuple) or not raw:
                raise self.fail(node.at, f"in({attr.name}, [...]) takes a non-empty list")
            return col.in_([self._value(attr, kind, _as_text(v) if kind == "text" else v, "in")
                            for v in raw])
        return _apply(col, op, self._value(attr, kind, raw, op))


_USAGE = frozenset(USAGE_COLUMNS)


def _with_subtree(table: Any, column: ColumnElement[Any], name: str) -> ColumnElement[Any]:
    """A usage attribute as reads give it (``_run_usage.roll_up_usage``): an llm run's own, a
    chain's summed over the llm calls under it, as LangSmith filters them (``and(eq(run_type,
    "chain"), gt(total_tokens, 5000))``: its SDK's own example). A correlated sum over the
    run's trace (``ix_runs_trace``) for each non-llm run the condition is asked of."""
    below = runs.alias("usage_below")
    summed = select(func.sum(below.c[name])).where(
        llm_runs_under(table, below)).scalar_subquery()
    return case((table.c.run_type == "llm", column), else_=func.coalesce(column, summed))


def text_search(text: str, table: Any, dialect: str | None = None) -> ColumnElement[bool]:
    """A case-insensitive substring of the name, error, inputs or outputs (``search("x")``,
    ``list_runs(query=...)``); ``%`` and ``_`` are literal.

    On SQLite ``LIKE`` already ignores case exactly as its ``lower()`` does (ASCII letters
    only), so the plain ``LIKE`` finds the same runs without copying every document through
    ``lower()`` first: about half the cost of a search."""
    cols = (table.c.name, table.c.error, cast(table.c.inputs, Text), cast(table.c.outputs, Text))
    if dialect == "sqlite":
        return or_(*(col.contains(text, autoescape=True) for col in cols))
    return or_(*(col.icontains(text, autoescape=True) for col in cols))


def _apply(col: ColumnElement[Any], op: str, value: Any) -> ColumnElement[bool]:
    if value is NULL:
        return col.is_(None) if op == "eq" else col.is_not(None)
    if op == "eq":
        equal: ColumnElement[bool] = col == value
        return equal
    if op == "neq":  # a missing value differs from any value
        return or_(col.is_(None), col != value)
    ordered: dict[str, ColumnElement[bool]] = {"gt": col > value, "gte": col >= value,
                                               "lt": col < value, "lte": col <= value}
    return ordered[op]


def _bad() -> Any:
    raise ValueError


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _number_text(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _as_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value)
    return value


def _duration(value: Any) -> int:
    """Seconds (a number) or a string with a unit (``"2s"``, ``"150ms"``) as microseconds."""
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, (int, float)):
        return round(value * 1_000_000)
    m = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise ValueError
    return round(float(m.group(1)) * _UNITS[m.group(2) or "s"])
