"""Dataset import/export as JSONL and CSV, all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.client import Client
from assay.errors import ExampleValidationError, InvalidInputError


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_import_round_trip(client: Client, tmp_path: Path, fmt: str) -> None:
    ds = client.create_dataset("src")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": "What is 2+2?", "n": 4, "tags": ["math"]}, "outputs": {"a": "4"},
         "metadata": {"level": 1}, "split": "test"},
        {"inputs": {"q": 'quotes "and", commas'}, "outputs": None, "split": ["train", "hard"]},
        {"inputs": {"q": "", "n": 0, "s": "0042"}, "outputs": {"a": ""}},  # "" is not absent
    ])
    path = tmp_path / f"out.{fmt}"
    assert client.export_dataset(path, dataset_name="src") == 3
    copy = client.import_dataset(path, dataset_name="copy")
    assert copy.example_count == 3
    src = sorted(client.list_examples(dataset_id=ds.id), key=lambda e: str(e.inputs["q"]))
    dst = sorted(client.list_examples(dataset_id=copy.id), key=lambda e: str(e.inputs["q"]))
    assert [e.inputs for e in dst] == [e.inputs for e in src]
    assert [e.outputs or None for e in dst] == [e.outputs or None for e in src]
    assert [e.split for e in dst] == [e.split for e in src]
    assert dst[1].metadata["level"] == 1 and "level" not in dst[2].metadata


def test_export_as_of_a_tag(client: Client, tmp_path: Path) -> None:
    ds = client.create_dataset("tagged")
    client.create_example({"v": 1}, dataset_id=ds.id)
    client.update_dataset_tag(dataset_id=ds.id, tag="v1")
    client.create_example({"v": 2}, dataset_id=ds.id)
    path = tmp_path / "v1.jsonl"
    assert client.export_dataset(path, dataset_id=ds.id, as_of="v1") == 1
    assert json.loads(path.read_text().splitlines()[0])["inputs"] == {"v": 1}


def test_bad_jsonl_line_stores_nothing(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"inputs": {"q": 1}}\n{"inputs": {"q": 2}\n')
    with pytest.raises(ExampleValidationError, match="bad.jsonl:2: invalid JSON"):
        client.import_dataset(path, dataset_name="bad")
    assert not client.has_dataset(dataset_name="bad")


def test_bad_example_in_file_stores_nothing(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "bad2.jsonl"
    path.write_text('{"inputs": {"q": 1}}\n{"inputs": [1, 2]}\n')
    with pytest.raises(ExampleValidationError, match="index 1"):
        client.import_dataset(path, dataset_name="bad2")
    assert not client.has_dataset(dataset_name="bad2")


def test_upload_csv_with_named_columns(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("question,answer,ignored\nhi,hello,x\nbye,goodbye,y\n")
    ds = client.upload_csv(path, input_keys=["question"], output_keys=["answer"], name="plain")
    got = [(e.inputs, e.outputs) for e in client.list_examples(dataset_id=ds.id)]
    assert got == [({"question": "hi"}, {"answer": "hello"}),
                   ({"question": "bye"}, {"answer": "goodbye"})]
    with pytest.raises(InvalidInputError, match=r"no column\(s\) \['nope'\]"):
        client.upload_csv(path, input_keys=["nope"], output_keys=[], name="x")


def test_unknown_format_is_named(client: Client, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="unknown dataset format 'xml'"):
        client.import_dataset(tmp_path / "a.xml")


def test_a_lone_surrogate_is_exported_and_read_back_exactly(client: Client,
                                                            tmp_path: Path) -> None:
    """A string JSON gave as ``"\\ud800"`` cannot be written as UTF-8: a CSV cell holds it as
    JSON text (the export failed half way), a JSONL line escaped."""
    ds = client.create_dataset("surrogates")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"q": "x\ud800y", "n": {"k": "\udfff"}}, "outputs": {"a": "\ud83d"}}])
    for fmt in ("csv", "jsonl"):
        path = tmp_path / f"out.{fmt}"
        assert client.export_dataset(path, dataset_name="surrogates") == 1
        path.read_text(encoding="utf-8")  # valid UTF-8
        copy = client.import_dataset(path, dataset_name=f"copy-{fmt}")
        (got,) = client.list_examples(dataset_id=copy.id)
        assert got.inputs == {"q": "x\ud800y", "n": {"k": "\udfff"}}
        assert got.outputs == {"a": "\ud83d"}


def test_a_csv_row_cut_short_is_refused_by_line(client: Client, tmp_path: Path) -> None:
    """Missing cells would read as keys left out: the example stored without them."""
    path = tmp_path / "short.csv"
    path.write_text('inputs.q,inputs.n,outputs.a\nhi,1,hello\n"two\nlines",2,x\nbye,3\n')
    with pytest.raises(ExampleValidationError, match=r"short.csv:5: fewer cells than columns "
                                                     r"\(2 of 3\)"):
        client.import_dataset(path, dataset_name="short")
    assert not client.has_dataset(dataset_name="short")
    path.write_text("question,answer\nhi,hello\nbye\n")
    with pytest.raises(ExampleValidationError, match="short.csv:3: fewer cells"):
        client.upload_csv(path, input_keys=["question"], output_keys=["answer"], name="plain")


def test_an_export_to_an_unknown_format_names_the_ones_written(client: Client,
                                                                tmp_path: Path) -> None:
    client.create_dataset("named")
    with pytest.raises(InvalidInputError, match=r"'txt' .*use jsonl, csv or openai$"):
        client.export_dataset(tmp_path / "x.txt", dataset_name="named")
    with pytest.raises(InvalidInputError, match="use jsonl, csv, openai or adk-evalset"):
        client.import_dataset(tmp_path / "x.txt")
