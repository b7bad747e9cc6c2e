"""assay: evaluate LLM agents reproducibly.

Accuracy (an LLM judge against a reference), performance (latency, memory, tokens, first token,
cost) and reliability (which tools were called, in what order, with what arguments), for one
query in a unit test or a whole dataset as a tracked experiment.

Public names are imported lazily so ``import assay`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Client": "assay.client",
    "get_default_client": "assay.client",
    "Store": "assay.store",
    "Dataset": "assay.schemas",
    "Example": "assay.schemas",
    "Run": "assay.schemas",
    "Feedback": "assay.schemas",
    "TracerSession": "assay.schemas",
    "TracerSessionResult": "assay.schemas",
    "FeedbackStats": "assay.schemas",
    "AssayError": "assay.errors",
    "NotFoundError": "assay.errors",
    "ConflictError": "assay.errors",
    "InvalidInputError": "assay.errors",
    "StoreError": "assay.errors",
    "traceable": "assay.tracing",
    "trace": "assay.tracing",
    "tracing_context": "assay.tracing",
    "get_current_run_tree": "assay.tracing",
    "wrap_openai": "assay.tracing",
    "wrap_anthropic": "assay.tracing",
    "evaluate": "assay.evaluation",
    "aevaluate": "assay.evaluation",
    "evaluate_comparative": "assay.evaluation",
    "evaluate_online": "assay.evaluation",
    "evaluate_threads_online": "assay.evaluation",
    "aevaluate_comparative": "assay.evaluation",
    "ExperimentResults": "assay.evaluation",
    "EvaluationResult": "assay.evaluation",
    "EvaluationResults": "assay.evaluation",
    "RayExecutor": "assay.evaluation",
    "AccuracyEvaluator": "assay.evals",
    "PerformanceEvaluator": "assay.evals",
    "ReliabilityEvaluator": "assay.evals",
    "EvaluationScore": "assay.evals",
    "AccuracyEvaluationResult": "assay.evals",
    "PerformanceRunResult": "assay.evals",
    "PerformanceEvaluationResult": "assay.evals",
    "ToolCallCheck": "assay.evals",
    "ReliabilityEvaluationResult": "assay.evals",
    "ExpectedToolCall": "assay.evals",
    "get_judge": "assay.llm",
    "instrument_frameworks": "assay.integrations",
    "JudgeOptions": "assay.llm",
    "JudgeError": "assay.errors",
    "set_model_prices": "assay._model_prices",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from ._model_prices import set_model_prices
    from .client import Client, get_default_client
    from .errors import (
        AssayError,
        ConflictError,
        InvalidInputError,
        JudgeError,
        NotFoundError,
        StoreError,
    )
    from .evals import (
        AccuracyEvaluationResult,
        AccuracyEvaluator,
        EvaluationScore,
        ExpectedToolCall,
        PerformanceEvaluationResult,
        PerformanceEvaluator,
        PerformanceRunResult,
        ReliabilityEvaluationResult,
        ReliabilityEvaluator,
        ToolCallCheck,
    )
    from .evaluation import (
        EvaluationResult,
        EvaluationResults,
        ExperimentResults,
        RayExecutor,
        aevaluate,
        aevaluate_comparative,
        evaluate,
        evaluate_comparative,
        evaluate_online,
        evaluate_threads_online,
    )
    from .integrations import instrument_frameworks
    from .llm import JudgeOptions, get_judge
    from .schemas import (
        Dataset,
        Example,
        Feedback,
        FeedbackStats,
        Run,
        TracerSession,
        TracerSessionResult,
    )
    from .store import Store
    from .tracing import (
        get_current_run_tree,
        trace,
        traceable,
        tracing_context,
        wrap_anthropic,
        wrap_openai,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'assay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
