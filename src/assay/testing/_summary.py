"""The end of a pytest session: each experiment's statistics, and the gate against a baseline.

``--assay-baseline NAME`` (an experiment name or id, or ``previous``: the latest other pytest
experiment on the same dataset) compares each metric per example with the paired bootstrap of
``assay experiments compare``; ``--assay-fail-on-regression`` turns a significant regression
into a failed session, naming the metric and the examples that got worse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["Report", "describe", "summarize"]

# A latency change is a regression worth failing CI only when it is large in practice too:
# sub-millisecond tests differ "significantly" from run to run on any busy machine.
LATENCY_MIN_SECONDS = 0.010
LATENCY_MIN_RATIO = 0.20
_MAX_NAMED = 10


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    gate_errors: list[str] = field(default_factory=list)  # a baseline that could not be read
    regressed: list[str] = field(default_factory=list)  # ids of experiments that regressed


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}{unit}"
    return f"{value}{unit}"


def _secs(value: Any) -> float:
    return float(value.total_seconds() if hasattr(value, "total_seconds") else value)


def _stats_line(stats: Any) -> str:
    from ..analysis._format import usd  # (here: the plugin loads in every pytest session)

    parts = [f"{stats.run_count} test runs"]
    if stats.latency_p50 is not None:
        parts.append(f"latency p50 {_secs(stats.latency_p50):.3f}s "
                     f"p99 {_secs(stats.latency_p99):.3f}s")
    if stats.total_tokens:
        parts.append(f"tokens {stats.total_tokens:,}")
    if stats.total_cost is not None:
        parts.append(f"cost {usd(float(stats.total_cost))}")  # ($0.000013, not $0.0000)
    for key, fb in sorted((stats.feedback_stats or {}).items()):
        avg = fb.get("avg") if isinstance(fb, dict) else getattr(fb, "avg", None)
        if avg is not None:
            parts.append(f"{key} {avg:.3g}")
    return " | ".join(parts)


GATE_KEY = "assay_gate"  # experiment metadata: "failed" when its session failed the gate


def _baseline_id(client: Client, current: Any, baseline: str) -> str | None:
    if baseline != "previous":
        return baseline
    candidates = [p for p in client.list_projects(
        reference_dataset_id=current.reference_dataset_id)
        if str(p.id) != str(current.id) and isinstance(p.extra, dict)
        and "pytest" in ((p.extra or {}).get("metadata") or {})
        # a session that failed its gate is no baseline: run again, it would pass against
        # itself; a change accepted on purpose is gated once against its own experiment
        and ((p.extra or {}).get("metadata") or {}).get(GATE_KEY) != "failed"
        and p.start_time <= current.start_time]
    if not candidates:
        return None
    return str(max(candidates, key=lambda p: p.start_time).id)


def describe(client: Client, project_id: str) -> None:
    """Set the experiment's ``num_repetitions`` and ``dataset_splits`` from what its tests ran
    (markers' ``repetitions`` and ``split``), as ``evaluate()`` records them: the experiment is
    made by the session's first test, before the others' markers are known."""
    roots = list(client.list_runs(project_id=project_id, is_root=True))
    reps = 1 + max((int(r.metadata.get("repetition") or 0) for r in roots), default=0)
    ids = sorted({str(r.reference_example_id) for r in roots if r.reference_example_id})
    splits = sorted({s for ex in (client.list_examples(example_ids=ids) if ids else [])
                     for s in ex.split or []})
    project = client.read_project(project_id=project_id)
    meta = project.metadata
    if meta.get("num_repetitions") != reps or meta.get("dataset_splits") != splits:
        client.update_project(project_id, metadata={**meta, "num_repetitions": reps,
                                                    "dataset_splits": splits})


def summarize(client: Client, experiments: dict[str, str], *, baseline: str | None,
              fail_on_regression: bool) -> Report:
    """The report of this session's experiments (and their regressions against a baseline)."""
    report = Report()
    for suite, project_id in sorted(experiments.items()):
        stats = client.read_project(project_id=project_id, include_stats=True)
        report.lines.append(f"assay: {stats.name} (suite {suite}): {_stats_line(stats)}")
        if baseline is None:
            continue
        base = _baseline_id(client, stats, baseline)
        if base is None:
            report.lines.append("  baseline: no earlier pytest experiment on this dataset")
            continue
        from ..analysis import compare_experiments

        try:
            comparison, loaded = compare_experiments(client.store, [base, project_id])
        except NotFoundError as exc:  # a mistyped baseline must not turn the gate off
            report.lines.append(f"  baseline {baseline!r}: {exc}")
            report.gate_errors.append(f"baseline {baseline!r} for {stats.name}: {exc}")
            continue
        report.lines.append(f"  against {comparison.baseline.name}:")
        for d in comparison.diffs:
            if d.diff is None:
                continue
            report.lines.append(
                f"    {d.metric}: {_fmt(d.baseline_mean)} -> {_fmt(d.candidate_mean)} "
                f"(diff {d.diff:+.4g}, {d.confidence:.0%} CI [{d.ci_low:+.4g}, {d.ci_high:+.4g}],"
                f" n={d.n}) {_status(d)}")
        base_rows = loaded[0].by_key
        for d in comparison.regressions:
            if d.kind == "latency" and not _large(d):
                continue
            metric = f"feedback:{d.metric}" if d.kind == "feedback" else d.metric
            worse = []
            for row in loaded[1].rows:
                other = base_rows.get(row.key)
                x = other.metric(metric) if other else None
                y = row.metric(metric)
                if x is None or y is None:
                    continue
                if (y > x) if d.better == "lower" else (y < x):
                    worse.append(row)
            # each name is an example read: only for the tests the line names
            named = ", ".join(_nodeid(client, r) or r.key for r in worse[:_MAX_NAMED]) or "-"
            if len(worse) > _MAX_NAMED:
                named += f" and {len(worse) - _MAX_NAMED} more"
            if project_id not in report.regressed:
                report.regressed.append(project_id)
            report.regressions.append(
                f"{d.metric} regressed in {stats.name} against {comparison.baseline.name} "
                f"({_fmt(d.baseline_mean)} -> {_fmt(d.candidate_mean)}); worse: {named}")
    if report.gate_errors and fail_on_regression:
        report.lines.append("assay: the regression gate could not run (failing the session):")
        report.lines.extend(f"  {e}" for e in report.gate_errors)
    if report.regressions:
        report.lines.append("assay: significant regressions:" if fail_on_regression
                            else "assay: significant regressions (not failing the session):")
        report.lines.extend(f"  {r}" for r in report.regressions)
    return report


def _status(d: Any) -> str:
    """A metric's verdict as the gate takes it: a latency change the gate lets pass (too
    small in practice, see ``_large``) is not called a regression."""
    if d.status == "regression" and d.kind == "latency" and not _large(d):
        return (f"slower, under the gate ({LATENCY_MIN_SECONDS * 1000:g} ms and "
                f"{LATENCY_MIN_RATIO:.0%} at the interval's low end)")
    return str(d.status)


def _large(d: Any) -> bool:
    """A latency regression large enough in practice (see LATENCY_MIN_*), judged by the
    interval's conservative end, not its middle."""
    base = d.baseline_mean or 0.0
    return (d.ci_low or 0.0) >= max(LATENCY_MIN_SECONDS, LATENCY_MIN_RATIO * base)


def _nodeid(client: Client, row: Any) -> str | None:
    if row.example_id is None:
        return None
    try:
        return (client.read_example(row.example_id).metadata or {}).get("pytest_nodeid")
    except Exception:
        return None
