"""Online evaluation: score the production traces of a project as they arrive.

``evaluate_online("prod", evaluators=[...])`` makes one pass over the project's finished root
runs (optionally those matching a ``filter`` in LangSmith's filter language, started since
``since``, read as UTC when it has no timezone, as every stored time is), keeps a
``sampling_rate`` share of them, and runs every evaluator on each run not scored by this
``rule`` yet, writing the results as the run's feedback (source ``model``,
``metadata.online_rule``). ``watch_online`` repeats passes until stopped; ``assay online`` is the
command line.

The evaluators are the row evaluators of ``evaluate()`` (``(run, example)`` or named ``run``,
``inputs``, ``outputs``; there is no example, so ``reference_outputs`` is empty) and assay's
agent evaluators (``ReliabilityEvaluator(["lookup"])`` reads the run's own tool calls).

What makes passes safe to repeat and to interrupt:
- the sample is decided by a hash of (rule, run id): the same runs are kept every pass;
- a run counts as scored once it has this rule's feedback and none of it is an error: a pass
  skips it; one with error rows gets, next pass, only the evaluators that left them (an
  evaluator that raised writes an error row under each of its ``keys``) run again, so a slow
  or paid evaluator that succeeded is not paid for twice (all of them if an error row is no
  given evaluator's), and the error rows its new results do not replace are deleted;
- each feedback row's id is derived from (rule, run, key), and a run's rows are written at once:
  a pass killed after a run's evaluators ran and before its rows were written redoes that run,
  and a retried one replaces its rows instead of adding to them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._sync import offload, run_sync
from .._time import utcnow
from ..errors import InvalidInputError, NotFoundError
from ..schemas import Feedback, Run
from ._evaluators import RowEvaluator, adapt_evaluator, as_list
from ._sink import feedback_rows

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["OnlinePass", "aevaluate_online", "evaluate_online", "watch_online"]

log = logging.getLogger("assay.evaluation")

_NAMESPACE = uuid.UUID("5b0f7a52-3c1e-4c57-9d7e-6a1b8a9d0c21")  # online feedback ids
_PAGE = 500


@dataclass
class OnlinePass:
    """What one pass did: runs it looked at, kept by the sample, found scored already, scored
    now (``errors`` of them with an evaluator that raised; ``retried`` of them had an error
    row from an earlier pass, and only the evaluators that left one ran), and still running
    (for the next pass); ``resume_from`` is where the next pass of a watch starts."""

    rule: str
    considered: int = 0
    sampled: int = 0
    already_scored: int = 0
    scored: int = 0
    errors: int = 0
    retried: int = 0
    first_error: str | None = None  # the first evaluator error of the pass, as its row says
    running: int = 0
    feedback: int = 0
    resume_from: datetime | None = None
    scored_run_ids: list[uuid.UUID] = field(default_factory=list)


@dataclass
class _Row:
    """What a row evaluator reads, for a production run: no example, no reference."""

    run: Run
    example: None = None

    @property
    def inputs(self) -> dict[str, Any]:
        return self.run.inputs or {}

    @property
    def outputs(self) -> dict[str, Any]:
        return self.run.outputs or {}

    @property
    def reference_outputs(self) -> dict[str, Any]:
        return {}

    @property
    def attachments(self) -> dict[str, Any]:
        return {}


def sampled(rule: str, run_id: Any, rate: float) -> bool:
    """Whether the run is in the rule's sample: the same answer on every pass."""
    if rate >= 1:
        return True
    digest = hashlib.sha256(f"{rule}:{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


@dataclass
class Prior:
    """This rule's feedback already on one run: rows without an error, counted by key (a
    retry's ids come after them), and the ids of the error rows, by key."""

    ok: dict[str, int] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return not self.errors

    def retry(self, evs: list[RowEvaluator]) -> tuple[list[RowEvaluator], dict[str, int]]:
        """The evaluators to run again and the rows of each key they must not overwrite: those
        whose keys hold the error rows, beside what the others wrote; every evaluator, over
        nothing kept, if an error row is none of theirs (an evaluator dropped from the rule,
        one that returned an error result of its own key)."""
        failed = [ev for ev in evs if not self.errors.keys().isdisjoint(ev.keys)]
        if self.errors.keys() <= {k for ev in failed for k in ev.keys}:
            return failed, self.ok
        return evs, {}


def check_project(project_name: Any, what: str) -> None:
    """Refuse a missing project name: ``list_runs`` with none lists every project's runs
    (experiments too), and a pass would score them all."""
    if not isinstance(project_name, str) or not project_name.strip():
        raise InvalidInputError(
            f"{what} needs project_name (the name of the project to score), "
            f"got {project_name!r}")


def prepare(evaluators: Sequence[Any], rule: str | None, kind: str, sampling_rate: Any,
            max_concurrency: Any, client: Client | None,
            ) -> tuple[list[RowEvaluator], str, Client]:
    """What a pass starts from, checked: the evaluators adapted, the rule's name (by default
    ``kind:`` and the evaluators' names) and the client (by default the default one)."""
    evs = [adapt_evaluator(e) for e in as_list(evaluators, "evaluators")]
    if not evs:
        raise InvalidInputError("online evaluation needs at least one evaluator")
    _check(sampling_rate, max_concurrency)
    if client is None:
        from ..client import get_default_client

        client = get_default_client()
    return evs, rule or f"{kind}:" + ",".join(ev.name for ev in evs), client


def _check(sampling_rate: Any, max_concurrency: Any) -> None:
    if isinstance(sampling_rate, bool) or not isinstance(sampling_rate, (int, float)) or not (
            0 < sampling_rate <= 1):
        raise InvalidInputError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}")
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or (
            max_concurrency < 1):
        raise InvalidInputError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")


