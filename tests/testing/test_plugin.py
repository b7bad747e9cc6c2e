"""The pytest plugin, run the way users run it: pytester runs real test files in a subprocess
(the plugin loaded through its ``pytest11`` entry point) against a real SQLite store, and we
read what the store holds afterwards."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import pytest

from assay import Client

pytest_plugins = ["pytester"]


@pytest.fixture
def db(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "store" / "assay.db"
    monkeypatch.setenv("ASSAY_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.delenv("ASSAY_API_URL", raising=False)
    monkeypatch.delenv("ASSAY_TRACING", raising=False)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n"
                     "asyncio_default_fixture_loop_scope = function\n")
    return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def experiments(path: Path) -> list:
    return list(Client(database_url=f"sqlite:///{path}").list_projects())


SUITE = '''
import asyncio
import pytest
from assay import testing as t
from assay.tracing import traceable
from assay.evals import ReliabilityEvaluator

@traceable(run_type="tool")
def lookup(city):
    return city.upper()

@pytest.mark.assay(test_suite_name="agent-suite", output_keys=["expected"])
@pytest.mark.parametrize("city, expected", [("paris", "PARIS"), ("lima", "LIMA"), ("oslo", "nope")])
def test_lookup(city, expected):
    got = lookup(city)
    t.log_outputs({"answer": got})
    t.log_feedback(key="length", score=len(got))
    assert got == expected

@pytest.mark.assay(test_suite_name="agent-suite")
async def test_async_tool_calls():
    t.log_inputs({"question": "two tools"})
    await asyncio.sleep(0)
    lookup("a"); lookup("b")
    ReliabilityEvaluator(["lookup", "search"]).run(["lookup", "lookup"]).assert_passed()

@pytest.mark.assay(test_suite_name="agent-suite")
def test_expect():
    t.expect(3).to_equal(3)
    t.expect.edit_distance("hello", "helo").to_be_less_than(0.5)
    t.expect.score(0.8, key="relevance").to_be_greater_than(0.5)
    t.expect("abc").to_contain("z")

def test_unmarked():
    assert True
'''


def test_marked_tests_become_an_experiment_of_examples_runs_and_feedback(
        pytester: pytest.Pytester, db: Path) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = run(pytester)
    result.assert_outcomes(passed=3, failed=3)  # the suite's own outcome, unchanged
    result.stdout.fnmatch_lines(["*assay: agent-suite:* (suite agent-suite): 5 test runs*"])
    client = Client(database_url=f"sqlite:///{db}")
    [exp] = experiments(db)
    ds = client.read_dataset(dataset_name="agent-suite")
    assert exp.reference_dataset_id == ds.id
    assert exp.end_time is not None and exp.extra["metadata"]["pytest"]["run_id"]
    examples = {e.metadata["pytest_nodeid"].split("::")[1]: e
                for e in client.list_examples(dataset_id=ds.id)}
    assert set(examples) == {"test_lookup[paris-PARIS]", "test_lookup[lima-LIMA]",
                             "test_lookup[oslo-nope]", "test_async_tool_calls", "test_expect"}
    assert examples["test_lookup[oslo-nope]"].inputs == {"city": "oslo"}
    assert examples["test_lookup[oslo-nope]"].outputs == {"expected": "nope"}
    assert examples["test_async_tool_calls"].inputs == {"question": "two tools"}
    roots = {r.name: r for r in client.list_runs(project_id=exp.id, is_root=True)}
    assert len(list(client.list_runs(project_id=exp.id, is_root=True))) == 5
    tools = list(client.list_runs(project_id=exp.id, run_type="tool"))
    assert len(tools) == 3 + 2  # lookup once per parametrized case, twice in the async test
    async_root = roots["test_async_tool_calls"]
    assert {t.parent_run_id for t in tools if t.trace_id == async_root.id} == {async_root.id}
    assert "AssertionError" in (async_root.error or "")
    by_run: dict = {}
    for fb in client.list_feedback(project_ids=[exp.id]):
        by_run.setdefault(fb.run_id, {}).setdefault(fb.key, []).append(fb)
    assert by_run[async_root.id]["pass"][0].score == 0
    assert by_run[async_root.id]["reliability"][0].score == 0  # the evaluator's own result
    expect_fb = by_run[roots["test_expect"].id]
    assert sorted(f.score for f in expect_fb["expectation"]) == [0, 1, 1, 1]
    assert 0 < expect_fb["edit_distance"][0].score < 0.5
    assert expect_fb["relevance"][0].score == 0.8
    passed = [by_run[r.id]["pass"][0].score for r in client.list_runs(project_id=exp.id,
                                                                         is_root=True)]
    assert sorted(passed) == [0, 0, 0, 1, 1]
    stats = client.read_project(project_id=exp.id, include_stats=True)
    assert stats.run_count == 5 and stats.feedback_stats["pass"].avg == 0.4

    # the next session finds the same examples (no duplicates) and is a new experiment
    run(pytester).assert_outcomes(passed=3, failed=3)
    assert len(list(client.list_examples(dataset_id=ds.id))) == 5
    assert len(experiments(db)) == 2


def test_a_suite_without_marked_tests_writes_nothing(pytester: pytest.Pytester, db: Path) -> None:
    pytester.makepyfile(test_plain="def test_a():\n    assert 1\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "assay:" not in result.stdout.str() and "= assay =" not in result.stdout.str()
    assert not db.parent.exists() and not (pytester.path / ".assay").exists()


def test_a_skipped_test_says_why_and_markers_shape_the_experiment(pytester: pytest.Pytester,
                                                                   db: Path) -> None:
    """A skipped test, as LangSmith's plugin keeps it: the run with its reason, no pass/fail
    score; the markers' repetitions and split in the experiment's metadata."""
    pytester.makepyfile(test_skip=textwrap.dedent('''
        import pytest

        @pytest.mark.assay(test_suite_name="skips", repetitions=3, split="smoke")
        def test_ran():
            assert True

        @pytest.mark.assay(test_suite_name="skips")
        def test_needs_a_key():
            pytest.skip("no API key here")
    '''))
    run(pytester).assert_outcomes(passed=1, skipped=1)  # repetitions run inside the test
    [exp] = experiments(db)
    # the markers' repetitions and split, in the experiment as evaluate() records them
    assert (exp.metadata["num_repetitions"], exp.metadata["dataset_splits"]) == (
        3, ["base", "smoke"])  # the skipped test's example is in the default split
    client = Client(database_url=f"sqlite:///{db}")
    roots = list(client.list_runs(project_id=exp.id, is_root=True))
    [skipped] = [r for r in roots if r.name == "test_needs_a_key"]
    assert "no API key here" in skipped.outputs["skipped_reason"] and skipped.error is None
    scored = {str(f.run_id) for f in client.list_feedback(project_ids=[exp.id])
              if f.key == "pass"}
    assert scored == {str(r.id) for r in roots if r.name == "test_ran"} and len(scored) == 3


def test_a_marked_test_that_never_ran_its_body_is_still_an_example(pytester: pytest.Pytester,
                                                                     db: Path) -> None:
    """A fixture that raises, a skip or skipif marker: the test's body never runs, yet it is
    an example of the experiment (failed with the fixture's error, skipped with the marker's
    reason); it was left out, and the pass rate read 1.0 for a suite with an error in it."""
    pytester.makepyfile(test_unrun=textwrap.dedent('''
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture broke")

        @pytest.mark.assay(test_suite_name="unrun")
        def test_fixture_error(broken):
            pass

        @pytest.mark.assay(test_suite_name="unrun")
        @pytest.mark.skip(reason="decorator skip")
        def test_marker_skip():
            pass

        @pytest.mark.assay(test_suite_name="unrun")
        @pytest.mark.skipif(True, reason="not here")
        def test_skipif():
            pass

        @pytest.mark.assay(test_suite_name="unrun")
        def test_ok():
            pass
    '''))
    result = run(pytester)
    result.assert_outcomes(passed=1, skipped=2, errors=1)
    [exp] = experiments(db)
    client = Client(database_url=f"sqlite:///{db}")
    roots = {r.name: r for r in client.list_runs(project_id=exp.id, is_root=True)}
    assert set(roots) == {"test_fixture_error", "test_marker_skip", "test_skipif", "test_ok"}
    assert "fixture broke" in (roots["test_fixture_error"].error or "")
    assert "decorator skip" in roots["test_marker_skip"].outputs["skipped_reason"]
    assert "not here" in roots["test_skipif"].outputs["skipped_reason"]
    passed = {client.read_run(f.run_id).name: f.score
              for f in client.list_feedback(project_ids=[exp.id]) if f.key == "pass"}
    assert passed == {"test_fixture_error": 0.0, "test_ok": 1.0}
    assert "pass 0.5" in result.stdout.str()  # the summary's pass rate counts the error


def test_bad_use_is_named_and_tracking_problems_never_change_outcomes(
        pytester: pytest.Pytester, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_bad='''
import pytest
from assay import testing as t

@pytest.mark.assay(suite="x")
def test_unknown_marker_argument():
    pass

def test_log_outside_a_marked_test():
    t.log_outputs({"a": 1})
''')
    result = run(pytester)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*@pytest.mark.assay got unknown argument(s) suite; it takes keyword arguments only*",
        "*log_outputs() was called outside a test marked @pytest.mark.assay*"])

    pytester.makepyfile(test_bad='''
import pytest
from assay import testing as t

@pytest.mark.assay
def test_fine():
    t.log_outputs({"a": 1})
    t.log_feedback(key="k", score=1)
''')
    monkeypatch.setenv("ASSAY_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*assay: tracking problem (tests unaffected): could not*"])


def test_langsmith_marker_is_an_alias(pytester: pytest.Pytester, db: Path) -> None:
    pytester.makepyfile(test_ls='''
import pytest
from assay import testing as t

@pytest.mark.langsmith(test_suite_name="ls-suite", output_keys=["b"])
@pytest.mark.parametrize("a, b", [(1, 2)])
def test_x(a, b):
    t.log_outputs({"sum": a + b})

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
@pytest.mark.langsmith(test_suite_name="ls-suite")
async def test_anyio():
    t.log_outputs({"anyio": True})
''')
    run(pytester, "-o", "asyncio_mode=strict").assert_outcomes(passed=2)
    client = Client(database_url=f"sqlite:///{db}")
    examples = {e.metadata["pytest_nodeid"]: e
                for e in client.list_examples(dataset_name="ls-suite")}
    example = examples["test_ls.py::test_x[1-2]"]
    assert example.inputs == {"a": 1} and example.outputs == {"b": 2}
    roots = {r.name: r for r in client.list_runs(project_id=experiments(db)[0].id)}
    assert roots["test_x[1-2]"].outputs == {"sum": 3}
    assert roots["test_anyio"].outputs == {"anyio": True}


def test_xdist_workers_write_one_experiment(pytester: pytest.Pytester, db: Path) -> None:
    cases = ", ".join(str(i) for i in range(12))
    pytester.makepyfile(test_many=f'''
import pytest
from assay import testing as t

@pytest.mark.assay(test_suite_name="many")
@pytest.mark.parametrize("i", [{cases}])
def test_i(i):
    t.log_feedback(key="half", score=i % 2)
    assert i != 5
''')
    result = run(pytester, "-n", "2")
    result.assert_outcomes(passed=11, failed=1)
    [exp] = experiments(db)
    client = Client(database_url=f"sqlite:///{db}")
    assert len(list(client.list_runs(project_id=exp.id, is_root=True))) == 12
    assert len(list(client.list_examples(dataset_name="many"))) == 12
    fb = list(client.list_feedback(project_ids=[exp.id]))
    assert sorted(f.key for f in fb) == ["half"] * 12 + ["pass"] * 12
    result.stdout.fnmatch_lines(["*assay: many:* (suite many): 12 test runs*"])


def test_the_gate_fails_a_session_on_a_significant_regression(pytester: pytest.Pytester,
                                                              db: Path) -> None:
    def suite(quality: str) -> None:
        pytester.makepyfile(test_gate=textwrap.dedent(f'''
            import pytest
            from assay import testing as t

            @pytest.mark.assay(test_suite_name="gate")
            @pytest.mark.parametrize("i", range(8))
            def test_q(i):
                t.log_feedback(key="quality", score={quality})
        '''))
    suite("1.0")
    good = run(pytester)
    assert good.ret == 0
    [baseline] = experiments(db)
    suite("1.0 if i < 2 else 0.0")
    gated = run(pytester, "--assay-baseline", "previous", "--assay-fail-on-regression")
    gated.assert_outcomes(passed=8)
    assert gated.ret == 1
    gated.stdout.fnmatch_lines(["*quality: 1 -> 0.25 (diff -0.75*regression*",
                                "*assay: significant regressions:*"])
    out = gated.stdout.str()
    assert "quality regressed" in out and "test_gate.py::test_q[7]" in out
    assert "test_gate.py::test_q[0]" not in out.split("quality regressed")[1]
    assert "latency regressed" not in out  # sub-millisecond noise never fails the gate
    # the failed session is no 'previous' baseline: the same regression run again fails again
    again = run(pytester, "--assay-baseline", "previous", "--assay-fail-on-regression")
    assert again.ret == 1
    again.stdout.fnmatch_lines([f"*against {baseline.name}:*", "*quality: 1 -> 0.25*"])
    # a baseline that cannot be read fails the gate (it turned it off), the statistics shown
    typo = run(pytester, "--assay-baseline", "no-such-experiment", "--assay-fail-on-regression")
    assert typo.ret == 1
    typo.stdout.fnmatch_lines(["*assay: gate:* (suite gate): 8 test runs*",
                               "*the regression gate could not run*",
                               "*baseline 'no-such-experiment'*not found*"])
    # ... and that session is no 'previous' baseline either: the regression still fails
    after_typo = run(pytester, "--assay-baseline", "previous", "--assay-fail-on-regression")
    assert after_typo.ret == 1
    after_typo.stdout.fnmatch_lines([f"*against {baseline.name}:*", "*quality: 1 -> 0.25*"])
    alone = run(pytester, "--assay-fail-on-regression")  # nothing to gate against
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--assay-fail-on-regression needs --assay-baseline*"])
    lenient = run(pytester, "--assay-baseline", baseline.name)
    assert lenient.ret == 0
    lenient.stdout.fnmatch_lines([f"*against {baseline.name}:*",
                                  "*significant regressions (not failing the session)*"])


def test_a_distance_that_grows_is_a_regression(pytester: pytest.Pytester, db: Path) -> None:
    """``expect.edit_distance`` records a distance: lower is better. An answer that got worse
    (0 -> 0.92) was reported as an improvement and passed the gate."""
    def suite(answer: str) -> None:
        pytester.makepyfile(test_ed=textwrap.dedent(f'''
            import pytest
            from assay import testing as t

            @pytest.mark.assay(test_suite_name="ed")
            @pytest.mark.parametrize("i", range(8))
            def test_ed(i):
                t.expect.edit_distance({answer!r}, "hello world")
        '''))
    suite("hello world")
    assert run(pytester).ret == 0
    suite("goodbye moon")
    gated = run(pytester, "--assay-baseline", "previous", "--assay-fail-on-regression")
    assert gated.ret == 1
    gated.stdout.fnmatch_lines(["*edit_distance: 0 -> 0.9167*regression*"])
    assert not [line for line in gated.stdout.lines
                if "edit_distance:" in line and "improvement" in line]


def test_a_gated_session_fails_when_its_results_cannot_be_stored(
        pytester: pytest.Pytester, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong key or a server that is down: the tests still run, but a session asked to fail
    on a regression cannot pass on a comparison that never ran (it exited 0)."""
    pytester.makepyfile(test_gate=textwrap.dedent("""
        import pytest
        from assay import testing as t

        @pytest.mark.assay(test_suite_name="gate-down")
        def test_q():
            t.log_feedback(key="quality", score=1.0)
    """))
    monkeypatch.delenv("ASSAY_DATABASE_URL")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("ASSAY_API_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("ASSAY_API_KEY", "asy_wrong")
    plain = run(pytester)
    plain.assert_outcomes(passed=1)
    assert plain.ret == 0  # not gated: the tests' own outcome
    gated = run(pytester, "--assay-baseline", "previous", "--assay-fail-on-regression")
    gated.assert_outcomes(passed=1)
    assert gated.ret == 1
    gated.stdout.fnmatch_lines(["*the regression gate could not run*failing the session*"])


UPSONIC_SUITE = '''
import pytest
from openai import AsyncOpenAI
from upsonic import Agent
from upsonic.models.openai import OpenAIChatModel
from upsonic.providers.openai import OpenAIProvider

from assay.integrations._upsonic_native import is_captured


@pytest.fixture
def agent():  # built before each test runs: the second one after assay instrumented Upsonic
    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")
    return Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client)))


@pytest.mark.assay(test_suite_name="upsonic-suite")
@pytest.mark.parametrize("n", [1, 2])
def test_agent_is_traced_from_its_own_objects(agent, n):
    assert is_captured(agent)
'''


def test_assay_tests_move_fixture_built_upsonic_agents_off_upsonics_instrumentation(
        pytester: pytest.Pytester, db: Path) -> None:
    """An Upsonic agent a fixture builds after assay instrumented Upsonic (the second test) is
    traced from its own objects by the time the test runs, not through Upsonic's spans."""
    pytest.importorskip("upsonic", reason="needs assay[upsonic]")
    pytester.makepyfile(test_upsonic_suite=UPSONIC_SUITE)
    run(pytester).assert_outcomes(passed=2)


def test_the_summary_line_shows_a_small_cost_to_the_micro_dollar() -> None:
    """A suite on a cheap model costs fractions of a cent: shown as $0.000020, not $0.0000."""
    from types import SimpleNamespace

    from assay.testing._summary import _stats_line

    def line(cost: float) -> str:
        return _stats_line(SimpleNamespace(run_count=3, latency_p50=None, latency_p99=None,
                                           total_tokens=69, total_cost=cost, feedback_stats={}))

    assert "| cost $0.000020" in line(0.0000198)
    assert "| cost $1.2346" in line(1.23456)


def test_a_latency_change_the_gate_lets_pass_is_not_called_a_regression() -> None:
    """The per-metric line of a significant but small slowdown (3 ms -> 6 ms) says it is under
    the gate rather than "regression", which the session's verdict would contradict."""
    from types import SimpleNamespace

    from assay.testing._summary import _status

    def diff(base: float, low: float, kind: str = "latency") -> str:
        return _status(SimpleNamespace(status="regression", kind=kind, baseline_mean=base,
                                       ci_low=low))

    assert diff(0.003, 0.0007).startswith("slower, under the gate (10 ms and 20%")
    assert diff(0.100, 0.030) == "regression"  # 30 ms and 30%: the gate's regression
    assert diff(0.003, 0.0007, kind="feedback") == "regression"


def test_the_first_test_s_latency_holds_no_lazy_import(pytester: pytest.Pytester,
                                                       db: Path) -> None:
    """What ``expect`` imports on first use is imported before the first marked test's run
    starts (its latency held 9-13 ms of rapidfuzz before)."""
    pytester.makepyfile(test_warm='''
import sys
import pytest
from assay import testing as t

def test_unmarked_first():
    assert "rapidfuzz.distance" not in sys.modules  # nothing imported before it is needed

@pytest.mark.assay(test_suite_name="warm")
def test_first():
    assert "rapidfuzz.distance" in sys.modules and "numpy" in sys.modules
    t.expect.edit_distance("hello", "helo").to_be_less_than(0.5)
''')
    run(pytester).assert_outcomes(passed=2)
