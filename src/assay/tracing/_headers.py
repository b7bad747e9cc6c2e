"""LangSmith's distributed-tracing headers: a trace continued in another process.

Service A sends ``run.to_headers()`` (``langsmith-trace``: the run's dotted order; ``baggage``:
its metadata, tags and project, URL-encoded) with its request; service B makes a parent of them
(``RunTree.from_headers``, ``langsmith_extra={"parent": headers}``, ``tracing_context(parent=
headers)``) and its runs join A's trace under A's run. The parent is a stand-in that B never
writes (A does). The format is LangSmith's, so either side may be LangSmith's SDK.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from .._json import dumps
from ..errors import InvalidInputError
from ._run_tree import RunTree, _dt_to_us

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["BAGGAGE_HEADER", "TRACE_HEADER", "from_headers", "remote_parent", "to_headers"]

log = logging.getLogger("assay.tracing")


def to_headers(run: RunTree) -> dict[str, str]:
    """``RunTree.to_headers``."""
    items = []
    if run._meta:
        items.append(f"{_BAGGAGE_METADATA}={quote(dumps(run._meta))}")
    if run._tags:
        items.append(f"{_BAGGAGE_TAGS}={quote(','.join(run._tags))}")
    if run.session_name:
        items.append(f"{_BAGGAGE_PROJECT}={quote(run.session_name)}")
    return {TRACE_HEADER: run.dotted_order, BAGGAGE_HEADER: ",".join(items)}


def from_headers(headers: Mapping[Any, Any], client: Client | None,
                 project_name: str | None) -> RunTree | None:
    """``RunTree.from_headers``."""
    if not isinstance(headers, Mapping):
        raise InvalidInputError(f"distributed-tracing headers must be a mapping, got "
                                f"{type(headers).__name__}")
    dotted = _header(headers, TRACE_HEADER)
    if not dotted:
        return None
    return remote_parent(dotted, _header(headers, BAGGAGE_HEADER), client, project_name)


TRACE_HEADER = "langsmith-trace"
BAGGAGE_HEADER = "baggage"
_BAGGAGE_METADATA = "langsmith-metadata"
_BAGGAGE_TAGS = "langsmith-tags"
_BAGGAGE_PROJECT = "langsmith-project"
_SEGMENT_ID = 36  # a dotted-order segment: %Y%m%dT%H%M%S%fZ then the run id's 36 characters


class _RemoteParent(RunTree):
    """A run of another process, read from its headers: a parent here, written there only."""

    __slots__ = ()
    _remote = True

    def post(self) -> None:
        """Nothing: the process that sent the headers writes this run."""

    def patch(self) -> None:
        """Nothing: the process that sent the headers writes this run."""


def _header(headers: Mapping[Any, Any], name: str) -> str | None:
    """``headers[name]`` in any case, keys and values as str or bytes (an ASGI scope's)."""
    value = headers.get(name)
    if value is None:
        for key in headers:
            text = key.decode("latin-1") if isinstance(key, bytes | bytearray) else key
            if isinstance(text, str) and text.lower() == name:
                value = headers[key]
                break
    if isinstance(value, bytes | bytearray):
        value = value.decode("latin-1")
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"the {name!r} header must be text, got "
                                f"{type(value).__name__}")
    return value


def _segments(dotted: str) -> list[tuple[int, str]]:
    """A ``langsmith-trace`` value's segments as (start in epoch microseconds, run id)."""
    out = []
    for seg in dotted.split("."):
        try:
            stamp = datetime.strptime(seg[:-_SEGMENT_ID], "%Y%m%dT%H%M%S%fZ")
            run_id = str(uuid.UUID(seg[-_SEGMENT_ID:]))
        except ValueError:
            shown = dotted if len(dotted) <= 200 else dotted[:200] + "..."
            raise InvalidInputError(
                f"malformed {TRACE_HEADER!r} header (a dotted order: <%Y%m%dT%H%M%S%fZ><run "
                f"id> segments joined by '.'): {shown!r}") from None
        out.append((_dt_to_us(stamp.replace(tzinfo=UTC)), run_id))
    return out


def _baggage(value: str | None) -> tuple[dict[str, Any], list[str], str | None]:
    """(metadata, tags, project) from a ``baggage`` header; what cannot be read is left out
    and logged, as LangSmith does (the trace header alone places the runs)."""
    metadata: dict[str, Any] = {}
    tags: list[str] = []
    project = None
    for item in (value or "").split(","):
        key, _, raw = item.strip().partition("=")
        try:
            if key == _BAGGAGE_METADATA:
                read = json.loads(unquote(raw))
                if isinstance(read, dict):
                    metadata = read
            elif key == _BAGGAGE_TAGS:
                tags = [t for t in unquote(raw).split(",") if t]
            elif key == _BAGGAGE_PROJECT:
                project = unquote(raw) or None
        except ValueError as exc:
            log.warning("assay tracing: ignoring an unreadable %r in the baggage header: %s",
                        key, exc)
    return metadata, tags, project


def remote_parent(dotted: str, baggage: str | None, client: Client | None,
                   project_name: str | None) -> RunTree:
    """The run a ``langsmith-trace``/``baggage`` pair describes (see ``from_headers``)."""
    if not isinstance(dotted, str):
        raise InvalidInputError(f"a {TRACE_HEADER!r} value must be text, got "
                                f"{type(dotted).__name__}")
    dotted = dotted.strip()
    segs = _segments(dotted)
    metadata, tags, project = _baggage(baggage)
    if project is None or client is None:
        from ._context import _CFG, env_project

        cfg = _CFG.get()
        if project is None:
            project = project_name or (cfg.project_name if cfg is not None else None) \
                or env_project()
        if client is None and cfg is not None:
            client = cfg.client
    above = dotted.rpartition(".")[0]
    run = _RemoteParent("parent", "chain", None, client=client, project_name=project,
                        metadata=metadata, tags=tags, run_id=segs[-1][1],
                        trace_id=segs[0][1], parent_run_id=segs[-2][1] if above else None,
                        parent_dotted_order=above or None)
    run._start_us = segs[-1][0]
    run._dotted = dotted
    return run


