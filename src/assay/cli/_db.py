"""``assay db``: schema migrations."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..store import HEAD
from ._common import DbOption, JsonOption, console, emit_json, handle_errors, open_store, styled

app = typer.Typer(help="Manage the store's schema.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(
    db: DbOption = None,
    revision: Annotated[str, typer.Option(help="Target revision (default: head).")] = "head",
    json_out: JsonOption = False,
) -> None:
    """Apply pending migrations to the store (opening a store also does this); creates a
    store that does not exist yet."""
    with handle_errors():
        store = open_store(db, create=True, migrate=False)
        before = store.schema_version()
        after = store.upgrade(revision)
    if json_out:
        emit_json({"url": store.url, "from": before, "to": after, "head": HEAD})
    else:
        console.print(f"{store.url}: schema {before or 'empty'} -> {after} (head {HEAD})")


@app.command("version")
def version(db: DbOption = None, json_out: JsonOption = False) -> None:
    """Show the store's recorded schema version."""
    with handle_errors():
        store = open_store(db, migrate=False)
        current = store.schema_version()
    if json_out:
        emit_json({"url": store.url, "version": current, "head": HEAD})
    else:
        console.print(f"{store.url}: schema {current or 'empty'} (head {HEAD})")


def _differences(fast: dict, slow: dict) -> list[str]:
    """Fields where the maintained statistics differ from a recomputation (floats to 1e-9)."""
    out = []
    for key in sorted(set(fast) | set(slow)):
        a, b = fast.get(key), slow.get(key)
        if isinstance(a, float) and isinstance(b, float):
            if abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)):
                continue
        elif key in ("feedback_stats", "session_feedback_stats"):
            if _differences_fb(a or {}, b or {}):
                out.append(key)
            continue
        if a != b:
            out.append(key)
    return out


def _differences_fb(a: dict, b: dict) -> bool:
    if set(a) != set(b):
        return True
    for k in a:
        x, y = a[k], b[k]
        if x["n"] != y["n"] or x["values"] != y["values"]:
            return True
        for f in ("avg", "stdev"):
            if (x[f] is None) != (y[f] is None) or (
                    x[f] is not None and abs(x[f] - y[f]) > 1e-6 * max(1.0, abs(y[f]))):
                return True
    return False


_HOUR_COLUMNS = ("root_runs", "root_errors", "total_tokens", "total_cost", "cost_runs")


def _hours_differing(conn: Any) -> dict[str, int]:
    """Per session: how many ``run_hours`` rows (session, hour) differ from a recount of the
    runs (``hourly_select``, what ``rebuild_aggregates`` writes). A stored row whose sums all
    went back to 0 (its runs deleted) counts as absent, as the charts read it."""
    from sqlalchemy import select

    from ..store._aggregates import HOURLY, hourly_select
    from ..store._tables import run_hours

    def rows(result: Any, names: list[str]) -> dict[tuple[str, int], tuple[Any, ...]]:
        at = [names.index(c) for c in ("session_id", "hour", *_HOUR_COLUMNS)]
        out = {}
        for r in result:  # by position: hourly_select's columns carry no labels
            session_id, hour, *sums = (r[i] for i in at)
            if any(sums):
                out[(session_id, int(hour))] = tuple(x or 0 for x in sums)
        return out

    stored = rows(conn.execute(select(run_hours)), [c.name for c in run_hours.columns])
    recount = rows(conn.execute(hourly_select()), list(HOURLY))
    bad: dict[str, int] = {}
    for key in set(stored) | set(recount):
        a, b = stored.get(key), recount.get(key)
        if a is None or b is None or _differences(dict(zip(_HOUR_COLUMNS, a, strict=True)),
                                                  dict(zip(_HOUR_COLUMNS, b, strict=True))):
            bad[key[0]] = bad.get(key[0], 0) + 1
    return bad


