"""``RunTree``: one traced step, built cheaply on the hot path and turned into a wire dict later.

The hot path only records what cannot be recovered afterwards: an id (UUID v7 text; ``run.id``
parses it when read), integer epoch microseconds, the parent object, inputs and outputs as the
caller gave them; metadata, tags, events and the list of children are made on first use. The hot
paths make runs with ``fast_child``/``fast_root`` and end them with ``close``: the C extension
``_speedups`` where it is built (~0.2 us a run), else the classmethods below (~0.8 us: the id
from uuid_utils, the clock and two dozen slot stores in bytecode).
Everything else — the dotted order, datetimes, the LangSmith wire dict — comes later: a finished
run reaches the local store's journal as the tuple of its own attributes (``ROW``, one C call,
serialized by orjson without a Python step per value), and the dotted order of a root, or of a
child whose parent was queued first, is derived by the store's fold (from the start time, the id
and the parent's order). So a sync traced call pays its caller about 1.2 us where the C
extension is built (``_call.c`` runs the whole call; ~2 us in Python), and the writer about one
more.
"""

from __future__ import annotations

import logging
import operator
import os
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._compiled import compiled
from .._ids import as_uuid, new_id_text, uuid_text
from .._ids import dotted_segment_us as _segment
from .._json import settled
from .._time import to_micros
from ..errors import InvalidInputError
from ..schemas import RUN_TYPES, Run
from ._pending import SETTLERS
from ._pending import settle as _settle_pending

if TYPE_CHECKING:
    from ..client import Client
    from ._writer import RunWriter

__all__ = ["ROW", "ROW_SLOTS", "RUN_TYPES", "SPEEDUPS", "RunTree", "close", "fast_child",
           "fast_root", "format_error", "rows", "take"]

_RUN_TYPES = frozenset(RUN_TYPES)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RUNTIME = {"sdk": "assay", "library": "assay", "runtime": "python"}
_new_id = new_id_text
_time_ns = time.time_ns
log = logging.getLogger("assay.tracing")


def _now_us() -> int:
    return _time_ns() // 1000


