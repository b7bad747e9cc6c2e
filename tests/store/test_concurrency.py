"""Several processes writing one SQLite file: nothing lost, no "database is locked"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from assay.client import Client
from assay.store import HEAD

WRITER = r"""
import sys
from assay.client import Client
from assay.store import HEAD
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = Client(database_url=path)
# interleave reads and writes: a read transaction that later writes is where naive SQLite
# setups hit "database is locked"
for i in range(n):
    list(client.list_examples(dataset_name="shared", limit=5))
    client.create_examples(dataset_name="shared", examples=[
        {"inputs": {"writer": tag, "i": i, "j": j}} for j in range(5)])
    client.create_example({"writer": tag, "i": i, "single": True}, dataset_name="shared")
print("ok")
"""


def test_two_processes_write_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    Client(database_url=path).create_dataset("shared")
    n = 60
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in ("a", "b", "c")]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        assert "locked" not in err and out.strip() == "ok"
    examples = list(Client(database_url=path).list_examples(dataset_name="shared"))
    assert len(examples) == 3 * n * 6
    for tag in "abc":
        mine = [e.inputs for e in examples if e.inputs["writer"] == tag]
        assert sorted((x["i"], x.get("j", -1)) for x in mine) == sorted(
            [(i, j) for i in range(n) for j in range(5)] + [(i, -1) for i in range(n)])


def test_processes_open_a_new_file_at_once(tmp_path: Path) -> None:
    """Four processes open each of six brand-new stores at the same instant (pytest-xdist's
    workers do): switching a new file to WAL once answered "database is locked" at once,
    without waiting, and the worker lost its runs. Every open succeeds; one migrates."""
    import time

    paths = [str(tmp_path / f"fresh{k}.db") for k in range(6)]
    code = ("import sys, time\n"
            "from assay.store import Store\n"
            "t0 = float(sys.argv[2])\n"
            "for k, path in enumerate(sys.argv[1].split(',')):\n"
            "    while time.time() < t0 + 0.3 * k:\n"
            "        pass\n"
            "    print(Store.open(path).schema_version(), flush=True)\n")
    t0 = str(time.time() + 3.0)  # after every process has imported assay
    procs = [subprocess.Popen([sys.executable, "-c", code, ",".join(paths), t0],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.split() == [HEAD] * len(paths)
