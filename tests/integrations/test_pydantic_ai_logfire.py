"""pydantic-ai instrumented by Pydantic's Logfire (``logfire.instrument_pydantic_ai()``), then
evaluated by assay: the user's Logfire spans go on, and the agent's model and tool calls are
runs in assay too, once each, with or without an ``AssaySpanProcessor`` the user added to
Logfire. Each case runs in a process of its own (Logfire sets the global tracer provider and
pydantic-ai's global instrumentation)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("logfire", reason="needs the dev extra (logfire)")
pytest.importorskip("pydantic_ai", reason="needs assay[pydantic-ai]")

from assay.demo import ScriptedModelServer  # noqa: E402 - after the skip

SCRIPT = textwrap.dedent('''
    import json, sys
    import logfire
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exported = InMemorySpanExporter()  # what Logfire exports (as it would to its service)
    processors = [SimpleSpanProcessor(exported)]
    if sys.argv[1] == "with-processor":  # the README's advice before assay hooked Logfire
        from assay.tracing.otel import AssaySpanProcessor
        processors.append(AssaySpanProcessor())
    logfire.configure(send_to_logfire=False, console=False,
                      additional_span_processors=processors)
    logfire.instrument_pydantic_ai()

    from pydantic_ai import Agent
    from assay.client import Client
    from assay.evals import ReliabilityEvaluator
    from assay.evaluation import evaluate

    agent = Agent("openai:gpt-4o-mini", name="geo")

    @agent.tool_plain
    def lookup_city(city: str) -> str:
        return f"{city} has 2102650 people"

    client = Client()
    rows = list(evaluate(agent, client=client, evaluators=[
        ReliabilityEvaluator(["lookup_city"]).as_evaluator()], data=[
        {"inputs": {"question": "How many people live in Paris?"}, "outputs": {}}]))
    client.flush()
    [row] = rows
    runs = client.list_runs(trace_id=row["run"].trace_id)
    print(json.dumps({
        "runs": [[r.run_type, r.name, r.prompt_tokens or 0] for r in runs],
        "scores": [r.score for r in row["evaluation_results"]["results"]],
        "logfire": sorted(s.name for s in exported.get_finished_spans())}))
''')


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.mark.parametrize("setup", ["logfire-only", "with-processor"])
def test_a_logfire_users_agent_is_traced_once(setup: str, model: ScriptedModelServer,
                                             tmp_path: Path) -> None:
    env = {**os.environ, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "scripted",
           "ASSAY_DATABASE_URL": f"sqlite:///{tmp_path / 'assay.db'}"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, setup], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    kinds = [kind for kind, _, _ in out["runs"]]
    # the example's root, pydantic-ai's agent run, two model requests and the tool call: once
    assert sorted(kinds) == ["chain", "chain", "llm", "llm", "tool"], out["runs"]
    assert all(tokens > 0 for kind, _, tokens in out["runs"] if kind == "llm")
    assert ["tool", "lookup_city", 0] in out["runs"]
    assert out["scores"] == [1.0]  # the tool call, read from the trace
    assert out["logfire"] == ["chat gpt-4o-mini", "chat gpt-4o-mini",
                              "execute_tool lookup_city", "invoke_agent geo"]
