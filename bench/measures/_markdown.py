"""The README's "Performance" section, rendered from one results JSON of ``bench/run.py``."""

from __future__ import annotations

from typing import Any

from ._common import fmt_value

_STATUS = {True: "met", False: "**missed**", None: "n/a"}


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def render(report: dict[str, Any]) -> str:
    m = report["measurements"]
    lines = [
        "## Performance",
        "",
        f"Measured with `{report['command']}` on {report['started'][:10]}: Python "
        f"{report['python']}, {report['cpus']} cores, medians of {report['repeats']} runs "
        "unless a row says otherwise. Peers ran side by side in their own virtual environments, "
        "offline. Load average at start/end: "
        f"{report.get('loadavg_start')} / {report.get('loadavg_end')}"
        " (other work on the machine makes figures pessimistic)."
        + (f" The machine's speed, `python -m timeit \"sum(range(1000))\"`: "
           f"{report['speed_us_start']} us at start, {report.get('speed_us_end')} at end; "
           "machines differ by 2-3x from session to session, so absolute figures of runs on "
           "different machines compare only through it (the ratios to the floors and peers of "
           "one run do not need it)." if report.get("speed_us_start") else "")
        + (f" {report['note']}" if report.get("note") else ""),
        "",
        "### Goals",
        "",
    ]
    goal_rows = []
    for res in m.values():
        for g in res.get("goals", []):
            value = fmt_value(g["value"], g["unit"])
            goal_rows.append([g["goal"], value, f"{g.get('op', '<=')} {g['limit']:g}",
                              "-" if g.get("x_goal") is None else f"{g['x_goal']:.2f}",
                              _STATUS[g["passed"]]])
    lines += _table(["goal", "measured", "target", "measured / target", "status"], goal_rows)
    titles = {
        "harness": "Harness overhead per example (no-op target, one trivial evaluator)",
        "concurrency": "I/O-bound concurrency (2,000 examples x 20 ms, concurrency 100; "
                       "ideal 0.4 s)",
        "tracing": "Tracing cost (microseconds per span)",
        "stats": "`read_project(include_stats=True)` latency",
        "ingest": "Server ingest (`/runs/multipart`, zstd)",
        "startup": "Import time and memory",
        "fold": "Traced runs to queryable (journal fold, end to end)",
    }
    for name, res in m.items():
        lines += ["", f"### {titles.get(name, name)}", ""]
        if res.get("error"):
            lines.append(f"Failed: {res['error']}")
            continue
        t = res.get("table")
        if t:
            lines += _table(t["header"], t["rows"])
        notes = [n for n in res.get("notes", [])]
        if notes:
            lines.append("")
            lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
