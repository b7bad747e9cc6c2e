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
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client, get_default_client
    from .errors import AssayError, ConflictError, InvalidInputError, NotFoundError, StoreError
    from .schemas import (Dataset, Example, Feedback, FeedbackStats, Run, TracerSession,
                          TracerSessionResult)
    from .store import Store


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'assay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
