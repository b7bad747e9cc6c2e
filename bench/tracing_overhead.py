"""Per-span cost of assay tracing, on and off, beside OpenTelemetry's SDK and a bare span.

    .venv/bin/python bench/tracing_overhead.py [--spans 20000] [--repeats 5]

Each figure is the median over ``--repeats`` runs of (time for N traced calls - time for N bare
calls) / N, in microseconds. "flat": every span is a root. "nested": traces of one root with
``--fanout`` children, each with one grandchild. For assay "on":

* ``hot path``  — what the traced caller waits (runs queued to the background writer);
* ``stored``    — until ``client.flush()`` returns, i.e. every run is in a temp SQLite file.
  The writer shares the GIL, so this is the honest end-to-end cost per span.

Goals (issue 8): on with runs stored <= 10 us/span; off < 1 us/span.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from assay.client import Client
from assay.tracing import trace, traceable, tracing_context


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


def per_span(cases: dict[str, Callable[[], object]], base: Callable[[], object], n: int,
             repeats: int, before: Callable[[], object] = lambda: None) -> dict[str, float]:
    """Median microseconds per span of each case, minus the bare loop. ``before`` runs, untimed,
    ahead of every measurement (e.g. let the writer of the previous case finish)."""
    samples: dict[str, list[float]] = {k: [] for k in cases}
    base_t: list[float] = []
    for _ in range(repeats):
        before()
        base_t.append(timed(base))
        for name, fn in cases.items():
            before()
            samples[name].append(timed(fn))
    b = statistics.median(base_t)
    return {k: max(statistics.median(v) - b, 0.0) / n * 1e6 for k, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--spans", type=int, default=20_000, help="spans per measurement")
    ap.add_argument("--repeats", type=int, default=5, help="runs per figure (median)")
    ap.add_argument("--fanout", type=int, default=50, help="children per root in 'nested'")
    args = ap.parse_args()
    n, fan = args.spans, args.fanout
    os.environ.pop("ASSAY_TRACING", None)

    tmp = tempfile.mkdtemp(prefix="assay-bench-")
    # a fresh SQLite file for every measured repetition, so each starts from the same table size
    fresh = iter([Client(database_url=os.path.join(tmp, f"bench{i}.db"))
                  for i in range(4 * args.repeats + 4)])
    client = next(fresh)

    # -- callables --------------------------------------------------------------------------
    t_leaf = traceable(leaf)
    t_grand = traceable(run_type="tool")(leaf)

    @traceable
    def t_child(x: int) -> int:
        return t_grand(x)

    def bare_child(x: int) -> int:
        return leaf(x)

    groups = n // (fan * 2)  # each group: 1 root + fan children + fan grandchildren
    nested_spans = groups * (1 + 2 * fan)

    def base_flat() -> None:
        for i in range(n):
            leaf(i)

    def base_nested() -> None:
        for _ in range(groups):
            for i in range(fan):
                bare_child(i)

    def assay_flat_off() -> None:
        for i in range(n):
            t_leaf(i)

    def assay_nested_off() -> None:
        for _ in range(groups):
            with trace("root"):
                for i in range(fan):
                    t_child(i)

    used: list[Client] = []

    def on(fn: Callable[[], None], flush: bool) -> Callable[[], None]:
        def run() -> None:
            c = next(fresh)
            used.append(c)
            with tracing_context(enabled=True, client=c, project_name="bench"):
                fn()
            if flush:
                c.flush()
        return run

    def settle() -> None:
        """Untimed, before each measurement: no writer of an earlier case still busy (the hot
        path case returns with its 20,000 runs queued; timing the next case would bill it),
        and no fold of an earlier case's runs still to come: the store's background folder
        stands back while a case traces, for at most a few seconds, then folds what earlier
        cases left (~0.2 s of work for 20,000 runs) beside whichever case runs then (before
        stop 47 it did: one round of the nested 'stored' figure read 8.5 us a span, the next
        3.1)."""
        for c in used:
            c.flush()
            c.store.settle()

    # OpenTelemetry SDK
    def otel(exporter: bool) -> tuple[Callable[[], None], Callable[[], None]]:
        provider = TracerProvider()
        mem = InMemorySpanExporter()
        if exporter:
            provider.add_span_processor(SimpleSpanProcessor(mem))
        tracer = provider.get_tracer("bench")

        def flat() -> None:
            for i in range(n):
                with tracer.start_as_current_span("leaf"):
                    leaf(i)
            mem.clear()

        def nested() -> None:
            for _ in range(groups):
                with tracer.start_as_current_span("root"):
                    for i in range(fan):
                        with tracer.start_as_current_span("child"):
                            with tracer.start_as_current_span("grand"):
                                leaf(i)
            mem.clear()

        return flat, nested

    # bare contextvar span: the floor of any in-process tracer
    cur: contextvars.ContextVar[object] = contextvars.ContextVar("span", default=None)

    class Span:
        __slots__ = ("parent", "name", "start", "end")

        def __init__(self, name: str, parent: object) -> None:
            self.name, self.parent, self.start, self.end = name, parent, time.time_ns(), 0

    def cv_span(name: str, fn: Callable[[int], int], x: int) -> int:
        s = Span(name, cur.get())
        tok = cur.set(s)
        try:
            return fn(x)
        finally:
            cur.reset(tok)
            s.end = time.time_ns()

    def cv_flat() -> None:
        for i in range(n):
            cv_span("leaf", leaf, i)

    def cv_nested() -> None:
        for _ in range(groups):
            def body(_: int) -> int:
                for i in range(fan):
                    cv_span("child", lambda x: cv_span("grand", leaf, x), i)
                return 0
            cv_span("root", body, 0)

    otel_flat, otel_nested = otel(False)
    otel_mem_flat, otel_mem_nested = otel(True)

    # warm up (imports, store connection, writer thread)
    with tracing_context(enabled=True, client=client, project_name="bench"):
        assay_flat_off()
    client.flush()

    flat = per_span({
        "assay off": assay_flat_off,
        "assay on (hot path)": on(assay_flat_off, False),
        "assay on (stored)": on(assay_flat_off, True),
        "otel sdk, no exporter": otel_flat,
        "otel sdk, in-memory exporter": otel_mem_flat,
        "bare contextvar span": cv_flat,
    }, base_flat, n, args.repeats, before=settle)
    nested = per_span({
        "assay off": assay_nested_off,
        "assay on (hot path)": on(assay_nested_off, False),
        "assay on (stored)": on(assay_nested_off, True),
        "otel sdk, no exporter": otel_nested,
        "otel sdk, in-memory exporter": otel_mem_nested,
        "bare contextvar span": cv_nested,
    }, base_nested, nested_spans, args.repeats, before=settle)
    # In 'nested' the bare loop already makes the leaf calls, so per-span figures above are
    # (extra time) / (all spans); 'assay off' there includes 1 trace() block per group.

    ref = "otel sdk, no exporter"
    print(f"assay tracing overhead, microseconds per span (median of {args.repeats}; "
          f"flat: {n} spans, nested: {nested_spans} spans = {groups} x (1 + 2 x {fan}))")
    print(f"python {sys.version.split()[0]}, store: SQLite in {tmp}")
    print()
    print(f"{'':32s} {'flat':>9s} {'x otel':>7s} {'nested':>9s} {'x otel':>7s}")
    for key in flat:
        fr = flat[key] / flat[ref] if flat[ref] else float("nan")
        nr = nested[key] / nested[ref] if nested[ref] else float("nan")
        print(f"{key:32s} {flat[key]:9.2f} {fr:7.2f} {nested[key]:9.2f} {nr:7.2f}")
    print()
    for c in used:
        c.flush()
    assert all(next(iter(c.list_runs(project_name="bench", limit=1)), None) is not None
               for c in used), "a measured run stored nothing"
    with background_fold_off():  # each part alone: the store's folder would take some in
        wire_us, store_us, fold_us = writer_breakdown(next(fresh), n)
        alone = {"flat": apart(next(fresh), assay_flat_off, n),
                 "nested": apart(next(fresh), assay_nested_off, nested_spans)}
    print("where the stored cost goes (single thread, per run, the background fold off):")
    for shape, (caller_us, writer_us) in alone.items():
        print(f"  {shape + ':':7s} caller alone (writer held) {caller_us:5.2f} us/span, "
              f"then the writer alone {writer_us:5.2f}")
    print(f"  RunTree -> journal row (writer thread)              {wire_us:7.2f} us")
    print(f"  journal append, batches of 1000 (SQLite)            {store_us:7.2f} us")
    print(f"  (later, once) fold into runs on the first read      {fold_us:7.2f} us")
    print()
    goal_on = max(flat["assay on (stored)"], nested["assay on (stored)"])
    goal_off = max(flat["assay off"], nested["assay off"])
    print(f"goal 'on, stored <= 10 us/span': {goal_on:.1f} us -> "
          f"{'met' if goal_on <= 10 else 'NOT met'}")
    print(f"goal 'off < 1 us/span':          {goal_off:.2f} us -> "
          f"{'met' if goal_off < 1 else 'NOT met'}")
    stored = sum(c._tracing_writer().stored for c in used)
    batches = sum(c._tracing_writer().batches for c in used)
    lost = sum(c._tracing_writer().failed + c._tracing_writer().dropped for c in used)
    print(f"writer: {stored} runs stored in {batches} batches, {lost} failed or dropped")


def apart(client: Client, fn: Callable[[], None], spans: int) -> tuple[float, float]:
    """The traced calls with the writer held (it stores nothing meanwhile, so the caller has the
    interpreter to itself), then the writer storing that whole backlog (cold by then): us per
    span each, the bare loop included. Stored ~ their sum plus what sharing costs."""
    gate = threading.Event()
    client._tracing_writer().hold(gate)
    gc.collect()
    gc.disable()  # as in the timed figures above
    try:
        t0 = time.perf_counter()
        with tracing_context(enabled=True, client=client, project_name="bench"):
            fn()
        t1 = time.perf_counter()
        gate.set()
        client.flush()
        t2 = time.perf_counter()
    finally:
        gc.enable()
    return (t1 - t0) / spans * 1e6, (t2 - t1) / spans * 1e6


@contextlib.contextmanager
def background_fold_off() -> Iterator[None]:
    """The store's background folder off (``ASSAY_BACKGROUND_FOLD``, read at every append), so
    the breakdown's parts do not each hold some of the fold: it is timed apart, as the first
    read's."""
    before = os.environ.get("ASSAY_BACKGROUND_FOLD")
    os.environ["ASSAY_BACKGROUND_FOLD"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ASSAY_BACKGROUND_FOLD", None)
        else:
            os.environ["ASSAY_BACKGROUND_FOLD"] = before


def writer_breakdown(client: Client, n: int) -> tuple[float, float, float]:
    """Time the writer's work in its parts: building journal rows, appending them to the store's
    journal; and the fold that indexes them on the next read (not part of the stored figure)."""
    from assay.tracing import RunTree
    from assay.tracing._run_tree import ROW

    runs = []
    for i in range(n):
        r = RunTree("leaf", "chain", {"x": i}, client=client, project_name="bench")
        r.end(outputs={"output": i + 1})
        runs.append(r)
    gc.collect()
    gc.disable()  # as in the timed figures above
    try:
        client.store.settle()
        t0 = time.perf_counter()
        wires = list(map(ROW, runs))  # as the writer takes finished roots for the journal
        t1 = time.perf_counter()
        for i in range(0, n, 1000):
            client.store.journal.append_runs(wires[i:i + 1000], columns=RunTree.ROW_COLUMNS,
                                             extra=RunTree.ROW_EXTRA)
        t2 = time.perf_counter()
        client.store.settle()
        t3 = time.perf_counter()
    finally:
        gc.enable()
    return (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, (t3 - t2) / n * 1e6


if __name__ == "__main__":
    main()
