"""(3) Tracing: microseconds per span, flat and nested, assay on and off, beside langsmith
``@traceable`` (off and local) and the OpenTelemetry SDK (no exporter, in-memory exporter).

assay, OpenTelemetry and the bare contextvar span come from ``bench/tracing_overhead.py`` (the
tracing package's own benchmark, run as is in assay's venv and parsed); langsmith from
``bench/peers/peer_langsmith_traceable.py`` in its venv, with the same shapes and span counts.
The two run in turn, round by round, and each figure is the median of the rounds.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import tempfile
from typing import Any

from ._common import ASSAY_PYTHON, BENCH, PEERS, Context, goal, offline_env
from ._contest import _netns_prefix

NAME = "tracing"
TITLE = "tracing cost per span (flat / nested)"

_ROW = re.compile(r"^(\S.*?)\s{2,}(-?[\d.]+|nan)\s+(-?[\d.]+|nan)\s+(-?[\d.]+|nan)\s+"
                  r"(-?[\d.]+|nan)\s*$")


def _parse_overhead(text: str) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = _ROW.match(line.rstrip())
        if m:
            rows[m.group(1).strip()] = {"flat": float(m.group(2)), "nested": float(m.group(4))}
    if "assay off" not in rows or "assay on (stored)" not in rows:
        raise RuntimeError("could not read bench/tracing_overhead.py's table:\n" + text[-2000:])
    return rows


def _breakdown(text: str) -> str:
    """The 'where the stored cost goes' lines of tracing_overhead.py, if it prints them."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lower().startswith("where the stored cost goes"):
            found = []
            for item in lines[i + 1:]:
                if not item.strip():
                    break
                found.append(" ".join(item.split()))
            return "; ".join(found)
    return ""


def _median_rows(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each figure's median over the rounds (a row missing from a round is left out there)."""
    names = [k for k in rounds[0] if all(k in r for r in rounds)]
    return {k: {s: statistics.median(r[k][s] for r in rounds) for s in ("flat", "nested")}
            for k in names}


def run(ctx: Context) -> dict[str, Any]:
    spans = 5_000 if ctx.quick else 20_000
    rounds_n = 2 if ctx.quick else 3
    repeats = 2 if ctx.quick else 3  # per round: figures are medians of rounds x repeats
    script = BENCH / "tracing_overhead.py"
    if not script.exists():
        raise RuntimeError("bench/tracing_overhead.py (the tracing package's benchmark) is missing")
    from ._common import ensure_venv, run_json

    ls_py = ensure_venv("langsmith", ctx)
    env = offline_env()
    env.pop("OTEL_SDK_DISABLED", None)  # the OpenTelemetry SDK is a contestant here
    env.pop("ASSAY_TRACING", None)
    # assay (with OpenTelemetry in the same process) and langsmith in turn, round by round: the
    # machine drifts by tens of percent within minutes, and the ratio goals divide one by the
    # other (one block after the other once read langsmith at 61 and at 104 us/span)
    rounds: list[dict[str, dict[str, float]]] = []
    stdout, ls = "", {}
    for _ in range(rounds_n):
        scratch = tempfile.mkdtemp(prefix="assay-bench-tracing-")
        try:  # its SQLite stores (~300 MB) go with the scratch dir
            proc = subprocess.run([*_netns_prefix(), str(ASSAY_PYTHON), str(script), "--spans",
                                   str(spans), "--repeats", str(repeats)], capture_output=True,
                                  text=True, env={**env, "TMPDIR": scratch}, timeout=900)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if proc.returncode != 0:
            raise RuntimeError(f"tracing_overhead.py failed:\n{proc.stderr[-3000:]}")
        stdout = proc.stdout
        rows = _parse_overhead(proc.stdout)
        ls = run_json([*_netns_prefix(), str(ls_py), str(PEERS / "peer_langsmith_traceable.py"),
                       "--n", str(spans), "--repeats", str(repeats)], env=offline_env(),
                      timeout=900)
        us = ls["us_per_span"]
        rows["langsmith @traceable, off"] = {"flat": us["off_flat"], "nested": us["off_nested"]}
        rows["langsmith @traceable, local"] = {"flat": us["local_flat"],
                                               "nested": us["local_nested"]}
        rounds.append(rows)
    rows = _median_rows(rounds)
    per_round = [max(r["assay on (stored)"].values())
                 / max(r["langsmith @traceable, local"].values()) for r in rounds]

    ref = rows.get("otel sdk, in-memory exporter") or rows.get("otel sdk, no exporter")
    on = rows["assay on (stored)"]
    table = []
    for name, r in rows.items():
        x_on = [r[k] / on[k] if on[k] else float("nan") for k in ("flat", "nested")]
        table.append([name, f"{r['flat']:.2f}", f"{r['nested']:.2f}",
                      f"{x_on[0]:.2f} / {x_on[1]:.2f}"])
    worst_on = max(on["flat"], on["nested"])
    worst_off = max(rows["assay off"]["flat"], rows["assay off"]["nested"])
    goals = [goal("assay tracing on, runs stored (worst of flat/nested)", worst_on, 10.0,
                  "us/span"),
             goal("assay tracing off (worst of flat/nested)", worst_off, 1.0, "us/span")]
    if ref:
        goals.append(goal("assay on stored <= 1/4 of OpenTelemetry SDK (ratio)",
                          worst_on / max(ref["flat"], ref["nested"]), 0.25, "x otel"))
    lsl = rows["langsmith @traceable, local"]
    goals.append(goal("assay on stored <= 1/20 of langsmith local (ratio)",
                      worst_on / max(lsl["flat"], lsl["nested"]), 0.05, "x langsmith"))
    figures = {f"{k} [{s}]": round(v[s], 3) for k, v in rows.items() for s in ("flat", "nested")}
    breakdown = _breakdown(stdout)
    return {"figures": figures, "goals": goals,
            "notes": [f"{spans:,} spans per shape; each figure the median of {rounds_n} rounds "
                      f"(each a median of {repeats}), assay's and langsmith's processes taken "
                      "in turn; 'x assay on' = that row's cost / assay on (stored)",
                      "assay on stored / langsmith local in each round: "
                      + ", ".join(f"{x:.3f}" for x in per_round),
                      "assay 'hot path' = what the traced caller waits; 'stored' = until "
                      "client.flush() returns with every run in SQLite's journal (the goal's "
                      "figure); the store's background folder stands back while the spans are "
                      "traced (stop 40) and folds them after, so the end-to-end figure of such "
                      "a burst is 'traced to queryable' under 'Traced runs to queryable'"]
            + ([f"where the stored cost goes (tracing_overhead.py; the background fold off, "
                f"so each part is alone and the fold is timed apart): {breakdown}"]
               if breakdown else []),
            "table": {"header": ["tracer", "flat us/span", "nested us/span",
                                 "x assay on (flat / nested)"], "rows": table},
            "detail": {"tracing_overhead_stdout": stdout, "langsmith": ls, "rounds": rounds}}
