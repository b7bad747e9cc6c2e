"""What the OpenAI and Anthropic wrappers share: an llm run around one SDK call, and stream proxies.

A wrapped ``create`` records an llm run whose inputs are the call's keyword arguments, whose
outputs are the response (as a dict), and whose metadata carries ``ls_provider``,
``ls_model_name`` and ``usage_metadata``. For ``stream=True`` it returns a proxy over the SDK's
stream: iterating it records the first chunk's time as a ``new_token`` event and feeds every chunk
to an accumulator; the run ends when the stream is exhausted, closed, exited or fails. Everything
else (``response``, ``until_done``...) passes through to the SDK's own stream object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from ._context import _CFG, _RUN, STEP_RUNS, innermost
from ._run_tree import RunTree
from ._traceable import _fail, _is_on, _new_run

__all__ = ["Accumulator", "LLMCallSpec", "dump", "field", "record_response", "record_usage",
           "wrap_create"]

_SKIP_INPUTS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})


def dump(obj: Any) -> Any:
    """A pydantic SDK object as plain data (anything else unchanged)."""
    to_dict = getattr(obj, "model_dump", None)
    if callable(to_dict):
        try:
            return to_dict(mode="json", exclude_none=True)
        except TypeError:  # pragma: no cover - very old pydantic v1 objects
            return to_dict()
    return obj


def field(obj: Any, key: str) -> Any:
    """``obj[key]`` or ``obj.key``: SDK objects and their plain-dict forms read the same way."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def record_usage(run: RunTree, usage_metadata: dict[str, Any] | None, model: str | None) -> None:
    """Put a provider's usage (already as ``usage_metadata``) and model on an llm run.

    The requested model (set at the start) wins over the one the response names, so pricing
    follows what the caller asked for.
    """
    if usage_metadata is not None:
        run.metadata["usage_metadata"] = usage_metadata
    if model and "ls_model_name" not in run.metadata:
        run.metadata["ls_model_name"] = model


def record_response(run: RunTree, resp: Any, usage_of: Callable[[Any], dict[str, Any] | None]
                    ) -> None:
    """A whole (non-streamed) response as the run's outputs, with its usage and model."""
    run.outputs = dump(resp) if not isinstance(resp, dict) else resp
    record_usage(run, usage_of(field(resp, "usage")), field(resp, "model"))


class Accumulator(Protocol):
    def add(self, chunk: Any) -> None: ...
    def finish(self, run: RunTree) -> None: ...


class LLMCallSpec:
    """How one SDK method maps to an llm run: ``usage_of`` turns the SDK's usage object into
    ``usage_metadata``; ``new_accumulator`` reassembles a stream into one response."""

    def __init__(self, name: str, provider: str, *, model_type: str,
                 usage_of: Callable[[Any], dict[str, Any] | None],
                 new_accumulator: Callable[[], Accumulator],
                 is_stream: Callable[[dict[str, Any]], bool] = lambda kw: bool(kw.get("stream")),
                 ) -> None:
        self.name = name
        self.provider = provider
        self.model_type = model_type
        self.usage_of = usage_of
        self.new_accumulator = new_accumulator
        self.is_stream = is_stream

    def start(self, kwargs: dict[str, Any], run_name: str | None) -> RunTree | None:
        parent = _RUN.get()
        if STEP_RUNS:  # (a framework's step running here: see _context.STEP_RUNS)
            parent = innermost(parent)
        cfg = _CFG.get()
        if not _is_on(parent, cfg):
            return None
        inputs = {k: v for k, v in kwargs.items() if k not in _SKIP_INPUTS}
        metadata: dict[str, Any] = {"ls_provider": self.provider, "ls_model_type": self.model_type}
        if kwargs.get("model") is not None:
            metadata["ls_model_name"] = kwargs["model"]
        for src, dst in (("temperature", "ls_temperature"), ("max_tokens", "ls_max_tokens"),
                         ("max_completion_tokens", "ls_max_tokens"),
                         ("max_output_tokens", "ls_max_tokens"), ("stop", "ls_stop")):
            if kwargs.get(src) is not None:
                metadata[dst] = kwargs[src]
        params = {k: v for k, v in inputs.items() if k not in ("messages", "input", "system",
                                                               "prompt", "tools")}
        run = _new_run(run_name or self.name, "llm", inputs, parent, cfg, metadata=metadata,
                       extra={"invocation_params": params})
        run.post()
        return run


