"""Instructions per llm/tool step that assay's capture adds to a real agent, counted by valgrind.

    .venv/bin/python bench/frameworks_instructions.py [--only langgraph,pydantic-ai,google-adk,...]
        [--answers 20] [--warm N]

``bench/frameworks.py`` times the capture in CPU seconds, which vary by 20-50% from round to
round on a shared machine: too coarse to judge issue 21's goal (at most 5% of the framework's
own time per step). This counts instructions instead, which repeat from run to run: callgrind
counts every thread of the process and C code as well as Python (the framework, assay's hooks,
its writer, and the store's fold of what the answers journaled). Each mode runs in a process of
its own under ``valgrind --tool=callgrind --instr-atstart=no``; counting is switched on
(``callgrind_control -i on``) only around ``--answers`` answers after a warm-up of as many
(``--warm``: what a process pays once, such as preparing its statements, stays out), with the
writer's flush and the fold of what they journaled (``settle``) inside the window. The modes
are ``bench/frameworks.py``'s: ``off`` (the framework's tracing off), ``sdk`` (its tracing on,
nothing of assay's recording), ``assay`` (the agent inside an assay run, captured and stored),
and ``assay-process``: ``assay`` with the store's fold in a process of its own
(``ASSAY_BACKGROUND_FOLD=process``), which valgrind does not follow, so the agent's process
alone is counted, up to its runs journaled. Each window starts after a full collection of the
garbage collector, so that none falls inside one mode's window and not another's.
The scripted model runs natively in a process of its own, not counted. For LangGraph
(``langgraph``: its prebuilt ``create_react_agent``; ``langchain``: its successor in LangChain
1.x, ``langchain.agents.create_agent``), two more modes set assay beside the tracer LangGraph
users otherwise run, LangSmith's own (``LangChainTracer`` from ``langchain-core``, its
``langsmith`` client posting zstd-compressed multipart batches to ``frameworks._LangSmithSink``,
a loopback endpoint in another process that keeps nothing): ``langsmith`` (the answers, then
every run posted) and ``langsmith-answers`` (the answers alone), the same trace (16 runs an
answer, 8 with ``create_agent``).

Instructions are not time: cache misses, system calls and the loopback round trips are left
out. But a change in them is a change in the work done, so the ratio ``assay`` / ``off`` is
the capture's cost without the machine's noise. The tracing writer's tick and linger are scaled
by ~50 in the measured process, as valgrind slows it: its batches then hold about as many runs
as at full speed (before stop 46 they held an answer's, and each batch's fixed costs, an
append and a fold transaction, counted several times over). Needs valgrind (Debian's
``valgrind``). Prints figures, never asserts them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "src"))
sys.path.insert(0, _HERE)
os.environ.pop("OPENAI_API_KEY", None)  # nothing may be exported anywhere

MODES = ("off", "sdk", "assay")
# langchain: LangChain 1.x's create_agent, the successor of LangGraph's create_react_agent
FRAMEWORKS = ("langgraph", "langchain", "openai-agents", "pydantic-ai", "google-adk")


def _count(on: bool) -> None:
    """Switch callgrind's counting for this process (a no-op outside valgrind)."""
    if os.environ.get("ASSAY_BENCH_CALLGRIND"):
        subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                       check=True, capture_output=True)


