"""Thin sync wrappers over the async core, safe inside an already running event loop.

Shared by every layer that offers a sync entry point over an async core (judges, evaluators,
experiments), so it lives at the package root rather than under any one of them.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


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
