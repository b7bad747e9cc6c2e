"""``assay experiments compare``: table, --json, exit codes; local store and a live server."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.analysis import CompareOptions, compare_experiments
from assay.cli import app
from assay.store import Store

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from assay_factory import T0, LiveServer, Outcome, add_experiment, make_dataset  # noqa: E402


def _seed(store: Store) -> dict[str, Any]:
    ds, examples = make_dataset(store, "qa", 16)

    def base(i: int, ex: Any, rep: int) -> Outcome:
        return Outcome(latency=1 + 0.1 * i, scores={"correctness": 1.0, "toxicity": 0.1})

    def worse(i: int, ex: Any, rep: int) -> Outcome:
        return Outcome(latency=1 + 0.1 * i, scores={"correctness": 0.0 if i % 3 else 1.0,
                                                    "toxicity": 0.1})

    other_ds, other_examples = make_dataset(store, "other", 3)
    return {
        "base": add_experiment(store, ds.id, examples, "base", base),
        "same": add_experiment(store, ds.id, examples, "same", base, start=T0 + timedelta(hours=1)),
        "worse": add_experiment(store, ds.id, examples, "worse", worse,
                                start=T0 + timedelta(hours=2)),
        "elsewhere": add_experiment(store, other_ds.id, other_examples, "elsewhere", base),
    }


@pytest.fixture
def db(sqlite_url: str) -> tuple[str, dict[str, Any]]:
    store = Store.open(sqlite_url)
    data = _seed(store)
    store.close()
    return sqlite_url, data


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["experiments", "compare", *args], env=env,
                              terminal_width=160)


def test_no_regression_exits_zero(db: tuple[str, dict]) -> None:
    url, _ = db
    result = run("base", "same", "--db", url, "--fail-on-regression")
    assert result.exit_code == 0, result.output
    assert "same vs base (baseline)" in result.output
    assert "no significant regressions" in result.output
    assert "correctness" in result.output and "latency" in result.output
    assert "left out" not in result.output  # every example paired


def test_regression_fails_only_when_asked(db: tuple[str, dict]) -> None:
    url, data = db
    plain = run("base", "worse", "--db", url)
    assert plain.exit_code == 0, plain.output
    assert "1 significant regression:" in plain.output and "correctness (worse)" in plain.output
    assert "REGRESSION" in plain.output and "−0.625" in plain.output
    gated = run("base", str(data["worse"].id), "--db", url, "--fail-on-regression")
    assert gated.exit_code == 1
    assert "regression" in gated.output


def test_json_matches_the_analysis(db: tuple[str, dict]) -> None:
    url, data = db
    result = run("base", "same", "worse", "--db", url, "--json", "--seed", "3")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    store = Store.open(url)
    expected, _ = compare_experiments(store, ["base", "same", "worse"], CompareOptions(seed=3))
    store.close()
    assert out["baseline"]["name"] == "base"
    assert [c["name"] for c in out["candidates"]] == ["same", "worse"]
    assert out["regressions"] == 1
    assert out["options"]["seed"] == 3 and out["options"]["resamples"] == 2000
    by_key = {(d["candidate"]["name"], d["metric"], d["kind"]): d for d in out["diffs"]}
    reg = by_key[("worse", "correctness", "feedback")]
    assert reg["status"] == "regression" and reg["regression"] is True
    assert reg["diff"] == pytest.approx(-10 / 16)
    assert reg["ci_high"] < 0 and reg["n"] == 16
    for d in expected.diffs:
        got = by_key[(d.candidate.name, d.metric, d.kind)]
        assert got["diff"] == pytest.approx(d.diff)
        assert (got["ci_low"], got["ci_high"]) == pytest.approx((d.ci_low, d.ci_high))


def test_lower_is_better_option(db: tuple[str, dict]) -> None:
    url, _ = db
    out = json.loads(run("base", "worse", "--db", url, "--json",
                         "--lower-is-better", "correctness").output)
    d = next(d for d in out["diffs"] if d["metric"] == "correctness")
    assert d["better"] == "lower" and d["status"] == "improvement"


@pytest.mark.parametrize("args, code, message", [
    (["base"], 2, "at least two"),
    (["base", "nope"], 3, "experiment 'nope' not found"),  # (the store says "project")
    (["base", "elsewhere"], 2, "same dataset"),
    (["base", "base"], 2, "twice"),
])
def test_bad_input_exit_codes(db: tuple[str, dict], args: list[str], code: int,
                              message: str) -> None:
    url, _ = db
    result = run(*args, "--db", url)
    assert result.exit_code == code, result.output
    assert message in result.output


def test_against_a_live_server(db: tuple[str, dict], tmp_path: Path) -> None:
    """With ASSAY_API_URL set the command reads the experiments over the REST API."""
    from assay.server import create_app

    url, data = db
    base = Store.open(url)
    key = base.keys.create(tenant="cli")
    scoped = base.for_tenant(key.tenant_id)
    _seed(scoped)
    with LiveServer(create_app(store=base)) as live:
        env = {"ASSAY_API_URL": live.url, "ASSAY_API_KEY": key.key, "ASSAY_DATABASE_URL": ""}
        remote = run("base", "worse", "--json", env=env)
    local, _ = compare_experiments(scoped, ["base", "worse"])
    base.close()
    assert remote.exit_code == 0, remote.output
    out = json.loads(remote.output)
    assert out["regressions"] == len(local.regressions) == 1
    for got, want in zip(out["diffs"], local.diffs, strict=True):
        assert got["metric"] == want.metric and got["diff"] == pytest.approx(want.diff)
        assert got["ci_low"] == pytest.approx(want.ci_low)


def test_pairwise_results_among_the_compared(db: tuple[str, dict]) -> None:
    """A comparison of two of the compared experiments (``evaluate((a, b), ...)``) is shown
    beside the differences, in the table and in --json; one of other experiments is not."""
    from assay import evaluate_comparative
    from assay.client import Client

    url, _ = db

    def prefer_right(runs: list[Any], example: Any) -> dict[str, Any]:
        # "base" answers every example right, "worse" two of three wrong (see _seed)
        return {"key": "preferred", "scores": {r.id: int(r.session_id == ids["base"])
                                               for r in runs}}

    client = Client(database_url=url)
    ids = {n: client.read_project(project_name=n).id for n in ("base", "same", "worse")}
    evaluate_comparative(("base", "worse"), evaluators=[prefer_right], client=client,
                         experiment_prefix="base-vs-worse")
    evaluate_comparative(("same", "worse"), evaluators=[prefer_right], client=client,
                         experiment_prefix="same-vs-worse")
    client.close()

    table = run("base", "worse", "--db", url)
    assert table.exit_code == 0, table.output
    assert "pairwise (comparative evaluators)" in table.output
    row = next(line for line in table.output.splitlines() if "preferred" in line)
    assert row.split()[0].startswith("base-vs-worse")
    assert row.split()[1:] == ["preferred", "1", "(n", "16)", "0", "(n", "16)"]  # base, worse
    assert "same-vs-worse" not in table.output  # compares only one of base, worse

    out = json.loads(run("base", "worse", "--db", url, "--json").output)
    assert len(out["pairwise"]) == 1
    assert out["pairwise"][0]["name"] == row.split()[0]
    stats = out["pairwise"][0]["feedback_stats"]["preferred"]
    assert stats[str(ids["base"])] == {"n": 16, "avg": 1.0}
    assert stats[str(ids["worse"])] == {"n": 16, "avg": 0.0}

    plain = run("base", "same", "--db", url)  # no comparison of these two: no pairwise table
    assert plain.exit_code == 0 and "pairwise" not in plain.output



def test_unpaired_examples_are_reported(sqlite_url: str) -> None:
    """A candidate that ran on part of the dataset (killed, or the dataset grew): what was
    left out of the comparison is said, in the table and in --json."""
    store = Store.open(sqlite_url)
    ds, examples = make_dataset(store, "grown", 10)

    def ok(i: int, ex: Any, rep: int) -> Outcome:
        return Outcome(latency=1.0, scores={"correctness": 1.0})

    add_experiment(store, ds.id, examples[:8], "first-eight", ok)
    add_experiment(store, ds.id, examples[3:], "last-seven", ok, start=T0 + timedelta(hours=1))
    store.close()
    table = run("first-eight", "last-seven", "--db", sqlite_url)
    assert table.exit_code == 0, table.output
    assert ("5 examples paired; left out: 3 only in the baseline, 2 only in last-seven"
            in " ".join(table.output.split()))
    out = json.loads(run("first-eight", "last-seven", "--db", sqlite_url, "--json").output)
    [pairing] = out["pairings"]
    assert (pairing["paired"], pairing["only_in_baseline"], pairing["only_in_candidate"],
            pairing["unpaired"]) == (5, 3, 2, 5)
    assert pairing["candidate"]["name"] == "last-seven"
    assert {d["n"] for d in out["diffs"] if d["metric"] == "correctness"} == {5}
