"""Dataset files: JSONL (one example per line), CSV (``inputs.<key>``/``outputs.<key>``), OpenAI
fine-tuning JSONL (``openai``: one conversation a line, ``_openai_ft``), and Google ADK eval sets
(``*.evalset.json``, ``*.test.json``; read only: ``_adk_evalset``)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .. import _json
from ..errors import ExampleValidationError, InvalidInputError
from ..schemas import Example
from ._openai_ft import from_openai_line, openai_lines

__all__ = ["csv_examples", "default_name", "detect_format", "read_examples", "write_examples"]

_FORMATS = ("jsonl", "csv", "openai", "adk-evalset")
_ADK_SUFFIXES = (".evalset.json", ".test.json")  # (the names ADK gives its eval set files)


def default_name(path: str | Path) -> str:
    """A dataset's name from its file's: the name less its suffix (``cities.evalset.json``:
    ``cities``)."""
    name = Path(path).name
    for suffix in _ADK_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


def detect_format(path: str | Path, format: str | None, *, writing: bool = False) -> str:
    """The format named, or the file name's (``writing``: one that is written)."""
    if format is None and Path(path).name.lower().endswith(_ADK_SUFFIXES):
        return "adk-evalset"
    fmt = (format or Path(path).suffix.lstrip(".")).lower()
    if fmt == "json":
        fmt = "jsonl"
    if fmt not in _FORMATS:
        choices = "jsonl, csv or openai" if writing else "jsonl, csv, openai or adk-evalset"
        raise InvalidInputError(f"unknown dataset format {fmt!r} for {path}: use {choices}")
    return fmt


