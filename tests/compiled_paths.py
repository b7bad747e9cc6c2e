"""What the tests of assay's optional C code share: each C path is compared with the Python it
stands in for, which a pure-Python run (``ASSAY_PURE_PYTHON=1``, or no C compiler at install)
uses alone."""

from __future__ import annotations

import os

import pytest

__all__ = ["PURE", "is_in_use", "needs_c"]

PURE = bool(os.environ.get("ASSAY_PURE_PYTHON"))
needs_c = pytest.mark.skipif(PURE, reason="pure-Python run (ASSAY_PURE_PYTHON): nothing to compare")


def is_in_use(used: object, module: str) -> bool:
    """Whether the C code ``used`` (what the caller took from ``module``) is in use: it must be
    None in a pure-Python run (False) and there otherwise (True), so that a missing build is a
    failure, not a skip."""
    if PURE:
        assert used is None
        return False
    assert used is not None, (
        f"{module} was not built (pip install -e . needs a C compiler and the Python headers); "
        "set ASSAY_PURE_PYTHON=1 to test the Python fallback alone")
    return True
