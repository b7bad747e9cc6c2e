"""Examples read in the background while the first ones already run.

Reading a stored dataset costs a few microseconds per example; for a fresh experiment that
is time before the first target call, in which a concurrent experiment's workers would
otherwise sit idle. ``ExampleStream`` knows its length up front (a count query), hands out
examples in dataset order as a reader thread produces them, and blocks a consumer that runs
ahead only until the page it needs is there.

The caller reads the first page itself (``first``: ready when the experiment starts); the
reader reads on once told to (``start``: the experiment calls it when its first examples are
on their way) or once an example past the first page is asked for, so neither the rest of the
set-up nor the launch of the first examples shares the interpreter with it. If neither comes
within a second it reads on anyway: a set-up that failed still gives its connection back.

It then keeps ``AHEAD`` examples ready beyond the last one asked for, a page at a time, rather
than reading the whole dataset at once: with I/O-bound examples its work falls into the event
loop's idle moments instead of competing with the first examples as they finish. A pause that
lasts a second ends the pacing (the rest is read at once), so a slow experiment does not keep
the database's read snapshot open for its whole length.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

from .._gc import relaxed_gc
from ..errors import StoreError
from ..store._examples import StoredExample

__all__ = ["ExampleStream"]

_START_WAIT = 1.0  # seconds the reader waits to be started, or to be asked for more
AHEAD = 512  # examples kept ready beyond the last one asked for
_NEVER = 1 << 62


class ExampleStream(Sequence[StoredExample]):
    def __init__(self, count: int, pages: Iterator[list[StoredExample]],
                 first: Sequence[StoredExample] = ()) -> None:
        self._count = count
        self._items: list[StoredExample] = list(first)
        self._done = False
        self._error: BaseException | None = None
        self._started = False  # read the rest (``start``, or a consumer ran ahead)
        self._asked = 0  # the highest index the reader knows was asked for
        self._wake_at = _NEVER  # asking for this index wakes the paused reader
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pages,), daemon=True,
                                        name="assay-examples")
        self._thread.start()

    def _read(self, pages: Iterator[list[StoredExample]]) -> None:
        try:
            with self._cond:  # bounded: a stream nobody reads still ends
                self._cond.wait_for(lambda: self._started, timeout=_START_WAIT)
            paced = True
            with relaxed_gc():
                for page in pages:
                    with self._cond:
                        self._items.extend(page)
                        self._cond.notify_all()
                        if paced and len(self._items) - self._asked >= AHEAD:
                            self._wake_at = len(self._items) - AHEAD // 2
                            paced = self._cond.wait(_START_WAIT)  # False: read the rest
                            self._wake_at = _NEVER
        except BaseException as exc:  # handed to the consumer, which raises it
            self._error = exc
        finally:
            with self._cond:
                self._done = True
                self._count = len(self._items) if self._error is None else self._count
                self._cond.notify_all()

    def start(self) -> None:
        """Read on now."""
        if not self._started:
            self._ask(0)

    def _ask(self, i: int) -> None:
        with self._cond:
            self._started = True
            self._asked = max(self._asked, i)
            self._wake_at = _NEVER  # one wake-up: not one per example until the reader runs
            self._cond.notify_all()

    def _have(self, i: int) -> bool:
        """Wait until example ``i`` is read (True) or the reader stopped short of it."""
        if i < len(self._items):
            if i >= self._wake_at:  # the paused reader's mark: let it read another page
                self._ask(i)
            return True
        self._ask(i)
        with self._cond:
            while i >= len(self._items) and not self._done:
                self._cond.wait()
        if i < len(self._items):  # read before the reader failed: still good
            return True
        if self._error is not None:
            raise StoreError(f"reading the dataset's examples failed: {self._error}") \
                from self._error
        return False

    def complete(self) -> list[StoredExample]:
        """Every example (waits for the reader)."""
        self._have(self._count)
        self._thread.join()
        return self._items

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[StoredExample]:
        i = 0
        while self._have(i):
            yield self._items[i]
            i += 1

    @overload
    def __getitem__(self, index: int) -> StoredExample: ...
    @overload
    def __getitem__(self, index: slice) -> list[StoredExample]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.complete()[index]
        if index < 0:
            return self.complete()[index]
        if not self._have(index):
            raise IndexError(index)
        return self._items[index]
