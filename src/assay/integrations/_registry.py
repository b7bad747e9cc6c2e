"""Which agent frameworks assay knows, and how an object is matched to one.

Every framework module (``_pydantic_ai.py``, ``_upsonic.py``, ``_langchain.py``,
``_openai_agents.py``, ``_crewai.py``, ``_google_adk.py``) offers three module-level functions:

    adapt(obj) -> AgentAdapter | None      the agent object as something assay can call
    instrument() -> None                   install the framework's own hooks (idempotent)
    tool_calls(obj) -> list[ToolCall] | None   tool calls from one of its result objects

An object is matched by the top-level module names of ``type(obj).__mro__`` (or the two first
names, for a package inside a namespace such as ``google.adk``), so nothing here
imports a framework to ask whether an object is its own: a framework not installed costs nothing,
and a user's subclass of a framework class still matches. The match is cached per type.

The one switch: ``ASSAY_FRAMEWORK_TRACING=false`` in the environment, or
``set_framework_tracing(False)``, makes every framework hook record nothing (the adapters still
run the agents). Hooks ask ``framework_parent()`` at each step, so the switch applies at once.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, runtime_checkable

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..evals._models import ToolCall
    from ..tracing._run_tree import RunTree

__all__ = [
    "INTEGRATIONS",
    "QUERY_KEYS",
    "AgentAdapter",
    "Integration",
    "adapter_for",
    "chat_messages",
    "content_text",
    "framework_of",
    "framework_parent",
    "framework_recording",
    "framework_root",
    "framework_tracing_enabled",
    "instrument",
    "instrument_frameworks",
    "instrument_imported",
    "instrument_loaded",
    "is_adapter",
    "query_text",
    "register",
    "require_adapter",
    "set_framework_tracing",
    "supported_kinds",
    "tool_calls_from",
    "with_run_args",
]

log = logging.getLogger(__name__)

ENV_SWITCH = "ASSAY_FRAMEWORK_TRACING"
_FALSE = frozenset({"0", "false", "no", "off", "f", "n"})


@runtime_checkable
class AgentAdapter(Protocol):
    """A framework's agent object, callable the one way assay's evaluators and evaluate() call
    agents. ``arun`` returns the framework's native result; the other methods read it."""

    framework: str  # the INTEGRATIONS key, e.g. "pydantic-ai"
    name: str  # the agent's name, for run names and reports

    async def arun(self, query: Any) -> Any:
        """Call the agent with ``query`` (a string, or an evaluate() inputs dict)."""
        ...

    def output_text(self, result: Any) -> str:
        """The text the agent answered, for judges and reports."""
        ...

    def outputs(self, result: Any) -> dict[str, Any]:
        """A JSON-safe dict for the run's outputs: at least ``{"output": text}``."""
        ...

    def tool_calls(self, result: Any) -> list[ToolCall] | None:
        """The tool calls (name + args) from the framework's own result object."""
        ...


class Integration(NamedTuple):
    extra: str  # pip install 'assay[<extra>]'
    modules: tuple[str, ...]  # top-level (or namespace.package) names of its classes' modules
    impl: str  # the assay module that adapts and instruments it
    kinds: str  # what is accepted, for error messages


INTEGRATIONS: dict[str, Integration] = {
    "pydantic-ai": Integration("pydantic-ai", ("pydantic_ai",),
                               "assay.integrations._pydantic_ai", "pydantic-ai Agent"),
    "upsonic": Integration("upsonic", ("upsonic",), "assay.integrations._upsonic",
                           "Upsonic Agent, Team or Graph"),
    "langchain": Integration("langgraph", ("langgraph", "langchain_core", "langchain"),
                             "assay.integrations._langchain",
                             "LangGraph graph or LangChain runnable"),
    "openai-agents": Integration("openai-agents", ("agents",),
                                 "assay.integrations._openai_agents", "OpenAI Agents SDK Agent"),
    "crewai": Integration("crewai", ("crewai",), "assay.integrations._crewai",
                          "CrewAI Crew, Flow or Agent"),
    # (a package of a namespace shared with others: matched by its two first names)
    "google-adk": Integration("google-adk", ("google.adk",), "assay.integrations._google_adk",
                              "Google ADK agent or App"),
}

