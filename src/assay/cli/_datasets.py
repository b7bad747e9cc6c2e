"""``assay datasets``: list, show, import and export."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import InvalidInputError
from ._common import (
    DbOption,
    JsonOption,
    console,
    emit_json,
    handle_errors,
    open_client,
    styled,
)

app = typer.Typer(help="Work with datasets and their examples.", no_args_is_help=True)


@app.command("list")
def list_(db: DbOption = None, json_out: JsonOption = False) -> None:
    """List datasets, newest first."""
    with handle_errors():
        items = list(open_client(db).list_datasets())
    if json_out:
        emit_json([d.model_dump() for d in items])
        return
    table = Table("name", "examples", "experiments", "modified", "id")
    for d in items:
        table.add_row(d.name, str(d.example_count), str(d.session_count),
                      d.modified_at.isoformat(timespec="seconds") if d.modified_at else "",
                      str(d.id))
    console.print(table)


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    db: DbOption = None,
    split: Annotated[list[str] | None, typer.Option(help="Only these splits.")] = None,
    as_of: Annotated[str | None, typer.Option(help="A version tag or ISO time.")] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many examples.")] = 20,
    json_out: JsonOption = False,
) -> None:
    """Show a dataset's examples, splits and versions."""
    with handle_errors():
        client = open_client(db)
        ds = client.read_dataset(dataset_name=name)
        examples = list(client.list_examples(dataset_id=ds.id, splits=split, as_of=as_of,
                                             limit=limit))
        versions = list(client.list_dataset_versions(dataset_id=ds.id))
    if json_out:
        emit_json({"dataset": ds.model_dump(), "examples": [e.model_dump() for e in examples],
                   "versions": [v.model_dump() for v in versions]})
        return
    console.print(styled((ds.name, "bold"), f" ({ds.example_count} examples) {ds.id}"))
    table = Table()
    # kept whole: an id is a UUIDv7, whose first digits are its time, the same for examples
    # created together (their first 8 characters were one id for every row)
    table.add_column("id", no_wrap=True)
    for header in ("split", "inputs", "outputs"):
        table.add_column(header)
    for e in examples:
        table.add_row(str(e.id), ",".join(e.split or []), str(e.inputs)[:80],
                      str(e.outputs)[:80])
    console.print(table)
    if versions:
        console.print("versions: " + ", ".join(
            v.as_of.isoformat() + (f" [{', '.join(v.tags)}]" if v.tags else "")
            for v in versions[:10]))


@app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(
        help="A .jsonl or .csv file, or a Google ADK eval set (.evalset.json, .test.json).")],
    name: Annotated[str | None, typer.Option(help="Dataset name (default: file name).")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", help="jsonl, csv, openai (OpenAI fine-tuning lines) or adk-evalset "
        "(default: from the file name).")] = None,
    input_keys: Annotated[str | None, typer.Option(
        "--input-keys", help="A plain CSV's input columns, comma-separated (default: the "
        "columns named inputs.<key>).")] = None,
    output_keys: Annotated[str | None, typer.Option(
        "--output-keys", help="A plain CSV's reference-output columns, comma-separated "
        "(with --input-keys).")] = None,
    keep_ids: Annotated[bool, typer.Option(
        "--keep-ids", help="Keep the example ids the file gives (moving a dataset to another "
        "store); by default the examples get new ids, so a copy can live beside its "
        "source.")] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Create a dataset from a JSONL or CSV file or an ADK eval set (all rows or none)."""
    def keys(text: str | None) -> list[str] | None:
        return None if text is None else [k.strip() for k in text.split(",") if k.strip()]

    with handle_errors():
        if output_keys is not None and input_keys is None:
            raise InvalidInputError("--output-keys needs --input-keys")
        if not path.exists():  # before a store is created for it
            raise InvalidInputError(f"dataset file {path} does not exist")
        ds = open_client(db, create=True).import_dataset(
            path, dataset_name=name, format=format, input_keys=keys(input_keys),
            output_keys=keys(output_keys), keep_ids=keep_ids)
    if json_out:
        emit_json(ds.model_dump())
    else:
        console.print(f"imported {ds.example_count} examples into {ds.name!r} ({ds.id})")


@app.command("export")
def export(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    path: Annotated[Path, typer.Argument(help="Output .jsonl or .csv file.")],
    as_of: Annotated[str | None, typer.Option(help="A version tag or ISO time.")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", help="jsonl, csv or openai (OpenAI fine-tuning lines; default: from the "
        "file name).")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Write a dataset's examples to a JSONL or CSV file, or as OpenAI fine-tuning JSONL."""
    with handle_errors():
        n = open_client(db).export_dataset(path, dataset_name=name, as_of=as_of, format=format)
    if json_out:
        emit_json({"dataset": name, "path": str(path), "examples": n, "as_of": as_of})
    else:
        console.print(f"wrote {n} examples to {path}")
