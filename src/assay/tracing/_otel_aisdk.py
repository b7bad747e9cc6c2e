"""The Vercel AI SDK's own span attributes (``ai.*``), as its telemetry in versions 4-6 sends them.

``generateText``/``streamText``/``generateObject``/``streamObject`` with
``experimental_telemetry: {isEnabled: true}`` make a span per call (``ai.generateText``), one
per model request under it (``ai.generateText.doGenerate``, ``ai.streamText.doStream``) and one
per tool call (``ai.toolCall``), named by ``ai.operationId`` (a call given a ``functionId``:
its run is named by it, the operation kept in its metadata); ``embed``/``embedMany`` the same
with ``doEmbed``. None of them says ``gen_ai.operation.name``, and from version 6 the model
requests carry no ``gen_ai.usage.*`` either: tokens, model and messages are in ``ai.usage.*``,
``ai.model.*``, ``ai.prompt.messages`` and ``ai.response.*``. (Version 7's ``@ai-sdk/otel`` sends
the GenAI conventions, which ``_otel_map`` reads directly.)

Only the model requests are llm runs with usage: the call's span sums its requests' usage,
which stored again would count every token twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._otel_values import as_dict, parse_json, parse_result, to_int

__all__ = ["CONSUMED", "FIRST_CHUNK_EVENT", "OPERATION", "fields", "run_type"]

OPERATION = "ai.operationId"
FIRST_CHUNK_EVENT = "ai.stream.firstChunk"

_LLM = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream",
                  "ai.generateObject.doGenerate", "ai.streamObject.doStream"})
_EMBEDDING = frozenset({"ai.embed.doEmbed", "ai.embedMany.doEmbed"})
_TOOL = "ai.toolCall"

# read here: not copied into metadata["otel_attributes"]
CONSUMED = frozenset({
    OPERATION, "ai.telemetry.functionId", "ai.model.id",
    "ai.model.provider", "ai.prompt", "ai.prompt.messages", "ai.response.text",
    "ai.response.toolCalls", "ai.response.object", "ai.response.model",
    "ai.usage.inputTokens", "ai.usage.outputTokens",
    "ai.usage.promptTokens", "ai.usage.completionTokens", "ai.usage.totalTokens",
    "ai.usage.tokens", "ai.usage.cachedInputTokens", "ai.usage.inputTokenDetails.cacheReadTokens",
    "ai.usage.inputTokenDetails.cacheWriteTokens", "ai.toolCall.name", "ai.toolCall.id",
    "ai.toolCall.args", "ai.toolCall.input", "ai.toolCall.result", "ai.toolCall.output",
    "ai.value", "ai.values", "ai.embedding", "ai.embeddings",
})


def run_type(attrs: Mapping[str, Any]) -> str:
    op = attrs.get(OPERATION)
    if op in _LLM:
        return "llm"
    if op == _TOOL:
        return "tool"
    if op in _EMBEDDING:
        return "embedding"
    return "chain"


def _first(attrs: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            return value
    return None


def _usage(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``ai.usage.*`` as the store's usage: input and output tokens (version 4 names them
    prompt and completion tokens; output includes reasoning), cache reads and writes."""
    inp = to_int(_first(attrs, "ai.usage.inputTokens", "ai.usage.promptTokens",
                        "ai.usage.tokens"))
    out = to_int(_first(attrs, "ai.usage.outputTokens", "ai.usage.completionTokens"))
    if inp is None and out is None:
        return None
    total = to_int(attrs.get("ai.usage.totalTokens"))
    usage: dict[str, Any] = {"input_tokens": inp or 0, "output_tokens": out or 0,
                             "total_tokens": total if total is not None else (inp or 0) + (
                                 out or 0)}
    read = to_int(_first(attrs, "ai.usage.inputTokenDetails.cacheReadTokens",
                         "ai.usage.cachedInputTokens"))
    written = to_int(attrs.get("ai.usage.inputTokenDetails.cacheWriteTokens"))
    details = {k: v for k, v in (("cache_read", read), ("cache_creation", written)) if v}
    if written:  # Anthropic's writes by lifetime (an hour-long one costs more), in its usage
        meta = parse_json(attrs.get("ai.response.providerMetadata"))
        usage_of = meta.get("anthropic", {}).get("usage") if isinstance(meta, dict) else None
        split = usage_of.get("cache_creation") if isinstance(usage_of, dict) else None
        if isinstance(split, dict):
            details.update({k: n for k in ("ephemeral_5m_input_tokens",
                                           "ephemeral_1h_input_tokens")
                            if (n := to_int(split.get(k)))})
    if details:
        usage["input_token_details"] = details
    return usage


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    """The SDK's tool calls (``toolCallId``, ``toolName``, ``args`` or ``input``) as chat
    tool calls."""
    calls = []
    for call in value if isinstance(value, list) else []:
        if isinstance(call, dict):
            calls.append({"id": call.get("toolCallId"), "type": "function", "function": {
                "name": call.get("toolName"), "arguments": call.get("args", call.get("input"))}})
    return calls


