"""Where tracing state lives: the current run and the scoped switches, both in contextvars.

Two context variables, read on every traced call, so switched-off tracing costs two lookups and
a cached environment check. ``_RUN`` is the run code is executing in (set only while a *traced*
run is open); ``_CFG`` holds what the innermost ``tracing_context`` said. contextvars follow
``asyncio`` tasks on their own; worker threads get them through ``run_in_thread`` /
``ContextThreadPoolExecutor`` (plain threads start with an empty context).
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from .._sync import ContextThreadPoolExecutor

if TYPE_CHECKING:
    from ..client import Client
    from ._run_tree import RunTree

__all__ = [
    "ContextThreadPoolExecutor",
    "get_current_run_tree",
    "get_tracing_context",
    "run_in_thread",
    "tracing_context",
    "tracing_is_enabled",
    "with_context",
]

P = ParamSpec("P")
R = TypeVar("R")

ENV_TRACING = "ASSAY_TRACING"
ENV_PROJECT = "ASSAY_PROJECT"
_TRUE = frozenset({"1", "true", "yes", "on", "t", "y"})


class _Config:
    """What one ``tracing_context`` set (None = inherit from the enclosing one)."""

    __slots__ = ("enabled", "client", "project_name", "metadata", "tags", "at_run", "writer")

    def __init__(self, enabled: bool | None, client: Client | None, project_name: str | None,
                 metadata: dict[str, Any] | None, tags: list[str] | None,
                 at_run: RunTree | None) -> None:
        self.enabled = enabled
        self.client = client
        self.project_name = project_name
        self.metadata = metadata
        self.tags = tags
        self.at_run = at_run  # the run that was current when the context was entered
        self.writer: Any = None  # ``client``'s run writer, kept here by the first root run


_RUN: contextvars.ContextVar[RunTree | None] = contextvars.ContextVar("assay_run", default=None)
_CFG: contextvars.ContextVar[_Config | None] = contextvars.ContextVar("assay_tracing_cfg",
                                                                      default=None)

# -- framework steps running user code -----------------------------------------------------------
# A framework step whose run is not ``_RUN`` (a LangChain tool or graph node, its run built off
# the agent's thread; an Agents SDK function tool, its run made by the SDK's tracing processor)
# runs user code that may start runs of its own: a ``@traceable`` helper, a wrapped client,
# another framework's agent. Each integration with such steps adds here (``add_step_lookup``)
# a function giving the run of its step running in this context, or None, with the context
# variable the framework itself sets while such a step runs (its gate: the function is only
# called when that variable holds something here, so that a run started outside any framework
# step pays a variable read per framework, not a Python call); ``current_run`` answers the
# innermost, so those runs nest under the step (as LangSmith nests them), and a call outside
# any assay run joins the framework's trace of its own instead of starting another. Empty (no
# framework instrumented), it costs nothing; the C traced call reads it too (``_call.c``).
StepLookup = tuple["contextvars.ContextVar[Any] | None", Callable[[], "RunTree | None"]]


class _StepRuns(list):  # type: ignore[type-arg]  # (of StepLookup)
    """``STEP_RUNS``' type: pickled as a reference to the receiving process's own list (a
    traced function sent to a Ray worker by value carries its globals, and the lookups hold
    the hooks' objects, locks included)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return _step_runs, ()


def _step_runs() -> list[StepLookup]:
    return STEP_RUNS


STEP_RUNS: list[StepLookup] = _StepRuns()
_log = logging.getLogger("assay.tracing")
_lookups_lock = threading.Lock()


def add_step_lookup(lookup: Callable[[], RunTree | None],
                    gate: contextvars.ContextVar[Any] | None = None) -> None:
    """Have runs started while ``gate`` holds something (any time, for None) ask ``lookup``
    which framework step's run they are in (once per lookup)."""
    with _lookups_lock:
        if all(known is not lookup for _, known in STEP_RUNS):
            STEP_RUNS.append((gate, lookup))


def current_run() -> RunTree | None:
    """The run code executing here is in: the current assay run, or the run of a framework
    step running below it (``STEP_RUNS``)."""
    run = _RUN.get()
    return innermost(run) if STEP_RUNS else run


def innermost(run: RunTree | None) -> RunTree | None:
    """``run``, or the run of a framework step running here below it (or in a trace of its
    own, when ``run`` is None): the deepest of the ``STEP_RUNS`` answers."""
    for gate, step_run in STEP_RUNS:
        if gate is not None and not gate.get(None):
            continue
        try:
            step = step_run()
        except Exception:  # an integration's bug must not break the user's call
            _log.warning("assay: could not tell which framework step is running",
                         exc_info=True)
            continue
        if step is not None and step is not run and _below(step, run):
            run = step
    return run


def _below(step: RunTree, run: RunTree | None) -> bool:
    if run is None:
        return True
    parent = step.parent
    while parent is not None:
        if parent is run:
            return True
        parent = parent.parent
    return False

# -- the environment switch, re-read cheaply -------------------------------------------------------
# os.environ.get costs ~0.6 us (it encodes the key each time): too much for the switched-off path.
# Reading the encoded mapping directly costs a dict lookup and still sees changes made through
# os.environ (and so pytest's monkeypatch.setenv).
_env_data: Any = getattr(os.environ, "_data", None)
try:
    _env_key: Any = os.environ.encodekey(ENV_TRACING)
except AttributeError:  # pragma: no cover - not CPython's os.environ
    _env_data = None
    _env_key = ENV_TRACING
_env_raw: Any = object()
_env_on = False


def _env_enabled() -> bool:
    """ASSAY_TRACING is true (1/true/yes/on); off when unset."""
    global _env_raw, _env_on
    raw = _env_data.get(_env_key) if _env_data is not None else os.environ.get(ENV_TRACING)
    if raw is not _env_raw:
        text = raw.decode() if isinstance(raw, bytes) else (raw or "")
        _env_on = text.strip().lower() in _TRUE
        _env_raw = raw
    return _env_on


_project_key: Any = None
_project_raw: Any = object()
_project_name: str | None = None


def env_project() -> str | None:
    """ASSAY_PROJECT (cached like ASSAY_TRACING): the project of root runs that name none."""
    global _project_key, _project_raw, _project_name
    if _env_data is None:
        return os.environ.get(ENV_PROJECT) or None
    if _project_key is None:
        _project_key = os.environ.encodekey(ENV_PROJECT)
    raw = _env_data.get(_project_key)
    if raw is not _project_raw:
        _project_name = (raw.decode() if isinstance(raw, bytes) else raw) or None
        _project_raw = raw
    return _project_name


def tracing_is_enabled(enabled: bool | None = None) -> bool:
    """Whether a run started here with ``enabled`` would be recorded.

    ``True``/``False`` force it. ``None``: the innermost ``tracing_context(enabled=...)`` decides
    unless a traced run was opened inside it (its descendants are traced); otherwise
    ``ASSAY_TRACING``.
    """
    if enabled is not None:
        return enabled
    run = current_run()
    cfg = _CFG.get()
    if cfg is not None and cfg.enabled is not None and cfg.at_run is run:
        return cfg.enabled
    if run is not None:
        return True
    return _env_enabled()


def get_current_run_tree() -> RunTree | None:
    """The traced run the caller is executing in (a framework step's, inside a LangChain tool
    or graph node, say), or None."""
    return current_run()


def get_tracing_context() -> dict[str, Any]:
    """The effective scoped settings (for integrations that start runs themselves)."""
    cfg = _CFG.get()
    return {
        "parent": current_run(),
        "enabled": None if cfg is None else cfg.enabled,
        "client": None if cfg is None else cfg.client,
        "project_name": None if cfg is None else cfg.project_name,
        "metadata": None if cfg is None else cfg.metadata,
        "tags": None if cfg is None else cfg.tags,
    }


@contextmanager
def tracing_context(
    *,
    enabled: bool | None = None,
    client: Client | None = None,
    project_name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    parent: RunTree | Mapping[Any, Any] | str | None = None,
) -> Iterator[None]:
    """Scoped tracing switches; inner contexts override outer ones, metadata and tags add up.

    ``enabled`` turns tracing on or off for everything started inside (a run forced on with
    ``trace(enabled=True)`` still traces its own descendants). ``client`` and ``project_name``
    apply to new root runs; ``metadata`` and ``tags`` to every run started inside. ``parent``
    makes runs started inside children of that run (e.g. one received from another thread), or
    of another process's run: its ``to_headers()`` (``request.headers``; ``RunTree.from_headers``
    reads them: none without a ``langsmith-trace``) or that header's dotted order alone; runs
    inside then also get its baggage's metadata and tags.
    """
    if metadata is not None and not isinstance(metadata, Mapping):
        from ..errors import InvalidInputError

        raise InvalidInputError(f"tracing_context metadata must be a mapping, got {metadata!r}")
    if isinstance(tags, str):
        from ..errors import InvalidInputError

        raise InvalidInputError("tracing_context tags must be a list of strings, not one string")
    if enabled:  # the agent frameworks imported by now get their hooks (integrations)
        from ._traceable import _instrument_imported

        _instrument_imported()
    if parent is not None and isinstance(parent, Mapping | str):
        parent = _remote(parent, client, project_name)
    outer = _CFG.get()
    merged_meta = dict(outer.metadata) if outer is not None and outer.metadata else {}
    if parent is not None and parent._remote:  # another process's run: its baggage too
        merged_meta.update(parent.metadata)
        tags = [*parent.tags, *(tags or ())]
    if metadata:
        merged_meta.update(metadata)
    merged_tags = list(outer.tags) if outer is not None and outer.tags else []
    for tag in tags or ():
        if tag not in merged_tags:
            merged_tags.append(tag)
    run_token = _RUN.set(parent) if parent is not None else None
    current = current_run()
    if outer is not None and enabled is None and outer.at_run is current:
        inherited_enabled = outer.enabled
    else:
        inherited_enabled = enabled
    cfg = _Config(
        enabled=inherited_enabled,
        client=client if client is not None else (outer.client if outer is not None else None),
        project_name=project_name if project_name is not None else (
            outer.project_name if outer is not None else None),
        metadata=merged_meta or None,
        tags=merged_tags or None,
        at_run=current,
    )
    token = _CFG.set(cfg)
    try:
        yield
    finally:
        _CFG.reset(token)
        if run_token is not None:
            _RUN.reset(run_token)


def _remote(parent: Mapping[Any, Any] | str, client: Client | None,
            project_name: str | None) -> RunTree | None:
    """Another process's run from its headers (or dotted order), or None (no trace in them)."""
    from ._run_tree import RunTree

    if isinstance(parent, str):
        return RunTree.from_dotted_order(parent, client=client, project_name=project_name)
    return RunTree.from_headers(parent, client=client, project_name=project_name)


# -- threads ------------------------------------------------------------------------------------
def with_context(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` bound to a snapshot of the caller's context (current run, tracing switches).

    Use it for ``threading.Thread(target=with_context(work))`` and any other thread API.
    """
    ctx = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return ctx.run(fn, *args, **kwargs)

    return run


_pool: ContextThreadPoolExecutor | None = None


def run_in_thread(fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
    """Run ``fn(*args, **kwargs)`` in a worker thread inside the caller's tracing context.

    Returns a ``concurrent.futures.Future`` (``asyncio.wrap_future`` awaits it from async code).
    """
    global _pool
    if _pool is None:
        _pool = ContextThreadPoolExecutor(thread_name_prefix="assay-trace")
    return _pool.submit(fn, *args, **kwargs)
