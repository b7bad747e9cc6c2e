"""Prices of the user's own (ASSAY_MODEL_PRICES): aliases, own prices, order, bad rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay import InvalidInputError, set_model_prices
from assay._model_prices import ENV
from assay._usage import price


@pytest.fixture(autouse=True)
def _no_rules_after() -> Iterator[None]:
    yield
    set_model_prices(None)


def test_an_alias_prices_a_deployment_as_the_model_it_serves() -> None:
    assert price("azure", "prod-chat", 1000, 100) is None  # genai-prices knows no such model
    set_model_prices([{"model": "prod-chat", "price_as": "gpt-4o"}])
    assert price("azure", "prod-chat", 1000, 100) == price("azure", "gpt-4o", 1000, 100)
    # cache reads priced as the aliased model's are
    assert price("azure", "prod-chat", 1000, 100, 800) == price("azure", "gpt-4o", 1000, 100, 800)
    assert price("azure", "prod-chat-2", 1000, 100) is None  # an exact name


def test_own_prices_per_million_tokens_with_cache_reads_and_writes() -> None:
    set_model_prices([{"match": "^ft:gpt-4o-mini", "input": 0.30, "output": 1.20,
                       "cache_read": 0.15, "cache_write": 0.375}])
    model = "ft:gpt-4o-mini-2024-07-18:acme::x1"
    assert price("openai", model, 1_000_000, 1_000_000) == pytest.approx((0.30, 1.20))
    # 600k plain, 300k read, 100k written of 1M input tokens
    prompt, completion = price("openai", model, 1_000_000, 0, 300_000, 100_000)
    assert prompt == pytest.approx(0.6 * 0.30 + 0.3 * 0.15 + 0.1 * 0.375)
    assert completion == 0
    set_model_prices([{"model": "local-llama", "input": 0.2, "output": 0.4}])
    # no cache prices given: cached tokens at the input price
    assert price(None, "local-llama", 1000, 0, 500)[0] == pytest.approx(1000 * 0.2 / 1e6)


def test_first_matching_rule_wins_and_a_provider_narrows_a_rule() -> None:
    list_price = price("openai", "gpt-4o-mini", 1_000_000, 0)
    set_model_prices([{"model": "gpt-4o-mini", "provider": "azure", "input": 0.1, "output": 0.2},
                      {"match": "gpt-4o", "input": 9, "output": 9},
                      {"model": "gpt-4o-mini", "input": 1, "output": 1}])
    assert price("azure", "gpt-4o-mini", 1_000_000, 0)[0] == pytest.approx(0.1)
    assert price("openai", "gpt-4o-mini", 1_000_000, 0)[0] == pytest.approx(9)  # 2nd, before 3rd
    assert price("openai", "claude-haiku-4-5", 1, 1) == price("anthropic", "claude-haiku-4-5", 1, 1)
    set_model_prices(None)
    assert price("openai", "gpt-4o-mini", 1_000_000, 0) == list_price


@pytest.mark.parametrize(("rules", "says"), [
    ([{"price_as": "gpt-4o"}], "exactly one of 'model'"),
    ([{"model": "a", "match": "b", "price_as": "gpt-4o"}], "exactly one of 'model'"),
    ([{"model": "a"}], "give 'price_as'"),
    ([{"model": "a", "input": 1}], "give 'price_as'"),
    ([{"model": "a", "price_as": "gpt-4o", "input": 1}], "not both"),
    ([{"match": "(", "input": 1, "output": 1}], "not a regular expression"),
    ([{"model": "a", "input": -1, "output": 1}], "rule 0: input:"),
    ([{"model": "a", "input": 1, "output": 1, "currency": "EUR"}], "rule 0: currency:"),
    ([{"model": "a", "price_as": "gpt-4o"}, {"model": "b"}], "rule 1:"),
])
def test_a_bad_rule_is_refused_naming_it_and_nothing_changes(rules: list, says: str) -> None:
    set_model_prices([{"model": "kept", "price_as": "gpt-4o"}])
    with pytest.raises(InvalidInputError, match=says):
        set_model_prices(rules)
    assert price(None, "kept", 1000, 0) == price(None, "gpt-4o", 1000, 0)  # the rules in force


def test_a_file_of_rules_and_bad_files(tmp_path: Path) -> None:
    good = tmp_path / "prices.json"
    good.write_text(json.dumps([{"model": "prod-chat", "price_as": "gpt-4o"}]))
    set_model_prices(good)
    assert os.environ[ENV] == str(good)
    assert price(None, "prod-chat", 1000, 0) == price(None, "gpt-4o", 1000, 0)
    with pytest.raises(InvalidInputError, match="cannot read the price file"):
        set_model_prices(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": "x"}')
    with pytest.raises(InvalidInputError, match=r"bad.json\): expected a list of rules"):
        set_model_prices(bad)
    bad.write_text("[{")
    with pytest.raises(InvalidInputError, match="not JSON"):
        set_model_prices(bad)


def test_the_environment_variable_prices_a_new_process(tmp_path: Path) -> None:
    """What a fold process or ``assay serve`` started with the variable reads."""
    env = {**os.environ, ENV: json.dumps([{"model": "prod-chat", "price_as": "gpt-4o"}])}
    done = subprocess.run([sys.executable, "-c", (
        "import json; from assay._usage import price; "
        "print(json.dumps([price(None, m, 1000, 100) for m in ('prod-chat', 'gpt-4o')]))")],
        env=env, capture_output=True, text=True, timeout=60, check=True)
    aliased, listed = json.loads(done.stdout)
    assert aliased == listed and listed is not None


def test_a_bad_rule_in_the_environment_never_fails_the_store(tmp_path: Path) -> None:
    """Costs are computed as runs are stored: a bad ASSAY_MODEL_PRICES there is logged, naming
    the rule, and ignored (genai-prices prices), so a typo never leaves runs unstored;
    ``assay prices`` and ``assay serve`` refuse it at once (tests/cli/test_prices_cli.py)."""
    env = {**os.environ, ENV: json.dumps([{"model": "prod-chat"}]),
           "ASSAY_DATABASE_URL": f"sqlite:///{tmp_path / 'assay.db'}"}
    script = (
        "import json, uuid\n"
        "from assay.client import Client\n"
        "client = Client()\n"
        "rid = uuid.uuid4()\n"
        "client.create_run(id=rid, name='chat', run_type='llm', inputs={}, outputs={},\n"
        "    extra={'metadata': {'ls_provider': 'openai', 'ls_model_name': 'gpt-4o',\n"
        "        'usage_metadata': {'input_tokens': 1000, 'output_tokens': 100}}})\n"
        "client.flush()\n"
        "run = client.read_run(rid)\n"
        "print(json.dumps([run.prompt_cost, run.completion_cost]))\n")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == list(
        price("openai", "gpt-4o", 1000, 100))
    assert "ASSAY_MODEL_PRICES: rule 0: give 'price_as'" in done.stderr


_TRACED_THEN_KILLED = r"""
import os, sys, uuid
from assay import traceable
from assay.client import Client

