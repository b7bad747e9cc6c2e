"""``@traceable`` and ``trace(...)``: record a function call or a block as a run.

Switched off, a traced call costs two contextvar reads and a cached environment check before
calling straight through. Switched on, it builds a ``RunTree`` (no pydantic, no string
formatting), makes it current for the call, and hands it to the client's background writer.

Generators and async generators are stepped one item at a time with the run made current only
while the generator body runs, so the caller's code between items does not see the generator's
run as its parent. Their outputs are the collected items (``reduce_fn`` may fold them); for llm
runs the first item's time is recorded as a ``new_token`` event.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..errors import InvalidInputError
from ._context import (
    _CFG,
    _RUN,
    STEP_RUNS,
    _Config,
    _env_enabled,
    _remote,
    env_project,
    innermost,
)
from ._run_tree import (
    SPEEDUPS,
    RunTree,
    _as_outputs,
    check_run_type,
    close,
    fast_child,
    fast_root,
)
from ._writer import QUEUED

if TYPE_CHECKING:
    import uuid

    from ..client import Client

__all__ = ["trace", "traceable"]

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("assay.tracing")


EXTRA = "langsmith_extra"  # LangSmith's per-call options keyword (``_extra``)


class _PerCall:
    """Marks the options of one call with ``langsmith_extra`` (``_extra._OneCall``): its
    wrapper must not look for the keyword again."""

    __slots__ = ()


def _with_extra(fn: Callable[..., Any], o: _Options, kind: str, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    from ._extra import with_extra  # only calls that pass langsmith_extra load it

    return with_extra(fn, o, kind, args, kwargs)


_instrument: Callable[[], None] | None = None


def _instrument_imported() -> None:
    """Install the hooks of the agent frameworks the process has imported (integrations)."""
    global _instrument
    if _instrument is None:
        from ..integrations._registry import instrument_imported

        _instrument = instrument_imported
    _instrument()


def _is_on(parent: RunTree | None, cfg: _Config | None) -> bool:
    if cfg is not None and cfg.enabled is not None and cfg.at_run is parent:
        return cfg.enabled
    if parent is not None:
        return True
    return _env_enabled()


_default_opened = False  # the process's default client exists (its store opened)


def _open_default() -> None:
    """Open the default client (creating its store, migrating it: ~0.3 s the first time) before
    a root run starts, not when its start is posted: that time is not the traced call's."""
    global _default_opened
    from ..client import get_default_client

    get_default_client()
    _default_opened = True


def _new_run(
    name: str,
    run_type: str,
    inputs: Any,
    parent: RunTree | None,
    cfg: _Config | None,
    *,
    client: Client | None = None,
    project_name: str | None = None,
    project_id: uuid.UUID | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    reference_example_id: uuid.UUID | str | None = None,
    run_id: uuid.UUID | str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RunTree:
    """A run with every option applied (the general path)."""
    if cfg is not None and cfg.metadata:
        metadata = {**cfg.metadata, **metadata} if metadata else cfg.metadata
    if cfg is not None and cfg.tags:
        tags = list(cfg.tags) + [t for t in (tags or ()) if t not in cfg.tags]
    if parent is not None:
        run = RunTree(name, run_type, inputs, parent=parent, client=client,
                      project_name=project_name, project_id=project_id, metadata=metadata,
                      tags=tags, run_id=run_id, extra=extra)
        if reference_example_id is not None:
            from .._ids import as_uuid

            run.reference_example_id = as_uuid(reference_example_id, "reference_example_id")
        return run
    if client is None and cfg is not None:
        client = cfg.client
    if client is None and not _default_opened:
        _open_default()
    if project_name is None and project_id is None:
        project_name = (cfg.project_name if cfg is not None else None) or env_project()
    return RunTree(name, run_type, inputs, client=client, project_name=project_name,
                   project_id=project_id, metadata=metadata, tags=tags, extra=extra,
                   reference_example_id=reference_example_id, run_id=run_id)


# -- inputs -------------------------------------------------------------------------------------
_Build = Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]


