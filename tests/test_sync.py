"""offload: blocking work on assay's own threads, from an event loop."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal

import pytest

from assay._sync import offload

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


async def _offload(fn):  # type: ignore[no-untyped-def]
    return await offload(fn)


def test_offload_runs_on_a_pool_thread_with_the_caller_s_context() -> None:
    import threading

    async def main() -> tuple[str, str]:
        VAR.set("caller")
        return await offload(lambda: (VAR.get(), threading.current_thread().name))

    value, thread = asyncio.run(main())
    assert value == "caller" and thread.startswith("assay-io")


def test_run_in_executor_on_assays_loop_runs_in_the_tasks_context() -> None:
    """A framework's ``run_in_executor(None, fn)`` on the loop ``run_sync`` runs coroutines on
    (an agent's sync tool) sees the caller's context variables, as ``asyncio.to_thread``
    would; asyncio's own default executor starts each call with an empty context."""
    import threading

    from assay._sync import run_sync

    async def main() -> tuple[str, str]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, lambda: (VAR.get(), threading.current_thread().name))

    token = VAR.set("caller")
    try:
        value, thread = run_sync(main())
    finally:
        VAR.reset(token)
    assert value == "caller" and thread.startswith("assay-loop-executor")

    async def plain() -> str:
        return await asyncio.get_running_loop().run_in_executor(None, VAR.get)

    token = VAR.set("caller")
    try:
        assert asyncio.run(plain()) == "unset"  # (what assay's executor changes)
    finally:
        VAR.reset(token)


def test_keep_context_replaces_asyncios_own_executor_and_leaves_the_users() -> None:
    """Where a framework's tool run opens on a loop of the user's (Upsonic's sync tools):
    asyncio's own default executor, made before (a DNS lookup makes one), is replaced by one
    that keeps the caller's context and shut down; an executor the user set is theirs."""
    from concurrent.futures import ThreadPoolExecutor

    from assay._sync import keep_context_in_executor

    async def main(users: bool) -> tuple[bool, str, bool, object]:
        loop = asyncio.get_running_loop()
        if users:
            before = ThreadPoolExecutor(2)
            loop.set_default_executor(before)
        else:
            await loop.run_in_executor(None, lambda: None)  # asyncio makes its executor
            before = loop._default_executor  # type: ignore[attr-defined]
        kept = keep_context_in_executor(loop, "kept-test")
        assert keep_context_in_executor(loop, "kept-test") is kept  # (once per loop)
        VAR.set("caller")
        seen = await loop.run_in_executor(None, VAR.get)
        await asyncio.sleep(0)  # (the replaced executor is shut down on the loop's thread)
        return kept, seen, before._shutdown, loop._default_executor  # type: ignore[attr-defined]

    kept, seen, shut, now = asyncio.run(main(users=False))
    assert (kept, seen, shut) == (True, "caller", True)
    assert now._thread_name_prefix == "kept-test"  # type: ignore[attr-defined]
    kept, seen, shut, now = asyncio.run(main(users=True))
    assert (kept, seen, shut) == (False, "unset", False)
    assert now._thread_name_prefix != "kept-test"  # type: ignore[attr-defined]


def test_offload_raises_what_the_function_raised() -> None:
    def boom() -> None:
        raise KeyError("x")

    async def main() -> None:
        await offload(boom)

    with pytest.raises(KeyError):
        asyncio.run(main())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_threads_of_its_own() -> None:
    """The parent's pool threads do not exist in a child: without a fresh pool its first
    offload would wait forever (the alarm turns that into a failure)."""
    assert asyncio.run(_offload(lambda: 1)) == 1  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            signal.alarm(10)
            code = 0 if asyncio.run(_offload(lambda: 2)) == 2 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's offload failed or hung"
