"""The server's background folder: database statements and CPU while idle and under ingest.

    .venv/bin/python bench/folder_wakeups.py [--seconds 3] [--rate 200]

``polling`` approximates the folder before it woke on appends: ``Folder(interval=0.05)``
probes every 50 ms while nothing is appended, as the old loop did (under load the old loop
also probed every 50 ms; this one then wakes per idle gap, so the loaded row is only a rough
comparison). ``waking`` is the default (sleeps until an append; a fallback probe each second).
Figures: statements the folder thread sent per second (SQLAlchemy events), and this process's
CPU time per wall second (the appending loop included). The machine is shared: load shown.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def _run() -> dict[str, Any]:
    rid = str(uuid.uuid4())
    start = datetime.now(UTC)
    return {"id": rid, "trace_id": rid, "name": "r", "run_type": "chain",
            "start_time": start.isoformat(), "session_name": "bench",
            "dotted_order": start.strftime("%Y%m%dT%H%M%S%fZ") + rid}


def measure(interval: float | None, seconds: float, rate: float) -> tuple[float, float]:
    """(folder statements per second, process CPU seconds per second) over ``seconds``,
    appending ``rate`` batches per second (0: idle)."""
    from sqlalchemy import event

    from assay.server._folder import Folder
    from assay.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "fold.db")
        count = [0]

        @event.listens_for(store.engine, "before_cursor_execute")
        def _count(*_: Any) -> None:
            if threading.current_thread().name == "assay-fold":
                count[0] += 1

        folder = Folder(store) if interval is None else Folder(store, interval=interval)
        folder.start()
        time.sleep(0.3)
        count[0] = 0
        cpu, wall = time.process_time(), time.monotonic()
        end = wall + seconds
        while (now := time.monotonic()) < end:
            if rate:
                store.journal.append_runs([_run()])
                time.sleep(max(0.0, 1 / rate - (time.monotonic() - now)))
            else:
                time.sleep(0.05)
        used = time.process_time() - cpu
        folder.stop()
        store.settle()
        store.close()
    return count[0] / seconds, used / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for label, rate in (("idle", 0.0), (f"{args.rate:.0f} appends/s", args.rate)):
        old = measure(0.05, args.seconds, rate)
        new = measure(None, args.seconds, rate)
        print(f"{label:16} polling: {old[0]:6.1f} folder statements/s, process CPU "
              f"{old[1] * 100:5.1f}% | waking: {new[0]:6.1f} statements/s, CPU "
              f"{new[1] * 100:5.1f}%")


if __name__ == "__main__":
    main()
