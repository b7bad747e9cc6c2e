"""The judge is as sturdy as the agents: at 30% faults every accuracy evaluation gets a score.

The scripted model server answers the judge's requests from a fixed script (by arrival order,
so the run is deterministic): 7 of every 20 replies (35%) are faults of every kind seen in the
field —
429 with Retry-After, 500, a body that is not JSON, HTTP 200 with an empty ``choices`` list,
HTTP 200 without ``choices``, a reply past the client's timeout, a verdict that is not JSON —
including a burst of three in a row. All are retried under the judge's one policy.
"""

from __future__ import annotations

import json

from assay.demo import ScriptedModelServer, ScriptedReply
from assay.evals import AccuracyEvaluator
from assay.llm import JudgeOptions, OpenAIJudge

EVALUATIONS = 50
TIMEOUT = 0.25
VERDICT = json.dumps({"reasoning": "It names the capital.", "critique": "None needed.",
                      "score": 8, "is_met": True})


def _ok() -> ScriptedReply:
    return ScriptedReply(content=VERDICT)


FAULTS = {
    1: ScriptedReply(status=429, body={"error": {"message": "slow down"}},
                     headers={"retry-after": "0.01"}),
    6: ScriptedReply(body="{this is not json"),
    7: ScriptedReply(body={"id": "chatcmpl-x", "object": "chat.completion", "choices": []}),
    8: ScriptedReply(status=500, body={"error": {"message": "internal error"}}),
    11: ScriptedReply(content=VERDICT, delay=TIMEOUT * 3),  # past the client's timeout
    14: ScriptedReply(content="I would rate this answer highly."),  # no JSON verdict
    17: ScriptedReply(body={"id": "chatcmpl-y", "object": "chat.completion"}),  # no choices
}
CYCLE = 20


def _script(n: int) -> list[ScriptedReply]:
    return [FAULTS.get(i % CYCLE) or _ok() for i in range(n)]


def test_fifty_accuracy_evaluations_all_end_with_a_score(model: ScriptedModelServer) -> None:
    script = _script(10 * CYCLE)
    model.script(*script)
    judge = OpenAIJudge("judge-model", base_url=model.base_url, options=JudgeOptions(
        timeout=TIMEOUT, backoff_initial=0.005, backoff_max=0.02))
    scores = []
    for i in range(EVALUATIONS):
        result = AccuracyEvaluator(judge, lambda q: "Paris is the capital of France",
                                   f"Capital of France? ({i})", "Paris").run()
        assert not result.failed_iterations, (i, result.failed_iterations)
        scores.append(result.average_score)
    assert scores == [8.0] * EVALUATIONS
    served = len(model.requests)
    faults = sum(1 for i in range(served) if i % CYCLE in FAULTS)
    assert served > EVALUATIONS and faults / served >= 0.3, (faults, served)
