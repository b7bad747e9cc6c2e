"""Feedback rows reach the store in batches, written off the event loop.

One transaction per batch (by size, or at least every ``interval`` seconds so a slow experiment
killed midway loses little), never one commit per example. All feedback of one row is added in
one call and so always lands in one batch: a row's feedback is stored entirely or not at all,
which is what resume relies on to tell finished rows from unfinished ones.

A batch is handed to one of assay's threads by ``add`` itself once it is due (full, or its
oldest row ``interval`` old), not by a task of the event loop: examples with a sync target run
one after the other without ever giving the loop a turn, and a task would have written
nothing until the last of them (a killed experiment would have lost all its feedback, and the
end waited for all of it). A timer thread catches rows left queued while no example finishes:
a thread, for the same reason (a sync target that runs for minutes holds the loop, and the
rows of the example before it would wait for it). One write at a time; what arrives meanwhile
goes in the next. A lock keeps the queue whole between ``add`` and the timer.

A plain score's row is a list of ``SCORE_COLUMNS`` values (``add_results``); what all of them
share, the experiment and the source, is journaled once per batch, and the fold makes them
full rows again.

``hold``: the experiment's project row being written meanwhile (``Creation``): nothing is
written before it is done, and nothing at all if it failed. ``writer``: the run writer the
rows' runs were handed to before their feedback was added; a batch waits until the writer has
stored everything queued before it (``RunWriter.barrier``), so a process killed in between
never leaves feedback whose run is lost (read_project counted it, resume redid the run).

The end: ``detach()`` stops the background writes and hands over what is left, ``finish()``
stores it (blocking, on a thread, once the run writer is flushed): an experiment calls it on
the thread that stores its last runs and its end time, one hop off the event loop instead of
several. ``close()`` is the two in one.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from .._sync import offload, submit
from ..errors import StoreError
from ..store._journal import from_values
from ._schemas import EvaluationResult

if TYPE_CHECKING:
    from ..store import Store
    from ..tracing._writer import RunWriter
    from ._experiment import Creation

__all__ = ["SCORE_COLUMNS", "FeedbackSink", "feedback_rows"]

_clock = time.monotonic
# A plain score's row as a list of these values; the rest (experiment, source) is the same for
# every row of a sink and written once per batch (``Journal.append_feedback``'s ``defaults``)
SCORE_COLUMNS = ("run_id", "trace_id", "key", "score")


def feedback_rows(results: Sequence[EvaluationResult], run_id: Any, trace_id: Any,
                  experiment_id: Any) -> list[dict[str, Any]]:
    """Store rows for one row's results (``target_run_id`` may point below the root)."""
    out = []
    for r in results:
        source: dict[str, Any] = {"type": "model"}
        meta = dict(r.evaluator_info) if r.evaluator_info else {}
        if r.source_run_id is not None:
            meta["__run"] = {"run_id": str(r.source_run_id)}
        if meta:
            source["metadata"] = meta
        extra = r.extra
        if r.metadata:
            extra = {**(extra or {}), "metadata": r.metadata}
        out.append({
            "run_id": r.target_run_id or run_id,
            "session_id": experiment_id,
            "trace_id": trace_id,
            "key": r.key,
            "score": r.score,
            "value": r.value,
            "comment": r.comment,
            "correction": r.correction,
            "feedback_source": source,
            "extra": extra,
        })
    return out


