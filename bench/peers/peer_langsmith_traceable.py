"""langsmith ``@traceable``: microseconds per span, tracing off and local (``enabled="local"``).

Same shapes as ``bench/tracing_overhead.py``: "flat" = N root spans; "nested" = groups of one
root with ``fanout`` children, each with one grandchild. Figure = (traced - bare) / spans,
median of ``--repeats``. Local tracing builds every run tree but sends nothing.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import statistics
import time
from collections.abc import Callable

from langsmith import Client, traceable, tracing_context
from langsmith.schemas import LangSmithInfo


def leaf(x: int) -> int:
    return x + 1


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000, help="spans per measurement")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--fanout", type=int, default=50)
    args = ap.parse_args()
    n, fan = args.n, args.fanout
    groups = n // (fan * 2)
    nested_spans = groups * (1 + 2 * fan)
    client = Client(api_url="http://127.0.0.1:9", api_key="offline", info=LangSmithInfo())

    t_leaf = traceable(leaf, client=client)
    t_grand = traceable(run_type="tool", client=client)(leaf)

    @traceable(client=client)
    def t_child(x: int) -> int:
        return t_grand(x)

    @traceable(client=client)
    def t_root() -> None:
        for i in range(fan):
            t_child(i)

    def base_flat() -> None:
        for i in range(n):
            leaf(i)

    def base_nested() -> None:
        for _ in range(groups):
            for i in range(fan):
                leaf(i)

    def flat() -> None:
        for i in range(n):
            t_leaf(i)

    def nested() -> None:
        for _ in range(groups):
            t_root()

    def mode(fn: Callable[[], None], enabled: object) -> Callable[[], None]:
        def run() -> None:
            with tracing_context(enabled=enabled, client=client):
                fn()
        return run

    out: dict[str, float] = {}
    mode(flat, "local")()  # warm up
    for label, enabled in (("off", False), ("local", "local")):
        for shape, fn, base, spans in (("flat", flat, base_flat, n),
                                       ("nested", nested, base_nested, nested_spans)):
            b, t = [], []
            for _ in range(args.repeats):
                b.append(timed(base))
                t.append(timed(mode(fn, enabled)))
            out[f"{label}_{shape}"] = max(statistics.median(t) - statistics.median(b), 0) \
                / spans * 1e6
    print(json.dumps({"peer": "langsmith-traceable", "us_per_span": out, "spans_flat": n,
                      "spans_nested": nested_spans,
                      "version": importlib.metadata.version("langsmith")}))


if __name__ == "__main__":
    main()
