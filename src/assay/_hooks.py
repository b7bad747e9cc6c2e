"""Where a result produced in a test is reported: the seam between evaluators and pytest.

The three agent evaluators' result models call ``report_result`` when made; the pytest plugin
(``assay.testing``) listens while a marked test runs and records each as feedback. Nothing
listens elsewhere, so this costs one context-variable read per result.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

__all__ = ["report_result", "result_listener"]

result_listener: contextvars.ContextVar[Callable[[Any], None] | None] = contextvars.ContextVar(
    "assay_result_listener", default=None)


def report_result(result: Any) -> None:
    listener = result_listener.get()
    if listener is not None:
        listener(result)