class FeedbackSink:
    def __init__(self, store: Store, *, batch_size: int = 2000, interval: float = 1.0,
                 hold: Creation | None = None, experiment_id: str | None = None,
                 writer: RunWriter | None = None) -> None:
        self._store = store
        self._hold = hold
        self._writer = writer
        # what every plain score's row shares (see SCORE_COLUMNS)
        self._defaults = {"session_id": experiment_id, "feedback_source": {"type": "model"}}
        self.batch_size = batch_size
        self.interval = interval
        self._pending: list[Any] = []  # full rows (dicts) and plain scores (SCORE_COLUMNS lists)
        self._due = math.inf  # when the oldest queued row is to be written
        self._writing: Future[None] | None = None  # the write under way
        self._detached = False
        self._lock = threading.Lock()  # the queue, between add() and the timer thread
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.written = 0

    def start(self) -> None:
        threading.Thread(target=self._tick, name="assay-feedback-timer", daemon=True).start()

    def add(self, rows: Sequence[Any]) -> None:
        """Queue all feedback of one row (stored together); write the batch if it is due."""
        if self._error is not None:
            raise StoreError(f"storing feedback failed: {self._error}") from self._error
        now = _clock()
        with self._lock:
            pending = self._pending
            if not pending:
                self._due = now + self.interval
            pending.extend(rows)
            if len(pending) >= self.batch_size or now >= self._due:
                self._write_pending()

    def add_results(self, results: Sequence[EvaluationResult | tuple[str, Any]],
                    run_id: str) -> None:
        """``add`` for the results of one root run (its own trace): a plain (key, score) pair
        as a list of ``SCORE_COLUMNS`` values, any other result as its full row."""
        rows: list[Any] = []
        for r in results:
            if r.__class__ is tuple:
                rows.append([run_id, run_id, r[0], r[1]])
            else:
                rows.extend(feedback_rows((r,), run_id, run_id,  # type: ignore[arg-type]  # a result, not a pair
                                          self._defaults["session_id"]))
        self.add(rows)

    def _write_pending(self) -> None:
        """Hand what is queued to a thread, unless a write is under way (it goes next) or the
        experiment's row is not there yet (it waits). Called holding the lock."""
        writing = self._writing
        if not self._pending or self._detached or (writing is not None and not writing.done()):
            return
        hold = self._hold
        if hold is not None:
            if not hold.done.is_set():
                return
            if hold.failed:  # their experiment does not exist: never stored
                self._pending = []
                return
        rows, self._pending, self._due = self._pending, [], math.inf
        runs_stored = self._writer.barrier() if self._writer is not None else None
        self._writing = submit(self._write_noting, rows, runs_stored)

    def _tick(self) -> None:
        """Rows left queued while no example finishes are written when due all the same."""
        while not self._stop.wait(self.interval):
            if _clock() >= self._due:
                with self._lock:
                    self._write_pending()

    def _write_noting(self, rows: list[Any], runs_stored: threading.Event | None) -> None:
        try:
            if runs_stored is not None:
                runs_stored.wait()  # the writer sets it even when it stops on a bug
            self._write(rows)
        except BaseException as exc:  # surfaced by add(), detach() and close()
            self._error = exc

    def _write(self, rows: list[Any]) -> None:
        journal = getattr(self._store, "journal", None)  # a local store: one journal row
        if journal is not None:
            journal.append_feedback(rows, columns=SCORE_COLUMNS, defaults=self._defaults)
        else:  # a server: full rows
            self._store.feedback.create_many(from_values(rows, SCORE_COLUMNS, self._defaults),
                                             return_records=False)
        self.written += len(rows)

    async def close(self) -> None:
        """Store everything queued; re-raise a failed write."""
        await offload(self.finish, await self.detach())

    async def detach(self) -> list[Any]:
        """Stop storing (a write under way completes) and hand over what is still queued, for
        ``finish``; re-raise a failed write."""
        with self._lock:  # no write starts after this one
            self._detached = True
        self._stop.set()
        if self._writing is not None:
            if self._writer is not None and not self._writing.done():
                self._writer.wake()  # its runs are stored now, not after the writer's linger
            await asyncio.wrap_future(self._writing)  # never raises: see _write_noting
        self._raise()
        rows, self._pending = self._pending, []
        return rows

    def finish(self, rows: list[Any]) -> None:
        """Store the rows ``detach`` handed over (blocking: on a thread), after their runs
        (the caller flushed the run writer first). They wait for the experiment's row like
        every other write, and are dropped if it failed."""
        if self._hold is not None:
            self._hold.done.wait()
            if self._hold.failed:
                return
        if rows:
            try:
                self._write(rows)
            except Exception as exc:
                self._error = exc
                self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise StoreError(f"storing feedback failed: {self._error}") from self._error