_T = TypeVar("_T")
_BY_MODULE: dict[str, str] = {m: name for name, i in INTEGRATIONS.items() for m in i.modules}
_by_type: dict[type, str | None] = {}  # type -> framework name (None: no framework's)
_impls: dict[str, Any] = {}  # framework name -> its imported impl module (None: not written)
_instrumented: set[str] = set()
_failed: set[str] = set()  # of those, the ones whose hooks could not be installed
_lock = threading.Lock()

def once(make: Callable[[], _T]) -> Callable[[], _T]:
    """``make()``'s result, made on the first call only, even with threads racing for it: a
    framework's hook object (LangChain's handler, the Agents SDK's processor) must be one per
    process, or a run would be recorded twice."""
    made: list[_T] = []
    lock = threading.Lock()

    def get() -> _T:
        if not made:
            with lock:
                if not made:
                    made.append(make())
        return made[0]

    return get


# -- the switch -----------------------------------------------------------------------------------
_override: bool | None = None


def set_framework_tracing(enabled: bool | None) -> None:
    """Turn framework tracing on or off for the process (None: back to the environment).

    Off, the frameworks' hooks stay installed but record nothing; agents still run."""
    global _override
    _override = enabled


# ``os.environ``'s own dict and its key for the switch: ``os.environ.get`` is four Python calls
# (and a KeyError when unset), and LangChain asks the switch at every runnable it configures
_ENV_DATA: Any = getattr(os.environ, "_data", None)
_ENV_KEY: Any = os.environ.encodekey(ENV_SWITCH) if _ENV_DATA is not None else None


def framework_tracing_enabled() -> bool:
    """False when ``set_framework_tracing(False)`` or ``ASSAY_FRAMEWORK_TRACING`` is false."""
    if _override is not None:
        return _override
    if _ENV_DATA is not None and os.environ.__class__ is os._Environ:
        if _ENV_DATA.get(_ENV_KEY) is None:  # unset: the usual case
            return True
    raw = os.environ.get(ENV_SWITCH)
    return raw is None or raw.strip().lower() not in _FALSE


_run_var: Any = None  # assay.tracing's current-run context variable, once imported
_steps: Any = None  # ... its ``STEP_RUNS`` (other frameworks' steps running here)
_innermost: Any = None


def framework_parent(steps: bool = True) -> RunTree | None:
    """The run a framework step should become a child of, or None to record nothing.

    What every hook asks first: None when framework tracing is switched off or no traced assay
    run is current (outside ``evaluate()``, ``trace()`` or ``@traceable``) and no framework's
    step is running here. With ``steps``, the run of another framework's step running here
    (an Agents SDK agent called in a LangChain tool: ``tracing._context.STEP_RUNS``) when it
    is below the assay run; LangChain's own hooks, which nest their steps by LangChain's run
    ids and ask at every runnable, pass False for the steps inside one of its calls."""
    global _run_var, _steps, _innermost
    var = _run_var
    if var is None:  # resolved on first use: importing assay.evals stays free of tracing
        from ..tracing._context import _RUN as var
        from ..tracing._context import STEP_RUNS, innermost

        _steps, _innermost = STEP_RUNS, innermost
        _run_var = var
    run = var.get()
    if steps and _steps:
        run = _innermost(run)
    if run is None:
        return None
    # the switch as ``framework_tracing_enabled`` reads it, its usual case inline (this runs at
    # every step of every framework, and at every runnable LangChain configures)
    if _override is None and _ENV_DATA is not None and _ENV_DATA.get(_ENV_KEY) is None \
            and os.environ.__class__ is os._Environ:
        return run
    return run if framework_tracing_enabled() else None


_root_spec: Any = None  # assay.tracing's ``root_spec``, once imported


def framework_root() -> Any:
    """What a framework's outermost step should start a root run with when no assay run is
    current (``framework_parent()`` None): a ``tracing._roots.RootSpec`` where tracing is on
    for new roots (``ASSAY_TRACING=true``, ``tracing_context(enabled=True)``) and framework
    tracing is on, else None (record nothing, as before)."""
    global _root_spec
    make = _root_spec
    if make is None:
        from ..tracing._roots import root_spec as make

        _root_spec = make
    spec = make()  # (None, the usual answer, first: it is the cheaper question)
    return spec if spec is not None and framework_tracing_enabled() else None


