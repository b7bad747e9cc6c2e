"""A chain's usage as reads give it: the tokens, cost and first token of the llm calls under it.

The store keeps usage on the llm runs alone (the statistics count each call once); LangSmith's
run reads, its ``/runs/query`` and its filter language give a chain the sums over its subtree,
and so do assay's (``Client.read_run`` / ``list_runs``, the server's v1 run routes, the v2
queries' ``include_subtree_usage``, the web UI). A tree read whole is summed in Python from
the runs in hand; a run read alone asks the database (``subtree_usage``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from .._ids import as_uuid
from ..schemas import Run
from ._tables import runs
from ._types import from_micros

if TYPE_CHECKING:
    from ._base import Store

__all__ = ["USAGE_COLUMNS", "llm_runs_under", "roll_up_usage", "subtree_usage"]

USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_cost",
                 "completion_cost", "total_cost")


def llm_runs_under(top: Any, below: Any) -> ColumnElement[bool]:
    """``below`` is an llm run in ``top``'s subtree (``top`` itself included): the condition
    both the reads' sums and the filter language's chain usage (``_run_filter``) use."""
    return and_(below.c.trace_id == top.c.trace_id, below.c.tenant_id == top.c.tenant_id,
                below.c.run_type == "llm",
                or_(below.c.id == top.c.id,
                    below.c.dotted_order.startswith(top.c.dotted_order + "."),
                    # posted with a parent but no dotted order: a child of ``top`` counts
                    and_(below.c.dotted_order.is_(None), below.c.parent_run_id == top.c.id)))


def subtree_usage(store: Store, run_ids: Sequence[uuid.UUID | str]) -> dict[str, dict[str, Any]]:
    """Tokens and cost of the llm runs in each run's subtree (itself included), and its
    earliest first token: ``{run id: {prompt_tokens, completion_tokens, total_tokens,
    prompt_cost, completion_cost, total_cost, first_token_time}}``. A chain's own row
    carries none of these; LangSmith shows them summed over what it called."""
    ids = [str(as_uuid(i, "run id")) for i in run_ids]
    top, below = runs.alias("top"), runs.alias("below")
    sums = [func.sum(below.c[c]).label(c) for c in USAGE_COLUMNS]
    out: dict[str, dict[str, Any]] = {}
    store.settle()
    with store.read() as conn:
        for i in range(0, len(ids), 500):
            q = select(top.c.id, *sums, func.min(below.c.first_token_time).label("first")
                       ).select_from(top.join(below, llm_runs_under(top, below))
                       ).where(top.c.id.in_(ids[i:i + 500]),
                               top.c.tenant_id == store.tenant_id).group_by(top.c.id)
            for row in conn.execute(q):
                m = row._mapping
                usage: dict[str, Any] = {  # PostgreSQL sums integers as numeric
                    c: None if m[c] is None else (float(m[c]) if c.endswith("cost")
                                                  else int(m[c])) for c in USAGE_COLUMNS}
                usage["first_token_time"] = from_micros(m["first"])
                out[str(row.id)] = usage
    return out


def roll_up_usage(store: Store, found: Sequence[Run]) -> Sequence[Run]:
    """``found`` (and their child runs) with each chain's tokens, cost and first token summed
    over the llm calls under it; a run's own values are kept, an llm run's always. A tree read
    whole (``child_runs`` loaded) is summed here, with no query (a query per read tripled
    ``read_run``'s time on a small trace); a run alone asks the database. In place: what the
    API and ``Client`` hand out, never what the store keeps."""
    alone = [r for r in found if r.child_runs is None and _unset(r)]
    for run in found:
        if run.child_runs is not None:
            _sum_tree(run)
    for i in range(0, len(alone), 500):
        chunk = alone[i:i + 500]
        usage = subtree_usage(store, [r.id for r in chunk])
        for run in chunk:
            for name, value in usage.get(str(run.id), {}).items():
                if getattr(run, name) is None:
                    setattr(run, name, value)
    return found


def _unset(run: Run) -> bool:
    """A run whose usage a read fills from the llm calls under it."""
    return run.run_type != "llm" and run.total_tokens is None and run.total_cost is None


def _sum_tree(run: Run) -> dict[str, Any]:
    """``roll_up_usage`` over a loaded tree: the sums (and earliest first token) of the llm
    runs in ``run``'s subtree, each counted once, set on every run ``_unset`` finds."""
    sums: dict[str, Any] = {}
    if run.run_type == "llm":
        for name in (*USAGE_COLUMNS, "first_token_time"):
            if getattr(run, name) is not None:
                sums[name] = getattr(run, name)
    for child in run.child_runs or ():
        for name, value in _sum_tree(child).items():
            held = sums.get(name)
            sums[name] = value if held is None else (
                min(held, value) if name == "first_token_time" else held + value)
    if _unset(run):
        for name, value in sums.items():
            if getattr(run, name) is None:
                setattr(run, name, value)
    return sums
