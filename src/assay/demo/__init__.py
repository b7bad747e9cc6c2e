"""The main job: a real experiment with no API key and no network (``assay demo``).

A small tool-using agent (``_agent``) answers a bundled dataset of questions about cities,
arithmetic and units, ``num_repetitions`` times; evaluators that need no model score each answer
(exact match, the tool calls it made with ``ReliabilityEvaluator``, conciseness); the experiment
and its statistics land in the store like any other.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from ._agent import MODEL, PROVIDER, agent
from ._scripted import ScriptedModelServer, ScriptedReply

if TYPE_CHECKING:
    from ..client import Client
    from ..evaluation import ExperimentResults

__all__ = [
    "DATASET_NAME",
    "MODEL",
    "PROVIDER",
    "ScriptedModelServer",
    "ScriptedReply",
    "agent",
    "ensure_dataset",
    "evaluators",
    "load_examples",
    "run_demo",
    "summary_evaluators",
]

DATASET_NAME = "assay-demo-cities"


def load_examples() -> list[dict[str, Any]]:
    """The bundled examples (package data, so an installed wheel has them)."""
    text = resources.files(__name__).joinpath("data/city_questions.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def ensure_dataset(client: Client) -> str:
    """The demo dataset's id, created from the bundled file on first use."""
    if client.has_dataset(dataset_name=DATASET_NAME):
        return str(client.read_dataset(dataset_name=DATASET_NAME).id)
    ds = client.create_dataset(DATASET_NAME, description="assay demo: questions about cities, "
                               "arithmetic and units, with the tool calls a good agent makes")
    client.create_examples(dataset_id=ds.id, examples=load_examples())
    return str(ds.id)


def correct(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    ok = str(outputs.get("answer")) == str(reference_outputs.get("answer"))
    return {"key": "correct", "score": int(ok), "value": "CORRECT" if ok else "INCORRECT"}


def concise(outputs: dict[str, Any]) -> dict[str, Any]:
    text = outputs.get("text") or ""
    return {"key": "concise", "score": int(0 < len(text) <= 30),
            "comment": f"{len(text)} characters"}


def evaluators() -> list[Any]:
    from ..evals import ReliabilityEvaluator

    # expected calls come from each example's outputs["expected_tool_calls"], in order
    tools = ReliabilityEvaluator(None, order_matters=True).as_evaluator(key="tools")
    return [correct, tools, concise]


def pass_rate(outputs: list[dict[str, Any]],
              reference_outputs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [str(o.get("answer")) == str(r.get("answer"))
          for o, r in zip(outputs, reference_outputs, strict=True)]
    return {"key": "pass_rate", "score": sum(ok) / len(ok) if ok else 0.0}


def summary_evaluators() -> list[Any]:
    return [pass_rate]


def run_demo(client: Client, *, num_repetitions: int = 3, max_concurrency: int = 4,
             experiment_prefix: str = "demo", blocking: bool = True) -> ExperimentResults:
    """Run the demo experiment on ``client``'s store (``blocking=False``: rows as they finish)."""
    from ..evaluation import evaluate

    ensure_dataset(client)
    return evaluate(agent, data=DATASET_NAME, evaluators=evaluators(),
                    summary_evaluators=summary_evaluators(), num_repetitions=num_repetitions,
                    max_concurrency=max_concurrency, experiment_prefix=experiment_prefix,
                    description="assay demo: a scripted tool-using agent (no API key)",
                    metadata={"agent": "assay.demo.agent", "model": f"{PROVIDER}:{MODEL}"},
                    client=client, blocking=blocking)