def _page(client: Client, project_name: str, filter: str | None, since: datetime | None,
          offset: int) -> list[Run]:
    return list(client.list_runs(project_name=project_name, is_root=True, filter=filter,
                                 start_time=since, offset=offset, limit=_PAGE))


def rule_feedback(client: Client, rule: str, run_ids: list[Any]) -> Iterator[Feedback]:
    """This rule's feedback on ``run_ids``: one query per 100 runs, of the model-sourced rows
    only (an online rule's), so human feedback is not read."""
    for i in range(0, len(run_ids), 100):  # remote: ids in the query string, kept short
        for fb in client.store.feedback.list(run_ids=run_ids[i:i + 100], pairwise=False,
                                             source_types="model"):
            meta = (fb.feedback_source.metadata if fb.feedback_source else None) or {}
            if meta.get("online_rule") == rule:
                yield fb


def _scored(client: Client, rule: str, run_ids: list[Any]) -> dict[str, Prior]:
    """This rule's feedback on each of the runs holding some."""
    out: dict[str, Prior] = {}
    for fb in rule_feedback(client, rule, run_ids):
        prior = out.setdefault(str(fb.run_id), Prior())
        if (fb.extra or {}).get("error"):
            prior.errors.setdefault(fb.key, []).append(str(fb.id))
        else:
            prior.ok[fb.key] = prior.ok.get(fb.key, 0) + 1
    return out


def forget(client: Client, feedback_ids: list[str]) -> None:
    """Delete feedback rows no longer current: stale error rows, a thread's superseded score
    (one gone already, by a pass beside this one, is fine)."""
    for fid in feedback_ids:
        try:
            client.store.feedback.delete(fid)
        except NotFoundError:
            pass


async def _score(client: Client, rule: str, evs: list[RowEvaluator], run: Run,
                 report: OnlinePass, row_of: Callable[[Run], Any] = _Row,
                 prior: Prior | None = None,
                 superseded: Callable[[], list[str]] | None = None) -> None:
    """Run the evaluators on ``run`` (``row_of`` makes what they read of it) and write their
    results as its feedback, with ids derived from (rule, run, key); a retry (``prior``) runs
    only the evaluators that failed, numbers its rows after those kept, and deletes the error
    rows it did not replace (after the write: killed between, the next pass does it again).
    ``superseded``: the ids of rows these results replace (a thread's score on what was its
    last turn), deleted before the write: killed between, the run holds no score of the rule,
    so the next pass scores it again."""
    evs, kept = prior.retry(evs) if prior is not None else (evs, {})
    if any(ev.needs_run for ev in evs):  # with its subtree: tool calls, llm calls
        run = await offload(lambda: client.read_run(run.id, load_child_runs=True))
    row = row_of(run)
    results = [r for ev in evs for r in await ev.aevaluate(row)]
    rows = feedback_rows(results, run.id, run.trace_id, run.session_id)
    seen = {key: n - 1 for key, n in kept.items()}
    for r, item in zip(results, rows, strict=True):
        meta = dict(item["feedback_source"].get("metadata") or {})
        meta["online_rule"] = rule
        if getattr(row, "thread_id", None) is not None:  # a whole conversation's score
            meta["thread_id"] = row.thread_id
        item["feedback_source"]["metadata"] = meta
        n = seen[r.key] = seen.get(r.key, -1) + 1  # two results of one key: two rows
        item["id"] = uuid.uuid5(_NAMESPACE, f"{rule}:{run.id}:{r.key}:{n}")
    if superseded is not None:
        await offload(lambda: forget(client, superseded()))
    await offload(lambda: client.store.feedback.create_many(rows, return_records=False))
    if prior is not None:
        written = {str(item["id"]) for item in rows}
        stale = [f for ids in prior.errors.values() for f in ids if f not in written]
        if stale:
            await offload(forget, client, stale)
        report.retried += 1
    report.scored += 1
    report.feedback += len(rows)
    report.scored_run_ids.append(run.id)
    failed = [r for r in results if r.is_error]
    if failed:
        report.errors += 1
        if report.first_error is None:
            report.first_error = f"{failed[0].key}: {failed[0].comment}"


