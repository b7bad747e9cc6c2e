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
