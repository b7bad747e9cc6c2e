"""Independent checks of read_project statistics against the runs the server stored."""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np
import pytest

from assay.store import Store


def parse_printed_json(stdout: str) -> dict[str, Any]:
    """The JSON object a snippet printed last (SDKs print a results URL before it)."""
    start = stdout.index("\n{") + 1 if not stdout.startswith("{") else 0
    return json.loads(stdout[start:])  # type: ignore[no-any-return]


def check_experiment(store: Store, http: httpx.Client, name: str, *, runs: int,
                     feedback: dict[str, tuple[int, float]]) -> dict[str, Any]:
    """read_project stats over HTTP equal what we compute from the stored runs with numpy."""
    found = http.get("/sessions", params={"name": name, "include_stats": "true"})
    assert found.status_code == 200, found.text
    body = found.json()
    assert isinstance(body, list) and len(body) == 1  # read_project: an ARRAY
    stats = body[0]
    project = store.projects.read(project_name=name)
    roots = store.runs.list(project_ids=[str(project.id)], is_root=True)
    assert len(roots) == runs and stats["run_count"] == runs
    latencies = [(r.end_time - r.start_time).total_seconds() for r in roots]
    assert all(lat >= 0 for lat in latencies)
    assert stats["latency_p50"] == pytest.approx(float(np.percentile(latencies, 50)), abs=1e-6)
    assert stats["latency_p99"] == pytest.approx(float(np.percentile(latencies, 99)), abs=1e-6)
    for key, (n, avg) in feedback.items():
        assert stats["feedback_stats"][key]["n"] == n
        assert stats["feedback_stats"][key]["avg"] == pytest.approx(avg)
    assert stats["error_rate"] == 0
    assert stats["test_run_number"] == 1
    assert stats["reference_dataset_id"] is not None
    last = max(r.start_time for r in roots)
    assert stats["last_run_start_time"].replace("Z", "+00:00") == last.isoformat()
    return stats  # type: ignore[no-any-return]
