"""What the tests of assay's optional C code share: each C path is compared with the Python it
stands in for, which a pure-Python run (``ASSAY_PURE_PYTHON=1``, or no C compiler at install)
uses alone."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

__all__ = ["DROP", "PURE", "is_in_use", "needs_c", "posted_run"]

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


DROP = object()  # a field posted_run leaves out


def posted_run(**fields: Any) -> dict[str, Any]:
    """A finished chain run as the SDKs post it, every field set (``DROP``: left out)."""
    rid = str(uuid.uuid4())
    run: dict[str, Any] = {
        "id": rid, "trace_id": rid, "name": "Target", "run_type": "chain",
        "start_time": "2026-11-29T05:30:38.123456+00:00",
        "end_time": "2026-11-29T05:30:39.000001+00:00",
        "dotted_order": f"20261129T053038123456Z{rid}", "inputs": {"q": "hi"},
        "outputs": {"a": [1, 2.5, None, True]}, "extra": {"metadata": {"k": "v"}},
        "events": [{"name": "new_token", "time": "2026-11-29T05:30:38.2+00:00"}], "tags": ["t"],
        "session_name": "p", "reference_example_id": str(uuid.uuid4()), "serialized": {"n": 1},
    }
    run.update(fields)
    return {k: v for k, v in run.items() if v is not DROP}
