"""``assay online PROJECT -e module:evaluator``: score a project's production traces (or, with
``--threads``, its conversations once each has been quiet for ``--idle``).

One pass by default (cron-friendly: each run is scored once per rule, so passes can repeat);
``--watch`` keeps passing every ``--interval`` seconds until interrupted. Evaluators are named as
``module:attribute`` (the module imported from the working directory, as uvicorn's app), each the
kind ``evaluate()`` takes or an object with ``as_evaluator()`` (assay's agent evaluators).
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from .._time import utcnow
from ..errors import InvalidInputError
from ._common import (
    EXIT_ERROR,
    DbOption,
    JsonOption,
    console,
    emit_json,
    err_console,
    handle_errors,
    open_client,
)

__all__ = ["online"]

_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def load_evaluator(spec: str) -> Any:
    """``package.module:name`` -> that object (``name`` may be dotted)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidInputError(f"evaluator {spec!r}: give it as module:name")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInputError(f"evaluator {spec!r}: cannot import {module_name!r}: "
                                f"{exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InvalidInputError(f"evaluator {spec!r}: {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def parse_age(value: str, option: str) -> timedelta:
    """An age such as ``90s``, ``15m``, ``2h`` or ``7d``."""
    ago = _AGO.match(value.strip())
    if not ago:
        raise InvalidInputError(f"{option} {value!r}: give an age such as 90s, 15m, 2h or 7d")
    return timedelta(**{_UNITS[ago.group(2)]: float(ago.group(1))})


def parse_since(value: str | None) -> datetime | None:
    """An ISO time (UTC when it names no zone) or an age: ``90s``, ``15m``, ``2h``, ``7d``."""
    if value is None:
        return None
    if _AGO.match(value.strip()):
        return utcnow() - parse_age(value, "--since")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"--since {value!r}: give an ISO time or an age such as 15m, "
                                f"2h or 7d") from None
    return when if when.tzinfo else when.replace(tzinfo=utcnow().tzinfo)


def online(
    project: Annotated[str, typer.Argument(help="The project whose traces to score.")],
    evaluator: Annotated[list[str], typer.Option(
        "--evaluator", "-e", help="module:name of an evaluator (repeat for several).")],
    rule: Annotated[str | None, typer.Option(
        help="Name of this evaluation: each run is scored once per rule (default: the "
             "evaluators' names).")] = None,
    filter_: Annotated[str | None, typer.Option(
        "--filter", "-f", help='Runs to score, in the filter language: eq(name, "agent").')
    ] = None,
    sample: Annotated[float, typer.Option(
        help="Share of the runs to score, above 0 and at most 1 (the same runs every "
        "pass).")] = 1.0,
    since: Annotated[str | None, typer.Option(
        help="Runs started since: an ISO time or an age (15m, 2h, 7d). Default: all.")] = None,
    watch: Annotated[bool, typer.Option(
        "--watch", help="Keep scoring new runs until interrupted.")] = False,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between watch passes.")
    ] = 30.0,
    concurrency: Annotated[int, typer.Option(min=1, help="Runs scored at once.")] = 4,
    threads: Annotated[bool, typer.Option(
        "--threads", help="Score conversations (threads) as a whole, once each is quiet; "
        "the feedback goes on a thread's last turn.")] = False,
    idle: Annotated[str, typer.Option(
        help="With --threads: how long a conversation must be quiet (90s, 15m, 2h).")
    ] = "15m",
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Score a project's finished runs with evaluators; the scores are the runs' feedback."""
    from ..evaluation._online import OnlinePass, evaluate_online, watch_online
    from ..evaluation._online_threads import evaluate_threads_online

    noun = "threads" if threads else "runs"

    def show(report: OnlinePass) -> None:
        if json_out:  # watching: one compact line a pass (JSON Lines), read as it comes
            emit_json({k: v for k, v in vars(report).items() if k != "scored_run_ids"},
                      lines=watch)
            return
        one = noun[:-1] if report.scored == 1 else noun
        console.print(
            f"{report.rule}: {report.scored} {one} scored ({report.feedback} feedback"
            f"{f', {report.errors} with an evaluator error' if report.errors else ''}), "
            f"{report.already_scored} scored before, {report.running} "
            f"{'not quiet yet' if threads else 'still running'}; "
            f"{report.sampled} of {report.considered} {noun} in the sample")
        if report.first_error:
            console.print(f"  first evaluator error: {report.first_error}", soft_wrap=True)

    with handle_errors():
        client = open_client(db)
        evaluators = [load_evaluator(spec) for spec in evaluator]
        options: dict[str, Any] = {"rule": rule, "filter": filter_, "sampling_rate": sample,
                                   "since": parse_since(since), "max_concurrency": concurrency,
                                   "client": client}
        if threads:
            quiet = parse_age(idle, "--idle")
            try:
                while True:  # a pass looks at every thread: nothing to resume from
                    show(evaluate_threads_online(project, evaluators, idle=quiet, **options))
                    if not watch:
                        return
                    time.sleep(interval)
            except KeyboardInterrupt:
                err_console.print("stopped")  # (not on stdout: the passes' JSON is there)
            return
        if not watch:
            report = evaluate_online(project, evaluators, **options)
            show(report)
            if report.scored and report.errors == report.scored:  # nothing really scored
                raise typer.Exit(EXIT_ERROR)
            return
        try:
            asyncio.run(watch_online(project, evaluators, interval=interval, on_pass=show,
                                     **options))
        except KeyboardInterrupt:
            err_console.print("stopped")