def _looks_like_json(text: str) -> bool:
    if not text:
        return False
    if text[0] in '[{"' or text in ("true", "false", "null"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cell(value: Any) -> str:
    """Plain strings stay readable; anything that would read back as another type is JSON."""
    if isinstance(value, str) and value and not _looks_like_json(value) and _utf8(value):
        return value  # (an empty string is written '""': an empty cell is a key left out)
    return _json.dumps(value)  # (a lone surrogate escaped: a UTF-8 file cannot hold it)


def _utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (not a lone surrogate, which JSON's
    ``"\\ud800"`` gives)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _uncell(text: str) -> Any:
    if _looks_like_json(text):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def write_examples(examples: Iterable[Example], path: str | Path, *,
                   format: str | None = None) -> int:
    fmt = detect_format(path, format, writing=True)
    if fmt == "adk-evalset":
        raise InvalidInputError(f"{path}: ADK eval sets are read, not written: export to "
                                ".jsonl or .csv")
    rows = list(examples)
    lines = openai_lines(rows) if fmt == "openai" else None  # refused before a byte is written
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if lines is not None:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.writelines(_json.dumps(line) + "\n" for line in lines)
    elif fmt == "jsonl":
        with tmp.open("w", encoding="utf-8") as fh:
            for ex in rows:
                meta = {k: v for k, v in (ex.metadata or {}).items() if k != "dataset_split"}
                fh.write(_json.dumps({"id": str(ex.id), "inputs": ex.inputs, "outputs": ex.outputs,
                                      "metadata": meta or None, "split": ex.split}) + "\n")
    else:
        in_keys = sorted({k for ex in rows for k in ex.inputs})
        out_keys = sorted({k for ex in rows for k in (ex.outputs or {})})
        header = ["id"] + [f"inputs.{k}" for k in in_keys] + [f"outputs.{k}" for k in out_keys]
        header += ["metadata", "split"]
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            for ex in rows:
                meta = {k: v for k, v in (ex.metadata or {}).items() if k != "dataset_split"}
                w.writerow(
                    [str(ex.id)]
                    + [_cell(ex.inputs[k]) if k in ex.inputs else "" for k in in_keys]
                    + [_cell((ex.outputs or {})[k]) if k in (ex.outputs or {}) else ""
                       for k in out_keys]
                    + [_json.dumps(meta) if meta else "", ",".join(ex.split or [])]
                )
    tmp.replace(path)  # never leave a half-written export behind
    return len(rows)


def read_examples(
    path: str | Path,
    *,
    format: str | None = None,
    input_keys: Sequence[str] | None = None,
    output_keys: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Parse a dataset file into example dicts; a bad row raises naming its line."""
    fmt = detect_format(path, format)
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"dataset file {path} does not exist")
    if fmt == "adk-evalset":
        from ..integrations._adk_evalset import read_eval_set

        return read_eval_set(path)
    try:
        return _read_rows(path, fmt, input_keys, output_keys)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text ({exc.reason} at byte "
                                f"{exc.start}): save it as UTF-8") from None


def _not_json(word: str) -> Any:
    """NaN and Infinity: ``json`` reads them, but they are not JSON (an export would write them
    back as text no other reader takes)."""
    raise ValueError(f"{word} is not a JSON value")


def _read_rows(path: Path, fmt: str, input_keys: Sequence[str] | None,
               output_keys: Sequence[str] | None) -> list[dict[str, Any]]:
    """The examples of a JSONL or CSV file (UTF-8, with or without the BOM Excel writes)."""
    out: list[dict[str, Any]] = []
    if fmt in ("jsonl", "openai"):
        with path.open(encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line, parse_constant=_not_json)
                except ValueError as exc:
                    raise ExampleValidationError(len(out),
                                                 f"{path}:{lineno}: invalid JSON: {exc}") from None
                if not isinstance(item, dict):
                    raise ExampleValidationError(len(out), f"{path}:{lineno}: expected an object")
                if fmt == "openai":
                    try:
                        item = from_openai_line(item, f"{path}:{lineno}")
                    except InvalidInputError as exc:
                        raise ExampleValidationError(len(out), str(exc)) from None
                item.pop("dataset_id", None)
                item.pop("created_at", None)
                item.pop("modified_at", None)
                out.append(item)
        return out
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return csv_examples(fh, str(path), input_keys, output_keys)


def csv_examples(lines: Iterable[str], where: str, input_keys: Sequence[str] | None = None,
                 output_keys: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The examples of CSV text (a file opened with ``newline=""``, or lines): its
    ``inputs.<key>``/``outputs.<key>`` columns, or the columns named by ``input_keys`` and
    ``output_keys``. A bad row raises ``ExampleValidationError`` naming ``where`` and its line,
    a missing column ``InvalidInputError``: the file, the CLI's import and the server's
    upload all read CSV here."""
    out: list[dict[str, Any]] = []
    # strict: a quote left open is an error, not the rest of the file read into one cell
    reader = csv.DictReader(lines, strict=True)
    try:
        return _csv_rows(where, reader, input_keys, output_keys, out)
    except csv.Error as exc:
        raise ExampleValidationError(
            len(out), f"{where}:{reader.line_num}: malformed CSV: {exc}") from None


def _csv_rows(where: str, reader: csv.DictReader[str], input_keys: Sequence[str] | None,
              output_keys: Sequence[str] | None, out: list[dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """The rows of a CSV file as examples (``out``, filled as they are read)."""
    cols = reader.fieldnames or []
    if input_keys is not None:
        missing = [k for k in list(input_keys) + list(output_keys or []) if k not in cols]
        if missing:
            raise InvalidInputError(f"{where}: CSV has no column(s) {missing} (its columns: "
                                    f"{', '.join(cols)})")
    elif not any(c.startswith("inputs.") for c in cols):
        raise InvalidInputError(
            f"{where}: CSV needs 'inputs.<key>' (and 'outputs.<key>') columns, or name the "
            f"input and output columns (input_keys=/output_keys=, or --input-keys/"
            f"--output-keys on the command line); columns here: {', '.join(cols)}")
    for row in reader:
        lineno = reader.line_num  # (a quoted cell may span lines)
        if None in row:
            raise ExampleValidationError(len(out), f"{where}:{lineno}: more cells than columns")
        if None in row.values():  # a row cut short would read its missing cells as absent
            given = sum(v is not None for v in row.values())
            raise ExampleValidationError(
                len(out), f"{where}:{lineno}: fewer cells than columns ({given} of {len(cols)})")
        item: dict[str, Any]
        if input_keys is not None:
            item = {
                "inputs": {k: row[k] for k in input_keys},
                "outputs": {k: row[k] for k in (output_keys or [])} or None,
            }
        else:
            item = {
                "inputs": {c[7:]: _uncell(v) for c, v in row.items()
                           if c.startswith("inputs.") and v != ""},
                "outputs": {c[8:]: _uncell(v) for c, v in row.items()
                            if c.startswith("outputs.") and v != ""} or None,
            }
            if row.get("id"):
                item["id"] = row["id"]
            if row.get("metadata"):
                try:
                    item["metadata"] = json.loads(row["metadata"])
                except ValueError:
                    raise ExampleValidationError(
                        len(out), f"{where}:{lineno}: metadata is not JSON") from None
            if row.get("split"):
                item["split"] = row["split"].split(",")
        out.append(item)
    return out
