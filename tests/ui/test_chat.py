"""Chat turns from each dialect an llm run's inputs and outputs come in."""

from __future__ import annotations

from assay._chat import chat_turns


def roles(turns: list) -> list[str]:
    return [t.role for t in turns]


def test_openai_messages_parts_tool_calls_and_choices() -> None:
    inputs = {"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                     {"type": "image_url",
                                      "image_url": {"url": "data:image/png;base64,AAA"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a cat"}]}
    outputs = {"choices": [{"message": {"role": "assistant", "content": "A cat."}}]}
    before, after = chat_turns(inputs, outputs)
    assert roles(before) == ["system", "user", "assistant", "tool"]
    assert before[1].text == "what is this?" and before[1].attachments == ["image (image/png)"]
    call = before[2].tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("lookup", {"q": "x"}, "c1")
    assert before[3].tool_call_id == "c1" and before[3].text == "a cat"
    assert [(t.role, t.text) for t in after] == [("assistant", "A cat.")]


def test_anthropic_blocks_system_and_output_message() -> None:
    inputs = {"system": "terse", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "weather?"},
                                     {"type": "document", "title": "report.pdf"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather",
                                           "input": {"city": "Lima"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "19C"}]}]}]}
    outputs = {"role": "assistant", "content": [{"type": "text", "text": "19 degrees"}]}
    before, after = chat_turns(inputs, outputs)
    assert roles(before) == ["system", "user", "assistant", "user"]
    assert before[1].attachments == ["file (report.pdf)"]
    assert before[2].tool_calls[0].arguments == {"city": "Lima"}
    assert before[3].tool_call_id == "t1" and before[3].text == "19C"
    assert after[0].text == "19 degrees"


def test_langchain_serialized_messages_and_generations() -> None:
    inputs = {"messages": [[
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
         "kwargs": {"content": "hi"}},
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
         "kwargs": {"content": "", "tool_calls": [{"name": "add", "args": {"a": 1}, "id": "x"}]}}]]}
    outputs = {"generations": [[{"text": "", "message": {
        "lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
        "kwargs": {"content": "2"}}}]]}
    before, after = chat_turns(inputs, outputs)
    assert roles(before) == ["user", "assistant"]
    assert before[1].tool_calls[0].arguments == {"a": 1}
    assert [(t.role, t.text) for t in after] == [("assistant", "2")]


def test_prompts_and_unknown_shapes() -> None:
    before, after = chat_turns({"prompts": ["Say hi"]}, {"output": "hi"})
    assert [(t.role, t.text) for t in before + after] == [("user", "Say hi"), ("assistant", "hi")]
    assert chat_turns({"question": "x"}, None) is None  # shown as JSON instead
    assert chat_turns({"messages": [{"no": "role"}]}, None) is None


def test_vercel_ai_sdk_tool_call_and_result_parts() -> None:
    """The AI SDK's messages (its telemetry's ``ai.prompt.messages``): ``tool-call`` parts with
    ``toolName``/``input``, ``tool-result`` parts whose output is ``{type, value}``."""
    inputs = {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Lima?"}]},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "t1",
                                           "toolName": "lookup_city",
                                           "input": {"city": "Lima"}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "t1",
                                      "toolName": "lookup_city",
                                      "output": {"type": "text", "value": "9.9 million"}}]}]}
    before, _ = chat_turns(inputs, {"messages": [{"role": "assistant", "content": "9.9M"}]})
    assert roles(before) == ["user", "assistant", "tool"]
    call = before[1].tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("lookup_city", {"city": "Lima"}, "t1")
    assert before[2].tool_call_id == "t1" and before[2].text == "9.9 million"


def test_bedrock_converse_blocks_as_strands_agents_sends_them() -> None:
    """Strands Agents' spans (Bedrock Converse's content blocks, in GenAI message events):
    ``toolUse`` a tool call, ``toolResult`` the tool's turn."""
    inputs = {"messages": [
        {"role": "user", "content": [{"text": "Lima?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup_city",
                                                       "input": {"city": "Lima"}}}]},
        {"role": "tool", "content": [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                     "content": [{"text": "9.9 million"}]}}]}]}
    before, _ = chat_turns(inputs, None)
    assert roles(before) == ["user", "assistant", "tool"]
    assert before[0].text == "Lima?"
    call = before[1].tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("lookup_city", {"city": "Lima"}, "t1")
    assert before[2].tool_call_id == "t1" and before[2].text == "9.9 million"


def test_a_tool_answer_in_genai_parts_is_shown_whatever_it_is_called() -> None:
    """pydantic-ai's and Upsonic's model spans send a tool's answer as a user turn of one
    ``tool_call_response`` part holding ``result`` (a string, or an object): the run page
    showed an empty user turn; it is a tool turn with the answer."""
    inputs = {"messages": [
        {"role": "user", "parts": [{"type": "text", "content": "weather in Paris?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather",
                                         "arguments": {"city": "Paris"}}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1",
                                    "name": "get_weather", "result": "sunny in Paris"}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c2",
                                    "result": {"func": "Paris: 21C"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c3",
                                    "response": "as the conventions say"}]}]}
    before, _ = chat_turns(inputs, {})
    assert roles(before) == ["user", "assistant", "tool", "tool", "tool"]
    assert [(t.tool_call_id, t.text) for t in before[2:]] == [
        ("c1", "sunny in Paris"), ("c2", '{"func": "Paris: 21C"}'),
        ("c3", "as the conventions say")]
