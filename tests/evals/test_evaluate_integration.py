"""The three evaluators inside evaluate(): passed as objects, they write feedback to the store."""

from __future__ import annotations

from typing import Any

from llm.fake_openai import FakeLLMServer, chat, verdict

from assay.evals import AccuracyEvaluator, PerformanceEvaluator, ReliabilityEvaluator
from assay.evaluation import evaluate
from assay.llm import JudgeOptions, OpenAIJudge
from assay.tracing import trace, traceable, tracing_context

FAST = JudgeOptions(timeout=5, max_retries=0, max_output_retries=0)


@traceable(run_type="tool")
def search(query: str) -> str:
    return "Paris is the capital of France." if "France" in query else "Rome is in Italy."


@traceable(run_type="tool")
def summarize(text: str) -> str:
    return text.split(" ")[0]


def target(inputs: dict[str, Any]) -> dict[str, Any]:
    found = search(inputs["question"])
    if "skip" in inputs["question"]:
        return {"answer": found}
    return {"answer": summarize(found)}


def answer_only(question: str) -> str:
    return summarize(search(question))


def test_all_three_write_feedback(client, server: FakeLLMServer) -> None:  # type: ignore[no-untyped-def]
    ds = client.create_dataset("capitals")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"question": "Capital of France?"}, "outputs": {"answer": "Paris"}},
        {"inputs": {"question": "Capital of Italy? skip"}, "outputs": {"answer": "Rome"}},
    ])
    server.push(chat(verdict(score=10)), chat(verdict(score=4, is_met=False)))
    judge = OpenAIJudge("judge-model", base_url=server.base_url, options=FAST)
    results = evaluate(
        target, data="capitals", client=client,
        evaluators=[
            AccuracyEvaluator(judge),
            ReliabilityEvaluator(["search", "summarize"], order_matters=True),
            PerformanceEvaluator(answer_only, num_iterations=2, warmup_runs=0),
        ])
    rows = list(results)
    assert len(rows) == 2
    by_question = {}
    for row in rows:
        by_question[row["example"].inputs["question"]] = {
            r.key: r for r in row["evaluation_results"]["results"]}
    france = by_question["Capital of France?"]
    italy = by_question["Capital of Italy? skip"]
    assert france["reliability"].score == 1.0
    assert france["reliability"].comment == "All reliability checks passed."
    assert italy["reliability"].score == 0.0
    assert "Missing expected tool calls: ['summarize']" in italy["reliability"].comment
    assert {france["accuracy"].score, italy["accuracy"].score} == {10, 4}
    for fb in (france, italy):
        assert fb["latency_seconds"].score > 0
        assert fb["memory_peak_bytes"].score >= 0
        assert {"latency_p95_seconds", "memory_increase_bytes", "accuracy_is_met"} <= set(fb)

    stats = client.read_project(project_name=results.experiment_name, include_stats=True)
    fs = stats.feedback_stats
    assert fs["reliability"].n == 2 and fs["reliability"].avg == 0.5
    assert fs["accuracy"].n == 2 and fs["accuracy"].avg == 7
    assert fs["accuracy_is_met"].avg == 0.5
    assert fs["latency_seconds"].n == 2 and fs["memory_peak_bytes"].n == 2
    stored = list(client.list_feedback(run_ids=[r["run"].id for r in rows]))
    assert len(stored) == 2 * (2 + 1 + 4)


def test_expected_tool_calls_from_the_example(client) -> None:  # type: ignore[no-untyped-def]
    ds = client.create_dataset("per-example")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"question": "Capital of France?"},
         "outputs": {"expected_tool_calls": ["search", "summarize"]}},
        {"inputs": {"question": "Capital of Italy? skip"},
         "outputs": {"expected_tool_calls": [{"name": "search", "max_times": 1}]}},
    ])
    results = evaluate(target, data="per-example", client=client,
                       evaluators=[ReliabilityEvaluator(None, exact_match=True)])
    scores = sorted((row["example"].inputs["question"], row["evaluation_results"]["results"][0]
                     .score) for row in results)
    assert scores == [("Capital of France?", 1.0), ("Capital of Italy? skip", 1.0)]


def test_run_without_children_is_read_back_through_the_client(client) -> None:  # type: ignore[no-untyped-def]
    with tracing_context(enabled=True, client=client, project_name="reliability-readback"), \
            trace("agent") as root:
        answer_only("Capital of France?")
    client.flush()
    bare = client.read_run(root.id)  # loaded without its children
    assert bare.child_runs is None
    fn = ReliabilityEvaluator(["search", "summarize"], order_matters=True).as_evaluator(
        client=client)
    out = fn(bare, None)
    assert out == {"key": "reliability", "score": 1.0,
                   "comment": "All reliability checks passed."}
    wrong = ReliabilityEvaluator(["summarize", "search"], order_matters=True).as_evaluator(
        client=client)(bare)
    assert wrong["score"] == 0.0 and "expected order" in wrong["comment"]


def test_live_run_tree_from_tracing(client) -> None:  # type: ignore[no-untyped-def]
    """A RunTree straight from trace(): checked in a unit test without reading the store."""
    with tracing_context(enabled=True, client=client, project_name="live-tree"), \
            trace("agent") as root:
        answer_only("Capital of France?")
        search(query="again")
    res = ReliabilityEvaluator([{"name": "search", "args": {"query": "again"}}, "summarize"],
                               order_matters=True).run(root)
    assert res.passed is False and res.missing_tool_calls == []
    assert res.out_of_order_tool_calls in (["search"], ["summarize"])  # one of the two fits
    assert res.actual_tool_calls == ["search", "summarize", "search"]
