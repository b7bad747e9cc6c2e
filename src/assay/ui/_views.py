"""What each page shows, gathered from the store (templates only lay it out)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._usage import cache_counts
from ..analysis import CompareOptions, ExampleResult, compare_experiments, side_by_side
from ..errors import InvalidInputError
from ..schemas import Run, TracerSessionResult
from ..store._run_usage import roll_up_usage
from ._format import pct, secs

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["home", "dataset_page", "experiments_page", "run_page", "compare_page",
           "parse_ids"]

EXAMPLES_PER_PAGE = 100
ROWS_PER_PAGE = 200  # compare rows (the experiment page is ``_views_experiment``)


def _pages(params: dict[str, Any], offset: int, total: int, per_page: int) -> dict[str, Any]:
    """Links to the previous/next page, keeping the other query parameters."""
    from urllib.parse import urlencode

    keep = {k: v for k, v in params.items() if v not in (None, "", False)}

    def link(at: int) -> str:
        return "?" + urlencode({**keep, **({"offset": at} if at else {})})

    return {"offset": offset, "per_page": per_page, "total": total,
            "prev_url": link(max(offset - per_page, 0)) if offset > 0 else None,
            "next_url": link(offset + per_page) if offset + per_page < total else None}


def home(store: Store) -> dict[str, Any]:
    return {"datasets": store.datasets.list(),
            "projects": store.projects.list(reference_free=True, limit=50)}


def dataset_page(store: Store, dataset_id: str, *, split: str | None, as_of: str | None,
                 offset: int, shared: bool = False) -> dict[str, Any]:
    """A dataset's examples; ``shared`` is the page a share link opens: its experiments'
    statistics shown here (their pages need a key), no way elsewhere."""
    ds = store.datasets.read(dataset_id=dataset_id)
    at = as_of or None
    everything = store.examples.list(dataset_id=ds.id, as_of=at)
    splits = Counter(s for e in everything for s in (e.split or []))
    shown = [e for e in everything if split is None or split in (e.split or [])]
    offset = max(offset, 0)
    return {
        "dataset": ds, "splits": sorted(splits.items()), "split": split, "as_of": at,
        "total": len(shown), "offset": offset, "per_page": EXAMPLES_PER_PAGE,
        "examples": shown[offset: offset + EXAMPLES_PER_PAGE],
        "versions": store.datasets.list_versions(ds.id),
        "shared": shared, **(_shared_experiments(store, ds.id) if shared else
                             {"share": store.shares.of_dataset(ds.id)}),
    }


def _shared_experiments(store: Store, dataset_id: Any) -> dict[str, Any]:
    projects = store.projects.list(reference_dataset_id=dataset_id, include_stats=True)
    return {"experiments": projects, "share": None,
            **_feedback_columns(projects)}  # type: ignore[arg-type]  # with stats


def _feedback_columns(projects: list[TracerSessionResult]) -> dict[str, list[str]]:
    """The keys of the experiments' feedback on runs and of their summary evaluators."""
    return {"feedback_keys": sorted({k for p in projects for k in p.feedback_stats or {}}),
            "summary_keys": sorted({k for p in projects
                                    for k in p.session_feedback_stats or {}})}


def experiments_page(store: Store, dataset_id: str) -> dict[str, Any]:
    ds = store.datasets.read(dataset_id=dataset_id)
    projects = store.projects.list(reference_dataset_id=ds.id, include_stats=True)
    from ._views_projects import trends

    return {"dataset": ds, "experiments": projects,
            **_feedback_columns(projects),  # type: ignore[arg-type]  # with stats
            "trends": trends(projects),
            "pairwise": store.comparative.list(dataset_id=ds.id, limit=50)}


@dataclass
class Node:
    run: Run
    depth: int
    offset_pct: float
    width_pct: float

    @property
    def seconds(self) -> float | None:
        lat = self.run.latency
        return None if lat is None else lat.total_seconds()

    @property
    def first_token(self) -> float | None:
        if self.run.first_token_time is None:
            return None
        return (self.run.first_token_time - self.run.start_time).total_seconds()

    @property
    def cache(self) -> tuple[int, int]:
        """(tokens read from the prompt cache, tokens written to it) of an llm run, from its
        usage's details as the store prices them."""
        usage = self.run.metadata.get("usage_metadata")
        details = usage.get("input_token_details") if isinstance(usage, dict) else None
        if not isinstance(details, dict):
            return 0, 0
        read, written, _ = cache_counts(details)
        return read, written

    @property
    def chat(self) -> Any:
        """An llm run's conversation as chat turns (``_chat``), or None to show its JSON."""
        if self.run.run_type != "llm":
            return None
        from .._chat import chat_turns

        return chat_turns(self.run.inputs, self.run.outputs)

    @property
    def model(self) -> str | None:
        meta = self.run.metadata
        return meta.get("ls_model_name") or (self.run.extra or {}).get(
            "invocation_params", {}).get("model")


def _walk(run: Run, depth: int, t0: datetime, total: float, out: list[Node]) -> None:
    start = (run.start_time - t0).total_seconds()
    dur = run.latency.total_seconds() if run.latency is not None else 0.0
    out.append(Node(run, depth, 100 * start / total, max(100 * dur / total, 0.4)))
    for child in sorted(run.child_runs or [], key=lambda r: (r.start_time, r.dotted_order or "")):
        _walk(child, depth + 1, t0, total, out)


