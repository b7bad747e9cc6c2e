"""The experiment page: a row per example, a page at a time, at any size.

The rows of one page come from SQL (``store/_experiment_page.py``: keyset pages over each
example's first root); the headline numbers from the statistics the store keeps as runs arrive
(``read_project(include_stats=True)``); the distributions from the first runs of the
experiment (all of them up to ``CHART_RUNS``, and the charts say so beyond). Nothing here reads
the whole experiment, so the page costs the same at 100 runs and at a million.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..analysis import ExampleResult
from ..analysis._data import example_result
from ..errors import AssayError, InvalidInputError
from ..schemas import TracerSessionResult
from ..store._experiment_page import CHART_RUNS, chart_sample, experiment_rows
from ._svg import histogram_svg, seconds_tick

if TYPE_CHECKING:
    from ..schemas import Example, Run
    from ..store import Store

__all__ = ["ROWS_PER_PAGE", "Row", "experiment_page"]

ROWS_PER_PAGE = 200


@dataclass
class Row:
    number: int  # 1-based position in the experiment (kept when a filter hides rows)
    result: ExampleResult
    failing: list[str] = field(default_factory=list)  # feedback keys below the threshold

    @property
    def flagged(self) -> bool:
        return bool(self.failing or self.result.error)


class Keys:
    """The feedback keys of an experiment, from its statistics (the template's ``data``)."""

    def __init__(self, project: TracerSessionResult) -> None:
        stats = project.feedback_stats or {}
        self.score_keys = sorted(k for k, st in stats.items() if st.avg is not None)
        self.label_keys = sorted(k for k, st in stats.items() if st.values)


def _examples(store: Store, project: TracerSessionResult, ids: list[str]) -> dict[str, Example]:
    """The page's examples at the version the experiment ran on (current one as fallback)."""
    if not ids:
        return {}
    try:
        found = store.examples.list(example_ids=ids,
                                    as_of=project.metadata.get("dataset_version"))
    except AssayError:
        found = store.examples.list(example_ids=ids)
    return {str(e.id): e for e in found}


def _results(store: Store, project: TracerSessionResult, heads: list[Run],
             roots: dict[str, list[Run]]) -> list[ExampleResult]:
    """Each row as ``analysis.ExampleResult`` (what ``load_experiment`` makes of it)."""
    every = [r for h in heads for r in roots[str(h.id)]]
    ids = [str(r.id) for r in every]
    usage = store.runs.subtree_usage(ids) if ids else {}
    fb: dict[str, list[Any]] = defaultdict(list)
    for f in store.feedback.list(run_ids=ids, pairwise=False) if ids else []:
        fb[str(f.run_id)].append(f)
    examples = _examples(store, project, sorted({str(h.reference_example_id) for h in heads
                                                 if h.reference_example_id is not None}))
    out = []
    for head in heads:
        reps = roots[str(head.id)]
        key = str(head.reference_example_id) if head.reference_example_id else str(head.id)
        use = [usage.get(str(r.id), {}) for r in reps]
        out.append(example_result(
            key, reps, examples.get(key), [f for r in reps for f in fb.get(str(r.id), [])],
            [float(u.get("total_tokens") or 0) for u in use],
            [float(u["total_cost"]) if u.get("total_cost") is not None else None for u in use]))
    return out


def _charts(store: Store, project: TracerSessionResult, keys: Keys) -> list[Any]:
    lat, scores, n = chart_sample(store, str(project.id), CHART_RUNS)
    runs = project.run_count or n
    note = f" (first {n:,} of {runs:,} runs)" if n < runs else ""
    charts = [histogram_svg(lat, title=f"latency (s){note}", fmt=seconds_tick)]
    for key in keys.score_keys:
        vals = scores.get(key, [])
        lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
        rng = (min(lo, 0.0), max(hi, 1.0)) if vals and lo >= -1 and hi <= 1 else None
        charts.append(histogram_svg(vals, title=f"{key}{note}", bins=10, value_range=rng))
    return charts


def experiment_page(store: Store, project_id: str, *, failing: str | None, errors: bool,
                    threshold: float, cursor: str | None = None, where: str | None = None,
                    limit: int = ROWS_PER_PAGE) -> dict[str, Any]:
    """``failing`` / ``errors`` pick rows by their scores and errors; ``where`` (LangSmith's
    filter language) keeps the rows with a root run that matches it; both apply together."""
    project = store.projects.read(project_id=project_id, include_stats=True)
    assert isinstance(project, TracerSessionResult)
    keys = Keys(project)
    if failing and failing != "any" and failing not in keys.score_keys:
        known = ", ".join(keys.score_keys) or "none"
        raise InvalidInputError(f"no feedback key {failing!r} with scores here (known: {known})")
    where = (where or "").strip() or None
    page = experiment_rows(store, str(project.id), cursor=cursor or None, limit=limit,
                           errors=errors, failing=failing or None, threshold=threshold,
                           where=where)
    rows = [Row(n, r, [k for k, v in r.scores.items() if v < threshold])
            for n, r in zip(page.numbers, _results(store, project, page.heads, page.roots),
                            strict=True)]
    dataset = None
    if project.reference_dataset_id is not None:
        dataset = store.datasets.read(dataset_id=project.reference_dataset_id)
    params = {"failing": failing, "errors": "true" if errors else None,
              "threshold": threshold if threshold != 0.5 else None, "where": where}
    keep = {k: v for k, v in params.items() if v not in (None, "", False)}
    pager = {"first": page.shown_before + 1, "last": page.shown_before + len(rows),
             "of": page.matching, "cap": page.count_cap,
             "next_url": "?" + urlencode({**keep, "cursor": page.next_cursor})
             if page.next_cursor else None,
             "first_url": "?" + urlencode(keep) if cursor else None}
    return {"data": keys, "project": project, "dataset": dataset, "rows": rows,
            "matching": page.matching, "total": page.total, "cap": page.count_cap,
            "failing": failing or "", "errors": errors, "pager": pager,
            "threshold": threshold, "charts": _charts(store, project, keys),
            "where": where or "", "filtered": bool(failing or errors or where)}
