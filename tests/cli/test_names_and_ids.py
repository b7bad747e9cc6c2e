"""What the CLI shows of ids and names: ids that tell rows apart, keys revoked by what
``keys list`` shows, and errors that name an experiment or a dataset as the user knows it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.client import Client


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), terminal_width=200)


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich sizes its tables to the terminal; these tests read them as a 200-column one."""
    from assay.cli import _common

    monkeypatch.setattr(_common.console, "width", 200)


def test_datasets_show_tells_the_examples_apart(sqlite_url: str) -> None:
    """Examples created together share their UUIDv7's first digits (its time): the first 8
    made one id for every row."""
    with Client(database_url=sqlite_url) as client:
        ds = client.create_dataset("D")
        client.create_examples(dataset_id=ds.id, examples=[
            {"inputs": {"q": str(i)}, "outputs": {"a": str(i)}} for i in range(3)])
        ids = {str(e.id) for e in client.list_examples(dataset_id=ds.id)}
    result = invoke("datasets", "show", "D", "--db", sqlite_url)
    assert result.exit_code == 0, result.output
    assert len(ids) == 3 and all(i in result.output for i in ids)


def test_experiments_show_names_an_experiment(sqlite_url: str) -> None:
    result = invoke("experiments", "show", "nope", "--db", sqlite_url)
    assert result.exit_code == 3, result.output
    assert "experiment 'nope' not found" in result.output
    assert "project" not in result.output


def test_evaluate_names_an_empty_dataset(sqlite_url: str) -> None:
    from assay import evaluate
    from assay.errors import InvalidInputError

    with Client(database_url=sqlite_url) as client:
        ds = client.create_dataset("Empty")
        with pytest.raises(InvalidInputError) as raised:
            evaluate(lambda inputs: {"output": 1}, data="Empty", client=client)
    assert str(raised.value).startswith(f"dataset 'Empty' ({ds.id}) has no examples")


def _keys(url: str) -> list[dict[str, Any]]:
    keys: list[dict[str, Any]] = json.loads(invoke("keys", "list", "--db", url, "--json").output)
    return keys


def test_keys_revoke_takes_what_keys_list_shows(sqlite_url: str) -> None:
    for _ in range(3):
        assert invoke("keys", "create", "--db", sqlite_url).exit_code == 0
    first, second, third = _keys(sqlite_url)

    by_prefix = invoke("keys", "revoke", first["prefix"], "--db", sqlite_url)
    assert by_prefix.exit_code == 0, by_prefix.output
    # a start of the id: the help promised it, the store took only the whole id
    start = second["id"][:8]
    while sum(k["id"].startswith(start) for k in (first, third)):  # (made in the same moment:
        start = second["id"][:len(start) + 1]  # the start grows until it names one key)
    by_start = invoke("keys", "revoke", start, "--db", sqlite_url)
    assert by_start.exit_code == 0, by_start.output
    assert f"revoked key {second['id']}" in by_start.output
    revoked = {k["id"]: k["revoked_at"] is not None for k in _keys(sqlite_url)}
    assert revoked == {first["id"]: True, second["id"]: True, third["id"]: False}


def test_keys_revoke_refuses_a_start_that_names_several_or_is_short(sqlite_url: str) -> None:
    for _ in range(2):
        assert invoke("keys", "create", "--db", sqlite_url).exit_code == 0
    a, b = _keys(sqlite_url)
    common = 0
    while a["id"][common] == b["id"][common]:
        common += 1
    if common >= 8:
        both = invoke("keys", "revoke", a["id"][:common], "--db", sqlite_url)
        assert both.exit_code == 2 and "starts the ids of 2 keys" in both.output
    short = invoke("keys", "revoke", a["id"][:5], "--db", sqlite_url)
    assert short.exit_code == 3 and "not found" in short.output
    assert all(k["revoked_at"] is None for k in _keys(sqlite_url))


def test_keys_revoke_help_says_what_it_takes() -> None:
    said = " ".join(invoke("keys", "revoke", "--help").output.split())
    assert "unique prefix" not in said
    assert "its id" in said and "asy_" in said


def test_a_plain_csv_is_imported_by_naming_its_columns(sqlite_url: str, tmp_path: Any) -> None:
    """The error for a CSV without inputs.<key> columns named options the CLI lacked."""
    data = tmp_path / "plain.csv"
    data.write_text("question,answer,notes\nWhat is 2+2?,4,easy\n")
    refused = invoke("datasets", "import", str(data), "--db", sqlite_url)
    assert refused.exit_code == 2 and "--input-keys" in refused.output
    assert "question, answer, notes" in refused.output
    done = invoke("datasets", "import", str(data), "--input-keys", "question",
                  "--output-keys", "answer", "--db", sqlite_url)
    assert done.exit_code == 0, done.output
    [ex] = Client(database_url=sqlite_url).list_examples(dataset_name="plain")
    assert ex.inputs == {"question": "What is 2+2?"} and ex.outputs == {"answer": "4"}
    alone = invoke("datasets", "import", str(data), "--output-keys", "answer", "--db", sqlite_url)
    assert alone.exit_code == 2 and "--output-keys needs --input-keys" in alone.output
    flat = tmp_path / "flat.jsonl"
    flat.write_text('{"question": "2+2?", "answer": "4"}\n')
    shaped = invoke("datasets", "import", str(flat), "--db", sqlite_url)
    assert shaped.exit_code != 0 and '{"inputs": {...}, "outputs": {...}}' in shaped.output


