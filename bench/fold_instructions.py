"""Instructions a run that the server's fold process spends, counted by valgrind.

    .venv/bin/python bench/fold_instructions.py [--entries 12] [--rows 6] [--repeats 2]
        [--src DIR ...] [--postgres [ADMIN_URL]]

The ingest benchmark's CPU a run varies by 20-40% from round to round on a shared 2-core
machine (bench/README.md, stops 41-43), more than most changes to the fold make. This counts
instructions instead, which repeat from run to run within ~1%: a process admits ``--entries``
journal entries of the ingest benchmark's runs (100 each, a chain root and an llm child per
trace) as ``/runs/multipart`` does, then folds them as the fold process does (prepared ahead,
``--rows`` entries a transaction); a second process does the same without the fold. The
difference a run is the fold's cost. Both first fold one warm-up entry, so imports (genai-prices'
data, SQLAlchemy's compiled statements) are not counted. ``--src`` runs the same against other
source trees (a git worktree of an earlier commit, its C modules built in it:
``python setup.py build_ext --inplace``), interleaved. ``--postgres``: the store on a fresh
PostgreSQL database for each measured process instead of a SQLite file (the fold's own
process is counted, the server's not). Needs valgrind. Prints figures, never asserts them.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_CHILD = """
import sys, tempfile
sys.path.insert(0, {src!r}); sys.path.insert(0, {bench!r})
from datetime import UTC, datetime, timedelta
from measures.ingest import _runs
from assay.server import _ingest
from assay.server._wire import run_in
from assay.store import Store, _background
from assay.store._fold_ready import prepare

def admitted(session, at):
    posts = []
    for main, big in _runs(50, session, at):
        raw = dict(main); raw.update(big)
        post = _ingest._ADMIT(raw, None) if _ingest._ADMIT else None
        posts.append(post if post is not None else run_in(raw))
    return posts

def fold_all(store, rows):
    while store.engine.dialect.name == "postgresql":  # as the fold process: nothing ahead
        if not store.journal.fold_some(rows)[1]:
            return
    while True:
        ready = prepare(store.journal, rows)
        if ready is None:
            return
        store.journal.fold_some(ready.count, ready=ready)

t0 = datetime(2026, 11, 29, tzinfo=UTC)
with Store.open({url!r} or tempfile.mkdtemp() + "/fold.db") as store:
    _background.claim(store.engine)  # no background fold: only the measured one
    store.journal.admit(admitted("warm-up", t0 - timedelta(days=1)))
    fold_all(store, {rows})
    for e in range({entries}):
        store.journal.admit(admitted("bench-fold", t0 + timedelta(seconds=e)))
    if {fold}:
        fold_all(store, {rows})
"""


def _instructions(src: str, entries: int, rows: int, fold: bool, postgres: str | None) -> int:
    if postgres is not None:
        from fold_cost import scratch_url

        with scratch_url("postgres", postgres, "fold_instructions") as url:
            if url is None:
                raise SystemExit("--postgres: no PostgreSQL server answers")
            return _counted(src, entries, rows, fold, url)
    return _counted(src, entries, rows, fold, None)


def _counted(src: str, entries: int, rows: int, fold: bool, url: str | None) -> int:
    code = _CHILD.format(src=src, bench=str(HERE), entries=entries, rows=rows, fold=fold,
                         url=url)
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg",
                              sys.executable, "-c", code],
                             capture_output=True, text=True, env=dict(os.environ,
                                                                      ASSAY_BACKGROUND_FOLD="0"))
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode or found is None:
        raise RuntimeError(f"the measured process failed:\n{out.stderr[-3000:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=12)
    ap.add_argument("--rows", type=int, default=6, help="journal entries a fold transaction")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--src", nargs="*", default=[str(ROOT / "src")])
    ap.add_argument("--postgres", nargs="?", const="postgresql+psycopg://postgres@127.0.0.1:5432/"
                    "postgres", default=None, help="admin URL of a PostgreSQL server")
    args = ap.parse_args()
    runs = args.entries * 100
    got: dict[str, list[float]] = {src: [] for src in args.src}
    for _ in range(args.repeats):
        for src in args.src:
            fold = _instructions(src, args.entries, args.rows, True, args.postgres)
            base = _instructions(src, args.entries, args.rows, False, args.postgres)
            got[src].append((fold - base) / runs)
            print(f"{src}: {got[src][-1]:,.0f} instructions a run", flush=True)
    first = statistics.median(got[args.src[0]])
    for src, values in got.items():
        med = statistics.median(values)
        print(f"{src}: median {med:,.0f} instructions a run folded ({args.rows} entries a "
              f"transaction), {med / first:.3f}x the first")


if __name__ == "__main__":
    main()