def framework_recording() -> bool:
    """Whether a framework step starting now is recorded: under an assay run, or as a root
    of its own (``framework_root``)."""
    return framework_parent() is not None or framework_root() is not None


# -- shared by the adapters --------------------------------------------------------------------
# the keys of an inputs dict that hold the prompt, in the order they are looked for
QUERY_KEYS = ("query", "question", "input", "prompt", "message", "text", "task", "user_input",
              "description")
_USER_ROLES = ("user", "human")


def chat_messages(query: Any) -> list[dict[str, Any]] | None:
    """The conversation of an inputs dict in the chat format LangSmith's chat datasets use
    (``{"messages": [{"role": "user", "content": "..."}, ...]}``, or ``(role, content)``
    pairs) as role/content dicts, or None when it is not one."""
    messages = query.get("messages") if isinstance(query, Mapping) else None
    if not isinstance(messages, (list, tuple)) or not messages:
        return None
    out = []
    for m in messages:
        if isinstance(m, Mapping) and isinstance(m.get("role"), str) and "content" in m:
            out.append({"role": m["role"], "content": m["content"]})
        elif isinstance(m, (list, tuple)) and len(m) == 2 and isinstance(m[0], str):
            out.append({"role": m[0], "content": m[1]})
        else:
            return None
    return out


def content_text(content: Any) -> str | None:
    """A chat message's text: a string, or the text blocks of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else b.get("text") for b in content
                 if isinstance(b, str) or isinstance(b, Mapping)]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def query_text(query: Any) -> str:
    """The prompt text of a query, for an agent that takes one: a string as is; of an evaluate()
    inputs dict, its last user message when it holds a chat (``messages``), else its
    ``query``/``question``/``input``/``prompt``/... value, else its only string value, else
    the dict as JSON. One rule for every framework's adapter."""
    if isinstance(query, str):
        return query
    if isinstance(query, Mapping):
        chat = chat_messages(query)
        users = [m for m in chat or () if m["role"] in _USER_ROLES]
        text = content_text(users[-1]["content"]) if users else None
        if text is not None:
            return text
        for key in QUERY_KEYS:
            value = query.get(key)
            if isinstance(value, str):
                return value
        strings = [v for v in query.values() if isinstance(v, str)]
        if len(strings) == 1:
            return strings[0]
        import json

        from .._json import jsonable

        return json.dumps(jsonable(dict(query)), ensure_ascii=False)
    return str(query)


def structured_output(value: Any) -> dict[str, Any] | list[Any] | None:
    """An agent's structured answer (an output type's model, a dict, a list) as JSON, for
    ``outputs["structured_output"]``; None for a text answer or anything else."""
    if value is None or isinstance(value, str):
        return None
    from .._json import jsonable

    data = jsonable(value)
    return data if isinstance(data, (dict, list)) else None


# -- matching -------------------------------------------------------------------------------------
def framework_of(obj: Any) -> str | None:
    """The INTEGRATIONS name whose modules define ``type(obj)`` or one of its bases."""
    cls = type(obj)
    try:
        return _by_type[cls]
    except KeyError:
        pass
    except TypeError:  # unhashable metaclass instance: no cache
        return _match(cls)
    found = _by_type[cls] = _match(cls)
    return found


def register(name: str, integration: Integration) -> None:
    """Add (or replace) a framework: its objects are matched from now on."""
    with _lock:
        INTEGRATIONS[name] = integration
        for module in integration.modules:
            _BY_MODULE[module] = name
        _by_type.clear()
        _impls.pop(name, None)
        _instrumented.discard(name)
        _failed.discard(name)


def is_adapter(obj: Any) -> bool:
    """Already shaped as an AgentAdapter (a user's own, or one adapter_for returned)."""
    return not isinstance(obj, type) and all(
        callable(getattr(obj, a, None)) for a in ("arun", "output_text", "outputs", "tool_calls")
    ) and isinstance(getattr(obj, "framework", None), str)


