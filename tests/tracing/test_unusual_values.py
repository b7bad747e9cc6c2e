"""A traced call's inputs the JSON encoders refuse (binary bytes, an object whose repr raises)
keep the run and its children: stored with a stand-in (base64 text; a note), not rejected."""

from __future__ import annotations

import base64
from typing import Any

from assay import Client, traceable
from assay.tracing import tracing_context


class NoRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@traceable(name="child")
def _child(x: Any) -> Any:
    return x


@traceable(name="parent")
def _parent(value: Any) -> int:
    _child("c")
    return 1


def test_binary_and_unprintable_inputs_keep_their_runs(sqlite_url: str) -> None:
    client = Client(database_url=sqlite_url)
    png = b"\x89PNG\r\n\x1a\n\x00"
    with tracing_context(enabled=True, client=client, project_name="odd-values"):
        _parent(png)
        _parent({"nested": [png], "text": b"hello"})
        _parent(NoRepr())
    client.flush()
    roots = sorted(client.list_runs(project_name="odd-values", is_root=True),
                   key=lambda r: r.start_time)
    assert [r.inputs["value"] for r in roots] == [
        base64.b64encode(png).decode(),
        {"nested": [base64.b64encode(png).decode()], "text": base64.b64encode(b"hello").decode()},
        "<NoRepr object (its repr failed)>"]
    children = list(client.list_runs(project_name="odd-values", is_root=False))
    assert len(children) == 3 and all(c.dotted_order.count(".") == 1 for c in children)


FIRST_CALL = '''
import time
from assay import Client, traceable

@traceable
def f():
    return time.time()

entered = f()
client = Client()
client.flush()
(run,) = client.list_runs()
print(entered - run.start_time.timestamp())
'''


def test_the_first_traced_call_starts_after_its_store_is_created(tmp_path: Any) -> None:
    """The default store created on a process's first traced call (~0.3 s: the file, its
    migrations) was inside that call's run, before the call itself began."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSAY_", "LANGSMITH_"))}
    env["ASSAY_TRACING"] = "true"
    out = subprocess.run([sys.executable, "-c", FIRST_CALL], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    gap = float(out.stdout.strip().splitlines()[-1])
    assert (tmp_path / ".assay" / "assay.db").exists()
    assert gap < 0.15  # the run's start to the call's first line: no store creation between