def child(framework: str, mode: str, answers: int, warm: int) -> None:
    """One mode's answers, counted (this process runs under valgrind). ``assay-answers``: the
    answers alone, without the flush and fold after them. ``assay-process``: the store's fold
    in a process of its own (``ASSAY_BACKGROUND_FOLD=process``, not counted: valgrind does not
    follow it), the window ending once the answers' runs are journaled."""
    answers_only = mode in ("assay-answers", "langsmith-answers")
    fold_elsewhere = mode == "assay-process"
    langsmith = mode.startswith("langsmith")
    mode = "assay" if mode.startswith("assay") else "langsmith" if langsmith else mode
    import frameworks as fw

    from assay.tracing import _writer

    # Under valgrind (~50x slower) the writer's 0.2 s linger would hold one answer's runs, where
    # at full speed it holds dozens: each journal append's and fold transaction's fixed cost
    # would be counted per few runs instead of per hundreds. Scaled by ~50, a batch holds about
    # what it holds at full speed (here: every counted answer, stored at the window's flush).
    defaults = dict(_writer.RunWriter.__init__.__kwdefaults__ or {})
    defaults.update(interval=1.0, linger=10.0)
    _writer.RunWriter.__init__.__kwdefaults__ = defaults

    from assay.client import Client
    from assay.store._background import wait_idle
    from assay.tracing import trace

    scratch = tempfile.mkdtemp(prefix="assay-ir-")
    client = Client(database_url=os.path.join(scratch, "a.db"))
    with fw._ModelProcess() as base_url, contextlib.ExitStack() as stack:
        run = fw.agent_for(framework, base_url)
        if framework == "openai-agents":
            fw._set_sdk_tracing(mode == "off")
        if langsmith:
            # its compression thread's flush interval (0.5 s) scaled by ~50 as the writer's
            # linger is: under valgrind each post would hold a few answers' runs, not dozens
            tracer, ls_client = fw.langsmith_tracer(stack.enter_context(fw._LangSmithSink()),
                                                    flush_interval=25.0)

        async def answer(k: int) -> None:
            if mode == "assay":
                async with trace("example", client=client, enabled=True):
                    await run(mode, k)
            elif mode == "langsmith":
                await run.graph.ainvoke({"messages": [("user", fw.question(k))]},
                                        {"callbacks": [tracer]})
            else:
                await run(mode, k)

        def settle() -> None:
            if langsmith:  # every run serialized, compressed and posted to the sink
                tracer.wait_for_futures()
                ls_client.flush()
                return
            client.flush()
            if not fold_elsewhere:
                client._store.journal.settle()
                wait_idle(client._store)

        def folded_elsewhere() -> None:
            """``assay-process``: wait (a plain read) until the other process folded them."""
            while fold_elsewhere and client._store.journal.backlog(1):
                time.sleep(0.01)

        async def go() -> None:
            for k in range(warm):
                await answer(k)
            settle()  # the warm-up's runs stored before counting starts
            folded_elsewhere()
            # every mode starts its window with the collector's generations alike: without
            # this a full collection (~70M instructions, ~4 points of a step) fell inside one
            # mode's window and after another's, by what the warm-up had allocated (stop 48)
            gc.collect()
            _count(True)
            for k in range(warm, warm + answers):
                await answer(k)
            if not answers_only:
                settle()  # the writer's and (in this process) the fold's work, counted
            _count(False)
            folded_elsewhere()  # (not counted: the store is removed after)

        asyncio.run(go())
    client.close()
    shutil.rmtree(scratch, ignore_errors=True)  # the store's file: nothing reads it after


