"""Thin sync wrappers over the async core, on one event loop that outlives every call.

Shared by every layer that offers a sync entry point over an async core (judges, evaluators,
experiments), so it lives at the package root rather than under any one of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["ContextThreadPoolExecutor", "awaited", "keep_context_in_executor", "offload",
           "on_a_running_loop", "run_sync", "submit"]

T = TypeVar("T")


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ThreadPoolExecutor whose tasks run in the submitter's context, so traced work in a
    worker thread nests under the run that submitted it."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        ctx = contextvars.copy_context()  # one copy per task: a Context can't run in 2 threads
        return super().submit(ctx.run, fn, *args, **kwargs)


OFFLOAD_THREADS = 32  # as many as asyncio's default executor has at most


_kept_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_kept_guard = threading.Lock()
_UNSAID = object()


def keep_context_in_executor(loop: asyncio.AbstractEventLoop, name: str) -> bool:
    """Make ``loop``'s default executor one that runs each call in the caller's context, as
    ``asyncio.to_thread`` does: a framework's sync work handed to ``run_in_executor(None,
    ...)`` (Upsonic's sync tools) then traces under the run that was current (the tool's).

    Once per loop. Only an executor asyncio made itself (or none yet) is replaced, the one
    replaced shut down on the loop's own thread once nothing can be handing it work; a default
    executor the user set is theirs and left, as is a loop that does not say which it has
    (uvloop). Whether the loop's default executor now keeps the caller's context."""
    if loop in _kept_loops:
        return True
    with _kept_guard:
        if loop in _kept_loops:
            return True
        current = getattr(loop, "_default_executor", _UNSAID)
        if current is not None and not (
                current.__class__ is ThreadPoolExecutor
                and getattr(current, "_thread_name_prefix", "").startswith("asyncio")):
            return False  # the user's own (or unknown): theirs to choose
        loop.set_default_executor(ContextThreadPoolExecutor(OFFLOAD_THREADS,
                                                            thread_name_prefix=name))
        if current is not None:  # its running calls finish; nothing new reaches it
            loop.call_soon_threadsafe(current.shutdown, False)
        _kept_loops.add(loop)
        return True


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def offload(fn: Callable[..., T], /, *args: Any) -> asyncio.Future[T]:
    """``asyncio.to_thread`` on assay's own threads: blocking store work, off the event loop.

    ``to_thread`` uses the running loop's default executor, which ``asyncio.run`` creates for
    every loop and joins (with yet another thread) when the loop closes: a thread started and
    joined per ``evaluate()`` call, ~0.4 ms before the call returns. These threads are the
    process's and stay between calls. Context variables go along, as with ``to_thread``.
    """
    return asyncio.wrap_future(submit(fn, *args))


def submit(fn: Callable[..., T], /, *args: Any) -> Future[T]:
    """``offload`` without awaiting: the call starts on one of those threads at once, whether
    or not the caller's event loop gets to run before it is done."""
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(OFFLOAD_THREADS, thread_name_prefix="assay-io")
            pool = _pool
    return pool.submit(contextvars.copy_context().run, fn, *args)


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist: start a new pool on first use."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


# -- the process's event loop ----------------------------------------------------------------------
# Agents keep async HTTP clients (httpx, aiohttp) bound to the loop they first ran on. A fresh
# ``asyncio.run`` per sync call closes that loop behind them, and the next call fails with
# "Event loop is closed". So every sync entry point runs its coroutine on ONE loop that lives as
# long as the process, on a daemon thread of its own.
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_lock = threading.Lock()


def _shared_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_thread
    loop = _loop
    if loop is not None:
        return loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            keep_context_in_executor(loop, "assay-loop-executor")
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                while True:  # nothing stops this loop; a task raising SystemExit or
                    try:  # KeyboardInterrupt escapes run_forever: its caller has it already
                        loop.run_forever()
                    except BaseException:  # noqa: BLE001, S112 - keep serving the others
                        continue

            thread = threading.Thread(target=serve, name="assay-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop_thread, _loop = thread, loop
        return _loop


def _forget_loop() -> None:
    """In a forked child the loop's thread does not exist: start a new loop on first use."""
    global _loop, _loop_thread, _loop_lock
    _loop, _loop_thread, _loop_lock = None, None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_loop)


def on_a_running_loop() -> bool:
    """Whether this thread is running an event loop: sync code called from a coroutine, which
    must not block it (``run_sync`` would run the work on a loop of its own, away from the
    clients an agent bound to this one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def awaited(coro: Coroutine[Any, Any, Any], then: Callable[[Any], T]) -> T:
    """``then`` of what ``coro`` gives: a sync evaluator's answer when it is awaited instead."""
    return then(await coro)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, on the process's long-lived event loop.

    The coroutine runs as a task on that loop with the caller's context variables (tracing
    parents, switches), and the caller waits for it. Called from the loop's own thread (a sync
    function inside a coroutine already running there), waiting on the loop would deadlock: it
    then runs on a helper thread with a loop of its own, as before.
    """
    loop = _shared_loop()
    ctx = contextvars.copy_context()
    if threading.current_thread() is _loop_thread:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-sync") as pool:
            return pool.submit(ctx.run, asyncio.run, coro).result()
    done: Future[T] = Future()
    task_box: list[asyncio.Task[T]] = []

    def start() -> None:
        try:
            task = loop.create_task(coro, context=ctx)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            done.set_exception(exc)
            return
        task_box.append(task)
        task.add_done_callback(_settle(done))

    loop.call_soon_threadsafe(start)
    try:
        return done.result()
    except BaseException:
        if not done.done():  # interrupted while waiting (Ctrl-C): stop the coroutine too
            def cancel() -> None:
                if task_box:
                    task_box[0].cancel()

            loop.call_soon_threadsafe(cancel)
        raise


def _settle(done: Future[T]) -> Callable[[asyncio.Task[T]], None]:
    def callback(task: asyncio.Task[T]) -> None:
        if task.cancelled():
            done.set_exception(asyncio.CancelledError())
            return
        exc = task.exception()
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(task.result())

    return callback