client = Client()

@traceable(run_type="llm", name="chat", client=client,
           metadata={"ls_provider": "openai", "ls_model_name": "prod-chat"})
def chat(q):
    return {"content": "hi", "usage_metadata": {"input_tokens": 1000, "output_tokens": 100,
                                                "total_tokens": 1100}}

chat("q")  # the tracing writer's batch (value lists)
client.create_run(id=uuid.UUID(sys.argv[1]), name="posted", run_type="llm", inputs={},
                  outputs={}, extra={"metadata": {"ls_provider": "openai",
                  "ls_model_name": "prod-chat", "usage_metadata": {"input_tokens": 1000,
                  "output_tokens": 100}}})
client.flush()
os._exit(0)  # gone before its batches were folded: another process folds them
"""


def _journal_and_die(url: str, rules: list | None) -> str:
    run_id = str(uuid.uuid4())
    env = {**os.environ, "ASSAY_DATABASE_URL": url, "ASSAY_BACKGROUND_FOLD": "0",
           "ASSAY_TRACING": "true", "ASSAY_PROJECT": f"prices-{run_id}"}
    env.pop(ENV, None)
    if rules is not None:
        env[ENV] = json.dumps(rules)
    done = subprocess.run([sys.executable, "-c", _TRACED_THEN_KILLED, run_id], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return run_id


def test_runs_are_priced_by_the_rules_of_the_process_that_traced_them(store_url: str) -> None:
    """A process that exits before its runs are folded leaves them to another process's fold
    (a reader, ``assay serve``): they are priced with the rules they were traced under, not
    the folder's (nor without any)."""
    from assay.client import Client
    from assay.store import Store

    listed = price("openai", "gpt-4o", 1000, 100)
    assert listed is not None and price("openai", "prod-chat", 1000, 100) is None
    traced_with = _journal_and_die(store_url, [{"model": "prod-chat", "price_as": "gpt-4o"}])
    traced_without = _journal_and_die(store_url, None)
    # the folding process has rules of its own, which neither batch was traced under
    set_model_prices([{"model": "prod-chat", "input": 500, "output": 500}])
    store = Store.open(store_url)
    try:
        client = Client(store=store)
        for run_id, expected in ((traced_with, listed), (traced_without, None)):
            posted = client.read_run(run_id)
            chats = [r for r in client.list_runs(project_name=f"prices-{run_id}")
                     if r.name == "chat"]
            assert len(chats) == 1 and chats[0].total_tokens == 1100
            for run in (posted, chats[0]):
                costs = (run.prompt_cost, run.completion_cost)
                if expected is None:
                    assert costs == (None, None)
                else:
                    assert costs == pytest.approx(expected)
        # the rules of this process still price what it traces itself
        assert price("openai", "prod-chat", 1_000_000, 0)[0] == pytest.approx(500)
    finally:
        store.close()