def _input_builder(fn: Callable[..., Any]) -> tuple[_Build, tuple[str, ...] | None, int]:
    """Map call arguments to named inputs without ``inspect.Signature.bind`` (10x faster).

    Positional arguments get their parameter names, defaults fill the rest, ``**kwargs`` are
    flattened into the inputs and extra positionals go under the ``*args`` name (as LangSmith
    does); ``self``/``cls`` are left out.

    Returns ``(build, names, drop)``: where the parameters are plain positional ones (no
    defaults, no ``*args``), a call with exactly those arguments and no keywords has the inputs
    ``dict(zip(names, args[drop:]))`` (the C ``Call`` makes them so), else ``names`` is None.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return (lambda args, kwargs: {"args": args, **kwargs} if args else dict(kwargs)), None, 0
    P = inspect.Parameter
    pos: list[str] = []
    var_pos: str | None = None
    defaults: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
            pos.append(p.name)
        elif p.kind is P.VAR_POSITIONAL:
            var_pos = p.name
        if p.default is not P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            defaults[p.name] = p.default
    own = pos[0] if pos and pos[0] in ("self", "cls") else None  # left out of the inputs
    npos = len(pos)
    extra_name = var_pos or "args"
    drop = 0 if own is None else 1
    names = tuple(pos[drop:]) if var_pos is None and not defaults else None

    def build(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        d = dict(zip(pos, args))  # noqa: B905 - extra positionals are handled below
        if len(args) > npos:
            d[extra_name] = args[npos:]
        if kwargs:
            d.update(kwargs)
        if defaults:
            for k, v in defaults.items():
                if k not in d:
                    d[k] = v
        if own is not None:
            d.pop(own, None)
        return d

    if npos == 1 and var_pos is None and not defaults and own is None:
        only = pos[0]

        def build_one(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            """The usual agent or step: one argument, given positionally."""
            if kwargs or len(args) != 1:
                return build(args, kwargs)
            return {only: args[0]}

        return build_one, names, drop
    return build, names, drop


# -- the decorator --------------------------------------------------------------------------------
class _Options:
    __slots__ = ("name", "run_type", "metadata", "tags", "project_name", "client",
                 "process_inputs", "process_outputs", "reduce_fn", "enabled", "plain", "is_llm")

    def __init__(self, name: str, run_type: str, metadata: Mapping[str, Any] | None,
                 tags: Sequence[str] | None, project_name: str | None, client: Client | None,
                 process_inputs: Callable[[dict[str, Any]], Any] | None,
                 process_outputs: Callable[[Any], Any] | None,
                 reduce_fn: Callable[[list[Any]], Any] | None, enabled: bool | None) -> None:
        self.name = name
        self.run_type = check_run_type(run_type)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInputError(f"traceable metadata must be a mapping, got {metadata!r}")
        if isinstance(tags, str):
            raise InvalidInputError("traceable tags must be a list of strings, not one string")
        self.metadata = dict(metadata) if metadata else None
        self.tags = list(tags) if tags else None
        self.project_name = project_name
        self.client = client
        self.process_inputs = process_inputs
        self.process_outputs = process_outputs
        self.reduce_fn = reduce_fn
        self.enabled = enabled
        self.plain = not (metadata or tags or project_name or client)
        self.is_llm = run_type == "llm"

    def processed(self, inputs: dict[str, Any]) -> Any:
        """The inputs as ``process_inputs`` records them (raw if the hook fails)."""
        if self.process_inputs is not None:
            try:
                return self.process_inputs(inputs)
            except Exception:  # a broken hook must not break the traced call
                log.warning("process_inputs of %s failed; recording raw inputs", self.name,
                            exc_info=True)
        return inputs

    def start(self, parent: RunTree | None, cfg: _Config | None, inputs: dict[str, Any]) -> RunTree:
        inputs = self.processed(inputs)
        if (not _default_opened and parent is None and self.client is None
                and (cfg is None or cfg.client is None)):
            _open_default()  # the root will go through the default client
        if self.plain and (cfg is None or not (cfg.metadata or cfg.tags)):
            if parent is not None:
                run = fast_child(parent, self.name, self.run_type, inputs)
                writer = run._writer
            elif cfg is not None:
                run = fast_root(self.name, self.run_type, inputs, cfg.client, None,
                                cfg.project_name or env_project(), None, None)
                writer = cfg.writer  # the context's client's, once a root looked it up
                if writer is None:
                    writer = run._get_writer()
                    if cfg.client is not None:  # (the default client may change)
                        cfg.writer = writer
                run._writer = writer
            else:
                run = fast_root(self.name, self.run_type, inputs, None, None, env_project(),
                                None, None)
                writer = None
        else:
            run = _new_run(self.name, self.run_type, inputs, parent, cfg, client=self.client,
                           project_name=self.project_name, metadata=self.metadata, tags=self.tags)
            writer = run._writer
        if writer is None:
            writer = run._get_writer()
        run._sent = QUEUED  # writer.post(run), inlined
        writer._put(run)
        return run

    def outputs(self, value: Any) -> dict[str, Any]:
        if self.process_outputs is not None:
            try:
                value = self.process_outputs(value)
            except Exception:
                log.warning("process_outputs of %s failed; recording raw outputs", self.name,
                            exc_info=True)
        return _as_outputs(value)

    def end_items(self, run: RunTree, items: list[Any]) -> None:
        """End a generator's run with the items it yielded (folded by ``reduce_fn``)."""
        outputs = None
        if self.reduce_fn is not None:
            try:
                outputs = self.outputs(self.reduce_fn(items))
            except Exception:
                log.warning("reduce_fn of %s failed; recording the items", self.name,
                            exc_info=True)
        run.outputs = self.outputs(items) if outputs is None else outputs
        run.patch()


