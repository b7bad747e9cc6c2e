"""Test support: realistic experiments written straight into a store (no evaluate()), and a
live uvicorn server on 127.0.0.1, for the analysis, UI and CLI tests.

Each example run is a trace as the SDKs send it: a root ``chain`` run with an ``llm`` child
(usage_metadata with explicit costs, ``new_token`` events) and a ``tool`` child, plus feedback
on the root. ``outcome(i, example, rep)`` decides what happened to example ``i``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from assay._ids import dotted_segment, new_id
from assay.schemas import Example, TracerSession
from assay.store import Store


@dataclass
class Outcome:
    latency: float = 1.0  # seconds (root run)
    prompt_tokens: int = 100
    completion_tokens: int = 20
    cost: float = 0.001  # USD of the llm call
    first_token: float | None = 0.2  # seconds after the llm call started; None = no streaming
    error: str | None = None
    output: str = "ok"
    scores: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


T0 = datetime(2025, 1, 1, tzinfo=UTC)


def make_dataset(store: Store, name: str, n: int, *,
                 splits: Sequence[str] = ("train", "test")) -> tuple[Any, list[Example]]:
    ds = store.datasets.create(name, description=f"{n} questions")
    examples = store.examples.create_many(
        [{"inputs": {"question": f"q{i}"}, "outputs": {"answer": f"a{i}"},
          "split": splits[i % len(splits)]} for i in range(n)],
        dataset_id=ds.id)
    return ds, examples


def add_experiment(
    store: Store,
    dataset_id: Any,
    examples: Sequence[Example],
    name: str,
    outcome: Callable[[int, Example, int], Outcome],
    *,
    repetitions: int = 1,
    start: datetime = T0,
) -> TracerSession:
    project = store.projects.create(
        name, reference_dataset_id=dataset_id, start_time=start,
        metadata={"num_repetitions": repetitions, "dataset_splits": ["base"]})
    posts: list[dict[str, Any]] = []
    feedback: list[dict[str, Any]] = []
    t = start
    for rep in range(repetitions):
        for i, ex in enumerate(examples):
            o = outcome(i, ex, rep)
            root_id, llm_id, tool_id = new_id(), new_id(), new_id()
            root_order = dotted_segment(t, root_id)
            llm_start = t + timedelta(seconds=o.latency * 0.1)
            llm_end = t + timedelta(seconds=o.latency * 0.6)
            tool_start = llm_end
            tool_end = t + timedelta(seconds=o.latency * 0.9)
            end = t + timedelta(seconds=o.latency)
            events = []
            if o.first_token is not None:
                first = llm_start + timedelta(seconds=o.first_token)
                events.append({"name": "new_token", "time": first.isoformat()})
            common = {"trace_id": str(root_id), "session_id": str(project.id)}
            posts.append({**common, "id": str(root_id), "name": "agent", "run_type": "chain",
                          "start_time": t.isoformat(), "end_time": end.isoformat(),
                          "inputs": dict(ex.inputs),
                          "outputs": None if o.error else {"answer": o.output},
                          "error": o.error, "reference_example_id": str(ex.id),
                          "dotted_order": root_order})
            posts.append({**common, "id": str(llm_id), "name": "ChatModel", "run_type": "llm",
                          "parent_run_id": str(root_id),
                          "dotted_order": root_order + "." + dotted_segment(llm_start, llm_id),
                          "start_time": llm_start.isoformat(), "end_time": llm_end.isoformat(),
                          "inputs": {"messages": [
                              {"role": "user", "content": ex.inputs["question"]}]},
                          "outputs": {"content": o.output, "tool_calls": [
                              {"name": "search", "args": {"query": ex.inputs["question"]}}]},
                          "events": events,
                          "extra": {"metadata": {
                              "ls_provider": "openai", "ls_model_name": "gpt-test",
                              "usage_metadata": {
                                  "input_tokens": o.prompt_tokens,
                                  "output_tokens": o.completion_tokens,
                                  "total_tokens": o.prompt_tokens + o.completion_tokens,
                                  "input_cost": o.cost * 0.75,
                                  "output_cost": o.cost * 0.25}}}})
            posts.append({**common, "id": str(tool_id), "name": "search", "run_type": "tool",
                          "parent_run_id": str(root_id),
                          "dotted_order": root_order + "." + dotted_segment(tool_start, tool_id),
                          "start_time": tool_start.isoformat(), "end_time": tool_end.isoformat(),
                          "inputs": {"query": ex.inputs["question"]},
                          "outputs": {"result": f"found {ex.inputs['question']}"}})
            for key, score in o.scores.items():
                feedback.append({"run_id": str(root_id), "key": key, "score": score,
                                 "comment": f"{key} of example {i}"})
            for key, label in o.labels.items():
                feedback.append({"run_id": str(root_id), "key": key, "value": label})
            t = end + timedelta(milliseconds=10)
    store.runs.upsert(posts=posts)
    if feedback:
        store.feedback.create_many(feedback)
    return project


class LiveServer:
    """uvicorn in a thread on a socket bound up front (no race for a "free" port)."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
