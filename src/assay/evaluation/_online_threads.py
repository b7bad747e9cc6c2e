"""Online evaluation of conversations: score each thread of a production project once it has
gone quiet, as a whole.

``evaluate_threads_online("support-bot", evaluators=[resolved], idle=timedelta(minutes=15))``
makes one pass over the project's threads (``store/_threads.py``: the turns whose metadata
names one ``session_id``/``thread_id``/``conversation_id``). A thread whose last turn ended at
least ``idle`` ago, with no turn still running, is scored: every evaluator reads the whole
conversation, and its results become feedback on the thread's last turn (source ``model``,
``metadata.online_rule`` and ``metadata.thread_id``). With a ``filter``, the conversation is the
turns the filter keeps and the last turn the last of those: the one the thread's summary (and
so the "scored already" check) names, or a thread would be scored again every pass.

What an evaluator reads (the row evaluators of ``evaluate()``, no example):
``inputs = {"thread_id": ..., "messages": [{"role": "user"|"assistant", "content": ...}, ...],
"turns": [each turn's inputs]}`` (the conversation, turn by turn), ``outputs`` the last turn's
outputs, ``run`` the last turn (with its subtree when asked for).

Safe to repeat, as ``evaluate_online``: the sample is a hash of (rule, thread id); a thread
counts as scored when its last turn holds this rule's feedback with no error, so a thread
that goes on later (a new last turn) is scored again, as the conversation it has become, and
that score replaces the one on its earlier last turn (one score per thread and rule: the
project's feedback statistics count threads, not passes); the evaluators that raised are run
again next pass (those alone); the feedback ids come from (rule, last turn, key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .._sync import offload, run_sync
from .._time import utcnow
from ..errors import InvalidInputError
from ..schemas import Run
from ._online import OnlinePass, Prior, _Row, _score, _scored, prepare, rule_feedback, sampled

if TYPE_CHECKING:
    from datetime import datetime

    from ..client import Client
    from ..store._threads import ThreadSummary

__all__ = ["aevaluate_threads_online", "evaluate_threads_online"]


def _text(value: Any, *, user: bool) -> str:
    from ..evals._agent import output_text
    from ..integrations._registry import query_text

    return query_text(value) if user else output_text(value)


class _ThreadRow(_Row):
    """What a row evaluator reads of a thread: the conversation, and its last turn (``run``,
    where the feedback goes; its outputs are the row's)."""

    def __init__(self, thread_id: str, turns: list[Run], run: Run) -> None:
        super().__init__(run)
        self.thread_id = thread_id
        self.turns = turns

    @property
    def inputs(self) -> dict[str, Any]:
        messages = []
        for turn in self.turns:
            messages.append({"role": "user", "content": _text(turn.inputs or {}, user=True)})
            if turn.outputs:
                messages.append({"role": "assistant",
                                 "content": _text(turn.outputs, user=False)})
        return {"thread_id": self.thread_id, "messages": messages,
                "turns": [t.inputs or {} for t in self.turns]}


def _quiet(t: ThreadSummary, now: datetime, idle: timedelta) -> bool:
    """No turn running, and the last one ended ``idle`` ago or more."""
    end = t.last_end_time
    return end is not None and end >= t.max_start_time and now - end >= idle


async def aevaluate_threads_online(
    project_name: str,
    /,
    evaluators: Sequence[Any],
    *,
    idle: timedelta = timedelta(minutes=15),
    rule: str | None = None,
    filter: str | None = None,
    sampling_rate: float = 1.0,
    since: datetime | None = None,
    max_concurrency: int = 4,
    client: Client | None = None,
) -> OnlinePass:
    """One pass over the threads of ``project_name`` (see the module docstring): ``filter``
    picks the turns that count, ``since`` the turns started from then. The report counts
    threads (``running``: those not quiet yet; ``scored_run_ids``: the last turns scored)."""
    evs, name, client = prepare(evaluators, rule, "threads", sampling_rate, max_concurrency,
                                client)
    if not isinstance(idle, timedelta) or idle < timedelta(0):
        raise InvalidInputError(f"idle must be a timedelta of zero or more, got {idle!r}")
    report = OnlinePass(rule=name)
    now = utcnow()
    threads = await offload(lambda: client.list_thread_summaries(
        project_name=project_name, filter=filter, start_time=since))
    report.considered = len(threads)
    keep = []
    for t in threads:
        if not sampled(name, t.thread_id, sampling_rate):
            continue
        report.sampled += 1
        if not _quiet(t, now, idle):
            report.running += 1
            continue
        keep.append(t)
    priors = await offload(_scored, client, name, [t.last_trace_id for t in keep]) if keep \
        else {}
    todo = [(t, priors.get(str(t.last_trace_id))) for t in keep]
    todo = [(t, p) for t, p in todo if p is None or not p.done]
    report.already_scored = len(keep) - len(todo)
    gate = asyncio.Semaphore(max_concurrency)

    async def one(t: ThreadSummary, prior: Prior | None) -> None:
        async with gate:
            # the turns the summary counted (the filter's), up to the last it named: a turn
            # that arrived since waits for the next pass, when the summary names it
            turns = await offload(lambda: list(client.read_thread(
                thread_id=t.thread_id, project_name=project_name, filter=filter)))
            ids = [str(turn.id) for turn in turns]
            if str(t.last_trace_id) not in ids:
                return
            turns = turns[:ids.index(str(t.last_trace_id)) + 1]

            def row_of(run: Run) -> _ThreadRow:
                return _ThreadRow(t.thread_id, turns[:-1] + [run], run)

            def superseded() -> list[str]:  # the thread's score on what was its last turn
                return [str(fb.id) for fb in rule_feedback(client, name, ids[:len(turns) - 1])
                        if fb.feedback_source is not None
                        and (fb.feedback_source.metadata or {}).get("thread_id") == t.thread_id]

            await _score(client, name, evs, turns[-1], report, row_of, prior,
                         superseded if len(turns) > 1 and prior is None else None)

    await asyncio.gather(*(one(t, p) for t, p in todo))
    report.resume_from = now
    return report


def evaluate_threads_online(
    project_name: str,
    /,
    evaluators: Sequence[Any],
    *,
    idle: timedelta = timedelta(minutes=15),
    rule: str | None = None,
    filter: str | None = None,
    sampling_rate: float = 1.0,
    since: datetime | None = None,
    max_concurrency: int = 4,
    client: Client | None = None,
) -> OnlinePass:
    """The sync form of ``aevaluate_threads_online``."""
    return run_sync(aevaluate_threads_online(
        project_name, evaluators, idle=idle, rule=rule, filter=filter,
        sampling_rate=sampling_rate, since=since, max_concurrency=max_concurrency,
        client=client))
