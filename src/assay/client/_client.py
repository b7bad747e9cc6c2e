"""``Client``: LangSmith's method names over assay's store (local) or server (remote)."""

from __future__ import annotations

import os
import threading
from typing import Any

from ..store import Store
from ._datasets import DatasetMethods
from ._projects import FeedbackMethods, ProjectMethods
from ._queues import QueueMethods
from ._runs import RunMethods
from ._shares import ShareMethods
from ._threads import ThreadMethods

__all__ = ["Client", "get_default_client"]


class Client(DatasetMethods, ProjectMethods, FeedbackMethods, QueueMethods, RunMethods,
             ShareMethods, ThreadMethods):
    """Datasets, examples, projects, runs and feedback, with LangSmith's names and keywords.

    ``Client()`` opens the embedded store (``ASSAY_DATABASE_URL`` or ``.assay/assay.db``);
    ``Client(database_url=...)`` another one; ``Client(store=...)`` shares an open store.
    ``Client(api_url=..., api_key=...)`` (or ``ASSAY_API_URL`` / ``ASSAY_API_KEY``) talks to an
    ``assay serve`` server instead, with the same methods. ``tracing_sampling_rate``: the
    share of traces made with this client that are kept (LangSmith's keyword; default: the
    ``ASSAY_TRACING_SAMPLING_RATE`` environment variable, else every trace).
    """

    def __init__(
        self,
        api_url: str | None = None,
        *,
        api_key: str | None = None,
        database_url: str | os.PathLike[str] | None = None,
        store: Store | None = None,
        tracing_sampling_rate: float | None = None,
    ) -> None:
        if tracing_sampling_rate is not None:  # else the environment's (see tracing/_sampling)
            from ..tracing._sampling import below_of

            self._sampling_below = below_of(tracing_sampling_rate)
        if api_url is None and store is None and database_url is None:
            api_url = os.environ.get("ASSAY_API_URL") or None
        if api_url is not None:  # remote mode: the same repositories, over an assay server
            from ..errors import InvalidInputError
            from ._remote import RemoteBackend

            if store is not None or database_url is not None:
                raise InvalidInputError(
                    "give api_url (remote) or database_url/store (local), not both")
            if not str(api_url).lower().startswith(("http://", "https://")):
                # a database URL or a path in the first argument reached the server client,
                # whose first request failed, and traced runs went nowhere until then
                raise InvalidInputError(
                    f"api_url {api_url!r} is not an http(s) URL of an assay server; for a "
                    f"local store use Client(database_url=...)")
            key = api_key if api_key is not None else os.environ.get("ASSAY_API_KEY")
            # RemoteBackend duck-types the Store repositories the client calls (no shared base)
            self._backend = RemoteBackend(api_url, key)  # type: ignore[assignment]  # duck-typed
            self._store = self._backend
            self._remote = True
            return
        self._store = store if store is not None else Store.open(database_url)
        self._backend = self._store
        self._remote = False

    @property
    def store(self) -> Store:
        """The local store; in remote mode the RemoteBackend with the same repositories."""
        return self._store

    @property
    def is_remote(self) -> bool:
        return self._remote

    def _tracing_writer(self) -> Any:
        """The background writer that stores this client's traced runs (made on first use):
        one per store per process, shared by every client of that store (``writer_for``)."""
        writer = self.__dict__.get("_run_writer")
        if writer is None:
            from ..tracing._writer import writer_for

            with _writer_lock:
                writer = self.__dict__.get("_run_writer")
                if writer is None:
                    writer = self.__dict__["_run_writer"] = writer_for(self)
                    if "_sampling_below" in self.__dict__ and writer is not None:
                        writer.sampled_clients = True
        return writer

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every run traced so far in this process toward this client's store (by
        any client of it, the default one included) is stored and readable."""
        writer = self.__dict__.get("_run_writer")
        if writer is None:
            from ..tracing._writer import writer_for

            writer = writer_for(self, create=False)
        if writer is not None and not writer.flush(timeout):
            from ..errors import StoreError

            raise StoreError(f"traced runs were not all stored within {timeout}s")

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.is_remote:
            return f"Client(api_url={self._backend.url!r})"
        return f"Client(database_url={self._store.url!r})"


_default: Client | None = None
_writer_lock = threading.Lock()


def get_default_client() -> Client:
    """The process-wide client used when none is passed (created on first use)."""
    global _default
    if _default is None:
        _default = Client()
    return _default
