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