def _fail(run: RunTree, exc: BaseException) -> None:
    """Record a traced call's exception on its run. Never raises: the exception the caller
    must see is the call's own."""
    try:
        run.end(error=exc)
        run.patch()
    except Exception:
        log.warning("could not record the failure of run %s", run.id, exc_info=True)


if SPEEDUPS is not None:  # what the C Call reads and calls back into
    SPEEDUPS.configure(_Config, _RUN, _CFG, _env_enabled, env_project, _fail, QUEUED,
                       STEP_RUNS, innermost, _open_default)


def _call_in(run: RunTree, fn: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` with ``run`` current; if the call raises, the run ends with it.

    Creates the generator the (async) generator wrappers step through. ``_wrap_sync`` does the
    same inline, as calling through here would cost every traced call one more frame.
    """
    token = _RUN.set(run)
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        _RUN.reset(token)
        _fail(run, exc)
        raise
    _RUN.reset(token)
    return result


# The four wrappers below open with the same few lines (two contextvar reads, the on/off check,
# ``o.start``) written out rather than shared: with tracing off those lines are the whole cost of
# a traced call, and a helper call would add a frame to it (~30 ns, about 10% of that cost). The
# sync one's body runs in C where the extension is built (``_call.c``; this one is its reference).
# Their bodies differ where Python makes them differ: ``await``, ``yield`` and ``yield from``
# cannot be passed to a helper.
def _wrap_sync(fn: Callable[..., Any], o: _Options,
               compiled: Any = SPEEDUPS) -> Callable[..., Any]:
    """The sync wrapper: its body in C where built (``compiled``; None gives the Python one,
    the reference the tests compare it with)."""
    build, names, drop = _input_builder(fn)
    if compiled is not None:  # the body of the Python wrapper below, in C (_call.c)
        call = compiled.Call(fn, o, build, names, drop)

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if kwargs and EXTRA in kwargs:  # LangSmith's per-call options (rare: _extra)
                return _with_extra(fn, o, "sync", args, kwargs)
            return call(args, kwargs)

        return traced
    forced = o.enabled

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs and EXTRA in kwargs and not isinstance(o, _PerCall):
            return _with_extra(fn, o, "sync", args, kwargs)
        parent = _RUN.get()
        if STEP_RUNS:  # (a framework's step running here: see _context.STEP_RUNS)
            parent = innermost(parent)
        cfg = _CFG.get()
        if not (forced if forced is not None else _is_on(parent, cfg)):
            return fn(*args, **kwargs)
        run = o.start(parent, cfg, build(args, kwargs))
        token = _RUN.set(run)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            _RUN.reset(token)
            _fail(run, exc)
            raise
        _RUN.reset(token)
        hook = o.process_outputs
        if close(run, result if hook is None else o.outputs(result)) != QUEUED:
            assert run._writer is not None  # set when its post was queued
            run._writer.patch(run)  # the writer took the post before the end (rare)
        return result

    return wrapper


def _wrap_async(fn: Callable[..., Any], o: _Options) -> Callable[..., Any]:
    build = _input_builder(fn)[0]
    forced = o.enabled

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs and EXTRA in kwargs and not isinstance(o, _PerCall):
            return await _with_extra(fn, o, "async", args, kwargs)
        prev = parent = _RUN.get()
        if STEP_RUNS:
            parent = innermost(prev)
        cfg = _CFG.get()
        if not (forced if forced is not None else _is_on(parent, cfg)):
            return await fn(*args, **kwargs)
        run = o.start(parent, cfg, build(args, kwargs))
        token = _RUN.set(run)
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            _reset(token, prev)
            _fail(run, exc)
            raise
        _reset(token, prev)
        run.outputs = o.outputs(result)
        run.patch()
        return result

    return wrapper


def _reset(token: Any, previous: RunTree | None) -> None:
    """Reset the current run; if the frame resumed in another context, restore by value."""
    try:
        _RUN.reset(token)
    except ValueError:
        _RUN.set(previous)


def _wrap_gen(fn: Callable[..., Any], o: _Options) -> Callable[..., Any]:
    build = _input_builder(fn)[0]
    forced = o.enabled

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs and EXTRA in kwargs and not isinstance(o, _PerCall):
            return (yield from _with_extra(fn, o, "gen", args, kwargs))
        prev = parent = _RUN.get()
        if STEP_RUNS:
            parent = innermost(prev)
        cfg = _CFG.get()
        if not (forced if forced is not None else _is_on(parent, cfg)):
            return (yield from fn(*args, **kwargs))
        run = o.start(parent, cfg, build(args, kwargs))
        gen = _call_in(run, fn, args, kwargs)
        items: list[Any] = []
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            token = _RUN.set(run)
            try:
                item = gen.send(sent) if thrown is None else gen.throw(thrown)
            except StopIteration as stop:
                _RUN.reset(token)
                result = stop.value
                break
            except BaseException as exc:
                _RUN.reset(token)
                _fail(run, exc)
                raise
            _RUN.reset(token)
            if o.is_llm and not items:
                run._mark_first_token()
            items.append(item)
            thrown = None
            try:
                sent = yield item
            except GeneratorExit:  # the consumer stopped early: keep what it got
                token = _RUN.set(run)
                try:
                    gen.close()
                finally:
                    _RUN.reset(token)
                o.end_items(run, items)
                raise
            except BaseException as exc:
                thrown, sent = exc, None
        o.end_items(run, items)
        return result

    return wrapper


def _wrap_async_gen(fn: Callable[..., Any], o: _Options) -> Callable[..., Any]:
    build = _input_builder(fn)[0]
    forced = o.enabled

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs and EXTRA in kwargs and not isinstance(o, _PerCall):
            async for item in _with_extra(fn, o, "agen", args, kwargs):
                yield item
            return
        prev = parent = _RUN.get()
        if STEP_RUNS:
            parent = innermost(prev)
        cfg = _CFG.get()
        if not (forced if forced is not None else _is_on(parent, cfg)):
            agen = fn(*args, **kwargs)
            sent: Any = None
            thrown: BaseException | None = None
            try:
                while True:
                    try:
                        item = await (agen.asend(sent) if thrown is None else agen.athrow(thrown))
                    except StopAsyncIteration:
                        return
                    thrown = None
                    try:
                        sent = yield item
                    except GeneratorExit:
                        raise
                    except BaseException as exc:  # forwarded, as Python's own delegation would
                        thrown, sent = exc, None
            finally:
                await agen.aclose()
        run = o.start(parent, cfg, build(args, kwargs))
        agen = _call_in(run, fn, args, kwargs)
        items: list[Any] = []
        sent = None
        thrown = None
        while True:
            token = _RUN.set(run)
            try:
                item = await (agen.asend(sent) if thrown is None else agen.athrow(thrown))
            except StopAsyncIteration:
                _reset(token, prev)
                break
            except BaseException as exc:
                _reset(token, prev)
                _fail(run, exc)
                raise
            _reset(token, prev)
            if o.is_llm and not items:
                run._mark_first_token()
            items.append(item)
            thrown = None
            try:
                sent = yield item
            except GeneratorExit:
                token = _RUN.set(run)
                try:
                    await agen.aclose()
                finally:
                    _reset(token, prev)
                o.end_items(run, items)
                raise
            except BaseException as exc:
                thrown, sent = exc, None
        o.end_items(run, items)

    return wrapper


@overload
def traceable(func: F) -> F: ...
@overload
def traceable(
    func: str | None = None,
    *,
    run_type: str = "chain",
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    project_name: str | None = None,
    client: Client | None = None,
    process_inputs: Callable[[dict[str, Any]], Any] | None = None,
    process_outputs: Callable[[Any], Any] | None = None,
    reduce_fn: Callable[[list[Any]], Any] | None = None,
    enabled: bool | None = None,
) -> Callable[[F], F]: ...
def traceable(
    func: Any = None,
    *,
    run_type: str = "chain",
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    project_name: str | None = None,
    client: Client | None = None,
    process_inputs: Callable[[dict[str, Any]], Any] | None = None,
    process_outputs: Callable[[Any], Any] | None = None,
    reduce_fn: Callable[[list[Any]], Any] | None = None,
    enabled: bool | None = None,
) -> Any:
    """Record every call of a function as a run (sync, async, generator or async generator).

    Usable bare (``@traceable``) or with options (``@traceable(run_type="llm")``; the run type
    may also be given positionally, ``@traceable("tool")``). ``enabled=None`` follows
    ``tracing_context`` / ``ASSAY_TRACING``; ``True``/``False`` force it for this function.
    ``process_inputs``/``process_outputs`` transform what is recorded (e.g. to drop secrets);
    ``reduce_fn`` folds a generator's items into its output.
    """
    if isinstance(func, str):
        run_type, func = func, None

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise InvalidInputError(f"@traceable needs a function, got {fn!r}")
        o = _Options(name or getattr(fn, "__name__", None) or type(fn).__name__, run_type,
                     metadata, tags, project_name, client, process_inputs, process_outputs,
                     reduce_fn, enabled)
        target = inspect.unwrap(fn) if not inspect.isfunction(fn) else fn
        if inspect.isasyncgenfunction(target):
            wrapped = _wrap_async_gen(fn, o)
        elif inspect.iscoroutinefunction(target):
            wrapped = _wrap_async(fn, o)
        elif inspect.isgeneratorfunction(target):
            wrapped = _wrap_gen(fn, o)
        else:
            wrapped = _wrap_sync(fn, o)
        wrapped.__assay_traceable__ = True  # type: ignore[attr-defined]  # a marker on the function
        return wrapped  # type: ignore[return-value]  # fn's signature (wraps)

    if func is None:
        return decorate
    return decorate(func)


# -- the context manager --------------------------------------------------------------------------
class trace:
    """Record a block as a run: ``with trace("step") as run:`` (also ``async with``).

    The run is current inside the block, so traced calls in it become its children. Leaving the
    block ends the run (keeping outputs set with ``run.end(outputs=...)``); an exception is
    recorded as the run's error and propagates unchanged. When tracing is off the block still
    gets a ``RunTree`` to write to, but nothing is stored and it is not made current.
    """

    __slots__ = ("_args", "_enabled", "_parent", "_run", "_token", "_prev", "_on")

    def __init__(
        self,
        name: str,
        run_type: str = "chain",
        inputs: Any = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        project_name: str | None = None,
        project_id: uuid.UUID | str | None = None,
        client: Client | None = None,
        reference_example_id: uuid.UUID | str | None = None,
        run_id: uuid.UUID | str | None = None,
        enabled: bool | None = None,
        parent: RunTree | Mapping[Any, Any] | str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        check_run_type(run_type)
        if parent is not None and isinstance(parent, Mapping | str):
            # another process's run, from its to_headers(): its project, metadata and tags
            parent = _remote(parent, client, project_name)
            if parent is not None:
                project_name = None
                metadata = {**parent.metadata, **(metadata or {})}
                tags = [*parent.tags, *[t for t in tags or () if t not in parent.tags]]
        self._args: tuple[str, str, Any, dict[str, Any]]
        self._args = (name, run_type, inputs, dict(client=client, project_name=project_name,
                      project_id=project_id, metadata=metadata, tags=tags,
                      reference_example_id=reference_example_id, run_id=run_id, extra=extra))
        self._enabled = enabled
        self._parent = parent
        self._run: RunTree | None = None
        self._token: Any = None
        self._prev: RunTree | None = None
        self._on = False

    def __enter__(self) -> RunTree:
        if self._run is not None:
            raise InvalidInputError("a trace(...) block cannot be entered twice")
        name, run_type, inputs, kw = self._args
        prev = current = _RUN.get()
        if STEP_RUNS:
            current = innermost(prev)
        cfg = _CFG.get()
        self._on = on = self._enabled if self._enabled is not None else _is_on(current, cfg)
        parent = self._parent if self._parent is not None else (current if on else None)
        if on and parent is None:  # a root: the frameworks imported by now get their hooks
            _instrument_imported()
        self._run = run = _new_run(name, run_type, inputs, parent, cfg, **kw)
        if on:
            run.post()
            self._prev = prev
            self._token = _RUN.set(run)
        return run

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        run = self._run
        assert run is not None, "trace exited without being entered"
        if self._token is not None:
            _reset(self._token, self._prev)
            self._token = None
        if exc is not None:
            run.end(error=exc)
        else:
            run.end()
        if self._on:
            run.patch()

    async def __aenter__(self) -> RunTree:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)
