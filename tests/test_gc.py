"""relaxed_gc: fewer collections inside the block, the process's settings as they were after.

Each check runs in a fresh interpreter: the suite's own servers (relaxed_gc(freeze=True) for
their lifetime) would otherwise be part of the state under test.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PRELUDE = """
import gc, threading, weakref
from assay._gc import YOUNG, relaxed_gc

class Node:
    other = None

def thread_inside_a_block():
    \"\"\"Another thread inside a relaxed_gc block until the returned event is set.\"\"\"
    inside, leave = threading.Event(), threading.Event()

    def other():
        with relaxed_gc():
            inside.set()
            leave.wait()

    t = threading.Thread(target=other)
    t.start()
    inside.wait()
    return t, leave
"""


def _run(code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_thresholds_restored_and_survivors_promoted_without_a_scan() -> None:
    _run("""
        before = gc.get_threshold()
        with relaxed_gc():
            assert gc.get_threshold()[0] >= YOUNG
            kept = [Node() for _ in range(1000)]
        assert gc.get_threshold() == before
        oldest = {id(o) for o in gc.get_objects(generation=2)}
        assert all(id(n) in oldest for n in kept)  # promoted, as a full scan would have
        assert gc.get_freeze_count() == 0
    """)


def test_cycles_made_inside_are_still_collected() -> None:
    _run("""
        with relaxed_gc():
            a, b = Node(), Node()
            a.other, b.other = b, a
            gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None
    """)


def test_freeze_mode_and_a_process_own_freeze_are_left_as_they_were() -> None:
    _run("""
        with relaxed_gc(freeze=True):
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() == 0
        gc.freeze()  # a forking server's start-up, say
        frozen = gc.get_freeze_count()
        with relaxed_gc():
            kept = [Node() for _ in range(100)]
        assert gc.get_freeze_count() == frozen
    """)


def test_overlapping_blocks_in_threads_restore_the_process_thresholds() -> None:
    _run("""
        gc.set_threshold(900, 11, 12)
        with relaxed_gc():
            t, leave = thread_inside_a_block()
        assert gc.get_threshold()[0] >= YOUNG  # the other block is still inside
        leave.set()
        t.join()
        assert gc.get_threshold() == (900, 11, 12)
        with relaxed_gc(freeze=True):
            with relaxed_gc(freeze=True):
                pass
            assert gc.get_freeze_count() > 0  # the outer block's freeze holds
        assert gc.get_freeze_count() == 0
    """)


def test_a_forked_child_leaves_the_blocks_of_threads_it_does_not_have() -> None:
    """A writer's or folder's thread inside a block at the fork never leaves it in the child:
    the child gets the process's thresholds back; the forking thread's own block holds."""
    _run("""
        import os
        gc.set_threshold(900, 11, 12)
        t, leave = thread_inside_a_block()
        for own_block in (False, True):
            r, w = os.pipe()
            if own_block:
                block = relaxed_gc()
                block.__enter__()
            pid = os.fork()
            if pid == 0:  # the child: only this thread
                if own_block:
                    ok = gc.get_threshold()[0] >= YOUNG
                    block.__exit__(None, None, None)
                    ok = ok and gc.get_threshold() == (900, 11, 12)
                else:
                    ok = gc.get_threshold() == (900, 11, 12)
                with relaxed_gc():
                    ok = ok and gc.get_threshold()[0] >= YOUNG
                ok = ok and gc.get_threshold() == (900, 11, 12)
                os.write(w, b"1" if ok else b"0")
                os._exit(0)
            os.waitpid(pid, 0)
            assert os.read(r, 1) == b"1", f"child, own block {own_block}"
            if own_block:
                block.__exit__(None, None, None)
        assert gc.get_threshold()[0] >= YOUNG  # the parent's thread is still inside
        leave.set()
        t.join()
        assert gc.get_threshold() == (900, 11, 12)
    """)


def test_build_many_relaxes_the_collector_only_for_many_rows() -> None:
    _run("""
        from assay._gc import BULK, build_many

        before = gc.get_threshold()
        seen = []
        def build(row):
            seen.append(gc.get_threshold()[0])
            return [row]

        assert build_many(build, range(BULK - 1)) == [[i] for i in range(BULK - 1)]
        assert set(seen) == {before[0]}
        seen.clear()
        assert build_many(build, list(range(BULK))) == [[i] for i in range(BULK)]
        assert min(seen) >= YOUNG
        assert gc.get_threshold() == before
        try:
            build_many(lambda row: 1 / 0, list(range(BULK)))
        except ZeroDivisionError:
            pass
        assert gc.get_threshold() == before  # restored when a row fails too
    """)
