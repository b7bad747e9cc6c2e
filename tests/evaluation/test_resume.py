"""Resume: an experiment killed with SIGKILL halfway, then continued, ends with exactly one root
run (and one set of feedback) per (example, repetition): none lost, none doubled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from assay import evaluate
from assay.client import Client
from assay.store import Store
from assay.tracing import get_current_run_tree, traceable

from .conftest import make_dataset

N, REPS = 40, 2
TOTAL = N * REPS

CHILD = '''
import os, time
from assay import evaluate
from assay.client import Client
from assay.store import Store
from assay.tracing import get_current_run_tree, traceable

store = Store.open(os.environ["ASSAY_DATABASE_URL"]).for_tenant(os.environ["ASSAY_TEST_TENANT"])
client = Client(store=store)

@traceable(run_type="llm", name="model")
def model(x):
    get_current_run_tree().set_usage(input_tokens=10, output_tokens=x, provider="openai",
                                     model="gpt-4o-mini")
    return x

def target(inputs):
    time.sleep(0.05)
    return {"y": 2 * model(inputs["x"])}

def exact(outputs, reference_outputs):
    return outputs["y"] == reference_outputs["y"]

def size(outputs):
    return {"key": "size", "score": outputs["y"]}

evaluate(target, data="resume-data", evaluators=[exact, size], experiment="resume-exp",
         num_repetitions=%d, client=client, max_concurrency=2)
print("finished")
''' % REPS  # noqa: UP031 (the template is Python code with braces in it)


@traceable(run_type="llm", name="model")
def model(x: int) -> int:
    get_current_run_tree().set_usage(input_tokens=10, output_tokens=x, provider="openai",
                                     model="gpt-4o-mini")
    return x


def _counts(client: Client) -> tuple[int, int]:
    try:
        exp = client.read_project(project_name="resume-exp")
    except Exception:
        return 0, 0
    roots = len(list(client.list_runs(project_id=exp.id, is_root=True)))
    fb = len(list(client.list_feedback(project_ids=[exp.id])))
    return roots, fb


def _settle(client: Client) -> None:
    """Wait until what the killed child wrote stops changing: a COMMIT it sent just before the
    kill can still land on a PostgreSQL server after the process is gone (seen under load:
    two rows more at resume than at the first read)."""
    last = None
    for _ in range(100):
        exp = client.read_project(project_name="resume-exp")
        now = (sorted((str(r.id), r.end_time is not None)
                      for r in client.list_runs(project_id=exp.id, is_root=True)),
               len(list(client.list_feedback(project_ids=[exp.id]))))
        if now == last:
            return
        last = now
        time.sleep(0.1)
    raise AssertionError("the killed experiment's rows kept changing")


def test_sigkill_halfway_then_resume(client: Client, store: Store, tenant_env: dict[str, str],
                                     tmp_path: Path) -> None:
    make_dataset(client, "resume-data", N)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env=tenant_env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            roots, fb = _counts(client)
            if roots >= TOTAL // 2 and fb > 0:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "the experiment finished before it was killed"
    _settle(client)

    exp = client.read_project(project_name="resume-exp")
    at_kill = list(client.list_runs(project_id=exp.id, is_root=True))
    fb_at_kill = Counter(str(f.run_id) for f in client.list_feedback(project_ids=[exp.id]))
    finished = [r for r in at_kill if r.end_time is not None and fb_at_kill[str(r.id)] == 2]
    assert set(fb_at_kill) <= {str(r.id) for r in at_kill}  # no feedback stored before its run
    assert 0 < len(finished) < TOTAL
    assert len(at_kill) < TOTAL

    calls: list[int] = []

    def target(inputs: dict) -> dict:
        calls.append(inputs["x"])
        return {"y": 2 * model(inputs["x"])}

    def exact(outputs: dict, reference_outputs: dict) -> bool:
        return outputs["y"] == reference_outputs["y"]

    def size(outputs: dict) -> dict:
        return {"key": "size", "score": outputs["y"]}

    res = evaluate(target, evaluators=[exact, size], experiment="resume-exp", client=client,
                   max_concurrency=3)
    assert res.experiment_id == exp.id
    assert len(calls) == TOTAL - len(finished)  # only the missing pairs ran

    roots = list(client.list_runs(project_id=exp.id, is_root=True))
    pairs = Counter((str(r.reference_example_id), r.metadata["repetition"]) for r in roots)
    examples = list(client.list_examples(dataset_name="resume-data"))
    assert set(pairs) == {(str(e.id), rep) for e in examples for rep in range(REPS)}
    assert all(n == 1 for n in pairs.values()) and len(roots) == TOTAL
    assert all(r.end_time is not None and r.error is None for r in roots)

    feedback = list(client.list_feedback(project_ids=[exp.id]))
    per_run = Counter((str(f.run_id), f.key) for f in feedback)
    assert set(per_run) == {(str(r.id), k) for r in roots for k in ("exact", "size")}
    assert all(n == 1 for n in per_run.values())

    runs = list(client.list_runs(project_id=exp.id))
    llm = [r for r in runs if r.run_type == "llm"]
    root_traces = {r.trace_id for r in roots}
    assert len(llm) == TOTAL and {r.trace_id for r in llm} == root_traces
    assert {r.trace_id for r in runs} == root_traces  # no half-written traces left

    stats = client.read_project(project_id=exp.id, include_stats=True)
    assert stats.run_count == TOTAL and stats.error_rate == 0
    assert stats.feedback_stats["exact"].n == TOTAL and stats.feedback_stats["exact"].avg == 1.0
    assert stats.completion_tokens == REPS * sum(range(N))
    assert stats.end_time is not None and stats.metadata["num_repetitions"] == REPS
    assert [r["example"].inputs["x"] for r in res] == list(range(N)) * REPS
    assert all(len(r["evaluation_results"]["results"]) == 2 for r in res)

    again = evaluate(target, evaluators=[exact, size], experiment=exp.id, client=client)
    assert len(calls) == TOTAL - len(finished)  # nothing left to run
    assert len(list(again)) == TOTAL


def test_resume_checks_the_dataset_and_creates_named_experiments(client: Client) -> None:
    make_dataset(client, "a", 2)
    make_dataset(client, "b", 2)
    res = evaluate(lambda i: i, data="a", experiment="named", client=client)
    assert res.experiment_name == "named"
    import pytest

    from assay.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="ran on dataset"):
        evaluate(lambda i: i, data="b", experiment="named", client=client)
