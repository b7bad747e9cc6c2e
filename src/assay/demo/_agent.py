"""A small tool-using agent that needs no API key: a scripted, deterministic chat "model".

The model is a stand-in for ``gpt-4o-mini``: each step is traced as an ``llm`` run carrying
``ls_provider``/``ls_model_name`` and token usage (so the store prices it with genai-prices),
and the final answer is streamed token by token (so the first token is timed). It picks tools
by pattern, the way a real model would pick them from the question; its latency is simulated
in proportion to the tokens it reads and writes. Two of its answers go wrong on purpose: an
unknown city makes a tool raise (an error on the run) and one question it answers "from memory"
without calling the tool it should (an incorrect answer and a reliability failure).
"""

from __future__ import annotations

import ast
import asyncio
import json
import operator
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..tracing import get_current_run_tree, traceable

__all__ = ["CITIES", "MODEL", "PROVIDER", "agent", "calculator", "convert_units", "lookup_city"]

PROVIDER, MODEL = "openai", "gpt-4o-mini"
SYSTEM = ("You are a careful assistant with three tools: lookup_city(city) returns a city's "
          "population and area; calculator(expression) evaluates arithmetic; "
          "convert_units(value, from_unit, to_unit) converts km/miles and celsius/fahrenheit. "
          "Use a tool for every fact or number. Answer in one short sentence.")

# population, area in km2
CITIES: dict[str, tuple[int, float]] = {
    "Paris": (2102650, 105.4), "Berlin": (3644826, 891.1), "Madrid": (3305408, 604.3),
    "Tokyo": (13960236, 2194.1), "Osaka": (2753862, 225.2), "Cairo": (10025657, 3085.1),
    "Lima": (9943800, 2672.3), "Sydney": (5312163, 12367.7),
}


def _tokens(text: str) -> int:
    """A deterministic token estimate (about 4 tokens per 3 words)."""
    return max(1, (len(text.split()) * 4 + 2) // 3)


# -- tools ----------------------------------------------------------------------------------------
@traceable(run_type="tool", name="lookup_city")
async def lookup_city(city: str) -> dict[str, Any]:
    await asyncio.sleep(0.004)
    if city not in CITIES:
        raise LookupError(f"no city named {city!r} in the atlas")
    population, area = CITIES[city]
    return {"city": city, "population": population, "area_km2": area}


_OPS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.USub: operator.neg}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError(f"unsupported expression: {ast.dump(node)}")


@traceable(run_type="tool", name="calculator")
async def calculator(expression: str) -> float:
    await asyncio.sleep(0.001)
    return _eval(ast.parse(expression, mode="eval"))


_CONVERSIONS = {("km", "miles"): lambda v: v / 1.609344, ("miles", "km"): lambda v: v * 1.609344,
                ("celsius", "fahrenheit"): lambda v: v * 9 / 5 + 32,
                ("fahrenheit", "celsius"): lambda v: (v - 32) * 5 / 9}


@traceable(run_type="tool", name="convert_units")
async def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    await asyncio.sleep(0.001)
    try:
        return _CONVERSIONS[(from_unit, to_unit)](value)
    except KeyError:
        raise ValueError(f"cannot convert {from_unit} to {to_unit}") from None


TOOLS: dict[str, Callable[..., Awaitable[Any]]] = {
    "lookup_city": lookup_city, "calculator": calculator, "convert_units": convert_units}


# -- the scripted model -------------------------------------------------------------------------
def _number(x: float) -> str:
    return str(int(round(x))) if abs(x - round(x)) < 1e-9 else f"{x:.2f}"