def run_page(store: Store, run_id: str, *, shared: bool = False) -> dict[str, Any]:
    """A trace: ``shared`` is the page a share link opens (no feedback, no way elsewhere)."""
    run = store.runs.read(run_id, load_child_runs=True)
    roll_up_usage(store, [run])  # a chain's row sums the llm calls under it, as the API reads
    nodes: list[Node] = []
    ends = [run.end_time or run.start_time]
    stack = list(run.child_runs or [])
    while stack:
        r = stack.pop()
        ends.append(r.end_time or r.start_time)
        stack.extend(r.child_runs or [])
    total = max((max(ends) - run.start_time).total_seconds(), 1e-6)
    _walk(run, 0, run.start_time, total, nodes)
    # with its statistics: the page names the project and offers its feedback keys
    project = (store.projects.read(project_id=run.session_id, include_stats=True)
               if run.session_id else None)
    llm = [n.run for n in nodes if n.run.run_type == "llm"]
    totals = {
        "llm_calls": len(llm),
        "tool_calls": sum(1 for n in nodes if n.run.run_type == "tool"),
        "tokens": sum(r.total_tokens or 0 for r in llm),
        "cost": sum(r.total_cost for r in llm if r.total_cost is not None) if any(
            r.total_cost is not None for r in llm) else None,
    }
    if shared:
        return {"run": run, "nodes": nodes, "project": None, "totals": totals,
                "feedback": [], "feedback_keys": [], "shared": True, "share": None}
    keys = sorted((getattr(project, "feedback_stats", None) or {}).keys())
    return {"run": run, "nodes": nodes, "project": project, "totals": totals,
            "feedback": store.feedback.list(run_ids=[n.run.id for n in nodes]),
            "feedback_keys": keys, "shared": False, "share": store.shares.of_run(run.id)}


def parse_ids(values: list[str]) -> list[str]:
    """``?ids=a&ids=b`` and ``?ids=a,b`` both work; each must be a UUID."""
    out: list[str] = []
    for v in values:
        for part in v.split(","):
            part = part.strip()
            if part:
                try:
                    out.append(str(uuid.UUID(part)))
                except ValueError:
                    raise InvalidInputError(f"ids: {part!r} is not an experiment id") from None
    if len(out) < 2:
        raise InvalidInputError("compare needs at least two experiment ids (?ids=A,B)")
    return out


def _cell_class(base: ExampleResult | None, row: ExampleResult | None, key: str) -> str:
    if base is None or row is None or key not in base.scores or key not in row.scores:
        return ""
    if row.scores[key] < base.scores[key]:
        return "worse"
    return "better" if row.scores[key] > base.scores[key] else ""


def order_ids(store: Store, ids: list[str], *, by_time: bool, baseline: str | None) -> list[str]:
    """The baseline first: the oldest experiment with ``by_time``, or the one named."""
    if by_time:
        started = {str(p.id): p.start_time for p in store.projects.list(project_ids=ids)}
        ids = sorted(ids, key=lambda i: (started.get(i) is None, started.get(i)))
    if baseline:
        if baseline not in ids:
            raise InvalidInputError(f"baseline {baseline} is not one of the compared ids")
        ids = [baseline] + [i for i in ids if i != baseline]
    return ids


def compare_page(store: Store, ids: list[str], options: CompareOptions,
                 offset: int = 0) -> dict[str, Any]:
    comparison, loaded = compare_experiments(store, ids, options)
    score_keys: list[str] = []
    for d in loaded:
        score_keys += [k for k in d.score_keys if k not in score_keys]
    pairs = side_by_side(loaded)
    offset = max(offset, 0)
    pages = _pages({"ids": ",".join(ids), "confidence": options.confidence,
                    "resamples": options.resamples, "seed": options.seed},
                   offset, len(pairs), ROWS_PER_PAGE)
    examples = []
    for key, results in pairs[offset: offset + ROWS_PER_PAGE]:
        first = next(r for r in results if r is not None)
        classes = [{k: _cell_class(results[0], r, k) for k in score_keys} for r in results]
        examples.append({"key": key, "first": first, "results": results, "classes": classes})
    by_candidate = [(c, [d for d in comparison.diffs if d.candidate.id == c.id])
                    for c in comparison.candidates]
    dataset = store.datasets.read(dataset_id=comparison.dataset_id)
    chosen = [e.project.id for e in loaded]
    pairwise = [c for c in store.comparative.list(dataset_id=dataset.id)
                if c.compares_two_of(chosen)][:50]
    return {"comparison": comparison, "experiments": loaded, "by_candidate": by_candidate,
            "score_keys": score_keys, "examples": examples, "dataset": dataset, "pages": pages,
            "ids": ",".join(ids), "options": options, "pairwise": pairwise}


def stat_cards(p: TracerSessionResult) -> list[tuple[str, str]]:
    """The headline numbers of an experiment, as on read_project(include_stats=True)."""
    from ._format import num, usd

    cards = [("runs", num(p.run_count)), ("latency p50", secs(p.latency_p50)),
             ("latency p99", secs(p.latency_p99)), ("first token p50", secs(p.first_token_p50)),
             ("first token p99", secs(p.first_token_p99)), ("tokens", num(p.total_tokens)),
             ("cost", usd(p.total_cost)), ("error rate", pct(p.error_rate))]
    for key, st in sorted((p.feedback_stats or {}).items()):
        value = num(st.avg) if st.avg is not None else ", ".join(
            f"{k}: {v}" for k, v in sorted(st.values.items()))
        cards.append((key, value))
    return cards

