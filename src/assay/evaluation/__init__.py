"""Experiments: run a target over a dataset, score it, and store it all.

    evaluate / aevaluate        LangSmith's entry points (one async core, a sync wrapper)
    evaluate_comparative        pairwise: stored experiments' runs scored against each other
    evaluate_online             online: a project's production traces scored as they arrive
    evaluate_threads_online     online: a project's conversations scored once they go quiet
    RayExecutor                 ``executor=``: run the examples as Ray tasks on a cluster
    ExperimentResults           the rows, in dataset order; summary_results; to_pandas()
    EvaluationResult(s)         what evaluators return (LangSmith's shapes)
    git_info                    the git facts recorded in an experiment's metadata

Statistics of a finished experiment come from the store:
``client.read_project(project_name=results.experiment_name, include_stats=True)``.
"""

from ._comparative import (
    ComparativeExperimentResults,
    ComparisonEvaluationResult,
    aevaluate_comparative,
    evaluate_comparative,
)
from ._evaluate import aevaluate, evaluate
from ._evaluators import RowEvaluator, SummaryEvaluator, adapt_evaluator, adapt_summary_evaluator
from ._git import git_info
from ._online import OnlinePass, aevaluate_online, evaluate_online, watch_online
from ._online_threads import aevaluate_threads_online, evaluate_threads_online
from ._ray import RayExecutor
from ._results import ExperimentResultRow, ExperimentResults
from ._schemas import EvaluationResult, EvaluationResults

__all__ = [
    "ComparativeExperimentResults",
    "ComparisonEvaluationResult",
    "EvaluationResult",
    "EvaluationResults",
    "ExperimentResultRow",
    "ExperimentResults",
    "OnlinePass",
    "RayExecutor",
    "RowEvaluator",
    "SummaryEvaluator",
    "adapt_evaluator",
    "adapt_summary_evaluator",
    "aevaluate",
    "aevaluate_comparative",
    "aevaluate_online",
    "aevaluate_threads_online",
    "evaluate",
    "evaluate_comparative",
    "evaluate_online",
    "evaluate_threads_online",
    "git_info",
    "watch_online",
]
