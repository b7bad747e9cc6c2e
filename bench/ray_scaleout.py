"""Examples per second of ``evaluate()`` locally and on Ray, for a CPU-bound target.

    .venv/bin/python bench/ray_scaleout.py [--n 200] [--work-ms 20] [--cpus 2] [--repeats 3]

The target burns ``--work-ms`` of pure-Python CPU per example (so threads cannot help: the GIL)
and traces one llm child with token usage; one evaluator scores it. Every experiment stores its
runs and feedback in a fresh SQLite file and is timed until ``evaluate()`` returns, i.e. until
everything is stored. Compared:

    local, one at a time       evaluate(max_concurrency=0), the sync default
    local, threads             evaluate(max_concurrency=None): the GIL serialises the work
    ray, <cpus> CPUs           evaluate(executor=RayExecutor(), max_concurrency=None)

Ray's start-up (``ray.init``, a local cluster of ``--cpus`` CPUs) is timed on its own, and so
is the first Ray experiment (workers import assay then); the Ray figures are medians of warm
runs. A no-op target on Ray shows the per-example cost of the Ray path itself (shipping
examples, runs and feedback back, storing them). Ideal speed-up is the number of CPUs; on a
machine with only that many cores the driver's own work (unpickling, storing) competes with the
workers for them. Ray's workers run at nice 0 here (``RAY_worker_niceness``; Ray's default is
15), so that other processes on a shared box do not starve them more than the local runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Ray starts its workers at nice 15 so the driver stays responsive; on a box shared with other
# busy processes that alone would make every Ray figure lose. 0 compares like with like.
os.environ.setdefault("RAY_worker_niceness", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from assay import Client
from assay.evaluation import RayExecutor, evaluate
from assay.store import Store
from assay.tracing import get_current_run_tree, traceable

WORK_MS = 20.0
_LOOPS_PER_MS = 1


@traceable(run_type="llm", name="model")
def model(x: int) -> int:
    get_current_run_tree().set_usage(input_tokens=50, output_tokens=10, provider="openai",
                                     model="gpt-4o-mini")
    return x


def burn(loops: int) -> int:
    acc = 0
    for i in range(loops):
        acc = (acc + i * i) % 1_000_003
    return acc


def target(inputs: dict) -> dict:
    burn(inputs["loops"])
    return {"y": 2 * model(inputs["x"])}


def noop(inputs: dict) -> dict:
    return {"y": 2 * inputs["x"]}


def exact(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


def calibrate(ms: float) -> int:
    """Loops of ``burn`` that take ``ms`` milliseconds of CPU (not wall time: other processes
    on the box would shrink it)."""
    loops = 20_000
    while True:
        t = time.process_time()
        burn(loops)
        took = (time.process_time() - t) * 1000
        if took > 100:
            return max(1, int(loops * ms / took))
        loops *= 2


def cpu_share(loops: int) -> float:
    """CPU time / wall time of this process burning alone: 1.0 on an idle core."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(10):
        burn(loops)
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def dataset(client: Client, n: int, loops: int) -> str:
    ds = client.create_dataset(f"scaleout-{n}-{loops}")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i, "loops": loops}, "outputs": {"y": 2 * i}} for i in range(n)])
    return ds.name


def timed(fn, n: int, work_dir: str, loops: int, **kwargs) -> float:
    """Seconds for one experiment of ``n`` examples on a fresh SQLite store."""
    path = Path(tempfile.mkdtemp(dir=work_dir)) / "assay.db"
    store = Store.open(path)
    client = Client(store=store)
    name = dataset(client, n, loops)
    t = time.perf_counter()
    res = evaluate(fn, data=name, evaluators=[exact], client=client, **kwargs)
    took = time.perf_counter() - t
    stats = client.read_project(project_name=res.experiment_name, include_stats=True)
    assert stats.run_count == n and stats.error_rate == 0, stats
    tokens = 60 * n if fn is target else 0
    assert stats.feedback_stats["exact"].avg == 1.0 and stats.total_tokens == tokens, stats
    store.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="examples per experiment")
    ap.add_argument("--work-ms", type=float, default=WORK_MS, help="CPU ms per example")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure (median)")
    args = ap.parse_args()
    n, cpus = args.n, args.cpus
    loops = calibrate(args.work_ms)
    print(f"{n} examples, {args.work_ms:g} ms of CPU each ({loops} loops), "
          f"{os.cpu_count()} cores here, Ray with {cpus} CPUs; median of {args.repeats}")

    import ray

    load_before, share_before = os.getloadavg()[0], cpu_share(loops)
    with tempfile.TemporaryDirectory() as work:
        t = time.perf_counter()
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        started = time.perf_counter() - t
        first = timed(target, n, work, loops, max_concurrency=None, executor=RayExecutor())
        configs = [
            ("local, one at a time", target, {"max_concurrency": 0}),
            ("local, threads (max_concurrency=None)", target, {"max_concurrency": None}),
            (f"ray, {cpus} CPUs (auto batches)", target,
             {"max_concurrency": None, "executor": RayExecutor()}),
            (f"ray, {cpus} CPUs, batch_size=1", target,
             {"max_concurrency": None, "executor": RayExecutor(batch_size=1)}),
            ("no-op target, local", noop, {"max_concurrency": 0}),
            ("no-op target, ray", noop, {"max_concurrency": None, "executor": RayExecutor()}),
        ]
        runs: dict[str, list[float]] = {label: [] for label, _, _ in configs}
        for _ in range(args.repeats):  # interleaved: background load hits every figure alike
            for label, fn, kwargs in configs:
                runs[label].append(timed(fn, n, work, loops, **kwargs))
        ray.shutdown()
    secs = {label: statistics.median(v) for label, v in runs.items()}

    base = secs["local, one at a time"]
    print(f"measured: {base / n * 1000:.1f} ms wall per example locally, one at a time")
    print(f"\n{'':42}{'examples/s':>12}{'vs local':>10}")
    for label, _, _ in configs[:4]:
        print(f"{label:42}{n / secs[label]:12.1f}{base / secs[label]:9.2f}x")
    print(f"\nray.init (local cluster, {cpus} CPUs): {started:.2f} s")
    print(f"first Ray experiment (workers import assay then): {n / first:.1f} examples/s")
    print(f"no-op target: local {secs['no-op target, local'] / n * 1e6:.0f} us/example, "
          f"ray {secs['no-op target, ray'] / n * 1e6:.0f} us/example (the Ray path's own cost)")
    print(f"load average (1 min) before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f}; "
          f"CPU share of one busy thread before / after: {share_before:.2f} / "
          f"{cpu_share(loops):.2f} (below 1: other processes take the cores)")


if __name__ == "__main__":
    main()