def _measure(framework: str, mode: str, answers: int, warm: int,
             out_dir: str) -> tuple[int, int]:
    """Instructions counted in ``mode``'s window (a valgrind process of its own): (on the
    thread that runs the agent, in all threads)."""
    out = os.path.join(out_dir, f"cg.{framework}.{mode}")
    # the store's fold at the end, in one go: the background folder's batches follow the clock,
    # and under valgrind (~50x slower) each would hold a few answers' runs instead of hundreds
    env = dict(os.environ, ASSAY_BENCH_CALLGRIND="1", PYTHONWARNINGS="ignore",
               ASSAY_BACKGROUND_FOLD="process" if mode == "assay-process" else "0")
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
         f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__), "--child",
         framework, mode, str(answers), str(warm)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{framework} {mode}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    per_thread: dict[str, int] = {}
    for name in os.listdir(out_dir):
        # this mode's files alone: "assay-01" and not "assay-answers-01" (before stop 47 a
        # prefix test took both, and the process figure of "assay" mixed threads of the two)
        thread = re.fullmatch(rf"cg\.{re.escape(framework)}\.{re.escape(mode)}-(\d+)", name)
        if thread:
            with open(os.path.join(out_dir, name)) as fh:
                for line in fh:
                    found = re.match(r"totals: (\d+)", line)  # (summary: before the switch)
                    if found:
                        per_thread[thread.group(1)] = int(found.group(1))
    if "01" not in per_thread:
        raise RuntimeError(f"{framework} {mode}: no instruction totals in {out_dir}")
    return per_thread["01"], sum(per_thread.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(FRAMEWORKS))
    ap.add_argument("--answers", type=int, default=20, help="answers counted per mode")
    ap.add_argument("--warm", type=int, default=None,
                    help="answers before counting starts (default: as many as --answers)")
    ap.add_argument("--child", nargs=4, metavar=("FRAMEWORK", "MODE", "ANSWERS", "WARM"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), int(args.child[3]))
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    from frameworks import STEPS

    wanted = [f for f in args.only.split(",") if f]
    unknown = set(wanted) - set(FRAMEWORKS)
    if unknown:
        sys.exit(f"unknown framework(s) {sorted(unknown)}: choose from {', '.join(FRAMEWORKS)}")
    out_dir = tempfile.mkdtemp(prefix="assay-bench-ir-")
    # as many answers before counting as counted: a fold of that many runs prepares its
    # statements (a 64-row insert, once a process) before the window, which then holds the
    # steady state's per-step work (3 answers left those to the window: ~0.7 points of the
    # Agents SDK's process figure, stop 53)
    warm = args.answers if args.warm is None else args.warm
    jobs = [(f, m) for f in wanted for m in (*MODES, "assay-answers", "assay-process")]
    graphs = [f for f in ("langgraph", "langchain") if f in wanted]  # LangSmith's tracer too
    jobs += [(f, m) for f in graphs for m in ("langsmith-answers", "langsmith")]
    print(f"{args.answers} answers per mode after {warm} uncounted, {STEPS} steps per answer "
          f"(2 llm + 1 tool), "
          f"counted under callgrind, two processes at a time ...", flush=True)
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(
            lambda job: _measure(job[0], job[1], args.answers, warm, out_dir), jobs),
            strict=True))
    steps = args.answers * STEPS
    print("\ninstructions per step; 'agent thread': the thread that runs the agent, during the "
          "answers (the framework and assay's hooks); 'process': every thread, with the writer's "
          "flush and the store's fold of the answers' runs (the writer's linger scaled to "
          "valgrind's pace: its batches as large as at full speed, stored and folded at the end); "
          "'fold process': every thread of the agent's process, the store's fold in a process "
          "of its own (ASSAY_BACKGROUND_FOLD=process), which is not counted")
    print(f"{'framework':<14} {'what':<13} {'off':>12} {'sdk':>12} {'assay':>12} "
          f"{'assay - off':>12} {'ratio':>8} {'(vs sdk)':>9}")
    for f in wanted:
        rows = (("agent thread", [counts[(f, m)][0] for m in ("off", "sdk", "assay-answers")]),
                ("process", [counts[(f, m)][1] for m in MODES]),
                ("fold process", [counts[(f, m)][1] for m in ("off", "sdk", "assay-process")]))
        for what, values in rows:
            off, sdk, on = (v / steps for v in values)
            print(f"{f:<14} {what:<13} {off:>12,.0f} {sdk:>12,.0f} {on:>12,.0f} "
                  f"{on - off:>12,.0f} {(on - off) / off * 100:>7.2f}% "
                  f"{(on - sdk) / off * 100:>8.2f}%   "
                  f"{'met' if on - off <= 0.05 * off else 'NOT met'} (goal <= 5%)")
    print("\nwhere the process's points go (of 'off'): the agent's thread during the answers "
          "(assay's hooks), the other threads (the writer: building, converting and journaling "
          "the runs), the agent's thread after them (the flush and the fold)")
    for f in wanted:
        off, ans, on = (counts[(f, m)] for m in ("off", "assay-answers", "assay"))
        base = off[1]
        hooks = (ans[0] - off[0]) / base * 100
        writer = ((on[1] - on[0]) - (off[1] - off[0])) / base * 100
        fold = (on[0] - ans[0]) / base * 100
        print(f"{f:<14} hooks {hooks:+6.2f}   writer {writer:+6.2f}   flush and fold "
              f"{fold:+6.2f}   (sum {hooks + writer + fold:+6.2f}%)")
    for f in graphs:
        off = counts[(f, "off")]
        print(f"\nthe same {f} agent traced by LangSmith's own tracer instead "
              "(LangChainTracer, the official client's runs serialized, zstd-compressed and "
              "posted to a loopback sink in another process), over 'off':")
        for who, answers_mode, whole_mode in (("assay", "assay-answers", "assay"),
                                              ("langsmith", "langsmith-answers", "langsmith")):
            thread = (counts[(f, answers_mode)][0] - off[0]) / off[0] * 100
            whole = (counts[(f, whole_mode)][1] - off[1]) / off[1] * 100
            print(f"{who:<10} agent thread {thread:+6.2f}%   process {whole:+6.2f}%")
    print(f"\ncallgrind files (callgrind_annotate them for where the instructions go): {out_dir}")


if __name__ == "__main__":
    main()
