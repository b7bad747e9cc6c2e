"""Profile one benchmark workload with py-spy (all threads) and print where the time goes.

    .venv/bin/python bench/hotspots.py harness [--n 10000]
    .venv/bin/python bench/hotspots.py concurrency
    .venv/bin/python bench/hotspots.py tracing [--n 20000]
    .venv/bin/python bench/hotspots.py ingest        (profiles the `assay serve` process)
    .venv/bin/python bench/hotspots.py stats         (read_project on the cached 10^6 store)

Prints, per thread, the functions with the largest inclusive and self share of the samples
(py-spy leaves idle threads out), so a missed goal names the code that limits it. Needs py-spy
(``pip install py-spy``; the ``bench`` extra) and permission to ptrace (root, or a child process).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from measures._common import ASSAY_PYTHON, PEERS, offline_env  # noqa: E402

_LINE = re.compile(r":\d+\)$")
_LINE_ANY = re.compile(r":\d+\)")
# leaves that mean "waiting", which py-spy does not always recognise as idle
_IDLE_LEAVES = ("_worker (concurrent/futures/thread.py)", "Condition.wait (threading.py)",
                "Event.wait (threading.py)", "select (selectors.py)",
                "EpollSelector.select (selectors.py)", "_PollLikeSelector.select (selectors.py)",
                "Thread._wait_for_tstate_lock (threading.py)", "Queue.get (queue.py)",
                "WorkerThread.run (anyio/_backends/_asyncio.py)")


def _norm(frame: str) -> str:
    frame = _LINE.sub(")", frame.strip())
    frame = frame.replace(str(HERE.parent / ".venv" / "lib"), "")
    return re.sub(r"python3\.\d+/site-packages/", "", frame)


def summarize(raw: Path, top: int = 18, focus: str | None = None) -> str:
    """Inclusive and self shares per thread from py-spy's collapsed ('raw') output.

    ``focus``: keep only main-thread stacks containing this text (the timed call), so set-up
    and imports do not dilute the shares; other threads are kept whole.
    """
    incl: dict[str, Counter[str]] = defaultdict(Counter)
    self_: dict[str, Counter[str]] = defaultdict(Counter)
    totals: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        # the main thread (whatever py-spy calls it) starts at <module>: keep its timed call only
        if focus and "<module> (" in stack and focus not in _LINE_ANY.sub(")", stack):
            continue
        thread = re.sub(r"^thread \(\d+\): ", "", frames[0]) if frames[0].startswith("thread") \
            else "all"
        thread = re.sub(r"\d+$", "N", thread)  # worker-1, worker-2 ... as one
        funcs = [_norm(f) for f in frames[1:]] if frames[0].startswith("thread") else \
            [_norm(f) for f in frames]
        n = int(count)
        if funcs and funcs[-1] in _IDLE_LEAVES:
            continue
        totals[thread] += n
        for f in set(funcs):
            incl[thread][f] += n
        if funcs:
            self_[thread][funcs[-1]] += n
    grand = sum(totals.values()) or 1
    out = [f"{grand} samples (idle threads and waiting leaves excluded"
           + (f"; main thread only inside {focus!r})" if focus else ")")]
    for thread, total in totals.most_common():
        out.append(f"\n== thread {thread}: {total} samples ({100 * total / grand:.0f}% of all)")
        out.append("  inclusive:")
        for f, n in incl[thread].most_common(top):
            out.append(f"    {100 * n / grand:5.1f}%  {f}")
        out.append("  self:")
        for f, n in self_[thread].most_common(top // 2):
            out.append(f"    {100 * n / grand:5.1f}%  {f}")
    return "\n".join(out)


GIL = False  # --gil: sample only the thread holding the GIL (CPU, not waits)


def spy_args(out: Path, rate: int = 400) -> list[str]:
    spy = shutil.which("py-spy") or str(HERE.parent / ".venv" / "bin" / "py-spy")
    return [spy, "record", "-r", str(rate), "--threads", "--format", "raw", "-o", str(out),
            *(["--gil"] if GIL else [])]


def _record(cmd: list[str], out: Path, rate: int = 400, pid: int | None = None,
            duration: int | None = None) -> None:
    args = spy_args(out, rate)
    if pid is not None:
        args += ["--pid", str(pid), "--subprocesses"]
        if duration:
            args += ["--duration", str(duration)]
        subprocess.run(args, check=True, capture_output=True)
    else:
        scratch = tempfile.mkdtemp(prefix="assay-profile-run-")
        try:
            subprocess.run(args + ["--", *cmd], check=True, env=offline_env(TMPDIR=scratch),
                           stdout=subprocess.DEVNULL)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=["harness", "concurrency", "tracing", "ingest", "stats"])
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--top", type=int, default=18)
    ap.add_argument("--keep", default=None, help="also save the raw py-spy stacks here")
    ap.add_argument("--gil", action="store_true",
                    help="only samples of the thread holding the GIL: where the CPU goes, "
                         "without the waits that threads sharing one GIL otherwise show")
    args = ap.parse_args()
    global GIL
    GIL = args.gil
    tmp = Path(tempfile.mkdtemp(prefix="assay-profile-"))
    raw = tmp / "stacks.txt"
    py = str(ASSAY_PYTHON)
    focus = None
    if args.workload == "harness":
        focus = "evaluate (assay/evaluation/_evaluate.py)"
    if args.workload == "harness":
        _record([py, str(PEERS / "peer_assay.py"), "--n", str(args.n or 10_000)], raw)
    elif args.workload == "concurrency":
        _record([py, str(PEERS / "peer_assay.py"), "--n", str(args.n or 2_000), "--mode",
                 "concurrent", "--concurrency", "100", "--sleep-ms", "20"], raw)
    elif args.workload == "tracing":
        _record([py, str(HERE / "tracing_overhead.py"), "--spans", str(args.n or 20_000),
                 "--repeats", "1"], raw)
    elif args.workload == "stats":
        code = ("import sys; sys.path.insert(0, {!r}); sys.path.insert(0, {!r})\n"
                "from measures._statsdata import cached_sqlite, session_id_for\n"
                "from assay.store import Store\n"
                "p = cached_sqlite([10_000, 100_000, 1_000_000], print)\n"
                "s = Store.open(p)\n"
                "for _ in range(3):\n"
                "    s.projects.read(project_id=session_id_for({:d}), include_stats=True)\n"
                .format(str(HERE), str(HERE.parent / "src"), args.n or 1_000_000))
        _record([py, "-c", code], raw, rate=200)
    else:  # ingest: profile the server while the benchmark's senders load it
        from measures import ingest

        ingest.profile_server(raw, spy_args=spy_args(raw))
    print(summarize(raw, args.top, focus))
    if args.keep:
        shutil.copy(raw, args.keep)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
