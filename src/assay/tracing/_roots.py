"""Root runs for a framework's calls made outside any assay run, where tracing is on.

Inside ``evaluate()``, a ``trace`` block or a ``@traceable`` function, a framework's steps
become children of the current run. A service in production calls its agent with no assay run
around it; LangSmith makes each such call a trace of its own when tracing is on, and so does
assay: where ``ASSAY_TRACING=true`` or inside ``tracing_context(enabled=True)``, the outermost
step of a framework's call (a LangGraph graph's invoke, an Agents SDK trace, a pydantic-ai
agent run...) starts a root run, with the client, project, metadata and tags that tracing
configuration names, and the framework's inner steps nest under it.

A hook asks ``root_spec()`` where the call starts (on the agent's own thread and context) and
keeps the answer: a run built later, on the writer's thread, is made from it exactly as it
would have been made then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._context import _CFG, _Config, _env_enabled
from ._run_tree import RunTree
from ._traceable import _new_run

__all__ = ["RootSpec", "root_spec"]


class RootSpec:
    """The tracing configuration in force where a framework's call started outside any assay
    run: what its root run is made with (``new_run``)."""

    __slots__ = ("cfg",)

    def __init__(self, cfg: _Config | None) -> None:
        self.cfg = cfg

    def new_run(self, name: str, run_type: str, inputs: Any, *,
                metadata: Mapping[str, Any] | None = None,
                tags: Sequence[str] | None = None) -> RunTree:
        """The call's root run (not posted: the hook patches it when the call ends).
        ``inputs`` as ``fast_child`` takes them: a dict, or an integration's ``Deferred``
        dict, kept as it is (None: none)."""
        run = _new_run(name, run_type, None, None, self.cfg, metadata=metadata, tags=tags)
        if inputs is not None:
            run.inputs = inputs
        return run

    def wake(self) -> None:
        """Make sure the writer of the client the root will use runs: a process whose first
        traced run is a framework's root has none yet, and an integration that builds its
        runs later (LangChain's log) needs one ticking to build them."""
        cfg = self.cfg
        client = cfg.client if cfg is not None else None
        if client is None:
            from ..client import get_default_client

            client = get_default_client()
        client._tracing_writer()._ensure_running()


def root_spec() -> RootSpec | None:
    """A ``RootSpec`` where a run started now with no parent would be recorded
    (``ASSAY_TRACING=true``, ``tracing_context(enabled=True)``), else None."""
    cfg = _CFG.get()
    # (``_is_on(None, cfg)`` inline: LangChain asks at every runnable it configures)
    if cfg is not None and cfg.enabled is not None and cfg.at_run is None:
        return RootSpec(cfg) if cfg.enabled else None
    return RootSpec(cfg) if _env_enabled() else None