def _us_to_dt(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def _dt_to_us(value: datetime | float | str) -> int:
    try:
        out = to_micros(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"not a timestamp: {value!r}") from exc
    assert out is not None
    return out


def format_error(error: BaseException | str) -> str:
    """``Type: message`` followed by the traceback (the exception's own, where it was raised)."""
    if isinstance(error, str):
        return error
    try:
        head = f"{type(error).__name__}: {error}"
    except Exception:  # its __str__ raised: the traceback below says so too
        head = f"{type(error).__name__}: <str() failed>"
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return f"{head}\n\n{tb}"


def _as_inputs(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    return {"input": value}


_PLAIN = frozenset({str, int, float, bool, list, tuple, type(None), bytes})


def _as_outputs(value: Any) -> dict[str, Any]:
    cls = type(value)
    if cls is dict:
        same: dict[str, Any] = value
        return same
    if cls in _PLAIN:  # skip the (slow) Mapping ABC check for the common cases
        return {"output": value}
    if isinstance(value, Mapping):
        return dict(value)
    return {"output": value}


def check_run_type(run_type: str) -> str:
    if run_type not in _RUN_TYPES:
        raise InvalidInputError(
            f"run_type must be one of {', '.join(RUN_TYPES)}; got {run_type!r}")
    return run_type


class _OnFirstUse:
    """A run's container attribute, kept as None in a slot of its own until first read: most
    runs never get metadata, tags, events or children, and each empty one made up front cost
    every traced call an allocation (the journal row and the wire dict read the slot)."""

    __slots__ = ("slot", "make")

    def __init__(self, slot: str, make: type) -> None:
        self.slot = slot
        self.make = make

    def __get__(self, run: Any, owner: type | None = None) -> Any:
        if run is None:
            return self
        value = getattr(run, self.slot)
        if value is None:
            value = self.make()
            setattr(run, self.slot, value)
        return value

    def __set__(self, run: Any, value: Any) -> None:
        setattr(run, self.slot, value)


class RunTree:
    """One run in a trace. ``trace()`` and ``@traceable`` make these; integrations may too.

    Fields read like LangSmith's: ``id``, ``trace_id``, ``parent_run_id``, ``dotted_order``,
    ``start_time``/``end_time`` (UTC datetimes), ``inputs``, ``outputs``, ``error``, ``metadata``,
    ``tags``, ``events``, ``child_runs``. ``post()`` sends the start, ``end()`` records the
    result, ``patch()`` sends it; the writer merges post and patch when both are waiting.
    """

    __slots__ = (
        "_id", "_trace", "_parent_id", "parent", "_parent_dotted", "_dotted", "name", "run_type",
        "inputs", "outputs", "error", "_start_us", "_end_us", "_meta", "_tags", "_events",
        "extra", "session_name", "session_id", "_ref", "_kids", "_writer",
        "_client", "_closed", "_sent", "__weakref__",
    )
    # set in __init__ and the fast constructors, branch by branch: declared once here
    _trace: str
    _parent_id: str | None
    _parent_dotted: str | None
    session_name: str | None
    session_id: str | None
    _ref: uuid.UUID | str | None  # canonical text from the fast path, parsed on first read
    _client: Client | None
    _writer: RunWriter | None

    def __init__(
        self,
        name: str,
        run_type: str = "chain",
        inputs: Any = None,
        *,
        parent: RunTree | None = None,
        client: Client | None = None,
        project_name: str | None = None,
        project_id: uuid.UUID | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        extra: Mapping[str, Any] | None = None,
        reference_example_id: uuid.UUID | str | None = None,
        run_id: uuid.UUID | str | None = None,
        start_time: datetime | None = None,
        trace_id: uuid.UUID | str | None = None,
        parent_run_id: uuid.UUID | str | None = None,
        parent_dotted_order: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"a run needs a non-empty string name, got {name!r}")
        self._id = _new_id() if run_id is None else uuid_text(run_id, "run_id")
        self.name = name
        self.run_type = check_run_type(run_type)
        self.inputs = _as_inputs(inputs)
        self.outputs: dict[str, Any] | None = None
        self.error: str | None = None
        self._start_us = _now_us() if start_time is None else _dt_to_us(start_time)
        self._end_us: int | None = None
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInputError(f"run metadata must be a mapping, got {metadata!r}")
        self._meta: dict[str, Any] | None = dict(metadata) if metadata else None
        if isinstance(tags, str):
            raise InvalidInputError("run tags must be a list of strings, not one string")
        self._tags: list[str] | None = list(tags) if tags else None
        self._events: list[dict[str, Any]] | None = None
        self.extra: dict[str, Any] | None = dict(extra) if extra else None
        self._kids: list[RunTree] | None = None
        self._dotted: str | None = None
        self._closed = False
        self._sent = 0
        self.parent = parent
        if parent is not None:
            self._trace = parent._trace
            self._parent_id = parent._id
            self._parent_dotted = None
            if project_name is None and project_id is None:
                self.session_name, self.session_id = parent.session_name, parent.session_id
            else:
                self.session_name = project_name
                self.session_id = uuid_text(project_id, "project_id") if project_id else None
            self._ref = None
            self._client = client if client is not None else parent._client
            self._writer = parent._writer if client is None else None
            parent._adopt(self)
        else:
            if parent_run_id is not None and (trace_id is None or parent_dotted_order is None):
                raise InvalidInputError(
                    "a run under a remote parent needs trace_id and parent_dotted_order too")
            self._parent_id = (uuid_text(parent_run_id, "parent_run_id") if parent_run_id
                               else None)
            self._trace = uuid_text(trace_id, "trace_id") if trace_id is not None else self._id
            self._parent_dotted = parent_dotted_order
            self.session_name = project_name
            self.session_id = uuid_text(project_id, "project_id") if project_id else None
            self._ref = (as_uuid(reference_example_id, "reference_example_id")
                         if reference_example_id is not None else None)
            self._client = client
            self._writer = None

    @classmethod
    def _bare(cls, name: str, run_type: str, inputs: dict[str, Any]) -> RunTree:
        """A new run with every field at its default, started now: the fast constructors
        below fill in the rest, skipping ``__init__``'s checks (their callers made them)."""
        self = cls.__new__(cls)
        self._id = _new_id()
        self.name = name
        self.run_type = run_type
        self.inputs = inputs
        self.outputs = None
        self.error = None
        self._start_us = _time_ns() // 1000
        self._end_us = None
        self._meta = None  # metadata, tags, events, children: made on first use
        self._tags = None
        self._events = None
        self._kids = None
        self.extra = None
        self._dotted = None
        self._closed = False
        self._sent = 0
        self._parent_dotted = None
        return self

    @classmethod
    def _fast_child(cls, parent: RunTree, name: str, run_type: str,
                    inputs: dict[str, Any]) -> RunTree:
        """The hot path of ``@traceable``: a child with no options, validated at decoration."""
        self = cls._bare(name, run_type, inputs)
        self.parent = parent
        self._trace = parent._trace
        self._parent_id = parent._id
        self.session_name = parent.session_name
        self.session_id = parent.session_id
        self._ref = None
        self._client = parent._client
        self._writer = parent._writer
        parent._adopt(self)
        return self

    @classmethod
    def _fast_root(cls, name: str, run_type: str, inputs: dict[str, Any], client: Any,
                   session_id: str | None, session_name: str | None,
                   metadata: dict[str, Any] | None,
                   reference_example_id: uuid.UUID | str | None) -> RunTree:
        """A root run on a hot path (``evaluate()``'s examples, plain ``@traceable`` roots):
        every argument already checked once by the caller; ``metadata`` becomes the run's own;
        ``reference_example_id`` may be canonical UUID text (parsed when first read)."""
        self = cls._bare(name, run_type, inputs)
        self._trace = self._id
        self._meta = metadata
        self.parent = None
        self._parent_id = None
        self.session_name = session_name
        self.session_id = session_id
        self._ref = reference_example_id
        self._client = client
        self._writer = None
        return self

    def _close(self, result: Any) -> int:
        """The end of a traced call (``@traceable``'s hot path): outputs (from its result, see
        ``_as_outputs``), end time, closed; returns ``_sent`` (its end is queued unless its
        post still is)."""
        self.outputs = _as_outputs(result)
        self._end_us = _time_ns() // 1000
        self._closed = True
        return self._sent

    # -- identity -----------------------------------------------------------------------------
    # ids are kept as canonical text (what every writer sends): parsed only when read here
    @property
    def id(self) -> uuid.UUID:
        return uuid.UUID(self._id)

    @property
    def trace_id(self) -> uuid.UUID:
        return uuid.UUID(self._trace)

    @property
    def parent_run_id(self) -> uuid.UUID | None:
        pid = self._parent_id
        return None if pid is None else uuid.UUID(pid)

    @property
    def reference_example_id(self) -> uuid.UUID | None:
        ref = self._ref
        if ref.__class__ is str:  # as evaluate() read it from the store: parsed on first use
            ref = self._ref = uuid.UUID(ref)
        return ref  # type: ignore[return-value]  # parsed above

    @reference_example_id.setter
    def reference_example_id(self, value: uuid.UUID | None) -> None:
        self._ref = value

    @property
    def dotted_order(self) -> str:
        dotted = self._dotted
        if dotted is None:
            seg = _segment(self._start_us, self._id)
            if self.parent is not None:
                dotted = f"{self.parent.dotted_order}.{seg}"
            elif self._parent_dotted:
                dotted = f"{self._parent_dotted}.{seg}"
            else:
                dotted = seg
            self._dotted = dotted
        return dotted

    @property
    def start_time(self) -> datetime:
        return _us_to_dt(self._start_us)

    @property
    def end_time(self) -> datetime | None:
        return None if self._end_us is None else _us_to_dt(self._end_us)

    @property
    def client(self) -> Client:
        """The client this run is stored through (the default client when none was given)."""
        if self._client is None:
            from ..client import get_default_client

            self._client = get_default_client()
        return self._client

    @property
    def ended(self) -> bool:
        return self._end_us is not None

    def __repr__(self) -> str:
        return f"RunTree(name={self.name!r}, run_type={self.run_type!r}, id={self._id})"

    # made on first use (most runs have no metadata, tags, events or children)
    metadata = _OnFirstUse("_meta", dict)
    tags = _OnFirstUse("_tags", list)
    events = _OnFirstUse("_events", list)
    child_runs = _OnFirstUse("_kids", list)

    def _adopt(self, child: RunTree) -> None:
        kids = self._kids
        if kids is None:
            self._kids = [child]
        else:
            kids.append(child)

    # -- recording ----------------------------------------------------------------------------
    def add_metadata(self, metadata: Mapping[str, Any]) -> None:
        if not isinstance(metadata, Mapping):
            raise InvalidInputError(f"add_metadata needs a mapping, got {metadata!r}")
        self.metadata.update(metadata)

    def add_tags(self, tags: Iterable[str] | str) -> None:
        for tag in [tags] if isinstance(tags, str) else tags:
            if tag not in self.tags:
                self.tags.append(tag)

    def add_event(self, event: Mapping[str, Any]) -> None:
        """Record an event (``{"name": "new_token", "time": ...}``); time defaults to now."""
        if not isinstance(event, Mapping) or not event.get("name"):
            raise InvalidInputError(f"an event needs a 'name', got {event!r}")
        ev = dict(event)
        t = ev.get("time")
        if t is None:
            ev["time"] = _us_to_dt(_now_us()).isoformat()
        elif isinstance(t, datetime):
            ev["time"] = t.isoformat()
        self.events.append(ev)

    def _mark_first_token(self, us: int | None = None) -> None:
        """Record the first chunk of a streamed response (once)."""
        for ev in self.events:
            if ev.get("name") == "new_token":
                return
        self.events.append({"name": "new_token", "time": _us_to_dt(us or _now_us()).isoformat()})

    def set_usage(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
        *,
        input_cost: float | None = None,
        output_cost: float | None = None,
        total_cost: float | None = None,
        provider: str | None = None,
        model: str | None = None,
        input_token_details: Mapping[str, int] | None = None,
        output_token_details: Mapping[str, int] | None = None,
    ) -> None:
        """Token usage (and optionally explicit cost, provider, model) of an llm run.

        Without an explicit cost the store prices the tokens with genai-prices at write time
        from ``ls_provider``/``ls_model_name``; an unknown model gets no cost.
        """
        usage: dict[str, Any] = dict(self.metadata.get("usage_metadata") or {})
        for key, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens),
                           ("input_cost", input_cost), ("output_cost", output_cost),
                           ("total_cost", total_cost)):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise InvalidInputError(f"set_usage {key} must be a non-negative number, "
                                            f"got {value!r}")
                usage[key] = value
        if total_tokens is not None:
            usage["total_tokens"] = total_tokens
        elif "input_tokens" in usage or "output_tokens" in usage:
            usage["total_tokens"] = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
        if input_token_details:
            usage["input_token_details"] = dict(input_token_details)
        if output_token_details:
            usage["output_token_details"] = dict(output_token_details)
        self.metadata["usage_metadata"] = usage
        if provider is not None:
            self.metadata["ls_provider"] = provider
        if model is not None:
            self.metadata["ls_model_name"] = model

    def create_child(self, name: str, run_type: str = "chain", inputs: Any = None,
                     **kwargs: Any) -> RunTree:
        return RunTree(name, run_type, inputs, parent=self, **kwargs)

    # -- distributed tracing (LangSmith's headers) --------------------------------------------
    _remote = False  # True on a parent read from another process's headers (never written)

    def to_headers(self) -> dict[str, str]:
        """LangSmith's distributed-tracing headers for continuing this run's trace in another
        process: ``langsmith-trace`` (the dotted order) and ``baggage`` (the run's metadata,
        tags and project, URL-encoded), which ``RunTree.from_headers`` there (assay's or
        LangSmith's) reads back."""
        from ._headers import to_headers

        return to_headers(self)

    @classmethod
    def from_headers(cls, headers: Mapping[Any, Any], *, client: Client | None = None,
                     project_name: str | None = None) -> RunTree | None:
        """The run another process sent its ``to_headers()`` from (LangSmith's or assay's), as a
        parent for runs here: they join its trace under it, in the project its baggage names
        (else ``project_name``, the ``tracing_context``'s, ``ASSAY_PROJECT``), with its
        baggage's metadata and tags. None when the headers carry no ``langsmith-trace``; a
        malformed one is refused (``InvalidInputError``), as LangSmith raises. Header names
        are matched in any case, as str or bytes. The parent itself is never written here
        (its process writes it): ``post()``/``patch()`` on it do nothing."""
        from ._headers import from_headers

        return from_headers(headers, client, project_name)

    @classmethod
    def from_dotted_order(cls, dotted_order: str, *, client: Client | None = None,
                          project_name: str | None = None) -> RunTree:
        """``from_headers`` of a ``langsmith-trace`` value alone (no baggage)."""
        from ._headers import remote_parent

        return remote_parent(dotted_order, None, client, project_name)

    def end(self, outputs: Any = None, error: BaseException | str | None = None,
            end_time: datetime | None = None) -> None:
        """Record the result; the end time is kept from the first call."""
        if outputs is not None:
            self.outputs = _as_outputs(outputs)
        if error is not None:
            self.error = format_error(error)
        if self._end_us is None:
            self._end_us = _now_us() if end_time is None else _dt_to_us(end_time)

    # -- sending ------------------------------------------------------------------------------
    def _get_writer(self) -> RunWriter:
        writer = self._writer
        if writer is None:
            client = self.client
            try:
                get = client._tracing_writer
            except AttributeError:
                raise InvalidInputError(
                    f"tracing needs an assay Client, got {type(client).__name__}") from None
            writer = self._writer = get()
        return writer

    def post(self) -> None:
        """Queue the start of the run (the writer sends it, merged with the end if it's there)."""
        self._get_writer().post(self)

    def patch(self) -> None:
        """Queue the finished run; nothing recorded on it afterwards is sent."""
        if self._end_us is None:
            self.end()
        self._closed = True
        (self._writer or self._get_writer()).patch(self)  # (the writer is set after a run's first)

    # -- wire format --------------------------------------------------------------------------
    def _wire_extra(self, copy: bool) -> dict[str, Any]:
        """The wire's ``extra``: the run's own with its metadata and the runtime in it, a new
        dict (the run's are never changed); ``copy``: the metadata copied too."""
        extra, meta = self.extra, self._meta
        meta = (dict(meta) if copy else meta) if meta else {}
        if extra:
            extra = dict(extra)
            extra["metadata"] = meta
            extra.setdefault("runtime", _RUNTIME)
            return extra
        return {"metadata": meta, "runtime": _RUNTIME}

    def _wire(self, final: bool, micros: bool = False) -> dict[str, Any]:
        """LangSmith's run dict. ``final``: with end time, outputs and error. ``micros``: times
        as epoch microseconds (what the local store keeps) instead of datetimes."""
        extra = self._wire_extra(copy=True)
        parent, tags, events = self._parent_id, self._tags, self._events
        out: dict[str, Any] = {
            "id": self._id,
            "trace_id": self._trace,
            "parent_run_id": parent,
            "dotted_order": self._dotted or self.dotted_order,
            "name": self.name,
            "run_type": self.run_type,
            "start_time": self._start_us if micros else _us_to_dt(self._start_us),
            "inputs": self.inputs,
            "extra": extra,
            "tags": list(tags) if tags else [],
            "events": list(events) if events else [],
        }
        if self.session_id is not None:
            out["session_id"] = str(self.session_id)
        if self.session_name is not None:
            out["session_name"] = self.session_name
        if self._ref is not None:
            out["reference_example_id"] = str(self._ref)
        if final:
            end = self._end_us
            out["end_time"] = end if micros or end is None else _us_to_dt(end)
            out["outputs"] = self.outputs
            out["error"] = self.error
        return out

    # A finished run as the local store's journal keeps it: its own attributes in this order
    # (``ROW``), metadata apart from extra (the fold puts it in, with the runtime, as
    # ``_wire_extra`` does), a root's dotted order left to the fold when nothing asked for it.
    ROW_COLUMNS = ("id", "trace_id", "parent_run_id", "dotted_order", "name", "run_type",
                   "start_time", "inputs", "extra", "metadata", "tags", "events", "session_id",
                   "session_name", "reference_example_id", "end_time", "outputs", "error")
    ROW_EXTRA = {"runtime": _RUNTIME}  # what every row's extra has: once per batch

    def to_dict(self) -> dict[str, Any]:
        """The run as LangSmith's wire dict, as it stands now."""
        return self._wire(final=True)

    def to_run(self, *, include_children: bool = True) -> Run:
        """The run (and its finished descendants) as the shared ``assay.schemas.Run`` record."""
        from .._usage import derive_usage

        if SETTLERS:  # runs an integration recorded under this one but has not built yet
            _settle_pending(True)
        data = self._wire(final=True)
        for key in ("inputs", "outputs"):  # an integration's values converted on write
            if key in data:
                data[key] = settled(data[key])
        usage = derive_usage(data)
        data.update(usage)
        data["status"] = "error" if self.error else ("success" if self._end_us else "pending")
        if self.session_id is not None:
            data["session_id"] = self.session_id
        if include_children:
            kids = sorted(self._kids or (), key=lambda r: r.dotted_order)
            data["child_runs"] = [k.to_run() for k in kids]
        return Run.model_validate(data)