async def aevaluate_online(
    project_name: str,
    /,
    evaluators: Sequence[Any],
    *,
    rule: str | None = None,
    filter: str | None = None,
    sampling_rate: float = 1.0,
    since: datetime | None = None,
    max_concurrency: int = 4,
    client: Client | None = None,
) -> OnlinePass:
    """One pass of online evaluation over ``project_name`` (see the module docstring).

    ``rule`` names this evaluation (default: the evaluators' names): a run is scored once per
    rule, so a new rule name scores everything again. Returns what the pass did.
    """
    check_project(project_name, "evaluate_online")
    evs, name, client = prepare(evaluators, rule, "online", sampling_rate, max_concurrency,
                                client)
    report = OnlinePass(rule=name)
    started = utcnow()
    gate = asyncio.Semaphore(max_concurrency)

    async def one(run: Run, prior: Prior | None) -> None:
        async with gate:
            await _score(client, name, evs, run, report, prior=prior)

    offset = 0
    oldest_running: datetime | None = None
    newest: datetime | None = None
    while True:
        page = await offload(_page, client, project_name, filter, since, offset)
        offset += len(page)
        report.considered += len(page)
        keep = []
        for run in page:
            newest = run.start_time if newest is None else max(newest, run.start_time)
            if not sampled(name, run.id, sampling_rate):
                continue
            report.sampled += 1
            if run.end_time is None:  # still running: a later pass scores it
                report.running += 1
                if oldest_running is None or run.start_time < oldest_running:
                    oldest_running = run.start_time
                continue
            keep.append(run)
        priors = await offload(_scored, client, name, [r.id for r in keep]) if keep else {}
        todo = [(r, priors.get(str(r.id))) for r in keep]
        todo = [(r, p) for r, p in todo if p is None or not p.done]
        report.already_scored += len(keep) - len(todo)
        await asyncio.gather(*(one(r, p) for r, p in todo))
        if len(page) < _PAGE:
            break
    # the next pass of a watch: from the oldest run still running, else from the newest seen
    # (runs posted later with an earlier start are caught within a watch's lag)
    report.resume_from = oldest_running or newest or since or started
    return report


def evaluate_online(
    project_name: str,
    /,
    evaluators: Sequence[Any],
    *,
    rule: str | None = None,
    filter: str | None = None,
    sampling_rate: float = 1.0,
    since: datetime | None = None,
    max_concurrency: int = 4,
    client: Client | None = None,
) -> OnlinePass:
    """The sync form of ``aevaluate_online``."""
    return run_sync(aevaluate_online(
        project_name, evaluators, rule=rule, filter=filter, sampling_rate=sampling_rate,
        since=since, max_concurrency=max_concurrency, client=client))


async def watch_online(
    project_name: str,
    /,
    evaluators: Sequence[Any],
    *,
    interval: float = 30.0,
    lag: timedelta = timedelta(minutes=5),
    passes: int | None = None,
    on_pass: Any = None,
    rule: str | None = None,
    filter: str | None = None,
    sampling_rate: float = 1.0,
    since: datetime | None = None,
    max_concurrency: int = 4,
    client: Client | None = None,
) -> list[OnlinePass]:
    """Passes every ``interval`` seconds until cancelled (or ``passes`` of them). Each pass
    after the first starts ``lag`` before where the last one left off, so runs posted a little
    late are still scored; ``on_pass(report)`` is called after each one."""
    check_project(project_name, "watch_online")
    if interval <= 0:
        raise InvalidInputError(f"interval must be a positive number of seconds, got {interval!r}")
    reports: list[OnlinePass] = []
    start = since
    while passes is None or len(reports) < passes:
        report = await aevaluate_online(
            project_name, evaluators, rule=rule, filter=filter, sampling_rate=sampling_rate,
            since=start, max_concurrency=max_concurrency, client=client)
        reports.append(report)
        if on_pass is not None:
            on_pass(report)
        if report.resume_from is not None:
            start = report.resume_from - lag
        if passes is None or len(reports) < passes:
            await asyncio.sleep(interval)
    return reports
