"""The three agent evaluators: accuracy (LLM judge), performance, reliability.

    AccuracyEvaluator(judge, agent, query, expected_output).run()   -> AccuracyEvaluationResult
    PerformanceEvaluator(agent, task).run()                         -> PerformanceEvaluationResult
    ReliabilityEvaluator(["search", "summarize"]).run(history)      -> ReliabilityEvaluationResult
    CriteriaEvaluator(judge, "Polite, cites a source").score(answer) -> CriteriaScore

``CriteriaEvaluator`` judges without a reference answer (production traces, online evaluation).

Agents under test are sync/async callables or objects with invoke/ainvoke/run/do/do_async
(``AgentUnderTest``). Each evaluator's ``as_evaluator()`` plugs it into ``evaluate()``, writing
feedback. Every ``run()`` is a sync wrapper over an async ``arun()``.
"""

from ._accuracy import AccuracyEvaluator, build_judge_messages
from ._agent import AgentUnderTest, output_text
from ._criteria import CriteriaEvaluator, CriteriaScore
from ._matching import max_matching, ordered_matching
from ._models import (
    AccuracyEvaluationResult,
    AccuracyIteration,
    EvaluationScore,
    ExpectedToolCall,
    PerformanceEvaluationResult,
    PerformanceRunResult,
    ReliabilityEvaluationResult,
    ToolCall,
    ToolCallCheck,
)
from ._performance import PerformanceEvaluator
from ._reliability import ReliabilityEvaluator, args_match
from ._stats import percentile, summarize
from ._toolcalls import extract_tool_calls

__all__ = [
    "AccuracyEvaluationResult",
    "AccuracyEvaluator",
    "AccuracyIteration",
    "AgentUnderTest",
    "CriteriaEvaluator",
    "CriteriaScore",
    "EvaluationScore",
    "ExpectedToolCall",
    "PerformanceEvaluationResult",
    "PerformanceEvaluator",
    "PerformanceRunResult",
    "ReliabilityEvaluationResult",
    "ReliabilityEvaluator",
    "ToolCall",
    "ToolCallCheck",
    "args_match",
    "build_judge_messages",
    "extract_tool_calls",
    "max_matching",
    "ordered_matching",
    "output_text",
    "percentile",
    "summarize",
]
