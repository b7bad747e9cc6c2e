"""Upsonic's ``upsonic.eval`` API on assay's evaluators: change the import line, nothing else.

    # from upsonic.eval import AccuracyEvaluator, PerformanceEvaluator, ReliabilityEvaluator
    from assay.evals.upsonic import AccuracyEvaluator, PerformanceEvaluator, ReliabilityEvaluator

The constructors take Upsonic's arguments in Upsonic's order with its defaults (``judge_agent``
an Upsonic ``Agent``; ``agent_under_test`` an ``Agent``, ``Graph`` or ``Team``), ``run`` is the
same coroutine (``await evaluator.run(print_results=True)``; ``ReliabilityEvaluator.run`` is
sync, as in Upsonic) and the results are assay's models, which have every field of
``upsonic.eval.models`` and only add optional ones.

Where assay deliberately differs: every iteration's output and verdict is kept
(``result.iterations``), and a failing iteration is recorded with its error instead of aborting
the evaluation; latency is measured in runs with tracemalloc off and memory in separate runs with
it on (Upsonic times with tracemalloc on, which slows allocation-heavy code); the expected-tool
check needs one distinct call per expected entry. ``promptlayer=``/``langfuse=`` exports are not
supported (runs, feedback and statistics go to assay's store): passing one is an error.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InvalidInputError
from ._accuracy import AccuracyEvaluator as _AccuracyEvaluator
from ._models import (
    AccuracyEvaluationResult,
    EvaluationScore,
    PerformanceEvaluationResult,
    PerformanceRunResult,
    ReliabilityEvaluationResult,
    ToolCallCheck,
)
from ._performance import PerformanceEvaluator as _PerformanceEvaluator
from ._reliability import ReliabilityEvaluator as _ReliabilityEvaluator

__all__ = [
    "AccuracyEvaluationResult",
    "AccuracyEvaluator",
    "EvaluationScore",
    "PerformanceEvaluationResult",
    "PerformanceEvaluator",
    "PerformanceRunResult",
    "ReliabilityEvaluationResult",
    "ReliabilityEvaluator",
    "ToolCallCheck",
]

NO_GUIDELINES = "No additional guidelines provided."  # Upsonic's default, kept verbatim


def _no_exports(**given: Any) -> None:
    for name, value in given.items():
        if value is not None:
            raise InvalidInputError(
                f"{name}= is not supported by assay's Upsonic-compatible evaluators: results, "
                "runs and feedback are stored by assay (evaluate() with a project); leave "
                f"{name} unset")


def _console() -> Any:
    from rich.console import Console

    return Console(markup=False)  # what it prints is data (tool names, outputs), not markup


class AccuracyEvaluator(_AccuracyEvaluator):
    """``upsonic.eval.AccuracyEvaluator``'s signature over assay's accuracy evaluator."""

    def __init__(
        self,
        judge_agent: Any,
        agent_under_test: Any,
        query: str,
        expected_output: str,
        additional_guidelines: str | None = None,
        num_iterations: int = 1,
        promptlayer: Any = None,
        promptlayer_dataset_name: str | None = None,
        promptlayer_dataset_mode: str = "log_only",
        langfuse: Any = None,
        langfuse_dataset_name: str | None = None,
        langfuse_run_name: str | None = None,
        **assay_options: Any,
    ) -> None:
        _no_exports(promptlayer=promptlayer, langfuse=langfuse)
        super().__init__(judge_agent, agent_under_test, query, expected_output,
                         additional_guidelines or NO_GUIDELINES, num_iterations, **assay_options)
        self.judge_agent = judge_agent
        self.agent_under_test = agent_under_test
        self.promptlayer = promptlayer
        self.promptlayer_dataset_name = promptlayer_dataset_name
        self.promptlayer_dataset_mode = promptlayer_dataset_mode
        self.langfuse = langfuse
        self.langfuse_dataset_name = langfuse_dataset_name
        self.langfuse_run_name = langfuse_run_name

    async def run(  # type: ignore[override]  # async, as Upsonic's run
            self, print_results: bool = True) -> AccuracyEvaluationResult:
        result = await self.arun()
        if print_results:
            print_accuracy(result)
        return result

    async def run_with_output(  # type: ignore[override]  # async, as Upsonic's
            self, output: str, print_results: bool = True, trace_id: str | None = None
    ) -> AccuracyEvaluationResult:
        result = await self.ascore_output(output)
        if print_results:
            print_accuracy(result)
        return result


class PerformanceEvaluator(_PerformanceEvaluator):
    """``upsonic.eval.PerformanceEvaluator``'s signature over assay's performance evaluator."""

    def __init__(self, agent_under_test: Any, task: Any, num_iterations: int = 10,
                 warmup_runs: int = 2, promptlayer: Any = None) -> None:
        _no_exports(promptlayer=promptlayer)
        super().__init__(agent_under_test, task, num_iterations, warmup_runs)
        self.agent_under_test = agent_under_test
        self.promptlayer = promptlayer

    async def run(  # type: ignore[override]  # async, as Upsonic's run
            self, print_results: bool = True) -> PerformanceEvaluationResult:
        result = await self.arun()
        if print_results:
            print_performance(result)
        return result


class ReliabilityEvaluator(_ReliabilityEvaluator):
    """``upsonic.eval.ReliabilityEvaluator``'s signature over assay's reliability evaluator
    (``run`` is sync, as Upsonic's is)."""

    def __init__(self, expected_tool_calls: list[Any], order_matters: bool = False,
                 exact_match: bool = False, promptlayer: Any = None,
                 agent_under_test: Any = None, **assay_options: Any) -> None:
        _no_exports(promptlayer=promptlayer)
        if not isinstance(expected_tool_calls, list) or not expected_tool_calls:
            raise InvalidInputError("expected_tool_calls must be a non-empty list of tool names")
        super().__init__(expected_tool_calls, order_matters, exact_match, **assay_options)
        self.promptlayer = promptlayer
        self.agent_under_test = agent_under_test

    def run(self, run_result: Any, print_results: bool = True
            ) -> ReliabilityEvaluationResult:
        result = super().run(run_result)
        if print_results:
            print_reliability(result)
        return result


# -- printing (what Upsonic prints, with assay's per-iteration detail) -----------------------------
def print_accuracy(result: AccuracyEvaluationResult) -> None:
    from rich.panel import Panel
    from rich.text import Text

    avg = result.average_score
    color = "red" if math.isnan(avg) or avg < 5 else ("yellow" if avg < 8 else "green")
    text = Text()
    text.append("Average Score: ", style="bold")
    text.append(f"{avg:.2f} / 10.0\n", style=f"bold {color}")
    for it in result.iterations:
        verdict = (f"{it.score.score:g} ({'met' if it.score.is_met else 'not met'})"
                   if it.score is not None else f"failed ({it.error_stage}): {it.error}")
        text.append(f"\nIteration {it.index + 1}: ", style="bold")
        text.append(f"{verdict}\n  output: {it.generated_output or ''}\n")
    if result.evaluation_scores:
        last = result.evaluation_scores[-1]
        text.append("\nJudge's Reasoning: ", style="bold")
        text.append(f"{last.reasoning}\n")
        text.append("Judge's Critique: ", style="bold")
        text.append(last.critique)
    _console().print(Panel(text, title="Accuracy Evaluation", border_style=color, expand=False))


def _fmt_bytes(value: float) -> str:
    if abs(value) < 1024:
        return f"{value:.2f} B"
    if abs(value) < 1024 ** 2:
        return f"{value / 1024:.2f} KB"
    return f"{value / 1024 ** 2:.2f} MB"


def print_performance(result: PerformanceEvaluationResult) -> None:
    from rich.table import Table

    table = Table(title=f"Performance Evaluation Results ({result.num_iterations} iterations, "
                        f"{result.warmup_runs} warmups)")
    for column in ("Metric", "Average", "Median", "Min", "Max", "Std. Dev."):
        table.add_column(column)
    keys = ("average", "median", "min", "max", "std_dev")
    lat = result.latency_stats
    table.add_row("Latency", *(f"{lat[k] * 1000:.2f} ms" for k in keys))
    for label, stats in (("Memory Increase", result.memory_increase_stats),
                         ("Memory Peak", result.memory_peak_stats)):
        table.add_row(label, *(_fmt_bytes(stats[k]) for k in keys))
    _console().print(table)


def print_reliability(result: ReliabilityEvaluationResult) -> None:
    from rich.panel import Panel
    from rich.table import Table

    color = "green" if result.passed else "red"
    table = Table(box=None, show_header=False)
    for check in result.checks:
        table.add_row("✅" if check.passed else "❌", check.tool_name, str(check.times_called))
    _console().print(Panel(table, title=result.summary, border_style=color,
                           subtitle=f"Expected: {result.expected_tool_calls} | "
                                    f"Actual: {result.actual_tool_calls}"))
