"""``--db``: a store that does not exist or cannot be reached, as the commands answer it.

A mistyped SQLite path used to give a read-only command a new, empty store (and leave it on
disk); an unreachable PostgreSQL server, SQLAlchemy's traceback and exit 1 (a failed check's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app

# every command that only reads the store (or writes into what must already be there)
READERS = [
    ["datasets", "list"],
    ["datasets", "show", "qa"],
    ["datasets", "export", "qa", "OUT/qa.jsonl"],
    ["experiments", "list"],
    ["experiments", "show", "base"],
    ["experiments", "compare", "base", "other"],
    ["runs", "list"],
    ["runs", "show", "01a23b5e-0000-7000-8000-000000000000"],
    ["keys", "list"],
    ["keys", "revoke", "asy_abcdef"],
    ["db", "version"],
    ["db", "check"],
    ["online", "prod", "-e", "evals:short"],
]
IDS = [" ".join(c[:2]) for c in READERS]


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env, terminal_width=200)


@pytest.fixture(autouse=True)
def no_store_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASSAY_DATABASE_URL", raising=False)
    monkeypatch.delenv("ASSAY_API_URL", raising=False)


@pytest.mark.parametrize("command", READERS, ids=IDS)
def test_a_reader_refuses_a_sqlite_path_that_does_not_exist(command: list[str],
                                                            tmp_path: Path) -> None:
    where = tmp_path / "typo" / "dir" / "x.db"
    args = [a.replace("OUT", str(tmp_path)) for a in command]
    result = invoke(*args, "--db", str(where))
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"no store at {where}: the file does not exist" in said and "--db" in said
    assert not (tmp_path / "typo").exists()  # no directory, no store left behind


def test_the_path_in_a_sqlite_url_and_from_the_environment(tmp_path: Path) -> None:
    where = tmp_path / "typo2" / "assay.db"
    result = invoke("experiments", "list", "--db", f"sqlite:///{where}")
    assert result.exit_code == 2 and str(where) in result.output
    result = invoke("experiments", "list", env={"ASSAY_DATABASE_URL": str(where)})
    assert result.exit_code == 2 and "check ASSAY_DATABASE_URL" in result.output
    assert not (tmp_path / "typo2").exists()


def test_no_store_yet_at_the_default_path(tmp_path: Path) -> None:
    for command in (["experiments", "list"], ["db", "version"], ["keys", "list"]):
        result = invoke(*command)
        assert result.exit_code == 3, result.output
        said = " ".join(result.output.split())
        assert f"no store yet at {tmp_path / '.assay' / 'assay.db'}" in said
        assert "assay demo" in said
    assert not (tmp_path / ".assay").exists()


def test_the_writers_still_create_a_store(tmp_path: Path) -> None:
    upgraded = tmp_path / "a" / "assay.db"
    assert invoke("db", "upgrade", "--db", str(upgraded)).exit_code == 0
    assert upgraded.exists()
    keyed = tmp_path / "b" / "assay.db"
    assert invoke("keys", "create", "--db", str(keyed)).exit_code == 0
    assert keyed.exists()
    data = tmp_path / "qa.jsonl"
    data.write_text('{"inputs": {"q": "a"}, "outputs": {"a": "b"}}\n')
    assert invoke("datasets", "import", str(data)).exit_code == 0  # the default path
    assert (tmp_path / ".assay" / "assay.db").exists()
    listed = invoke("datasets", "list", "--json")  # and the readers read it
    assert listed.exit_code == 0 and json.loads(listed.output)[0]["name"] == "qa"
    assert invoke("db", "version", "--db", str(upgraded)).exit_code == 0


UNREACHABLE = "postgresql://assay:s3cret@127.0.0.1:1/nowhere"  # nothing listens on port 1


@pytest.mark.parametrize("command", [["db", "check"], ["db", "version"], ["db", "upgrade"],
                                     ["experiments", "list"], ["keys", "list"]],
                         ids=lambda c: " ".join(c))
def test_an_unreachable_postgresql_is_one_line_and_exit_4(command: list[str]) -> None:
    pytest.importorskip("psycopg")
    result = invoke(*command, "--db", UNREACHABLE)
    assert result.exit_code == 4, result.output  # an error; 1 is a failed check
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: cannot open the store at postgresql")
    assert "@127.0.0.1:1/nowhere" in lines[0] and "refused" in lines[0].lower()
    assert "s3cret" not in result.output and "Traceback" not in result.output


def test_store_open_raises_a_store_error() -> None:
    """At the source: what the library's callers (Client, the server) get too."""
    pytest.importorskip("psycopg")
    from assay.errors import StoreError
    from assay.store import Store

    with pytest.raises(StoreError, match=r"cannot open the store at .*:\*\*\*@127\.0\.0\.1:1"):
        Store.open(UNREACHABLE)
    lazy = Store.open(UNREACHABLE, migrate=False)  # connects on first use
    with pytest.raises(StoreError, match="cannot open the store"):
        lazy.schema_version()
    lazy.close()
