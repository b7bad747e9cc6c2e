"""(2) I/O-bound concurrency: 2,000 examples whose target awaits 20 ms, at concurrency 100.

Ideal wall time = 2,000 / 100 x 20 ms = 0.4 s; the figure is measured / ideal. assay stores
runs and feedback as in (1); peers run the same workload at the same bound (deepeval has no
target, so its metric awaits the 20 ms).
"""

from __future__ import annotations

from typing import Any

from ._common import Context, goal
from ._contest import Contestant, measure, measure_interleaved

NAME = "concurrency"
TITLE = "I/O-bound concurrency (2,000 examples x 20 ms at concurrency 100)"

N, SLEEP_MS, BOUND = 2_000, 20.0, 100
IDEAL_S = N / BOUND * SLEEP_MS / 1000
GOAL = 1.10

_SLEEP = ["--sleep-ms", str(SLEEP_MS), "--concurrency", str(BOUND)]
FLOOR = Contestant("bare floor (asyncio workers + sqlite3)", "floor.py", args=_SLEEP)
CONTESTANTS = [
    Contestant("assay aevaluate(), stored", "peer_assay.py",
               args=["--mode", "concurrent", *_SLEEP]),
    FLOOR,
    Contestant("pydantic-evals Dataset.evaluate", "peer_pydantic_evals.py", "pydantic-evals",
               _SLEEP),
    # sync target in LangSmith's thread pool (its aevaluate uploads even with upload_results=False)
    Contestant("langsmith evaluate local (threads)", "peer_langsmith.py", "langsmith", _SLEEP),
    Contestant("deepeval evaluate, cache off", "peer_deepeval.py", "deepeval",
               ["--cache", "off", *_SLEEP]),
    Contestant("inspect-ai eval, mockllm/model", "peer_inspect_ai.py", "inspect-ai", _SLEEP,
               repeats=1),
]


def run(ctx: Context) -> dict[str, Any]:
    rows, figures, notes, detail = [], {}, [], {}
    assay_ratio = None
    floor_ratio = None
    try:  # assay and the floor in turn: the machine's drift stays out of their comparison
        paired = measure_interleaved(CONTESTANTS[:2], N, ctx)
    except Exception as exc:  # measured one by one below, failures reported there
        ctx.log(f"    interleaved runs failed ({str(exc)[:200]}): one by one")
        paired = {}
    for c in CONTESTANTS if not ctx.quick else CONTESTANTS[:4]:
        try:
            r = paired.get(c.label) or measure(c, N, ctx)
        except Exception as exc:
            notes.append(f"{c.label} failed: {str(exc)[:300]}")
            continue
        ratio = r["median_s"] / IDEAL_S
        detail[c.label] = r
        figures[c.label] = round(ratio, 3)
        rows.append([c.label + (f" ({r['repeats']} run)" if r["repeats"] == 1 else ""),
                     f"{r['median_s']:.3f} s", f"{ratio:.2f}", r.get("version") or "-"])
        ctx.log(f"    {c.label:40s} {r['median_s']:.3f} s = {ratio:.2f} x ideal")
        if c is CONTESTANTS[0]:
            assay_ratio = ratio
        elif c is FLOOR:
            floor_ratio = ratio
    phases = detail.get(CONTESTANTS[0].label, {})
    if "examples_seconds" in phases:
        # where assay's wall time goes: before the first target call, the examples themselves
        # (first call to last return), after the last return (flushes, experiment end)
        ex_ratio = phases["examples_seconds"] / IDEAL_S
        figures["assay examples phase / ideal"] = round(ex_ratio, 3)
        notes.append(f"assay's wall time split (medians): set-up to the first target call "
                     f"{phases['setup_seconds'] * 1000:.0f} ms, the examples "
                     f"{phases['examples_seconds'] * 1000:.0f} ms (= {ex_ratio:.2f} x ideal), "
                     f"tear-down after the last one {phases['teardown_seconds'] * 1000:.0f} ms")
    if floor_ratio is not None:
        notes.append(f"the bare floor (plain asyncio workers, no harness) reaches "
                     f"{floor_ratio:.2f} x ideal here: timer rounding and the event loop's own "
                     f"work per wake-up; assay adds {(assay_ratio or 0) - floor_ratio:+.2f}")
        figures["floor ratio"] = round(floor_ratio, 3)
    if ctx.quick:
        notes.append("quick mode: deepeval and inspect-ai left out")
    return {"figures": figures,
            "goals": [goal("assay measured / ideal", assay_ratio, GOAL, "x ideal")],
            "notes": notes,
            "table": {"header": ["contestant", "wall (median)", "/ ideal 0.4 s", "version"],
                      "rows": rows},
            "detail": detail}