# A finished run's journal row (``RunTree.ROW_COLUMNS``): one C call per run, no Python step
# per attribute (``RunWriter._sort`` settles the dotted order first where the fold cannot)
ROW_SLOTS = ("_id", "_trace", "_parent_id", "_dotted", "name", "run_type", "_start_us", "inputs",
             "extra", "_meta", "_tags", "_events", "session_id", "session_name", "_ref",
             "_end_us", "outputs", "error")
ROW = operator.attrgetter(*ROW_SLOTS)


def _rows(runs: list[RunTree]) -> list[tuple[Any, ...]]:
    """Finished runs as their journal rows (``rows``: in C where built, a slot read per value)."""
    return list(map(ROW, runs))


def _compiled() -> Any:
    """The compiled run core (``_speedups.c``) bound to ``RunTree``, or None (see
    ``assay._compiled``)."""
    _speedups: Any = compiled("assay.tracing._speedups")
    if _speedups is None:
        return None

    def seed() -> None:  # a forked child must not make its parent's ids
        _speedups.seed(os.urandom(32))

    seed()
    os.register_at_fork(after_in_child=seed)
    _speedups.bind(RunTree, ROW_SLOTS)
    return _speedups


SPEEDUPS = _compiled()
# The hot paths' steps: RunTree._fast_child/_fast_root/_close, the id and the writer's rows
# in C when built
fast_child: Callable[[RunTree, str, str, dict[str, Any]], RunTree]
fast_root: Callable[..., RunTree]
close: Callable[[RunTree, Any], int]
rows: Callable[[list[RunTree]], list[tuple[Any, ...]]]
take: Callable[[list[Any], int, Callable[[Any], Any]], list[tuple[Any, ...]]] | None
if SPEEDUPS is not None:
    fast_child, fast_root, close = SPEEDUPS.child, SPEEDUPS.root, SPEEDUPS.close
    rows, take, _new_id = SPEEDUPS.rows, SPEEDUPS.take, SPEEDUPS.new_id
else:
    fast_child, fast_root, close = RunTree._fast_child, RunTree._fast_root, RunTree._close
    rows, take = _rows, None  # (the writer sorts its items in Python: RunWriter._sort)
