"""evaluate(executor="ray"): a real local Ray (2 CPUs) and a real SQLite store.

The same experiment run locally and on Ray must leave the same statistics, runs traced on the
workers must be stored under their own root, results come back in dataset order, failures are
recorded rather than raised, resuming runs only the missing pairs, and what cannot travel to
the workers is refused with a message that names it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network: before Ray is imported

import ray
from ray import cloudpickle

from assay import aevaluate, evaluate
from assay.client import Client
from assay.errors import InvalidInputError
from assay.evaluation import RayExecutor
from assay.store import Store
from assay.tracing import get_current_run_tree, traceable, tracing_context

from .conftest import make_dataset, unique

# pytest imports this file as "evaluation.test_ray", a name Ray's workers cannot import: send
# its functions by value, as a script's (__main__) functions are.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.xdist_group("ray")  # one Ray per run under --dist loadgroup


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.fixture
def client(sqlite_url: str) -> Iterator[Client]:
    store = Store.open(sqlite_url)
    yield Client(store=store)
    store.close()


# -- an agent with llm (plain and streamed) and tool steps --------------------------------------
@traceable(run_type="llm", name="model")
def _model(prompt: str, n: int):
    get_current_run_tree().set_usage(input_tokens=100 + n, output_tokens=10 + n,
                                     provider="openai", model="gpt-4o-mini")
    yield from ("the", "answer", "is", str(n))


@traceable(run_type="llm", name="plain-model")
def _plain_model(prompt: str, n: int) -> str:
    get_current_run_tree().set_usage(input_tokens=7, output_tokens=3, provider="openai",
                                     model="gpt-4o-mini")
    return "ok"


@traceable(run_type="tool", name="double")
def _double(x: int) -> int:
    return 2 * x


@traceable(name="plan")
def _plan(x: int) -> str:
    return " ".join(_model("question", x)) if x % 2 else _plain_model("question", x)


def agent(inputs: dict) -> dict:
    x = inputs["x"]
    if x % 5 == 4:
        raise RuntimeError(f"agent failed on {x}")
    return {"y": _double(x), "text": _plan(x)}


def exact(outputs: dict, reference_outputs: dict) -> dict:
    ok = outputs.get("y") == reference_outputs["y"]
    return {"key": "exact", "score": int(ok), "value": "CORRECT" if ok else "INCORRECT"}


def parity(run, example) -> dict:  # LangSmith's legacy positional form
    return {"key": "odd", "score": example.inputs["x"] % 2}


def flaky(inputs: dict) -> float:
    if inputs["x"] == 3:
        raise ValueError("flaky evaluator broke")
    return 0.5


def _stats(client: Client, name: str) -> Any:
    return client.read_project(project_name=name, include_stats=True)


def test_ray_experiment_has_the_statistics_of_the_local_one(client: Client) -> None:
    make_dataset(client, "calc", 10)
    kwargs: dict[str, Any] = {"data": "calc", "evaluators": [exact, parity, flaky],
                              "num_repetitions": 2, "client": client, "max_concurrency": None}
    local = evaluate(agent, **kwargs)
    remote = evaluate(agent, executor=RayExecutor(batch_size=3), **kwargs)
    a, b = _stats(client, local.experiment_name), _stats(client, remote.experiment_name)

    assert b.run_count == a.run_count == 20
    assert b.error_rate == a.error_rate == pytest.approx(4 / 20)
    assert (b.prompt_tokens, b.completion_tokens, b.total_tokens) == (
        a.prompt_tokens, a.completion_tokens, a.total_tokens)
    assert b.total_tokens > 0
    assert b.total_cost == pytest.approx(a.total_cost) and b.total_cost > 0
    assert b.streaming_rate == a.streaming_rate == pytest.approx(8 / 20)
    assert b.first_token_p50 is not None
    assert set(b.feedback_stats) == set(a.feedback_stats) == {"exact", "odd", "flaky"}
    for key, fa in a.feedback_stats.items():
        fb = b.feedback_stats[key]
        assert (fb.n, fb.values) == (fa.n, fa.values), key
        assert fb.avg == pytest.approx(fa.avg) and fb.stdev == pytest.approx(fa.stdev), key
    assert b.feedback_stats["exact"].values == {"CORRECT": 16, "INCORRECT": 4}

    def shape(name: str) -> Counter:
        exp = client.read_project(project_name=name)
        return Counter((r.run_type, r.name) for r in client.list_runs(project_id=exp.id))

    assert shape(remote.experiment_name) == shape(local.experiment_name)

    # results in dataset order, with the run tree (children included) on each row
    rows = list(remote)
    assert [r["example"].inputs["x"] for r in rows] == list(range(10)) * 2
    assert [r["run"].metadata["repetition"] for r in rows] == [0] * 10 + [1] * 10
    assert [r["run"].outputs for r in rows] == [r["run"].outputs for r in local]
    assert [c.name for c in rows[1]["run"].child_runs] == ["double", "plan"]
    assert rows[1]["run"].child_runs[1].child_runs[0].completion_tokens == 11
    assert [len(r["evaluation_results"]["results"]) for r in rows] == [3] * 20


def test_runs_traced_on_workers_nest_under_their_roots(client: Client) -> None:
    make_dataset(client, "nest", 8)

    @traceable(name="judge-call")
    def judge_call(y: int) -> bool:
        return y >= 0

    def judged(outputs: dict) -> bool:  # traces its own run, as an LLM judge does
        return judge_call(outputs.get("y", 0))

    with tracing_context(enabled=True):  # as locally: evaluators' own runs if tracing is on
        res = evaluate(agent, data="nest", evaluators=[judged], client=client,
                       max_concurrency=4, executor="ray")
    exp = client.read_project(project_name=res.experiment_name)
    runs = list(client.list_runs(project_id=exp.id))
    by_id = {r.id: r for r in runs}
    roots = [r for r in runs if r.parent_run_id is None]
    assert len(roots) == 8 and all(r.trace_id == r.id for r in roots)
    x_of_root = {r.id: r.inputs["x"] for r in roots}

    llm = [r for r in runs if r.run_type == "llm"]
    assert len(llm) == 7  # x = 4 fails before any step
    for run in llm:  # llm -> plan -> root of the example it belongs to
        plan = by_id[run.parent_run_id]
        root = by_id[plan.parent_run_id]
        assert plan.name == "plan" and root.parent_run_id is None
        assert run.trace_id == plan.trace_id == root.id
        assert run.inputs["n"] == x_of_root[root.id]
        assert run.dotted_order.startswith(plan.dotted_order + ".")
        assert plan.dotted_order.startswith(root.dotted_order + ".")
    tools = [r for r in runs if r.run_type == "tool"]
    assert all(r.outputs["output"] == 2 * x_of_root[r.parent_run_id] for r in tools)

    # the evaluator's own runs went to the "evaluators" project, one per row
    judge = client.read_project(project_name="evaluators")
    assert Counter(r.name for r in client.list_runs(project_id=judge.id)) == {"judge-call": 8}


def test_failures_are_recorded_not_raised(client: Client) -> None:
    make_dataset(client, "fail", 6)

    def target(inputs: dict) -> dict:
        x = inputs["x"]
        if x == 1:
            raise KeyError("no such thing")
        if x == 2:
            time.sleep(3)  # past the per-example timeout
        if x == 5:
            return {"y": threading.Lock()}  # cannot be pickled back to the driver
        return {"y": 2 * x}

    def broken(outputs: dict) -> bool:
        raise ZeroDivisionError("evaluator divided by zero")

    res = evaluate(target, data="fail", evaluators=[exact, broken], client=client,
                   max_concurrency=None, timeout=1.0, executor="ray")
    rows = list(res)
    assert [r["example"].inputs["x"] for r in rows] == list(range(6))
    errors = {r["example"].inputs["x"]: r["run"].error for r in rows if r["run"].error}
    assert set(errors) == {1, 2, 5}
    assert errors[1].startswith("KeyError: 'no such thing'")
    assert errors[2].startswith("TimeoutError: the target took longer than the per-example "
                                "timeout of 1s")
    assert "could not be sent back from the Ray worker" in errors[5]

    stats = _stats(client, res.experiment_name)
    assert stats.run_count == 6 and stats.error_rate == pytest.approx(3 / 6)
    assert stats.feedback_stats["broken"].n == 6 and stats.feedback_stats["broken"].avg is None
    exp = client.read_project(project_name=res.experiment_name)
    fb = [f for f in client.list_feedback(project_ids=[exp.id]) if f.key == "broken"]
    assert all(f.comment == "ZeroDivisionError: evaluator divided by zero" for f in fb)
    assert all(f.extra and f.extra["error"] for f in fb)
    assert stats.feedback_stats["exact"].avg == pytest.approx(3 / 6)  # x = 0, 3, 4


def test_resume_runs_only_the_missing_pairs(client: Client) -> None:
    make_dataset(client, "res", 8)
    name = unique("resume")

    def first(inputs: dict) -> dict:
        if inputs["x"] % 2:
            raise RuntimeError("odd")
        return {"y": 2 * inputs["x"], "attempt": 1}

    def second(inputs: dict) -> dict:
        return {"y": 2 * inputs["x"], "attempt": 2}

    ev = [exact]
    evaluate(first, data="res", evaluators=ev, client=client, experiment=name, num_repetitions=2,
             error_handling="ignore", max_concurrency=None, executor="ray")
    exp = client.read_project(project_name=name)
    before = {(str(r.reference_example_id), r.metadata["repetition"]): r.id
              for r in client.list_runs(project_id=exp.id, is_root=True)}
    assert len(before) == 8  # the even examples, twice

    res = evaluate(second, evaluators=ev, client=client, experiment=name, max_concurrency=None,
                   executor=RayExecutor(batch_size=2))
    assert res.experiment_id == exp.id
    rows = list(res)
    assert [r["example"].inputs["x"] for r in rows] == list(range(8)) * 2
    assert [r["run"].outputs["attempt"] for r in rows] == [1, 2] * 8  # only odd ones ran again
    roots = list(client.list_runs(project_id=exp.id, is_root=True))
    pairs = Counter((str(r.reference_example_id), r.metadata["repetition"]) for r in roots)
    assert len(pairs) == 16 and set(pairs.values()) == {1}
    kept = {(str(r.reference_example_id), r.metadata["repetition"]): r.id for r in roots}
    assert all(kept[p] == rid for p, rid in before.items())  # finished pairs untouched
    stats = _stats(client, name)
    assert stats.run_count == 16 and stats.error_rate == 0
    assert stats.feedback_stats["exact"].n == 16 and stats.feedback_stats["exact"].avg == 1.0


def test_max_concurrency_bounds_examples_in_flight(client: Client) -> None:
    make_dataset(client, "bound", 6)

    def slow(inputs: dict) -> dict:
        time.sleep(0.15)
        return {"y": 2 * inputs["x"]}

    def peak(name: str) -> int:
        exp = client.read_project(project_name=name)
        edges = []
        for r in client.list_runs(project_id=exp.id, is_root=True):
            edges += [(r.start_time, 1), (r.end_time, -1)]
        now = top = 0
        for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
            now += step
            top = max(top, now)
        return top

    one = evaluate(slow, data="bound", client=client, max_concurrency=1, executor="ray")
    assert peak(one.experiment_name) == 1
    both = evaluate(slow, data="bound", client=client, max_concurrency=None,
                    executor=RayExecutor(batch_size=1))
    assert peak(both.experiment_name) == 2  # both CPUs of the cluster at work
    with pytest.warns(RuntimeWarning, match="one example at a time"):
        evaluate(slow, data="bound", client=client, executor="ray", max_concurrency=0)


async def test_aevaluate_async_target_without_upload(client: Client) -> None:
    @traceable(run_type="tool", name="lookup")
    async def lookup(x: int) -> int:
        return x + 1

    async def target(inputs: dict) -> dict:
        return {"y": await lookup(inputs["x"])}

    data = [{"inputs": {"x": i}, "outputs": {"y": i + 1}} for i in range(5)]
    projects = len(list(client.list_projects()))
    res = await aevaluate(target, data=data, evaluators=[exact], client=client,
                          upload_results=False, executor=RayExecutor(task_concurrency=3))
    rows = list(res)
    assert [r["run"].outputs["y"] for r in rows] == [1, 2, 3, 4, 5]
    assert all(r["evaluation_results"]["results"][0].score == 1 for r in rows)
    assert [r["run"].child_runs[0].name for r in rows] == ["lookup"] * 5
    assert len(list(client.list_projects())) == projects  # nothing stored


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def sized(inputs: dict, attachments: dict) -> dict:  # LangSmith's (inputs, attachments) form
    return {"size": len(attachments["img"]["reader"].read()), "pid": os.getpid()}


def same_size(outputs: dict, reference_outputs: dict, attachments: dict) -> bool:
    return outputs["size"] == reference_outputs["size"] == len(
        attachments["img"]["reader"].read())


def test_targets_and_evaluators_taking_attachments_run_on_workers(client: Client) -> None:
    """Each example's files travel with it to the worker (read on the driver when its batch is
    sent: a worker has no store); target and evaluator each read them whole, and the experiment
    scores as the local one does."""
    ds = client.create_dataset(unique("files"))
    for i in range(4):
        client.create_example({"q": i}, dataset_id=ds.id, outputs={"size": len(PNG) + i},
                              attachments={"img": ("image/png", PNG + bytes(i))})
    rows = {}
    for executor in ("local", "ray"):
        res = evaluate(sized, data=ds.name, evaluators=[same_size], client=client,
                       executor=executor, max_concurrency=None)
        rows[executor] = list(res)
    for executor, got in rows.items():
        assert [r["run"].outputs["size"] for r in got] == [len(PNG) + i for i in range(4)], executor
        assert [r["evaluation_results"]["results"][0].score for r in got] == [True] * 4
        assert all(r["run"].error is None for r in got)
    assert {r["run"].outputs["pid"] for r in rows["ray"]}.isdisjoint({os.getpid()})


def test_what_cannot_reach_the_workers_is_refused_by_name(client: Client, tmp_path: Path) -> None:
    make_dataset(client, "pick", 3)
    lock = threading.Lock()

    def locked(inputs: dict) -> dict:
        with lock:
            return {"y": 2 * inputs["x"]}

    projects = len(list(client.list_projects()))
    with pytest.raises(InvalidInputError, match=r"target 'locked' .*cannot be pickled.*lock"):
        evaluate(locked, data="pick", client=client, executor="ray")

    def locked_eval(outputs: dict) -> bool:
        with lock:
            return True

    with pytest.raises(InvalidInputError, match=r"evaluator 'locked_eval' .*cannot be pickled"):
        evaluate(agent, data="pick", evaluators=[locked_eval], client=client, executor="ray")
    assert len(list(client.list_projects())) == projects  # refused before the experiment

    # a module only this process can import: the workers cannot unpickle the target
    module = f"only_here_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("def target(inputs):\n    return {'y': 1}\n")
    sys.path.insert(0, str(tmp_path))
    try:
        target = __import__(module).target
        with pytest.raises(InvalidInputError, match=rf"could not load .*{module}"):
            evaluate(target, data="pick", client=client, executor="ray", max_concurrency=None)
    finally:
        sys.path.remove(str(tmp_path))


def test_traced_functions_travel_while_framework_hooks_hold_locks() -> None:
    """A traced function sent by value carries the tracing module's globals, the list of
    framework step lookups among them: it travels as a name (the hooks in it hold locks), and
    the receiving process uses its own list."""
    from assay.evaluation._ray import _dumps
    from assay.tracing._context import STEP_RUNS

    lock = threading.Lock()

    def held() -> None:
        with lock:
            return None

    STEP_RUNS.append((None, held))
    try:
        for fn in (_model, _plan, agent):  # a generator's wrapper is Python: by value
            cloudpickle.loads(_dumps(fn))
        assert cloudpickle.loads(_dumps(STEP_RUNS)) is STEP_RUNS
    finally:
        STEP_RUNS.remove((None, held))


def test_bad_executor_arguments() -> None:
    with pytest.raises(InvalidInputError, match="executor must be 'local', 'ray' or a RayEx"):
        evaluate(agent, data=[{"inputs": {"x": 1}}], upload_results=False, executor="spark")
    with pytest.raises(InvalidInputError, match="batch_size must be an int >= 1"):
        RayExecutor(batch_size=0)
    with pytest.raises(InvalidInputError, match="cannot be combined with address"):
        RayExecutor(address="ray://head:10001", num_cpus=4)
    # shape: never more examples in flight than the bound, every slot busy when it allows
    ex = RayExecutor()
    for n, bound, slots in [(100, 10, 2), (100, 1, 2), (1000, None, 8), (7, 3, 4), (50, 100, 2)]:
        size, tasks = ex.shape(n, bound, slots)
        assert size >= 1 and tasks >= 1
        if bound is not None:
            assert size * tasks <= bound
            assert tasks >= min(slots, bound)
    assert RayExecutor(batch_size=50).shape(100, 10, 2) == (5, 2)