def _match(cls: type) -> str | None:
    for base in getattr(cls, "__mro__", (cls,)):
        module = getattr(base, "__module__", None) or ""
        top, _, rest = module.partition(".")
        name = _BY_MODULE.get(top)
        if name is None and rest:  # a namespace package's (google.adk)
            name = _BY_MODULE.get(f"{top}.{rest.partition('.')[0]}")
        if name is not None:
            return name
    return None


def _impl(name: str) -> Any:
    """The framework's assay module, imported once; None when it is not written (yet)."""
    try:
        return _impls[name]
    except KeyError:
        pass
    path = INTEGRATIONS[name].impl
    try:
        module = importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name != path:
            raise
        module = None
    _impls[name] = module
    return module


def supported_kinds() -> str:
    """The framework agents assay runs, for error messages ("a pydantic-ai Agent, ...")."""
    kinds = [("an " if i.kinds[:1] in "AEIOUaeiou" else "a ") + i.kinds
             for i in INTEGRATIONS.values()]
    return ", ".join(kinds[:-1]) + " or " + kinds[-1]


def _impl_of(obj: Any) -> tuple[str, Any] | None:
    """The framework ``obj`` belongs to and assay's module for it, if both exist."""
    name = framework_of(obj)
    impl = None if name is None else _impl(name)
    return None if impl is None else (name, impl)  # type: ignore[return-value]  # name set


def adapter_for(obj: Any) -> AgentAdapter | None:
    """An adapter for ``obj`` if it is an agent of a known framework (or already an adapter),
    else None.

    Matching instruments that framework too, so the agent's own steps are traced."""
    if is_adapter(obj):
        return obj
    found = _impl_of(obj)
    if found is None:
        return None
    name, impl = found
    instrument(name)
    adapter: AgentAdapter = impl.adapt(obj)  # impl is Any: its adapt makes an AgentAdapter
    return adapter


def require_adapter(obj: Any) -> AgentAdapter:
    """``adapter_for(obj)``, or InvalidInputError naming the type and the supported kinds."""
    adapter = adapter_for(obj)
    if adapter is None:
        kind = type(obj)
        raise InvalidInputError(
            f"assay does not know how to run a {kind.__module__}.{kind.__qualname__}: pass "
            f"a function taking the query or {supported_kinds()}")
    return adapter


def with_run_args(agent: Any, **run_args: Any) -> AgentAdapter:
    """``agent`` as assay runs it, each run given ``run_args``: what a framework's own run call
    takes besides the prompt, for an agent that needs it (pydantic-ai's ``agent.run``: ``deps``,
    ``model_settings``, ``usage_limits``...; the Agents SDK's ``Runner.run``: ``context``,
    ``max_turns``, ``run_config``...; a LangGraph graph's ``ainvoke``: ``config``). Pass what it
    returns to ``evaluate()`` or an evaluator in place of the agent; its runs are traced as the
    agent's are. A framework that takes none here is refused, naming it."""
    adapter = require_adapter(agent)
    bind = getattr(adapter, "with_run_args", None)
    if bind is None:
        raise InvalidInputError(
            f"{adapter.framework} agents take no run arguments in assay (got "
            f"{', '.join(sorted(run_args))}): pass a function that runs the agent with them")
    bound: AgentAdapter = bind(**run_args)
    return bound


