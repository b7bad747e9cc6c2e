"""A chain's tokens, cost and first token read back summed over the llm calls under it
(``Client.read_run`` / ``list_runs`` on the embedded store, as LangSmith's reads give them)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from assay._ids import dotted_segment, utcnow


def _llm_extra(prompt: int, completion: int) -> dict[str, Any]:
    return {"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                         "usage_metadata": {"input_tokens": prompt, "output_tokens": completion,
                                            "total_tokens": prompt + completion}}}


def test_a_chain_reads_back_with_the_usage_of_the_llm_calls_under_it(client: Any) -> None:
    project = f"roll-up-{uuid.uuid4().hex[:8]}"
    t0 = utcnow()
    root, step, tool, llm1, llm2 = (uuid.uuid4() for _ in range(5))
    orders: dict[uuid.UUID | None, str] = {}

    def post(run_id: uuid.UUID, name: str, run_type: str, parent: uuid.UUID | None,
             at: int, **kw: Any) -> None:
        start = t0 + timedelta(milliseconds=at)
        own = dotted_segment(start, run_id)  # (as LangSmith's SDKs send them)
        orders[run_id] = f"{orders[parent]}.{own}" if parent else own
        client.create_run(name, {"q": name}, run_type, id=run_id, project_name=project,
                          parent_run_id=parent, trace_id=root, start_time=start,
                          dotted_order=orders[run_id], **kw)
        client.update_run(run_id, end_time=start + timedelta(milliseconds=50),
                          outputs={"a": name})

    post(root, "agent", "chain", None, 0)
    post(step, "plan", "chain", root, 1)
    post(llm1, "chat", "llm", step, 2, extra=_llm_extra(100, 20),
         events=[{"name": "new_token", "time": (t0 + timedelta(milliseconds=30)).isoformat()}])
    post(tool, "lookup", "tool", root, 60)
    post(llm2, "chat", "llm", root, 70, extra=_llm_extra(200, 40))
    client.flush()

    (top,) = client.list_runs(project_name=project, is_root=True)
    tree = client.read_run(root, load_child_runs=True)
    for run in (top, tree):
        assert (run.prompt_tokens, run.completion_tokens, run.total_tokens) == (300, 60, 360)
        assert run.total_cost and run.total_cost > 0
        assert run.first_token_time == t0 + timedelta(milliseconds=30)
    by_name = {r.name: r for r in client.list_runs(project_name=project) if r.run_type != "llm"}
    assert by_name["plan"].total_tokens == 120 and by_name["lookup"].total_tokens is None
    llms = sorted(r.total_tokens for r in client.list_runs(project_name=project, run_type="llm"))
    assert llms == [120, 240]  # an llm run's own usage, never a sum
    (plan,) = [c for c in tree.child_runs or () if c.name == "plan"]
    assert plan.total_tokens == 120  # (child runs of a read tree too)
    # what the store keeps is the llm calls' own usage: the project's total counts each once
    stats = client.read_project(project_name=project, include_stats=True)
    assert stats.total_tokens == 360
