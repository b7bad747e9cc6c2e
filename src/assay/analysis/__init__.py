"""Experiment analysis: a row per example, and paired comparisons with bootstrap intervals.

``load_experiment`` turns an experiment into a row per example (repetitions averaged);
``compare`` pairs two or more experiments on one dataset by example and, per metric (each
feedback score, latency, tokens, cost, error), gives the mean difference with a paired-bootstrap
confidence interval, marking significant regressions. The web UI and ``assay experiments
compare`` both use it, so they always agree.
"""

from ._bootstrap import BootstrapResult, paired_bootstrap
from ._compare import (
                       LOWER_IS_BETTER,
                       CompareOptions,
                       Comparison,
                       ExperimentRef,
                       MetricDiff,
                       Pairing,
                       compare,
                       compare_experiments,
                       side_by_side,
)
from ._data import BUILTIN_METRICS, ExampleResult, ExperimentData, load_experiment

__all__ = [
    "BUILTIN_METRICS",
    "LOWER_IS_BETTER",
    "BootstrapResult",
    "CompareOptions",
    "Comparison",
    "ExampleResult",
    "ExperimentData",
    "ExperimentRef",
    "MetricDiff",
    "Pairing",
    "compare",
    "compare_experiments",
    "load_experiment",
    "paired_bootstrap",
    "side_by_side",
]
