"""``assay prices``: a model's prices per million tokens and their source (a rule of
ASSAY_MODEL_PRICES, genai-prices, none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay import set_model_prices
from assay._usage import price
from assay.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_rules_after() -> Iterator[None]:
    yield
    set_model_prices(None)


def test_each_model_its_prices_and_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.cli import _common

    monkeypatch.setattr(_common.console, "width", 250)  # rich sizes tables to the terminal
    set_model_prices([{"model": "prod-chat", "price_as": "gpt-4o"},
                      {"match": "^local-", "input": 0.2, "output": 0.4}])
    result = runner.invoke(app, ["prices", "gpt-4o", "prod-chat", "local-llama", "nobody-knows",
                                 "claude-sonnet-4-5", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["model"]: r for r in json.loads(result.stdout)}
    listed = price(None, "gpt-4o", 1000, 1000)
    assert rows["gpt-4o"]["source"] == "genai-prices"
    assert rows["gpt-4o"]["input"] == pytest.approx(listed[0] * 1000)
    assert rows["gpt-4o"]["output"] == pytest.approx(listed[1] * 1000)
    assert rows["prod-chat"]["source"] == "ASSAY_MODEL_PRICES rule 0 (as gpt-4o)"
    assert {k: rows["prod-chat"][k] for k in ("input", "output", "cache_read")} == {
        k: rows["gpt-4o"][k] for k in ("input", "output", "cache_read")}
    local = rows["local-llama"]
    assert local["source"] == "ASSAY_MODEL_PRICES rule 1"
    assert (local["input"], local["output"], local["cache_read"]) == (0.2, 0.4, 0.2)
    assert rows["nobody-knows"]["source"] == "none: unpriced"
    assert rows["nobody-knows"]["input"] is None
    # per million at an ordinary call's size: not the long-context tier a million would cross
    sonnet = price(None, "claude-sonnet-4-5", 1000, 0)
    assert rows["claude-sonnet-4-5"]["input"] == pytest.approx(sonnet[0] * 1000)
    table = runner.invoke(app, ["prices", "prod-chat"])
    assert table.exit_code == 0 and "rule 0 (as gpt-4o)" in table.stdout


def test_a_bad_rule_in_the_environment_is_named() -> None:
    env = {**os.environ, "ASSAY_MODEL_PRICES": json.dumps([{"model": "a", "input": 1}])}
    assay = Path(sys.executable).with_name("assay")  # the command, as installed
    done = subprocess.run([str(assay), "prices", "gpt-4o"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "ASSAY_MODEL_PRICES: rule 0: give 'price_as'" in " ".join(done.stderr.split())


def test_assay_serve_refuses_a_bad_rule_before_serving(tmp_path: Path) -> None:
    env = {**os.environ, "ASSAY_MODEL_PRICES": json.dumps([{"match": "(", "input": 1,
                                                             "output": 1}])}
    assay = Path(sys.executable).with_name("assay")
    done = subprocess.run([str(assay), "serve", "--db", f"sqlite:///{tmp_path / 'a.db'}",
                           "--port", "0"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert "rule 0: 'match' is not a regular expression" in " ".join(
        (done.stdout + done.stderr).split())
    assert not (tmp_path / "a.db").exists()  # refused before anything was made
