"""(6) ``import assay`` time and the peak memory of a 10,000-example experiment.

Import time: ``python -X importtime -c "import X"`` in fresh interpreters, summed over top-level
imports, minus what a bare interpreter imports anyway; median of several. The same data names
the heaviest packages. The peers'
top-level imports are timed the same way in their venvs. Peak memory: peak RSS (VmHWM) of a process
that runs a stored 10,000-example ``evaluate`` (``peer_assay.py``), beside one that only imports
assay and opens a client (peak RSS read as VmHWM).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ._common import ASSAY_PYTHON, ROOT, Context, ensure_venv, median, offline_env
from ._contest import Contestant, measure

NAME = "startup"
TITLE = "import time and peak memory"

ASSAY_IMPORTS = {
    "import assay": "import assay",
    "from assay import Client": "from assay import Client",
    "from assay.evaluation import evaluate": "from assay.evaluation import evaluate",
    "from assay.tracing import traceable": "from assay.tracing import traceable",
}
PEER_IMPORTS = {
    "pydantic-evals": "from pydantic_evals import Dataset",
    "langsmith": "from langsmith import evaluate",
    "inspect-ai": "from inspect_ai import eval",
    "deepeval": "from deepeval import evaluate",
}
# VmHWM (this process's peak RSS): ru_maxrss would include the parent's size (see peer_assay.py)
_RSS_SNIPPET = (
    "import os, tempfile; from assay import Client; "
    "c = Client(database_url=os.path.join(tempfile.mkdtemp(), 'x.db')); "
    "print(next(int(l.split()[1]) for l in open('/proc/self/status') "
    "if l.startswith('VmHWM:')) / 1024)"
)


def _importtime(py: Path, code: str) -> tuple[float, dict[str, float]]:
    """(ms spent importing, outermost cumulative ms per top-level package) of one fresh run."""
    proc = subprocess.run([str(py), "-X", "importtime", "-c", code], capture_output=True,
                          text=True, env=offline_env(), cwd=str(ROOT), check=True)
    total = 0.0
    pkgs: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if not m:
            continue
        ms = int(m.group(1)) / 1000
        if len(m.group(2)) <= 1:  # a top-level import: its cumulative time counts once
            total += ms
        pkg = m.group(3).split(".")[0]
        pkgs[pkg] = max(pkgs.get(pkg, 0.0), ms)
    return total, pkgs


def _import_ms(py: Path, code: str, runs: int) -> tuple[float, dict[str, float]]:
    """Median import time of ``code`` beyond the interpreter's own start-up imports."""
    base = median([_importtime(py, "pass")[0] for _ in range(3)])
    samples = [_importtime(py, code) for _ in range(runs)]
    return median([t for t, _ in samples]) - base, samples[len(samples) // 2][1]


def run(ctx: Context) -> dict[str, Any]:
    runs = 5 if ctx.quick else 9
    py = ASSAY_PYTHON
    rows, figures = [], {}
    pkgs: dict[str, float] = {}
    heaviest = ("", -1.0)
    for label, code in ASSAY_IMPORTS.items():
        ms, found = _import_ms(py, code, runs)
        if ms > heaviest[1]:
            pkgs, heaviest = found, (label, ms)
        figures[f"{label} ms"] = round(ms, 1)
        rows.append([label, f"{ms:.0f} ms", "assay"])
    startup = _importtime(py, "pass")[1]
    top = sorted(((k, v) for k, v in pkgs.items() if k not in startup and k != "assay"),
                 key=lambda kv: -kv[1])[:8]
    for peer, code in PEER_IMPORTS.items():
        try:
            ppy = ensure_venv(peer, ctx)
            ms, _ = _import_ms(ppy, code, runs)
        except Exception as exc:
            rows.append([code, f"failed: {exc}"[:60], peer])
            continue
        figures[f"{peer} import ms"] = round(ms, 1)
        rows.append([code, f"{ms:.0f} ms", peer])

    scratch = tempfile.mkdtemp(prefix="assay-bench-startup-")
    try:
        proc = subprocess.run([str(py), "-c", _RSS_SNIPPET], capture_output=True, text=True,
                              env=offline_env(TMPDIR=scratch), check=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    idle_mb = float(proc.stdout.strip().splitlines()[-1])
    n = 2_000 if ctx.quick else 10_000
    exp = measure(Contestant("assay evaluate, stored", "peer_assay.py",
                             args=["--mode", "sequential"]), n, ctx)
    peak = exp.get("peak_rss_mb")
    figures.update({"idle client peak MB": round(idle_mb, 1),
                    f"experiment N={n} peak MB": peak})
    rows.append(["peak RSS: import + Client()", f"{idle_mb:.0f} MB", "assay"])
    rows.append([f"peak RSS: evaluate {n:,} examples, stored", f"{peak:.0f} MB", "assay"])
    if peak is not None:
        per_ex_kb = (peak - idle_mb) * 1024 / n
        figures["KB per example"] = round(per_ex_kb, 2)
        rows.append(["  = per example above the idle client", f"{per_ex_kb:.1f} KB", "assay"])
    heavy = ", ".join(f"{k} {v:.0f}" for k, v in top)
    notes = ["import times from -X importtime (median, beyond the interpreter's own start-up); "
             f"heaviest packages under `{heaviest[0]}` (ms): {heavy}"]
    return {"figures": figures, "goals": [], "notes": notes,
            "table": {"header": ["what", "median", "package"], "rows": rows},
            "detail": {"importtime_top": top, "experiment": exp}}
