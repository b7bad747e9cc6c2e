"""Every assay command and subcommand has help text, and ``--help`` renders it.

Walks the real click command tree behind the typer app, so commands added later are covered
without touching this file. (typer vendors its own click, so groups are found by duck typing.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from assay.cli import app

ROOT = typer.main.get_command(app)


def _walk(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    if hasattr(cmd, "list_commands"):
        ctx = cmd.context_class(cmd)
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path + (name,))} is listed but cannot be loaded"
            yield from _walk(sub, path + (name,))


COMMANDS = list(_walk(ROOT))
IDS = [" ".join(("assay",) + p) for p, _ in COMMANDS]


def test_the_tree_has_the_daily_commands() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    daily = {"serve", "demo", "db upgrade", "keys create", "keys list", "keys revoke",
             "datasets list", "datasets show", "datasets import", "datasets export",
             "experiments list", "experiments show", "experiments compare"}
    assert daily <= names, f"missing: {sorted(daily - names)}"


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=IDS)
def test_command_has_help_text(path: tuple[str, ...], cmd: Any) -> None:
    text = (cmd.help or cmd.short_help or "").strip()
    assert text, f"`assay {' '.join(path)}` has no help text (add a docstring or help=)"
    assert len(text) >= 10, f"`assay {' '.join(path)}` help is too short: {text!r}"


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=IDS)
def test_every_option_and_argument_is_described(path: tuple[str, ...], cmd: Any) -> None:
    missing = [p.name for p in cmd.params
               if not getattr(p, "hidden", False) and p.name != "help"
               and not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"`assay {' '.join(path)}`: no help for {missing}"


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=IDS)
def test_help_renders(path: tuple[str, ...], cmd: Any) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=120)
    assert result.exit_code == 0, result.output
    first_line = (cmd.help or cmd.short_help or "").strip().splitlines()[0]
    assert " ".join(first_line.split()[:3]) in " ".join(result.output.split())
