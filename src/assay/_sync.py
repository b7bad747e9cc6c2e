"""Thin sync wrappers over the async core, safe inside an already running event loop.

Shared by every layer that offers a sync entry point over an async core (judges, evaluators,
experiments), so it lives at the package root rather than under any one of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["offload", "run_sync", "submit"]

T = TypeVar("T")

OFFLOAD_THREADS = 32  # as many as asyncio's default executor has at most
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


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code.

    Outside an event loop this is ``asyncio.run``. Inside one (Jupyter, or a sync evaluator
    called from an async runner) it runs on a helper thread with its own loop, carrying the
    caller's context variables (tracing parents) along.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-sync") as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()
