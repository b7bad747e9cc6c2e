"""Examples read in the background while the first ones already run.

Reading a stored dataset costs a few microseconds per example; for a fresh experiment that
is time before the first target call, in which a concurrent experiment's workers would
otherwise sit idle. ``ExampleStream`` knows its length up front (a count query), hands out
examples in dataset order as a reader thread produces them, and blocks a consumer that runs
ahead only until the page it needs is there.

The caller reads the first page itself (``first``: ready when the experiment starts); the
reader waits for the first example to be asked for before it reads on, so the rest of the
set-up does not share the interpreter with it, and the rest of the dataset is read while the
first examples run (or after a second, if no example is asked for: a set-up that failed still
gives its connection back).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

from .._gc import relaxed_gc
from ..errors import StoreError
from ..schemas import Example

__all__ = ["ExampleStream"]

_START_WAIT = 1.0  # seconds the reader waits for the first example to be asked for


class ExampleStream(Sequence[Example]):
    def __init__(self, count: int, pages: Iterator[list[Example]],
                 first: Sequence[Example] = ()) -> None:
        self._count = count
        self._items: list[Example] = list(first)
        self._done = False
        self._error: BaseException | None = None
        self._started = False  # the consumer asked for an example: read the rest
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pages,), daemon=True,
                                        name="assay-examples")
        self._thread.start()

    def _read(self, pages: Iterator[list[Example]]) -> None:
        try:
            with self._cond:  # bounded: a stream nobody reads still ends
                self._cond.wait_for(lambda: self._started, timeout=_START_WAIT)
            with relaxed_gc():
                for page in pages:
                    with self._cond:
                        self._items.extend(page)
                        self._cond.notify_all()
        except BaseException as exc:  # handed to the consumer, which raises it
            self._error = exc
        finally:
            with self._cond:
                self._done = True
                self._count = len(self._items) if self._error is None else self._count
                self._cond.notify_all()

    def _have(self, i: int) -> bool:
        """Wait until example ``i`` is read (True) or the reader stopped short of it."""
        if i < len(self._items) and self._started:
            return True
        with self._cond:
            if not self._started:
                self._started = True
                self._cond.notify_all()
            while i >= len(self._items) and not self._done:
                self._cond.wait()
        if i < len(self._items):  # read before the reader failed: still good
            return True
        if self._error is not None:
            raise StoreError(f"reading the dataset's examples failed: {self._error}") \
                from self._error
        return False

    def complete(self) -> list[Example]:
        """Every example (waits for the reader)."""
        self._have(self._count)
        self._thread.join()
        return self._items

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Example]:
        i = 0
        while self._have(i):
            yield self._items[i]
            i += 1

    @overload
    def __getitem__(self, index: int) -> Example: ...
    @overload
    def __getitem__(self, index: slice) -> list[Example]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.complete()[index]
        if index < 0:
            return self.complete()[index]
        if not self._have(index):
            raise IndexError(index)
        return self._items[index]
