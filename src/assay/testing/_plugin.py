"""The pytest plugin (entry point ``pytest11``): marked tests become a tracked experiment.

Loaded into every pytest session where assay is installed, so it imports nothing but pytest
until a test marked ``@pytest.mark.assay`` runs (``@pytest.mark.langsmith`` is an alias, with
LangSmith's keyword arguments; ``--assay-no-langsmith-alias`` leaves those to LangSmith's plugin).
A suite without marked tests pays nothing and has no file written.

A marked test runs inside a root run of the session's experiment (every llm/tool call in it
traced as its child), with a ``TestCase`` current for ``assay.testing.log_*``, ``expect`` and the
evaluators' results; when it ends, its example, outcome (feedback ``pass``) and feedback are
stored. The end of the session prints each experiment's statistics and, with
``--assay-baseline``, the comparison that ``--assay-fail-on-regression`` turns into a gate.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._session import TestSession
    from ._summary import Report

__all__ = ["MARKER_ARGUMENTS"]

# LangSmith's @pytest.mark.langsmith / @test keyword arguments
MARKER_ARGUMENTS = frozenset({"id", "output_keys", "client", "test_suite_name", "metadata",
                              "experiment_metadata", "repetitions", "split", "cached_hosts"})


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        alias = not config.getoption("assay_no_langsmith_alias")
        self.markers = ("assay", "langsmith") if alias else ("assay",)
        workerinput = getattr(config, "workerinput", None)
        self.is_worker = workerinput is not None
        self.run_id = (workerinput or {}).get("assay_run_id") or uuid.uuid4().hex
        self.session: TestSession | None = None
        self.worker_experiments: dict[str, str] = {}
        self.worker_problems: list[str] = []
        self.report: Report | None = None

    def tracker(self) -> TestSession:
        if self.session is None:
            from ._session import TestSession

            self.session = TestSession(self.run_id, root_name=self.config.rootpath.name,
                                       prefix=self.config.getoption("assay_experiment_prefix"))
            _warm()
        return self.session


# What ``expect`` and the tracer import on first use: imported before the first marked test's
# run starts, or that test's latency holds them (9 ms for the first expect.edit_distance).
_WARM = ("rapidfuzz.distance", "numpy", "assay.testing._expect", "assay.tracing._writer")


def _warm() -> None:
    import importlib
    import importlib.util

    for name in _WARM:
        try:
            if importlib.util.find_spec(name.split(".")[0]) is not None:
                importlib.import_module(name)
        except Exception:  # noqa: S112 - a library that fails to import fails in the test itself
            continue


_STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "assay: marked tests tracked as an experiment")
    group.addoption("--assay-baseline", default=None, metavar="EXPERIMENT",
                    help="compare this session's experiment with EXPERIMENT (a name or id, or "
                         "'previous': the latest earlier pytest experiment on the same dataset)")
    group.addoption("--assay-fail-on-regression", action="store_true", default=False,
                    help="fail the session when a metric regressed significantly against the "
                         "baseline (paired bootstrap, as `assay experiments compare`)")
    group.addoption("--assay-experiment-prefix", default=None, metavar="PREFIX",
                    help="name experiments PREFIX:<session id> (default: the suite's name)")
    group.addoption("--assay-no-langsmith-alias", action="store_true", default=False,
                    help="leave @pytest.mark.langsmith to LangSmith's own plugin")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "assay(test_suite_name=None, output_keys=None, metadata=None, split=None, "
        "repetitions=None, id=None, experiment_metadata=None): track this test as an example "
        "of the session's assay experiment")
    if not config.pluginmanager.has_plugin("langsmith_plugin"):
        config.addinivalue_line("markers", "langsmith(**kwargs): alias of @pytest.mark.assay")
    if config.getoption("assay_fail_on_regression") and not config.getoption("assay_baseline"):
        raise pytest.UsageError(
            "--assay-fail-on-regression needs --assay-baseline (an experiment's name or id, "
            "or 'previous'): without one there is nothing to gate against")
    state = _State(config)
    config.stash[_STATE] = state
    if not state.is_worker and config.pluginmanager.has_plugin("xdist"):
        config.pluginmanager.register(_XdistHooks(state), "assay-xdist")


class _XdistHooks:
    """The controller's side under pytest-xdist: one session id for all workers, and their
    experiments and problems back for the summary."""

    def __init__(self, state: _State) -> None:
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["assay_run_id"] = self.state.run_id

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        raw = getattr(node, "workeroutput", {}).get("assay")
        if raw:
            data = json.loads(raw)
            self.state.worker_experiments.update(data.get("experiments") or {})
            self.state.worker_problems += [p for p in data.get("problems") or []
                                           if p not in self.state.worker_problems]


def _marker(item: pytest.Item, state: _State) -> pytest.Mark | None:
    for name in state.markers:
        mark = item.get_closest_marker(name)
        if mark is not None:
            return mark
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or "langsmith" not in state.markers:
        return
    if config.pluginmanager.has_plugin("langsmith_plugin") and any(
            item.get_closest_marker("langsmith") for item in items):
        # assay tracks these tests: LangSmith's own wrapper then calls them straight through
        os.environ["LANGSMITH_TEST_TRACKING"] = "false"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    state = item.config.stash.get(_STATE, None)
    mark = _marker(item, state) if state is not None else None
    if mark is not None and isinstance(item, pytest.Function):
        item.obj = _wrap(item, item.obj, mark, state)  # type: ignore[arg-type]  # set above
    yield


def _bad_marker(mark: pytest.Mark) -> str | None:
    unknown = sorted(set(mark.kwargs) - MARKER_ARGUMENTS)
    if mark.args or unknown:
        given = ", ".join([repr(a) for a in mark.args] + unknown)
        return (f"@pytest.mark.{mark.name} got unknown argument(s) {given}; it takes keyword "
                f"arguments only: {', '.join(sorted(MARKER_ARGUMENTS))}")
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A marked test that never ran its body (a fixture that raised, a skip or skipif marker)
    is still an example of the experiment: failed with the setup's error, or skipped with its
    reason (it was left out, and the pass rate read as if it had passed)."""
    yield
    if call.when != "setup" or call.excinfo is None:
        return
    state = item.config.stash.get(_STATE, None)
    mark = _marker(item, state) if state is not None else None
    if mark is None or not isinstance(item, pytest.Function):
        return
    assert state is not None  # (a mark is only found with it)
    exc = call.excinfo.value
    _, options, inputs, reference = _case_of(item, item.obj, mark)
    try:
        run = _Running(state, item, options, dict(inputs), dict(reference), 0)
        run.__enter__()
        run.__exit__(type(exc), exc, exc.__traceback__)
    except Exception as err:  # noqa: BLE001 - tracking never changes a test's outcome
        state.tracker().problem(f"could not record {item.nodeid}: {err}")