def _policy(question: str, results: list[Any]) -> tuple[str, dict[str, Any]] | str:
    """The next tool call, or the final answer sentence, given the tool results so far."""
    q = question.rstrip("?.")
    if m := re.match(r"What is the population density of (\w+)", q):
        if not results:
            return "lookup_city", {"city": m[1]}
        if len(results) == 1:
            return "calculator", {
                "expression": f"{results[0]['population']} / {results[0]['area_km2']}"}
        return f"{m[1]} has about {int(round(results[1]))} people per km2."
    if m := re.match(r"What is the population of (\w+)", q):
        if m[1] == "Sydney":  # answers from memory instead of calling the tool
            return "Sydney has about 5 million people."
        if not results:
            return "lookup_city", {"city": m[1]}
        return f"{m[1]} has {results[0]['population']} people."
    if m := re.match(r"How many (?:more )?people live in (\w+) (and|than in) (\w+)", q):
        a, how, b = m[1], m[2], m[3]
        if len(results) < 2:
            return "lookup_city", {"city": (a, b)[len(results)]}
        if len(results) == 2:
            op = "+" if how == "and" else "-"
            return "calculator", {"expression":
                                  f"{results[0]['population']} {op} {results[1]['population']}"}
        return f"The answer is {_number(results[2])} people."
    if m := re.match(r"Which is larger, (\w+) or (\w+)", q):
        if len(results) < 2:
            return "lookup_city", {"city": (m[1], m[2])[len(results)]}
        big = max(results, key=lambda r: r["population"])
        return f"{big['city']} is larger."
    if m := re.match(r"What is (.+)", q):
        if not results:
            return "calculator", {"expression": m[1]}
        return f"It is {_number(results[0])}."
    if m := re.match(r"Convert ([\d.]+) (\w+) to (\w+)", q):
        if not results:
            return "convert_units", {"value": float(m[1]), "from_unit": m[2], "to_unit": m[3]}
        return f"That is {_number(results[0])} {m[3]}."
    return "I do not know."


@traceable(run_type="llm", name="ChatOpenAI")
async def _choose_tool(messages: list[dict[str, Any]], question: str,
                       results: list[Any]) -> dict[str, Any]:
    """One non-streamed model step that returns a tool call."""
    decision = _policy(question, results)
    assert not isinstance(decision, str)
    name, args = decision
    prompt = sum(_tokens(str(m["content"])) for m in messages)
    call = {"id": f"call_{len(results)}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}
    completion = _tokens(json.dumps(call["function"]))
    await asyncio.sleep(0.012 + prompt * 0.00002)
    get_current_run_tree().set_usage(prompt, completion, provider=PROVIDER, model=MODEL)  # type: ignore[union-attr]  # in @traceable
    return {"role": "assistant", "content": None, "tool_calls": [call]}


@traceable(run_type="llm", name="ChatOpenAI")
async def _stream_answer(messages: list[dict[str, Any]], answer: str) -> AsyncIterator[str]:
    """The final model step, streamed word by word (its first chunk is timed)."""
    prompt = sum(_tokens(str(m["content"])) for m in messages)
    get_current_run_tree().set_usage(prompt, _tokens(answer), provider=PROVIDER, model=MODEL)  # type: ignore[union-attr]  # in @traceable
    await asyncio.sleep(0.010 + prompt * 0.00002)  # time to first token
    for i, word in enumerate(answer.split(" ")):
        await asyncio.sleep(0.002)
        yield word if i == 0 else " " + word


async def agent(inputs: dict[str, Any]) -> dict[str, Any]:
    """Answer ``inputs["question"]`` with the tools; returns ``{"answer", "text"}``."""
    question = inputs["question"]
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": question}]
    results: list[Any] = []
    for _ in range(6):
        if isinstance(_policy(question, results), str):
            break
        reply = await _choose_tool(messages, question, results)
        messages.append(reply)
        call = reply["tool_calls"][0]
        result = await TOOLS[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
        results.append(result)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    final = _policy(question, results)
    assert isinstance(final, str)
    text = "".join([chunk async for chunk in _stream_answer(messages, final)])
    return {"answer": _extract(text), "text": text}


def _extract(text: str) -> str:
    """The short answer inside the sentence: a city name or the first number."""
    if m := re.match(r"(\w+) is larger", text):
        return m[1]
    m = re.search(r"-?\d+(?:\.\d+)?", text)
    return m[0] if m else text

