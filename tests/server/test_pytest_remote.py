"""The pytest plugin against `assay serve`: ASSAY_API_URL/ASSAY_API_KEY point a test session at
the team server, and the experiment lands there (workspace of the key)."""

from __future__ import annotations

import pytest

from .conftest import Server

pytest_plugins = ["pytester"]


def test_a_pytest_session_records_its_experiment_on_the_server(
        pytester: pytest.Pytester, sqlite_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    key, store = sqlite_server.new_key()
    monkeypatch.setenv("ASSAY_API_URL", sqlite_server.url)
    monkeypatch.setenv("ASSAY_API_KEY", key)
    pytester.makepyfile(test_remote='''
import pytest
from assay import testing as t
from assay.tracing import traceable

@traceable(run_type="tool")
def tool(x):
    return x * 2

@pytest.mark.assay(test_suite_name="remote-suite")
@pytest.mark.parametrize("x", [1, 2, 3])
def test_double(x):
    t.log_outputs({"y": tool(x)})
    t.log_feedback(key="small", score=x < 3)
    assert x != 3
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--assay-baseline",
                                           "previous")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*assay: remote-suite:* (suite remote-suite): 3 test runs*",
                                 "*no earlier pytest experiment on this dataset*"])
    [project] = store.projects.list()
    stats = store.projects.read(project_id=project.id, include_stats=True)
    assert stats.run_count == 3
    assert stats.feedback_stats["pass"].avg == pytest.approx(2 / 3)
    assert stats.feedback_stats["small"].avg == pytest.approx(2 / 3)
    assert len(store.runs.list(project_ids=[str(project.id)], run_type="tool")) == 3
    assert len(store.examples.list(dataset_name="remote-suite")) == 3
