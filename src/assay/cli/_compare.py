"""``assay experiments compare``: paired-bootstrap differences as a table, a JSON or an exit code.

The same numbers as the web UI's compare page (both call ``assay.analysis``), so a CI gate and a
person looking at the UI never disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ._common import (
    DbOption,
    JsonOption,
    as_experiment,
    console,
    emit_json,
    handle_errors,
    open_client,
    styled,
)

if TYPE_CHECKING:
    from ..analysis import Comparison
    from ..schemas import ComparativeExperiment

__all__ = ["compare"]

EXIT_REGRESSION = 1


def compare(
    experiments: Annotated[list[str], typer.Argument(
        help="Two or more experiment names or ids on the same dataset; the first is the baseline.",
        show_default=False)],
    db: DbOption = None,
    fail_on_regression: Annotated[bool, typer.Option(
        "--fail-on-regression",
        help="Exit with code 1 when any metric regressed significantly (for CI).")] = False,
    confidence: Annotated[float, typer.Option(
        min=0.5, max=0.999, help="Confidence level of the intervals.")] = 0.95,
    resamples: Annotated[int, typer.Option(min=100, max=100_000,
                                           help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same intervals).")] = 0,
    lower_is_better: Annotated[list[str] | None, typer.Option(
        "--lower-is-better", help="A feedback key where lower scores are better (repeatable).",
        show_default=False)] = None,
    json_out: JsonOption = False,
) -> None:
    """Compare experiments example by example: per metric, the difference with a CI.

    Each feedback score, latency, tokens, cost and error rate is paired by example (repetitions
    averaged); the interval comes from a paired bootstrap over examples. A regression is a
    difference whose interval excludes 0 in the bad direction.
    """
    from ..analysis import CompareOptions, compare_experiments

    with handle_errors():
        if len(experiments) < 2:
            from ..errors import InvalidInputError

            raise InvalidInputError("give at least two experiments (baseline first)")
        opts = CompareOptions(confidence=confidence, resamples=resamples, seed=seed,
                              lower_is_better=frozenset(lower_is_better or ()))
        store = open_client(db).store
        with as_experiment():
            result, loaded = compare_experiments(store, experiments, opts)
        chosen = [e.project.id for e in loaded]
        pairwise = [c for c in store.comparative.list(dataset_id=result.dataset_id)
                    if c.compares_two_of(chosen)][:50]
    regressions = result.regressions
    if json_out:
        data = result.model_dump(mode="json")
        for item, diff in zip(data["diffs"], result.diffs, strict=True):
            item["status"] = diff.status
        data["regressions"] = len(regressions)
        for item, pairing in zip(data["pairings"], result.pairings, strict=True):
            item["unpaired"] = pairing.unpaired
        data["pairwise"] = [c.model_dump(mode="json", include={
            "id", "name", "created_at", "experiments_info", "feedback_stats"}) for c in pairwise]
        emit_json(data)
    else:
        _print(result)
        if pairwise:
            _print_pairwise(pairwise, [(str(e.project.id), e.project.name) for e in loaded])
    if fail_on_regression and regressions:
        raise typer.Exit(EXIT_REGRESSION)


def _print(result: Comparison) -> None:
    from rich import box

    from ..analysis._format import metric_value, signed

    pct = f"{result.options.confidence * 100:g}%"
    for cand in result.candidates:
        table = Table(title=f"{cand.name} vs {result.baseline.name} (baseline)",
                      title_justify="left", box=box.SIMPLE_HEAD,
                      caption="↑ higher is better · ↓ lower is better · "
                              "diff = candidate − baseline",
                      caption_justify="left")
        table.add_column("metric", no_wrap=True)
        for col in ("baseline", "candidate", "diff", f"{pct} CI", "n"):
            table.add_column(col, justify="right")
        table.add_column("status", no_wrap=True)
        for d in result.diffs:
            if d.candidate.id != cand.id:
                continue
            ci = ("–" if d.ci_low is None
                  else f"[{signed(d.ci_low, d.kind)}, {signed(d.ci_high, d.kind)}]")
            status = {"regression": styled(("REGRESSION", "bold red")),
                      "improvement": styled(("improved", "green")),
                      "no significant change": styled("no change")}.get(d.status,
                                                                        styled(d.status))
            arrow = "↑" if d.better == "higher" else "↓"
            table.add_row(f"{d.metric} {arrow}", metric_value(d.baseline_mean, d.kind),
                          metric_value(d.candidate_mean, d.kind), signed(d.diff, d.kind), ci,
                          str(d.n), status)
        console.print(table)
        pairing = next(p for p in result.pairings if p.candidate.id == cand.id)
        if pairing.unpaired:
            console.print(styled((
                f"{pairing.paired} examples paired; left out: {pairing.only_in_baseline} only "
                f"in the baseline, {pairing.only_in_candidate} only in {cand.name}", "yellow")))
    n = len(result.regressions)
    if n:
        names = ", ".join(f"{d.metric} ({d.candidate.name})" for d in result.regressions)
        console.print(styled((f"{n} significant regression{'s' if n != 1 else ''}:", "bold red"),
                             f" {names}"))
    else:
        console.print("no significant regressions", style="green")


def _print_pairwise(pairwise: list[ComparativeExperiment], experiments: list[tuple[str, str]],
                    ) -> None:
    """Comparative evaluators' scores among these experiments (``evaluate((a, b), ...)``):
    each experiment's mean per key, newest comparison first, as on the web UI's compare page."""
    from rich import box

    from ..analysis._format import metric_value

    table = Table(title="pairwise (comparative evaluators)", title_justify="left",
                  box=box.SIMPLE_HEAD, caption="each experiment's mean score (n scored runs)",
                  caption_justify="left")
    table.add_column("comparison")
    table.add_column("key", no_wrap=True)
    for _, name in experiments:
        table.add_column(name, justify="right")
    for c in pairwise:
        if not c.feedback_stats:
            table.add_row(c.name or str(c.id), "–", *("–" for _ in experiments))
        for key, per in sorted((c.feedback_stats or {}).items()):
            cells = []
            for eid, _ in experiments:
                s = per.get(eid)
                cells.append("–" if s is None else
                             f"{metric_value(s['avg'], 'feedback')} (n {s['n']})")
            table.add_row(c.name or str(c.id), key, *cells)
    console.print(table)
