"""How long comparing experiments takes: loading from SQLite, the paired bootstrap, a UI page.

    python bench/bench_compare.py [n_examples]

Prints seconds per step and the bootstrap's throughput; nothing is asserted (see tests/ for
correctness).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "analysis"))

from assay.analysis import CompareOptions, compare, load_experiment, paired_bootstrap  # noqa: E402
from assay.store import Store  # noqa: E402


def main(n: int) -> None:
    from assay_factory import T0, Outcome, add_experiment, make_dataset

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "bench.db")
        t = time.perf_counter()
        ds, examples = make_dataset(store, "bench", n)
        def outcome(slower: float, p_correct: float):  # type: ignore[no-untyped-def]
            return lambda i, ex, r: Outcome(
                latency=1 + slower + rng.random(),
                scores={"correctness": float(rng.random() < p_correct)})

        a = add_experiment(store, ds.id, examples, "a", outcome(0.0, 0.8))
        b = add_experiment(store, ds.id, examples, "b", outcome(0.1, 0.75),
                           start=T0.replace(hour=1))
        print(f"seed {n} examples x 2 experiments (3 runs each): {time.perf_counter() - t:.2f} s")

        t = time.perf_counter()
        da, db = load_experiment(store, a.id), load_experiment(store, b.id)
        load = time.perf_counter() - t
        print(f"load_experiment x2: {load:.2f} s ({load / (2 * n) * 1e6:.0f} us per example)")

        t = time.perf_counter()
        result = compare([da, db], CompareOptions(resamples=2000))
        cmp_s = time.perf_counter() - t
        print(f"compare (6 metrics, 2000 resamples): {cmp_s:.3f} s; "
              f"regressions: {[d.metric for d in result.regressions]}")

        from fastapi import FastAPI
        from fastapi.testclient import TestClient

        from assay.ui import ui_router_for

        app = FastAPI()
        app.include_router(ui_router_for(store, auth=False))
        with TestClient(app) as http:
            for url in (f"/ui/experiments/{a.id}", f"/ui/compare?ids={a.id},{b.id}"):
                t = time.perf_counter()
                resp = http.get(url)
                took = time.perf_counter() - t
                print(f"GET {url.split('?')[0].rsplit('/', 1)[0]}/...: {took:.2f} s,"
                      f" {len(resp.content) / 1e3:.0f} kB, status {resp.status_code}")
        store.close()

    x = rng.normal(size=n)
    y = x + rng.normal(0.01, 0.1, size=n)
    t = time.perf_counter()
    paired_bootstrap(x, y, resamples=2000)
    s = time.perf_counter() - t
    print(f"paired_bootstrap alone, n={n}, 2000 resamples: {s * 1e3:.1f} ms "
          f"({2000 * n / s / 1e6:.0f} M draws/s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