def fields(attrs: Mapping[str, Any], out: dict[str, Any]) -> None:
    """Fill ``out`` (``_otel_map.span_fields``'s run fields) from the SDK's attributes (a
    streamed request's first chunk, ``ai.response.msToFirstChunk``, is read there with the
    other conventions' first-token figures)."""
    meta: dict[str, Any] = out["metadata"]
    run_type = out["run_type"]
    function = attrs.get("ai.telemetry.functionId")
    if function:
        meta["ai.telemetry.functionId"] = function
        if run_type == "chain":  # the call: named as its caller named it (as Langfuse does)
            out["name"] = str(function)
            meta[OPERATION] = attrs[OPERATION]
    if run_type == "tool":
        out["name"] = str(attrs.get("ai.toolCall.name") or out["name"])
        args = _first(attrs, "ai.toolCall.args", "ai.toolCall.input")
        out["inputs"] = as_dict(args, "input") if args is not None else {}
        result = _first(attrs, "ai.toolCall.result", "ai.toolCall.output")
        if result is not None:
            out["outputs"] = {"output": parse_result(result)}
        if attrs.get("ai.toolCall.id"):
            meta["tool_call_id"] = attrs["ai.toolCall.id"]
        return
    if run_type in ("llm", "embedding"):
        model = _first(attrs, "ai.response.model", "ai.model.id")
        if model:
            meta["ls_model_name"] = str(model)
        provider = attrs.get("ai.model.provider")  # "openai.chat", "google.generative-ai"
        if isinstance(provider, str) and provider:
            meta["ls_provider"] = provider.split(".", 1)[0].lower()
        usage = _usage(attrs)
        if usage is not None:
            meta["usage_metadata"] = usage
    if run_type == "embedding":
        value = _first(attrs, "ai.values", "ai.value")
        out["inputs"] = {"input": parse_json(value)} if value is not None else {}
        return
    if run_type == "llm":
        messages = parse_json(attrs.get("ai.prompt.messages"))
        out["inputs"] = {"messages": messages} if messages is not None else {}
    else:
        prompt = attrs.get("ai.prompt")
        out["inputs"] = as_dict(prompt, "input") if prompt is not None else {}
    if "ai.response.object" in attrs:
        out["outputs"] = {"output": parse_json(attrs["ai.response.object"])}
    elif "ai.response.text" in attrs or "ai.response.toolCalls" in attrs:
        message: dict[str, Any] = {"role": "assistant",
                                   "content": attrs.get("ai.response.text") or ""}
        calls = _tool_calls(parse_json(attrs.get("ai.response.toolCalls")))
        if calls:
            message["tool_calls"] = calls
        out["outputs"] = ({"messages": [message]} if run_type == "llm"
                          else {"output": message["content"], **(
                              {"tool_calls": calls} if calls else {})})
