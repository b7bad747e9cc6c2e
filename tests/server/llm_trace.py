"""A chain with a tool child and a streaming LLM child, traced by the official langsmith SDK.

Run by tests/server/test_python_sdk.py against `assay serve`; prints the chain's run id.
"""
import sys
import time

from langsmith import Client, traceable

PROJECT = sys.argv[1]
USAGE = {"input_tokens": 1200, "output_tokens": 350, "total_tokens": 1550}


@traceable(run_type="tool", name="lookup")
def lookup(x: int) -> int:
    return x * 2


def _reduce(chunks: list) -> dict:
    return {"output": "".join(chunks), "usage_metadata": USAGE}


@traceable(run_type="llm", name="chat", reduce_fn=_reduce,
           metadata={"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"})
def chat(prompt: str):
    time.sleep(0.05)  # time to first token
    for token in ["Hel", "lo ", "world"]:
        yield token
        time.sleep(0.01)


@traceable(run_type="chain", name="agent")
def agent(prompt: str) -> dict:
    tool = lookup(21)
    text = "".join(chat(prompt))
    from langsmith import get_current_run_tree

    print(get_current_run_tree().id)
    return {"text": text, "tool": tool}


client = Client()
agent("say hello", langsmith_extra={"project_name": PROJECT, "client": client})
client.flush()