def keyword_names(fn: Any, skip: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The keyword arguments ``fn`` takes (None: any, it has ``**kwargs``), less ``skip``."""
    import inspect

    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                 and p.name not in skip and p.name != "self")


def check_run_args(run_args: Mapping[str, Any], takes: tuple[str, ...] | None,
                   what: str) -> None:
    """Refuse, naming them, the run arguments that ``what`` does not take (``takes`` None:
    any), before anything runs (``with_run_args``)."""
    unknown = sorted(set(run_args) - set(takes)) if takes is not None else []
    if unknown:
        raise InvalidInputError(f"not a run argument of {what}: {', '.join(unknown)} (it "
                                f"takes {', '.join(takes or ()) or 'none'})")


def tool_calls_from(obj: Any) -> list[ToolCall] | None:
    """Tool calls from a framework's own result object (None: not a result assay knows)."""
    found = _impl_of(obj)
    if found is None:
        return None
    calls: list[ToolCall] | None = found[1].tool_calls(obj)
    return calls


# -- instrumentation ------------------------------------------------------------------------------
def instrument(name: str, *, strict: bool = False) -> bool:
    """Install one framework's hooks once; False when its assay module is missing or failed.

    A hook that cannot be installed is logged, never raised (evaluation goes on untraced), and
    not tried again; ``strict``: tried again, and its error raised (``instrument_frameworks``
    for a framework the user named)."""
    if name in _instrumented and not (strict and name in _failed):
        return name not in _failed
    with _lock:
        if name in _instrumented and not (strict and name in _failed):
            return name not in _failed
        impl = _impl(name)
        if impl is None:
            return False
        try:
            impl.instrument()
        except Exception:  # a framework version we do not fit: evaluate anyway
            if strict:
                raise
            log.warning("assay could not instrument %s; its steps will not be traced", name,
                        exc_info=True)
            _impls[name] = impl  # keep the adapter usable
            _instrumented.add(name)  # and do not retry (and warn) on every call
            _failed.add(name)
            return False
        _instrumented.add(name)
        _failed.discard(name)
        return True


def instrument_frameworks(*names: str) -> list[str]:
    """Install the hooks of the named frameworks (``"langgraph"``, ``"openai-agents"``,
    ``"pydantic-ai"``, ``"upsonic"``, ``"crewai"``, ``"google-adk"``), or, with no name, of
    every one of them that is installed (importing it); returns the names instrumented.

    For a service that calls its agents with no assay run around them: with tracing on
    (``ASSAY_TRACING=true`` or ``tracing_context(enabled=True)``) each framework call is then
    a trace of its own. ``evaluate()``, the evaluators and a root ``trace`` block install the
    hooks of the frameworks already imported without this call. A named framework that is not
    installed raises its install hint, one whose hooks fail to install that error; with no
    name, such a framework is logged and skipped (``instrument``)."""
    from ..errors import MissingDependencyError

    by_name = {**INTEGRATIONS, **{i.extra: i for i in INTEGRATIONS.values()}}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise InvalidInputError(
            f"unknown framework {', '.join(map(repr, unknown))}: assay knows "
            f"{', '.join(i.extra for i in INTEGRATIONS.values())}")
    wanted = {by_name[n] for n in names}
    done: list[str] = []
    for key, integration in INTEGRATIONS.items():
        if names and integration not in wanted:
            continue
        if not any(_installed(m) for m in integration.modules):
            if names:
                raise MissingDependencyError(integration.modules[0], integration.extra,
                                             f"assay's {integration.extra} integration")
            continue
        if instrument(key, strict=bool(names)):
            done.append(integration.extra)
    return done


def _installed(module: str) -> bool:
    import importlib.util

    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # (a namespace package's parent missing, a stub module)
        return False


def _adopt_built() -> None:
    for name in list(_instrumented):
        hook = getattr(_impls.get(name), "adopt", None)
        if hook is not None:
            try:
                hook()
            except Exception:  # noqa: BLE001 - they stay on the capture they have
                log.warning("assay could not adopt new %s agents", name, exc_info=True)


_modules_seen = -1


def instrument_imported() -> None:
    """``instrument_loaded`` when the process imported modules since the last look, else one
    int compare: what a root ``trace(...)`` block and ``tracing_context(enabled=True)`` call,
    so a framework called in production inside them is traced without ``evaluate()`` or an
    evaluator having run first."""
    global _modules_seen
    seen = len(sys.modules)
    if seen != _modules_seen:
        _modules_seen = seen
        instrument_loaded()


def instrument_loaded(*, adopt: bool = False) -> None:
    """Instrument every known framework the process has already imported.

    Called when evaluate() and each evaluator run start, so a plain function that calls a
    framework inside is traced too. Costs a few dict lookups once all are done. ``adopt``:
    also give agents built since their framework was instrumented the cheapest capture assay
    has for them (a framework module's optional ``adopt``: Upsonic's agents move from its
    OpenTelemetry onto their own objects); only where no agent is expected mid-run (when
    ``evaluate()``, an evaluator or an assay test starts), not per call."""
    if adopt:
        _adopt_built()
    if len(_instrumented) == len(INTEGRATIONS):
        return
    modules = sys.modules
    for name, integration in INTEGRATIONS.items():
        if name in _instrumented:
            continue
        if any(m in modules for m in integration.modules):
            instrument(name)