def _feedback_without_run(conn: Any) -> dict[str, int]:
    """Per session: feedback rows naming a run that is not stored (a process killed between
    storing an experiment's feedback and its runs, before feedback waited for them; or feedback
    posted for a run that never arrived). Reads count it; a resume of the experiment redoes
    those examples."""
    from sqlalchemy import func, select

    from ..store._tables import feedback, runs

    missing = ~select(runs.c.id).where(runs.c.id == feedback.c.run_id).exists()
    query = (select(feedback.c.session_id, func.count())
             .where(feedback.c.run_id.is_not(None), missing)
             .group_by(feedback.c.session_id))
    return {sid: n for sid, n in conn.execute(query)}


@app.command("check")
def check(
    db: DbOption = None,
    repair: Annotated[bool, typer.Option(
        "--repair", help="Rebuild every maintained aggregate from the rows.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Verify that every project's maintained statistics equal a full recomputation.

    Compares the per-project statistics and the hourly rollups (table run_hours, the charts'
    source): a project whose hours differ from a recount of its runs lists run_hours. Feedback
    naming a run that is not stored is listed as feedback_without_run (--repair keeps it:
    resume the experiment, or delete the feedback).

    Exits 1 when a project differs (after --repair, when it still differs).
    """
    from sqlalchemy import select

    from ..store._aggregates import rebuild_aggregates
    from ..store._stats import recompute_session_stats, session_stats
    from ..store._tables import sessions

    def mismatches() -> tuple[int, list[dict[str, Any]]]:
        bad: list[dict[str, Any]] = []
        checked = 0
        with store.read() as conn:
            hours = _hours_differing(conn)
            lost = _feedback_without_run(conn)
            for row in conn.execute(select(sessions)):
                checked += 1
                diff = _differences(session_stats(conn, row), recompute_session_stats(conn, row))
                if hours.pop(row.id, 0):
                    diff.append("run_hours")
                found: dict[str, Any] = {"project": row.name, "id": row.id, "fields": diff}
                if n := lost.pop(row.id, 0):
                    diff.append("feedback_without_run")
                    found["feedback_without_run"] = n
                if diff:
                    bad.append(found)
            for orphan in sorted(hours, key=str):  # hours of a project that no longer exists
                bad.append({"project": None, "id": orphan, "fields": ["run_hours"]})
            # feedback in no project: its run never stored (feedback waits for its run without
            # one; create_feedback(run_id=...) of an unknown run), or its project deleted
            if n := sum(lost.values()):
                bad.append({"project": None, "id": None, "fields": ["feedback_without_run"],
                            "feedback_without_run": n})
        return checked, bad

    with handle_errors():
        store = open_store(db)
        store.settle()  # journaled writes count: fold them first
        before: list[dict[str, Any]] = []
        if repair:  # what differed, to say what was rebuilt
            before = mismatches()[1]
            with store.write() as conn:
                rebuild_aggregates(conn)
        checked, bad = mismatches()
    if json_out:
        out: dict[str, Any] = {"checked": checked, "mismatched": bad, "repaired": repair}
        if repair:
            out["found_before_repair"] = before
        emit_json(out)
    elif bad:
        for b in bad:
            fields = [f"{f} ({b[f]} rows)" if f in b else f for f in b["fields"]]
            where = f" ({b['id']})" if b["id"] is not None else ""
            console.print(styled((str(b["project"] or "(no project)"), "red"),
                                 f"{where}: {', '.join(fields)}"))
        console.print(f"{len(bad)} of {checked} projects differ; run `assay db check --repair`")
        if any("feedback_without_run" in b for b in bad):
            console.print("feedback_without_run: --repair keeps it; resume the experiment "
                          "(evaluate(..., experiment=...)) to redo those examples, or delete "
                          "the feedback")
    else:
        console.print(f"{checked} projects checked: statistics consistent")
    if repair and not json_out and before:
        console.print(f"rebuilt the statistics of {len(before)} project(s) that differed")
    if bad:
        raise typer.Exit(1)
