"""The integrations registry: matching objects to frameworks, the error for unknown kinds,
instrumenting what is loaded, the one switch."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from assay import Client
from assay.errors import InvalidInputError
from assay.evals import AgentUnderTest, PerformanceEvaluator, extract_tool_calls
from assay.evals._models import ToolCall
from assay.evaluation import evaluate
from assay.integrations import (
    INTEGRATIONS,
    Integration,
    _registry,
    adapter_for,
    framework_of,
    framework_parent,
    framework_root,
    framework_tracing_enabled,
    instrument_frameworks,
    instrument_loaded,
    query_text,
    register,
    require_adapter,
    set_framework_tracing,
    tool_calls_from,
)
from assay.tracing import trace, tracing_context

from .conftest import make_pydantic_agent

# -- a framework of our own, registered like the real ones -----------------------------------------
FAKE_FW = "h21a_fakefw"  # the "framework" package: its classes live in this module name
FAKE_IMPL = "h21a_fakefw_assay"  # the assay side: adapt / instrument / tool_calls


class FakeResult:
    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = [{"tool": "lookup", "arguments": {"q": text}}]


class FakeAgent:
    result_cls: type[FakeResult] = FakeResult

    async def go(self, prompt: str) -> FakeResult:
        return self.result_cls(prompt.upper())


class FakeAdapter:
    framework = "fake"

    def __init__(self, agent: FakeAgent) -> None:
        self.agent = agent
        self.name = "fake-agent"

    async def arun(self, query: Any) -> FakeResult:
        return await self.agent.go(query_text(query))

    def output_text(self, result: FakeResult) -> str:
        return result.text

    def outputs(self, result: FakeResult) -> dict[str, Any]:
        return {"output": result.text}

    def tool_calls(self, result: FakeResult) -> list[ToolCall]:
        return [ToolCall(name=c["tool"], args=c["arguments"]) for c in result.calls]


@pytest.fixture
def fake_framework() -> Any:
    """FakeAgent/FakeResult as classes of a framework package, and an assay module for it."""
    fw = types.ModuleType(FAKE_FW)
    result_cls = type("Result", (FakeResult,), {"__module__": FAKE_FW})
    agent_cls = type("Agent", (FakeAgent,), {"__module__": FAKE_FW, "result_cls": result_cls})
    fw.Agent, fw.Result = agent_cls, result_cls  # type: ignore[attr-defined]
    impl = types.ModuleType(FAKE_IMPL)
    impl.instrumented = 0  # type: ignore[attr-defined]

    def instrument() -> None:
        impl.instrumented += 1  # type: ignore[attr-defined]

    impl.instrument = instrument  # type: ignore[attr-defined]
    impl.adapt = lambda obj: FakeAdapter(obj) if isinstance(obj, FakeAgent) else None  # type: ignore[attr-defined]
    impl.tool_calls = (  # type: ignore[attr-defined]
        lambda obj: FakeAdapter(None).tool_calls(obj) if isinstance(obj, FakeResult) else None)  # type: ignore[arg-type]
    sys.modules[FAKE_IMPL] = impl
    register("fake", Integration("fake", (FAKE_FW,), FAKE_IMPL, "Fake agent"))
    try:
        yield fw, impl
    finally:
        del INTEGRATIONS["fake"], _registry._BY_MODULE[FAKE_FW]
        _registry._by_type.clear()
        _registry._impls.pop("fake", None)
        _registry._instrumented.discard("fake")
        sys.modules.pop(FAKE_IMPL, None)
        sys.modules.pop(FAKE_FW, None)


def test_objects_are_matched_by_the_modules_of_their_classes(model: Any) -> None:
    agent = make_pydantic_agent(model.base_url)
    assert framework_of(agent) == "pydantic-ai"

    from pydantic_ai import Agent

    class MyAgent(Agent):  # a user's subclass, defined outside pydantic_ai
        pass

    assert framework_of(MyAgent(agent.model)) == "pydantic-ai"
    assert framework_of(1) is None and framework_of(lambda q: q) is None
    assert adapter_for(lambda q: q) is None and adapter_for("text") is None


def test_an_unknown_object_gets_an_error_naming_its_type_and_the_supported_kinds() -> None:
    class Gadget:
        pass

    for call in (lambda: require_adapter(Gadget()), lambda: AgentUnderTest(Gadget()),
                 lambda: evaluate(Gadget(), data=[{"inputs": {"q": 1}}], upload_results=False)):
        with pytest.raises(InvalidInputError) as info:
            call()
        message = str(info.value)
        assert "Gadget" in message, message
        for kind in ("a pydantic-ai Agent", "an Upsonic Agent", "a LangGraph graph",
                     "an OpenAI Agents SDK Agent", "a CrewAI Crew, Flow or Agent"):
            assert kind in message, message


def test_a_registered_framework_runs_in_evaluators_and_evaluate(fake_framework: Any) -> None:
    fw, impl = fake_framework
    agent = fw.Agent()
    assert framework_of(agent) == "fake"
    under_test = AgentUnderTest(agent)
    assert under_test.description == "fake:fake-agent" and impl.instrumented == 1
    result = under_test.call("hello")
    assert under_test.text(result) == "HELLO"
    # the framework's own result object, read by its module (not the generic rules)
    assert [(c.name, c.args) for c in extract_tool_calls(result)] == [("lookup", {"q": "HELLO"})]
    assert tool_calls_from(result) == extract_tool_calls(result)
    assert len(PerformanceEvaluator(agent, "x", num_iterations=2, warmup_runs=0).run()
               .all_runs) == 2
    rows = list(evaluate(agent, data=[{"inputs": {"question": "hi"}}], upload_results=False))
    assert rows[0]["run"].name == "fake-agent" and rows[0]["run"].outputs == {"output": "HI"}
    assert impl.instrumented == 1  # idempotent: once per process


def test_an_adapter_written_by_the_user_is_taken_as_is() -> None:
    adapter = FakeAdapter(FakeAgent())
    assert adapter_for(adapter) is adapter
    assert AgentUnderTest(adapter).text(AgentUnderTest(adapter).call("abc")) == "ABC"
    rows = list(evaluate(adapter, data=[{"inputs": {"question": "x"}}], upload_results=False))
    assert rows[0]["run"].outputs == {"output": "X"}


def test_instrument_loaded_instruments_only_imported_frameworks(fake_framework: Any) -> None:
    _, impl = fake_framework
    sys.modules.pop(FAKE_FW, None)
    instrument_loaded()
    assert impl.instrumented == 0  # the framework is not imported: nothing to hook
    sys.modules[FAKE_FW] = fake_framework[0]
    instrument_loaded()
    instrument_loaded()
    assert impl.instrumented == 1


def test_instrument_frameworks_installs_what_it_is_asked_for(fake_framework: Any) -> None:
    from assay.errors import MissingDependencyError

    fw, impl = fake_framework
    sys.modules[FAKE_FW] = fw  # the framework is installed (imported here)
    assert instrument_frameworks("fake") == ["fake"] and impl.instrumented == 1
    with pytest.raises(InvalidInputError, match=r"unknown framework 'nope'.*langgraph"):
        instrument_frameworks("fake", "nope")
    assert impl.instrumented == 1  # refused before anything was installed
    sys.modules.pop(FAKE_FW, None)  # named but not installed: its install hint
    with pytest.raises(MissingDependencyError, match=r"assay\[fake\]"):
        instrument_frameworks("fake")


def test_instrument_frameworks_without_names_takes_every_installed_one(
        fake_framework: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fw, impl = fake_framework
    absent = Integration("absent", ("h21a_not_installed",), FAKE_IMPL, "Absent agent")
    monkeypatch.setattr(_registry, "INTEGRATIONS",
                        {"fake": INTEGRATIONS["fake"], "absent": absent})
    sys.modules.pop(FAKE_FW, None)
    assert instrument_frameworks() == [] and impl.instrumented == 0
    sys.modules[FAKE_FW] = fw
    assert instrument_frameworks() == ["fake"] and impl.instrumented == 1

    def broken() -> None:
        raise AttributeError("this framework version has no hook")

    impl.instrument = broken  # every installed one: logged and skipped; named: raised
    _registry._instrumented.discard("fake")
    assert instrument_frameworks() == []
    with pytest.raises(AttributeError, match="no hook"):
        instrument_frameworks("fake")


def test_a_framework_call_outside_any_run_is_a_root_only_where_tracing_is_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ASSAY_TRACING", raising=False)
    client = Client(database_url=f"sqlite:///{tmp_path / 'roots.db'}")
    assert framework_root() is None  # tracing off: record nothing
    with tracing_context(enabled=True, client=client, project_name="svc",
                         metadata={"thread_id": "t"}, tags=["prod"]):
        spec = framework_root()
        assert spec is not None
        set_framework_tracing(False)
        try:
            assert framework_root() is None
        finally:
            set_framework_tracing(None)
        with tracing_context(enabled=False):
            assert framework_root() is None
    run = spec.new_run("graph", "chain", {"q": 1}, metadata={"user": "u"})
    assert run.parent_run_id is None and run.session_name == "svc" and run.client is client
    assert run.metadata == {"thread_id": "t", "user": "u"} and run.tags == ["prod"]
    monkeypatch.setenv("ASSAY_TRACING", "true")
    assert framework_root() is not None


def test_a_hook_that_cannot_be_installed_is_logged_not_raised(
        fake_framework: Any, caplog: pytest.LogCaptureFixture) -> None:
    fw, impl = fake_framework

    def broken() -> None:
        raise AttributeError("this framework version has no hook")

    impl.instrument = broken
    with caplog.at_level(logging.WARNING, logger="assay.integrations._registry"):
        result = AgentUnderTest(fw.Agent()).call("still runs")
    assert result.text == "STILL RUNS"
    assert "could not instrument fake" in caplog.text


def test_the_switch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert framework_tracing_enabled()
    client = Client(database_url=f"sqlite:///{tmp_path / 'switch.db'}")  # not the cwd's store
    with trace("parent", enabled=True, client=client) as parent:
        assert framework_parent() is parent
        set_framework_tracing(False)
        try:
            assert not framework_tracing_enabled() and framework_parent() is None
        finally:
            set_framework_tracing(None)
        monkeypatch.setenv("ASSAY_FRAMEWORK_TRACING", "false")
        assert framework_parent() is None
        monkeypatch.setenv("ASSAY_FRAMEWORK_TRACING", "1")
        assert framework_parent() is parent
    assert framework_parent() is None  # no current run: hooks record nothing


def test_query_text() -> None:
    assert query_text("plain") == "plain"
    assert query_text({"anything": "only value"}) == "only value"
    assert query_text({"question": "q", "context": "c"}) == "q"
    assert query_text({"a": 1, "b": 2}) == '{"a": 1, "b": 2}'


def test_one_prompt_rule_for_every_adapter() -> None:
    """``query_text``: what every framework's adapter sends as the prompt of an inputs dict.
    A chat (LangSmith's chat datasets: ``messages`` of role/content dicts or pairs) gives its
    last user message (content blocks joined); then the usual keys; then the only string
    value; else the dict as JSON."""
    from assay.integrations import chat_messages, query_text

    chat = {"messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Population of Paris?"},
                         {"role": "assistant", "content": "Which Paris?"},
                         {"role": "user", "content": [{"type": "text", "text": "The French "},
                                                      "one."]}]}
    assert query_text(chat) == "The French one."
    assert query_text({"messages": [("human", "Hi there")]}) == "Hi there"
    assert chat_messages(chat) == chat["messages"]
    assert chat_messages({"messages": [("user", "x")]}) == [{"role": "user", "content": "x"}]
    assert chat_messages({"messages": "not a chat"}) is None
    assert chat_messages({"messages": [{"text": "no role"}]}) is None
    assert query_text({"question": "Q?", "context": "C"}) == "Q?"
    assert query_text({"description": "Write a haiku"}) == "Write a haiku"
    assert query_text({"city": "Lima", "n": 3}) == "Lima"  # the only string value
    assert query_text({"a": "x", "b": "y"}) == '{"a": "x", "b": "y"}'
    assert query_text("plain") == "plain"
    assert query_text({"messages": [{"role": "assistant", "content": "only the model"}],
                       "input": "fallback"}) == "fallback"


def test_run_args_for_a_framework_that_takes_none_are_refused(fake_framework: Any) -> None:
    """``with_run_args`` on an agent whose adapter takes no run arguments: a clear error
    naming the framework and the arguments; an unknown object: the usual error."""
    from assay.integrations import with_run_args

    fw, _ = fake_framework
    with pytest.raises(InvalidInputError, match=r"fake agents take no run arguments.*deps"):
        with_run_args(fw.Agent(), deps=1)
    with pytest.raises(InvalidInputError, match="assay does not know how to run"):
        with_run_args(object(), deps=1)