class _StreamBase:
    _done = True  # class defaults keep __getattr__/__del__ safe on a half-built proxy
    _stream: Any = None

    def __init__(self, stream: Any, run: RunTree, acc: Accumulator) -> None:
        self._stream = stream
        self._run = run
        self._acc = acc
        self._first = True
        self._done = False

    def _chunk(self, chunk: Any) -> None:
        if self._first:
            self._first = False
            self._run._mark_first_token()
        try:
            self._acc.add(chunk)
        except Exception:  # an unexpected chunk shape must not break the caller's stream
            pass

    def _finish(self, error: BaseException | None = None) -> None:
        if self._done:
            return
        self._done = True
        run = self._run
        try:
            self._acc.finish(run)
        except Exception:  # pragma: no cover - keep the run even if assembling fails
            pass
        if error is not None:
            run.end(error=error)
        run.patch()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __del__(self) -> None:  # abandoned half-read: store what was seen
        try:
            self._finish()
        except Exception:  # pragma: no cover
            pass


class TracedStream(_StreamBase):
    """Proxy over a sync SDK stream (``openai.Stream``, ``anthropic.Stream``)."""

    def __iter__(self) -> TracedStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = self._stream.__next__()
        except StopIteration:
            self._finish()
            raise
        except BaseException as exc:
            self._finish(exc)
            raise
        self._chunk(chunk)
        return chunk

    def __enter__(self) -> TracedStream:
        self._stream.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._stream.__exit__(*exc)
        finally:
            self._finish(exc[1])

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._finish()


class AsyncTracedStream(_StreamBase):
    """Proxy over an async SDK stream (``openai.AsyncStream``, ``anthropic.AsyncStream``)."""

    def __aiter__(self) -> AsyncTracedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self._stream.__anext__()
        except StopAsyncIteration:
            self._finish()
            raise
        except BaseException as exc:
            self._finish(exc)
            raise
        self._chunk(chunk)
        return chunk

    async def __aenter__(self) -> AsyncTracedStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._stream.__aexit__(*exc)
        finally:
            self._finish(exc[1])

    async def close(self) -> None:
        try:
            await self._stream.close()
        finally:
            self._finish()


def wrap_create(create: Callable[..., Any], spec: LLMCallSpec, *, is_async: bool,
                run_name: str | None = None) -> Callable[..., Any]:
    """``create`` recorded as an llm run (see module docstring)."""
    if getattr(create, "__assay_wrapped__", False):
        return create

    if is_async:
        @functools.wraps(create)
        async def acreate(*args: Any, **kwargs: Any) -> Any:
            run = spec.start(kwargs, run_name)
            if run is None:
                return await create(*args, **kwargs)
            try:
                result = await create(*args, **kwargs)
            except BaseException as exc:
                _fail(run, exc)
                raise
            return _respond(run, spec, kwargs, result, AsyncTracedStream)

        acreate.__assay_wrapped__ = True  # type: ignore[attr-defined]  # a marker on the function
        return acreate

    @functools.wraps(create)
    def screate(*args: Any, **kwargs: Any) -> Any:
        run = spec.start(kwargs, run_name)
        if run is None:
            return create(*args, **kwargs)
        try:
            result = create(*args, **kwargs)
        except BaseException as exc:
            _fail(run, exc)
            raise
        return _respond(run, spec, kwargs, result, TracedStream)

    screate.__assay_wrapped__ = True  # type: ignore[attr-defined]  # a marker on the function
    return screate


def _respond(run: RunTree, spec: LLMCallSpec, kwargs: dict[str, Any], result: Any,
             stream_type: type[_StreamBase]) -> Any:
    """What a wrapped call returns: a stream proxy that ends the run later, or the response
    itself with the run ended now (sync and async calls differ only in how they got it)."""
    if spec.is_stream(kwargs):
        return stream_type(result, run, spec.new_accumulator())
    try:
        record_response(run, result, spec.usage_of)
    except Exception as exc:  # pragma: no cover - an odd response must not break the call
        run.add_metadata({"assay_wrapper_error": repr(exc)})
    run.patch()
    return result
