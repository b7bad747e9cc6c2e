"""Shared plumbing of the benchmark: timing, goals, the offline environment, peer venvs.

Every measurement module exposes ``NAME``, ``TITLE`` and ``run(ctx) -> dict``; the dict holds
``figures`` (name -> number), ``goals`` (made with ``goal()``), ``notes`` (strings) and, if
useful, ``table`` (rows printed as they are). ``run.py`` prints and saves them.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
PEERS = BENCH / "peers"
VENVS = BENCH / ".venvs"
CACHE = BENCH / ".cache"
RESULTS = BENCH / "results"
ASSAY_PYTHON = ROOT / ".venv" / "bin" / "python"

# Switch off every phone-home we know of; no peer may reach the network during a measurement.
OFFLINE_ENV = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_OUT": "YES",
    "DEEPEVAL_GRPC_LOGGING": "NO",
    "ERROR_REPORTING": "NO",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
    "LANGSMITH_ENDPOINT": "http://127.0.0.1:9",  # unroutable on purpose: nothing may be sent
    "LANGCHAIN_ENDPOINT": "http://127.0.0.1:9",
    "INSPECT_TELEMETRY": "",
    "INSPECT_DISABLE_MODEL_API": "",
    "INSPECT_LOG_LEVEL": "error",
    "INSPECT_PY_LOGGER_LEVEL": "error",
    "INSPECT_NO_ANSI": "1",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "LOGFIRE_CONSOLE": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
    "ANONYMIZED_TELEMETRY": "false",
    "POSTHOG_DISABLED": "1",
    "OTEL_SDK_DISABLED": "true",
    "OPENAI_API_KEY": "sk-offline-bench",  # some libraries insist on a key; nothing uses it
    "PYTHONHASHSEED": "0",
    "ASSAY_TRACING": "false",
}


def offline_env(**extra: str) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE (set on some CI machines) would make every contestant process
    # compile assay's modules from source (an editable install has no .pyc from pip, unlike the
    # peers' installed packages): contestants run as a normal install does, bytecode cached.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "VIRTUAL_ENV")) and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(OFFLINE_ENV)
    env.update(extra)
    return env


def apply_offline_env() -> None:
    """For measurements that run inside this process."""
    os.environ.update(OFFLINE_ENV)


# -- context --------------------------------------------------------------------------------------
@dataclass
class Context:
    quick: bool = False
    repeats: int = 3
    log: Callable[[str], None] = print
    rebuild_venvs: bool = False
    pg_url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


# -- timing ---------------------------------------------------------------------------------------
def median(values: list[float]) -> float:
    return statistics.median(values)


def turns(modes: list[str], rounds: int) -> Iterator[tuple[int, str]]:
    """(round, mode) for ``rounds`` rounds of every mode, the order turning round by round:
    no mode always runs first (after the previous round's store work) or last, which on these
    machines made the first one up to 10% dearer."""
    for r in range(rounds):
        k = r % len(modes)
        for mode in modes[k:] + modes[:k]:
            yield r, mode


def paired(values: list[float], bases: list[float], offs: list[float] | None = None) -> str:
    """``values`` over ``bases`` round by round, as a share of that round's ``offs`` (``bases``
    when not given): ``median% (min..max)``. The modes of a round ran minutes apart at most on
    the same inputs, so pairing them counts a slow stretch of the machine once, where a ratio
    of medians mixes rounds."""
    v = sorted((m - b) / o * 100 for m, b, o in zip(values, bases, offs or bases, strict=True))
    return f"{statistics.median(v):+.1f}% ({v[0]:+.1f}..{v[-1]:+.1f})"


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return []


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (``/proc/<pid>/stat``,
    Linux; 0 where there is no such process)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """The processes ``pid`` started (``/proc/<pid>/task/*/children``; none when it is gone)."""
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(k) for k in fh.read().split()]
    except OSError:
        pass
    return kids


def machine_speed() -> float:
    """``python -m timeit "sum(range(1000))"`` in microseconds (the best of 5 repeats): how
    fast this machine runs plain Python now. Machines differ by 2-3x from session to session,
    so absolute figures of two runs compare only through it; ratios to the floors and peers
    measured in the same run do not need it."""
    import timeit

    return round(min(timeit.repeat("sum(range(1000))", number=2000, repeat=5)) / 2000 * 1e6, 2)


# -- goals ----------------------------------------------------------------------------------------
def goal(label: str, value: float | None, limit: float, unit: str, *, lower_is_better: bool = True
         ) -> dict[str, Any]:
    """One goal: ``value`` against ``limit``. ``x_goal`` = value / limit; ``ratio`` > 1 means
    the goal is missed by that factor (for either direction)."""
    if value is None:
        return {"goal": label, "value": None, "limit": limit, "unit": unit, "ratio": None,
                "passed": None, "op": "<=" if lower_is_better else ">="}
    ratio = (value / limit) if lower_is_better else (limit / value if value else float("inf"))
    return {"goal": label, "value": value, "limit": limit, "unit": unit,
            "ratio": round(ratio, 3), "x_goal": round(value / limit, 3), "passed": ratio <= 1.0,
            "op": "<=" if lower_is_better else ">="}


# -- subprocesses and peer environments -----------------------------------------------------------
def last_json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON line in output:\n" + text[-2000:])


def run_json(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 1800,
             cwd: Path | None = None) -> dict[str, Any]:
    """Run a script that prints one JSON line of results; raise with its stderr on failure."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env or offline_env(),
                          timeout=timeout, cwd=str(cwd) if cwd else None)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd[:3]))} failed ({proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}\n{proc.stdout[-1000:]}")
    return last_json_line(proc.stdout)


def ensure_venv(peer: str, ctx: Context) -> Path:
    """The python of ``bench/.venvs/<peer>``, created and filled from
    ``bench/peers/<peer>.requirements.txt`` when missing or when the requirements changed.

    Installing needs PyPI; the measurements afterwards run offline.
    """
    req = PEERS / f"{peer}.requirements.txt"
    venv = VENVS / peer
    py = venv / "bin" / "python"
    digest = hashlib.sha256(req.read_bytes()).hexdigest()[:16]
    marker = venv / ".bench-requirements"
    if py.exists() and not ctx.rebuild_venvs and marker.exists() and marker.read_text() == digest:
        return py
    ctx.log(f"  creating {venv.relative_to(ROOT)} (pip install -r {req.name}) ...")
    VENVS.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["--upgrade", "pip"], check=True)
    subprocess.run(pip + ["-r", str(req)], check=True)
    marker.write_text(digest)
    return py




def fmt_value(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}".rstrip()