def test_datasets_export_reports_as_json(sqlite_url: str, tmp_path: Any) -> None:
    """The README promises --json on every command that reports: export says what it wrote."""
    import json

    data = tmp_path / "two.csv"
    data.write_text("inputs.q,outputs.a\n1,2\n3,4\n")
    assert invoke("datasets", "import", str(data), "--db", sqlite_url).exit_code == 0
    out = tmp_path / "back.jsonl"
    done = invoke("datasets", "export", "two", str(out), "--db", sqlite_url, "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {"dataset": "two", "path": str(out), "examples": 2,
                                       "as_of": None}
    assert len(out.read_text().splitlines()) == 2


def test_datasets_import_keeps_the_files_ids_when_asked(sqlite_url: str, tmp_path: Any) -> None:
    """An export moved to another store keeps its example ids with --keep-ids (the runs and
    feedback that name them still find them); by default a copy gets ids of its own."""
    source = Client(database_url=sqlite_url)
    ds = source.create_dataset("moved")
    source.create_examples(dataset_id=ds.id, examples=[{"inputs": {"q": 1}},
                                                       {"inputs": {"q": 2}}])
    ids = {str(e.id) for e in source.list_examples(dataset_id=ds.id)}
    out = tmp_path / "moved.jsonl"
    assert invoke("datasets", "export", "moved", str(out), "--db", sqlite_url).exit_code == 0
    other = f"sqlite:///{tmp_path / 'other.db'}"
    kept = invoke("datasets", "import", str(out), "--keep-ids", "--db", other)
    assert kept.exit_code == 0, kept.output
    assert {str(e.id) for e in Client(database_url=other).list_examples(
        dataset_name="moved")} == ids
    fresh = invoke("datasets", "import", str(out), "--name", "copy", "--db", sqlite_url)
    assert fresh.exit_code == 0, fresh.output
    assert not {str(e.id) for e in source.list_examples(dataset_name="copy")} & ids


def test_import_refuses_broken_files_by_name_and_creates_no_store(tmp_path: Any) -> None:
    """An open quote (it read the rest of the file into one cell), bytes that are not UTF-8 (a
    traceback, exit 1), a missing file (it created an empty store first); Excel's BOM is read."""
    db = tmp_path / "new" / "store.db"
    url = f"sqlite:///{db}"
    missing = invoke("datasets", "import", str(tmp_path / "nope.csv"), "--db", url)
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert not db.exists() and not db.parent.exists()
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('question,answer\n"unterminated,a1\nq2,a2\n')
    refused = invoke("datasets", "import", str(quoted), "--input-keys", "question",
                     "--output-keys", "answer", "--db", url)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "malformed CSV" in said and "quoted.csv:" in said
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"inputs": {"q": 1}}\n\xff\xfe\n')
    refused = invoke("datasets", "import", str(binary), "--db", url)
    assert refused.exit_code == 2 and "not UTF-8" in refused.output
    excel = tmp_path / "excel.csv"
    excel.write_bytes("\ufeffinputs.question,outputs.answer\nhi,there\n".encode())
    done = invoke("datasets", "import", str(excel), "--db", url)
    assert done.exit_code == 0, done.output
    [ex] = Client(database_url=url).list_examples(dataset_name="excel")
    assert ex.inputs == {"question": "hi"} and ex.outputs == {"answer": "there"}


def test_import_refuses_nan_which_is_not_json(sqlite_url: str, tmp_path: Any) -> None:
    """``json`` reads NaN; the export wrote it back as a bare NaN no JSON reader takes."""
    data = tmp_path / "nan.jsonl"
    data.write_text('{"inputs": {"q": 1}}\n{"inputs": {"q": NaN}}\n')
    refused = invoke("datasets", "import", str(data), "--db", sqlite_url)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "nan.jsonl:2" in said and "NaN is not a JSON value" in said


def test_experiments_show_of_a_project_without_a_dataset_prints_no_none(
        sqlite_url: str) -> None:
    """A tracing project (or a pytest suite's experiment) has no dataset version and its runs
    no repetition: shown as '-', not as Python's None."""
    client = Client(database_url=sqlite_url)
    client.create_run(id=uuid.uuid4(), name="chat", run_type="chain", inputs={"q": 1},
                      outputs={"a": 2}, project_name="traced-only")
    client.flush()
    shown = invoke("experiments", "show", "traced-only", "--db", sqlite_url)
    assert shown.exit_code == 0, shown.output
    assert "dataset version -" in shown.output and "None" not in shown.output
    assert "--limit shows more" not in shown.output
    client.create_run(id=uuid.uuid4(), name="chat", run_type="chain", inputs={"q": 2},
                      outputs={"a": 3}, project_name="traced-only")
    client.flush()
    cut = invoke("experiments", "show", "traced-only", "--limit", "1", "--db", sqlite_url)
    assert "the first 1 of 2 runs: --limit shows more" in cut.output
