"""assay's optional C modules, imported in one place.

Three small extensions speed up hot paths: ``assay.tracing._speedups`` (a traced call and its
run), ``assay.store._cencode`` (the journal's rows, ingest's posted runs) and
``assay.server._csplit`` (ingest's multipart body and its runs). Each has the same code in
Python beside it. Where a module was not built (no C compiler at install) or
``ASSAY_PURE_PYTHON`` is set, its caller runs that Python instead; the tests run both ways
and compare them.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["compiled"]


def compiled(name: str) -> ModuleType | None:
    """The C module ``name`` (e.g. ``"assay.store._cencode"``), or None where it was not built
    or ``ASSAY_PURE_PYTHON`` asks for the Python code."""
    if os.environ.get("ASSAY_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
