"""A dataset as OpenAI fine-tuning lines: each dialect an example can hold its conversation in,
what is refused (naming the example, writing nothing), and the file read back as examples."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from assay.client import Client
from assay.errors import ExampleValidationError, InvalidInputError

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
CALL = {"id": "c1", "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
# (example, the line it must give)
CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"inputs": {"input": [{"type": "system", "data": {"content": "Be brief."}},   # LangSmith's
                           {"type": "human", "data": {"content": "Hi"}}]},         # chat dataset
      "outputs": {"output": {"type": "ai", "data": {"content": "Hello!"}}}},
     {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello!"}]}),
    ({"inputs": {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS},
      "outputs": {"message": {"role": "assistant", "content": None, "tool_calls": [CALL]}}},
     {"messages": [{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": None, "tool_calls": [CALL]}],
      "tools": TOOLS}),
    ({"inputs": {"messages": [  # LangChain serialized, with a tool turn and Anthropic blocks
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages",
                                                "HumanMessage"], "kwargs": {"content": "Hi"}},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t9", "name": "weather",
                                           "input": {"city": "Oslo"}}]},
        {"role": "tool", "tool_call_id": "t9", "content": "cold"}]},
      "outputs": {"choices": [{"message": {"role": "assistant", "content": "It is cold."}}]}},
     {"messages": [{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": "t9", "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
                   {"role": "tool", "content": "cold", "tool_call_id": "t9"},
                   {"role": "assistant", "content": "It is cold."}]}),
    ({"inputs": {"question": "2+2?"}, "outputs": {"answer": "4"}},  # a kv example: one string each
     {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}),
]


def _dataset(client: Client, examples: list[dict[str, Any]], name: str = "chat") -> Any:
    ds = client.create_dataset(name)
    client.create_examples(dataset_id=ds.id, examples=examples)
    return ds


@pytest.mark.parametrize(("example", "line"), CASES, ids=["chat-dataset", "tools", "langchain",
                                                          "kv"])
def test_each_dialect_gives_its_line(client: Client, example: dict[str, Any],
                                     line: dict[str, Any]) -> None:
    _dataset(client, [example])
    assert client.read_dataset_openai_finetuning(dataset_name="chat") == [line]


def test_export_writes_the_lines_and_import_reads_them_back(client: Client,
                                                           tmp_path: Path) -> None:
    ds = _dataset(client, [case[0] for case in CASES])
    path = tmp_path / "train.jsonl"
    assert client.export_dataset(path, dataset_id=ds.id, format="openai") == len(CASES)
    written = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert written == client.read_dataset_openai_finetuning(ds.id)
    assert sorted(map(json.dumps, written)) == sorted(json.dumps(case[1]) for case in CASES)

    copy = client.import_dataset(path, dataset_name="copy", format="openai")
    back = client.read_dataset_openai_finetuning(copy.id)
    assert sorted(map(json.dumps, back)) == sorted(map(json.dumps, written))  # a fixed point
    one = next(e for e in client.list_examples(dataset_id=copy.id) if "tools" in e.inputs)
    assert one.inputs == {"messages": [{"role": "user", "content": "Weather in Paris?"}],
                          "tools": TOOLS}
    assert one.outputs == {"message": {"role": "assistant", "content": None,
                                       "tool_calls": [CALL]}}


@pytest.mark.parametrize(("example", "problem"), [
    ({"inputs": {"a": 1, "b": 2}, "outputs": {"answer": "x"}}, "inputs hold no conversation"),
    ({"inputs": {"question": "q"}, "outputs": {"a": "x", "b": "y"}}, "no assistant reply"),
    ({"inputs": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]},
      "outputs": {"output": "a cat"}}, "image (image/png)"),
])
def test_an_example_that_is_no_conversation_is_named(client: Client, tmp_path: Path,
                                                     example: dict[str, Any],
                                                     problem: str) -> None:
    ds = _dataset(client, [CASES[0][0], example])
    bad = next(e for e in client.list_examples(dataset_id=ds.id) if e.inputs == example["inputs"])
    with pytest.raises(InvalidInputError, match=f"example {bad.id}.*{re.escape(problem)}"):
        client.read_dataset_openai_finetuning(ds.id)
    path = tmp_path / "out" / "train.jsonl"
    with pytest.raises(InvalidInputError, match=re.escape(problem)):
        client.export_dataset(path, dataset_id=ds.id, format="openai")
    assert not path.parent.exists()  # refused before anything was written


def test_a_bad_line_imports_nothing(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    good = json.dumps(CASES[0][1])
    path.write_text(good + "\n" + json.dumps({"messages": [{"role": "user", "content": "hi"}]})
                    + "\n", encoding="utf-8")
    with pytest.raises(ExampleValidationError, match=r"train.jsonl:2: the last message must"):
        client.import_dataset(path, dataset_name="ft", format="openai")
    assert [d.name for d in client.list_datasets()] == []
