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


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=IDS)
def test_help_shows_no_rst_markup_and_no_ragged_lines(path: tuple[str, ...], cmd: Any) -> None:
    """typer prints docstrings as they are: ``name`` came out with its backticks, and each line
    break of a paragraph after the first stayed, so at 80 columns rich broke those lines again
    and a word or two stood alone on a line (``assay experiments compare --help``)."""
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=80)
    assert "``" not in result.output
    paragraphs = (cmd.help or "").split("\n\n")
    assert all("\n" not in p for p in paragraphs), f"`assay {' '.join(path)}`: {cmd.help!r}"


def test_readme_lists_every_exit_code() -> None:
    """The README's exit codes are the CLI's: 4 (any other assay error) was missing."""
    import re
    from pathlib import Path

    from assay.cli import _common

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## The command line", 1)[1].split("\n## ", 1)[0]
    sentence = " ".join(section[section.index("exit codes are"):].split())
    listed = {int(n) for n in re.findall(r"\b(\d) for ", sentence)}
    codes = {0, 1, _common.EXIT_INPUT, _common.EXIT_NOT_FOUND, _common.EXIT_ERROR}
    assert listed == codes, sentence
