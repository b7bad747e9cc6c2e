"""assay's benchmark: assay beside the harnesses people would otherwise use.

    .venv/bin/python bench/run.py [--quick] [--only NAME[,NAME]] [--repeats 3]

Measurements (``--only`` names): harness, concurrency, tracing, stats, ingest, startup, fold.
Prints figures, ratios and where each goal of issue 8 stands; writes the results as JSON to
``bench/results/`` (gitignored). Peers run in their own virtual environments under
``bench/.venvs/`` (created on first use with pip; everything measured runs offline).
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import json
import os
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from measures._common import (  # noqa: E402
    RESULTS,
    Context,
    apply_offline_env,
    fmt_value,
    loadavg,
    machine_speed,
)

ORDER = ["harness", "concurrency", "tracing", "stats", "ingest", "startup", "fold"]


def _print_result(name: str, title: str, res: dict) -> None:
    print(f"\n== {name}: {title}")
    table = res.get("table")
    if table:
        rows = [table["header"]] + [[str(c) for c in r] for r in table["rows"]]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for k, r in enumerate(rows):
            print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
            if k == 0:
                print("  " + "  ".join("-" * w for w in widths))
    for g in res.get("goals", []):
        status = {True: "PASS", False: "MISS", None: "n/a "}[g["passed"]]
        value = fmt_value(g["value"], g["unit"])
        ratio = "" if g["ratio"] is None else f"  (= {g['x_goal']:.2f} x goal)"
        print(f"  [{status}] {g['goal']}: {value} vs {g.get('op', '<=')} {g['limit']:g} "
              f"{g['unit']}{ratio}")
    for note in res.get("notes", []):
        print(f"  note: {note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smaller N and sizes, to check the suite works (figures are rougher)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(ORDER)}")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure (median reported)")
    ap.add_argument("--rebuild-venvs", action="store_true", help="recreate the peers' venvs")
    ap.add_argument("--pg-url", default=os.environ.get(
        "ASSAY_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
        help="PostgreSQL server for the stats measurement (a scratch database is created)")
    ap.add_argument("--out", default=None, help="results JSON path (default bench/results/)")
    ap.add_argument("--markdown", metavar="RESULTS_JSON", default=None,
                    help="only print the README's Performance section from a results file")
    ap.add_argument("--update-readme", action="store_true",
                    help="with --markdown: write the section into bench/README.md and the "
                         "project README between their PERFORMANCE markers")
    args = ap.parse_args(argv)
    if args.markdown:
        from measures._markdown import render

        section = render(json.loads(Path(args.markdown).read_text()))
        if args.update_readme:
            start, end = "<!-- PERFORMANCE:START -->", "<!-- PERFORMANCE:END -->"
            for readme in (HERE / "README.md", HERE.parent / "README.md"):
                text = readme.read_text()
                if start not in text or end not in text:
                    ap.error(f"{readme} has no {start} ... {end} markers")
                head, rest = text.split(start, 1)
                readme.write_text(head + start + "\n" + section + end + rest.split(end, 1)[1])
                print(f"updated {readme}")
        else:
            print(section, end="")
        return 0

    names = [n.strip() for n in args.only.split(",") if n.strip()] or ORDER
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        ap.error(f"unknown measurement(s) {', '.join(unknown)}; choose from {', '.join(ORDER)}")
    apply_offline_env()
    # assay is installed editable: compile its bytecode once, as pip does for the peers' packages
    compileall.compile_dir(str(HERE.parent / "src" / "assay"), quiet=1)
    ctx = Context(quick=args.quick, repeats=args.repeats, rebuild_venvs=args.rebuild_venvs,
                  pg_url=args.pg_url, log=lambda m: print(m, flush=True))
    started = datetime.now(UTC)
    load_start = loadavg()
    speed = machine_speed()
    print(f"assay bench — {started:%Y-%m-%d %H:%M} UTC, python {platform.python_version()}, "
          f"{os.cpu_count()} cores, load average {load_start}, timeit sum(range(1000)) "
          f"{speed} us" + (" (quick)" if args.quick else ""), flush=True)
    report: dict = {"started": started.isoformat(), "quick": args.quick,
                    "loadavg_start": load_start, "speed_us_start": speed,
                    "repeats": args.repeats, "python": platform.python_version(),
                    "platform": platform.platform(), "cpus": os.cpu_count(),
                    "command": " ".join([".venv/bin/python bench/run.py", *(argv or sys.argv[1:])]),
                    "measurements": {}}
    failed = 0
    for name in names:
        mod = importlib.import_module(f"measures.{name}")
        print(f"\n-- {name}: {mod.TITLE} ...", flush=True)
        before = loadavg()
        t0 = time.perf_counter()
        try:
            res = mod.run(ctx)
        except Exception as exc:  # one broken measurement must not hide the others
            failed += 1
            traceback.print_exc()
            res = {"error": f"{exc.__class__.__name__}: {exc}", "figures": {}, "goals": [],
                   "notes": [f"FAILED: {exc.__class__.__name__}: {str(exc)[:500]}"]}
        res["seconds"] = round(time.perf_counter() - t0, 1)
        res["loadavg_before"] = before
        res["loadavg_after"] = loadavg()
        if max(before[:1] + res["loadavg_after"][:1] or [0]) > 1.5:
            res.setdefault("notes", []).append(
                f"machine busy: load average {before} before, {res['loadavg_after']} after "
                f"on {os.cpu_count()} cores (figures pessimistic)")
        report["measurements"][name] = res
        _print_result(name, mod.TITLE, res)

    goals = [(n, g) for n, r in report["measurements"].items() for g in r.get("goals", [])]
    print("\n== goals")
    for _, g in goals:
        status = {True: "PASS", False: "MISS", None: "n/a "}[g["passed"]]
        value = fmt_value(g["value"], g["unit"])
        ratio = "" if g["ratio"] is None else f" = {g['x_goal']:.2f} x goal"
        miss = f", missed by x{g['ratio']:.2f}" if g["passed"] is False else ""
        print(f"  [{status}] {g['goal']}: {value} (goal {g.get('op', '<=')} {g['limit']:g})"
              f"{ratio}{miss}")
    report["loadavg_end"] = loadavg()
    report["speed_us_end"] = machine_speed()
    print(f"\nload average at end: {report['loadavg_end']}, timeit sum(range(1000)) "
          f"{report['speed_us_end']} us")
    out = Path(args.out) if args.out else RESULTS / f"bench-{started:%Y%m%dT%H%M%S}" \
        f"{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    from measures._markdown import render

    md = out.with_suffix(".md")
    md.write_text(render(report))
    print(f"results written to {out} (markdown for the README: {md.name})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
