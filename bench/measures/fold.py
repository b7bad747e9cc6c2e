"""(7) Traced runs from the journal to queryable: the fold per run beside the database's own
floor, and the end-to-end figures.

``bench/fold_cost.py`` in a fresh process per backend run: ``n`` root runs with one child each
traced with ``@traceable`` (the README's pattern) into a fresh store. Journal-only: the time to
``flush()`` with the background fold off, then the fold alone (``Store.settle``, wall and CPU
per run). End to end: the same with the background fold on, from the first traced call to the
first ``read_project`` answering with every run (traced run to queryable per span), and that
first read after ``flush()`` alone. SQLite and PostgreSQL (a scratch database).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from ._common import ASSAY_PYTHON, ROOT, Context, goal, median, offline_env

NAME = "fold"
TITLE = "traced runs to queryable (journal fold, end to end)"


def _once(ctx: Context, n: int) -> dict[str, Any]:
    proc = subprocess.run([str(ASSAY_PYTHON), str(ROOT / "bench" / "fold_cost.py"), "--n",
                           str(n), "--pg-url", ctx.pg_url, "--json"], capture_output=True,
                          text=True, env=offline_env(), cwd=str(ROOT), check=True, timeout=3600)
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            ctx.log(f"    {line}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run(ctx: Context) -> dict[str, Any]:
    n = 5_000 if ctx.quick else 50_000  # root runs: 100,000 spans in all
    rounds = [_once(ctx, n) for _ in range(1 if ctx.quick else max(1, ctx.repeats))]
    figures: dict[str, Any] = {}
    rows, goals = [], []
    for backend in ("sqlite", "postgres"):
        got = [r["results"][backend] for r in rounds if backend in r["results"]]
        if not got:
            continue
        m = {k: median([g[k] for g in got]) for k in got[0]}
        for key, value in m.items():
            figures[f"{backend} {key}"] = round(value, 3)
        rows.append([backend, f"{2 * n:,}", f"{m['journal_us_per_span']:.2f}",
                     f"{m['fold_us_per_run']:.2f} ({m['fold_cpu_us_per_run']:.2f} CPU)",
                     f"{m['floor_us_per_run']:.2f} ({m['floor_no_index_us_per_run']:.2f})",
                     f"{m['fold_us_per_run'] / m['floor_us_per_run']:.2f}",
                     f"{m['queryable_us_per_span']:.2f}", f"{m['flush_s']:.3f} s",
                     f"{m['first_read_s']:.3f} s"])
        goals.append(goal(f"fold per run, {backend}", m["fold_us_per_run"], 10.0, "us/run"))
        goals.append(goal(f"traced run to queryable, {backend}", m["queryable_us_per_span"],
                          15.0, "us/span"))
        goals.append(goal(f"first read after {2 * n:,} runs, {backend}", m["first_read_s"],
                          1.0, "s"))
    return {"figures": figures, "goals": goals,
            "notes": [("journal only: traced and flushed with the background fold off (what "
                       "the earlier figures measured); fold: the journal folded alone; end to "
                       "end: background fold on, first traced call to the first read_project "
                       "that counts every run; first read: that read alone, after flush()"),
                      ("floor: the rows the fold stored, inserted again into a copy of the runs "
                       "table with its indexes by the database's own bulk path (SQLite "
                       "inserts of the values read back, several rows a statement as the fold "
                       "writes them; PostgreSQL COPY of the text COPY TO "
                       "gave), 1,000 a transaction as the fold commits them: what the database "
                       "alone costs on this machine; in brackets, with the primary key only")],
            "table": {"header": ["backend", "spans", "journal only us/span", "fold us/run",
                                 "floor us/run (no secondary index)", "fold x floor",
                                 "traced to queryable us/span", "flush after tracing",
                                 "first read"], "rows": rows},
            "detail": rounds}