def _case_of(item: pytest.Function, fn: Callable[..., Any], mark: pytest.Mark
             ) -> tuple[str | None, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(a problem with the marker, its options, the test's inputs, its reference outputs)."""
    options = dict(mark.kwargs)
    callspec = getattr(item, "callspec", None)
    params = dict(getattr(callspec, "params", {}) or {})
    try:
        names = set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = set(params)
    inputs = {k: v for k, v in params.items() if k in names}
    reference = {k: inputs.pop(k) for k in options.get("output_keys") or () if k in inputs}
    return _bad_marker(mark), options, inputs, reference


def _wrap(item: pytest.Function, fn: Callable[..., Any], mark: pytest.Mark,
          state: _State) -> Callable[..., Any]:
    problem, options, inputs, reference = _case_of(item, fn, mark)
    repetitions = int(options.get("repetitions") or 1)

    def running(rep: int) -> _Running:
        if problem is not None:
            from ..errors import InvalidInputError

            raise InvalidInputError(problem)
        return _Running(state, item, options, dict(inputs), dict(reference), rep)

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> None:
            for rep in range(repetitions):
                with running(rep) as run:
                    run.result = await fn(*args, **kwargs)
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        for rep in range(repetitions):
            with running(rep) as run:
                run.result = fn(*args, **kwargs)
    return wrapper


class _Running:
    """One repetition of a marked test: its case and root run current, recorded at the end."""

    def __init__(self, state: _State, item: pytest.Function, options: dict[str, Any],
                 inputs: dict[str, Any], reference: dict[str, Any], rep: int) -> None:
        self.state, self.item, self.options, self.rep = state, item, options, rep
        self.inputs, self.reference = inputs, reference
        self.result: Any = None

    def __enter__(self) -> _Running:
        from .._hooks import result_listener
        from ._case import _CASE, TestCase

        tracker = self.state.tracker()
        self.tracker = tracker
        suite = tracker.suite_name(self.options)
        try:
            example_id = tracker.example_id(suite, self.item.nodeid, self.options.get("id"))
        except ValueError as exc:
            from ..errors import InvalidInputError

            raise InvalidInputError(f"@pytest.mark.{self.item.nodeid}: id= must be a UUID "
                                    f"({exc})") from None
        project_id = tracker.ensure(suite, self.options.get("experiment_metadata"))
        try:  # the agent frameworks the test uses are traced too, with no decorator
            from ..integrations import instrument_loaded

            instrument_loaded(adopt=True)
        except Exception as exc:
            tracker.problem(f"could not instrument the agent frameworks: {exc}")
        self.case = case = TestCase(self.item.nodeid, suite, example_id, None,
                                    inputs=self.inputs, reference_outputs=self.reference or None)
        self._trace = None
        if project_id is not None:
            try:
                from ..tracing import trace

                meta = {"pytest_nodeid": self.item.nodeid, **(self.options.get("metadata") or {})}
                if self.rep:
                    meta["repetition"] = self.rep
                self._trace = trace(self.item.name, "chain", dict(case.inputs),
                                    project_id=project_id, reference_example_id=example_id,
                                    client=tracker.client(), enabled=True, metadata=meta)
                case.run = self._trace.__enter__()
            except Exception as exc:
                self._trace = None
                tracker.problem(f"could not trace {self.item.nodeid}: {exc}")
        self._tokens = (_CASE.set(case), result_listener.set(tracker.listen(case)))
        return self

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> None:
        from .._hooks import result_listener
        from ._case import _CASE

        case_token, listener_token = self._tokens
        case = self.case
        skipped = et is not None and issubclass(et, pytest.skip.Exception)
        outputs = case.outputs
        if outputs is None and self.result is not None:
            outputs = self.result if isinstance(self.result, dict) else {"output": self.result}
        if outputs is None and skipped:  # kept, and said why, as LangSmith's plugin does
            outputs = {"skipped_reason": repr(exc)}
        try:
            if case.run is not None and self._trace is not None:
                if outputs is not None:
                    case.run.outputs = json.loads(json.dumps(outputs, default=repr))
                if skipped:
                    self._trace.__exit__(None, None, None)
                else:
                    self._trace.__exit__(et, exc, tb)
        except Exception as err:
            self.tracker.problem(f"could not end the run of {self.item.nodeid}: {err}")
        finally:
            result_listener.reset(listener_token)
            _CASE.reset(case_token)
        error = None if exc is None else f"{type(exc).__name__}: {exc}"
        self.tracker.record(case, passed=None if skipped else exc is None, error=error,
                            metadata=self.options.get("metadata"),
                            split=self.options.get("split"))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return
    if state.is_worker:
        if state.session is not None:
            state.session.finish()
            session.config.workeroutput["assay"] = json.dumps(  # type: ignore[attr-defined]  # xdist
                {"experiments": state.session.experiments, "problems": state.session.problems})
        return
    experiments = dict(state.worker_experiments)
    if state.session is not None:
        experiments.update(state.session.experiments)
    if not experiments and not state.worker_problems:
        if state.session is not None and state.session.problems:  # marked tests ran, and
            _gate_not_run(session, state.session, "the results were not stored")  # failed
        return
    tracker = state.tracker()
    tracker.problems += [p for p in state.worker_problems if p not in tracker.problems]
    client = tracker.client()
    options = session.config.option
    if client is None or not experiments:
        # marked tests ran but nothing reached the store (a wrong key, a server down): a
        # gated session cannot pass on a comparison that never ran
        _gate_not_run(session, tracker, "the results were not stored")
        return
    tracker.finish()
    try:
        from .._time import utcnow
        from ._summary import GATE_KEY, describe, summarize

        for project_id in experiments.values():
            client.update_project(project_id, end_time=utcnow())
            describe(client, project_id)

        state.report = summarize(client, experiments, baseline=options.assay_baseline,
                                 fail_on_regression=options.assay_fail_on_regression)
    except Exception as exc:
        tracker.problem(f"could not summarize the experiment: {type(exc).__name__}: {exc}")
        _gate_not_run(session, tracker, "the experiment could not be summarized")
        return
    report = state.report
    if options.assay_fail_on_regression and (report.regressions or report.gate_errors):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        # every experiment of a session that failed the gate (a regression, or a baseline
        # that could not be read) is never a 'previous' baseline (see _summary)
        for project_id in experiments.values():
            try:
                meta = client.read_project(project_id=project_id).metadata
                client.update_project(project_id, metadata={**meta, GATE_KEY: "failed"})
            except Exception as exc:  # noqa: BLE001 - reported; the outcome stands
                tracker.problem(f"could not mark {project_id} as failed: {exc}")


def _gate_not_run(session: pytest.Session, tracker: Any, why: str) -> None:
    """``--assay-fail-on-regression`` with no comparison made: the session fails, and says why
    (the tracking problems above it say what went wrong)."""
    if session.config.option.assay_fail_on_regression:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        tracker.problem(f"the regression gate could not run ({why}): failing the session")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.is_worker:
        return
    lines = list(state.report.lines) if state.report is not None else []
    problems = state.session.problems if state.session is not None else []
    if not lines and not problems:
        return
    terminalreporter.section("assay")
    for line in lines:
        terminalreporter.write_line(line)
    for p in problems:
        terminalreporter.write_line(f"assay: tracking problem (tests unaffected): {p}",
                                    yellow=True)
