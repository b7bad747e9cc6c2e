"""Running one contestant (assay, the floor, or a peer) as a fresh process, offline.

Each repetition is a new process in a scratch working directory; the script times only its
evaluate call and prints one JSON line. When the machine allows it (root, ``unshare``), every
contestant runs in a new network namespace: no network at all, so "offline" is enforced, not
just configured.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._common import ASSAY_PYTHON, PEERS, Context, ensure_venv, median, offline_env, run_json


@dataclass
class Contestant:
    label: str
    script: str  # file name under bench/peers/
    venv: str | None = None  # peer venv name; None = assay's .venv
    args: list[str] = field(default_factory=list)
    max_n: int | None = None  # cap N (too slow beyond it); the output says so
    quick_max_n: int | None = None
    repeats: int | None = None  # fewer runs for very slow contestants (said in the output)


@functools.cache
def _netns_prefix() -> tuple[str, ...]:
    if shutil.which("unshare") is None:
        return ()
    try:
        ok = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return ("unshare", "-n") if ok == 0 else ()


def offline_enforced() -> bool:
    return bool(_netns_prefix())


def python_for(c: Contestant, ctx: Context) -> Path:
    return ASSAY_PYTHON if c.venv is None else ensure_venv(c.venv, ctx)


def effective_n(c: Contestant, n: int, ctx: Context) -> int:
    cap = c.quick_max_n if ctx.quick and c.quick_max_n else c.max_n
    return min(n, cap) if cap else n


def run_once(c: Contestant, py: Path, n: int, extra: list[str] | None = None,
             timeout: float = 900) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="assay-bench-run-")
    try:
        cmd = [*_netns_prefix(), str(py), str(PEERS / c.script), "--n", str(n), *c.args,
               *(extra or [])]
        # TMPDIR too: whatever the script puts in temp files goes when the scratch dir goes
        return run_json(cmd, env=offline_env(TMPDIR=work), timeout=timeout, cwd=Path(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(c: Contestant, n: int, ctx: Context, extra: list[str] | None = None,
            repeats: int | None = None) -> dict[str, Any]:
    """Median seconds over ``repeats`` fresh processes, with the per-example figure."""
    py = python_for(c, ctx)
    n_eff = effective_n(c, n, ctx)
    runs = [run_once(c, py, n_eff, extra) for _ in range(repeats or c.repeats or ctx.repeats)]
    return _summary(c, n, n_eff, runs)


def measure_interleaved(cs: list[Contestant], n: int, ctx: Context) -> dict[str, dict[str, Any]]:
    """``measure`` for contestants whose figures are compared as ratios, their runs taken in
    turn (a, b, c, a, b, c, ...). This kind of machine drifts by tens of percent over a few
    minutes; blocks of runs one contestant after the other put that drift into the ratio."""
    pys = [python_for(c, ctx) for c in cs]
    counts = [c.repeats or ctx.repeats for c in cs]
    runs: list[list[dict[str, Any]]] = [[] for _ in cs]
    for round_ in range(max(counts)):
        for i, c in enumerate(cs):
            if round_ < counts[i]:
                runs[i].append(run_once(c, pys[i], effective_n(c, n, ctx)))
    return {c.label: _summary(c, n, effective_n(c, n, ctx), r)
            for c, r in zip(cs, runs, strict=True)}


def _summary(c: Contestant, n: int, n_eff: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    secs = [r["seconds"] for r in runs]
    out = {"label": c.label, "n_requested": n, "n": n_eff, "seconds": secs,
           "median_s": median(secs), "us_per_example": median(secs) / n_eff * 1e6,
           "version": runs[-1].get("version"), "repeats": len(runs)}
    if all("cpu_seconds" in r for r in runs):
        out["cpu_us_per_example"] = median([r["cpu_seconds"] for r in runs]) / n_eff * 1e6
    for key in ("peak_rss_mb", "first_read_seconds", "setup_seconds", "examples_seconds",
                "teardown_seconds"):
        if all(key in r for r in runs):
            out[key] = median([r[key] for r in runs])
    return out
