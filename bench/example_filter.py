"""``list_examples(filter=...)``: the metadata conditions checked in SQL first, against the
same filter evaluated by the Python predicate alone.

    .venv/bin/python bench/example_filter.py [--n 10000] [--database-url postgresql+psycopg://...]

A dataset of N examples (inputs of about 1 KB, metadata ``{"tenant": "t<i % 100>", "k": i}``,
one example in 100 with a ``"flagged"`` key). Each filter is timed in its pushed-down form and
wrapped in ``or(...)``, which means the same but is never pushed down (every example read,
decoded and tested in Python). Prints wall and CPU seconds (best of 5), the ratio, and the load
average, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

FILTERS = ['eq(metadata.tenant, "t7")', 'exists(metadata, "flagged")',
           'and(eq(metadata.tenant, "t7"), gt(metadata.k, 5000))']


def _best(fn, repeat: int = 5) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    wall = cpu = float("inf")
    n = 0
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        n = len(fn())
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu, n


def main() -> None:
    from assay.store import Store

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--database-url", default=None)
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    store = Store.open(url).for_tenant(str(uuid.uuid4()))
    ds = store.datasets.create(f"filter-bench-{os.getpid()}")
    rows = [{"inputs": {"q": f"question {i} " + "x" * 1000},
             "metadata": {"tenant": f"t{i % 100}", "k": i, **({"flagged": True} if i % 100 == 0
                                                               else {})}}
            for i in range(args.n)]
    for i in range(0, len(rows), 1000):
        store.examples.create_many(rows[i:i + 1000], dataset_id=ds.id)
    print(f"{args.n} examples on {store.dialect}; load average {os.getloadavg()}")
    print(f"{'filter':58} {'matched':>7} {'pushed wall/cpu s':>18} {'python wall/cpu s':>18} "
          f"{'speed-up (cpu)':>14}")
    for flt in FILTERS:
        pw, pc, n1 = _best(lambda f=flt: store.examples.list(dataset_id=ds.id, filter=f))
        aw, ac, n2 = _best(lambda f=flt: store.examples.list(dataset_id=ds.id, filter=f"or({f})"))
        assert n1 == n2, (flt, n1, n2)
        print(f"{flt:58} {n1:>7} {pw:>8.3f}/{pc:<9.3f} {aw:>8.3f}/{ac:<9.3f} {ac / pc:>13.1f}x")
    store.datasets.delete(dataset_id=ds.id)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
