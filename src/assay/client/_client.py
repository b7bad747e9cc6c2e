"""``Client``: LangSmith's method names over assay's store (local) or server (remote)."""

from __future__ import annotations

import os
from typing import Any

from ..store import Store
from ._datasets import DatasetMethods
from ._projects import FeedbackMethods, ProjectMethods
from ._runs import RunMethods

__all__ = ["Client", "get_default_client"]


class Client(DatasetMethods, ProjectMethods, FeedbackMethods, RunMethods):
    """Datasets, examples, projects, runs and feedback, with LangSmith's names and keywords.

    ``Client()`` opens the embedded store (``ASSAY_DATABASE_URL`` or ``.assay/assay.db``);
    ``Client(database_url=...)`` another one; ``Client(store=...)`` shares an open store.
    """

    def __init__(
        self,
        api_url: str | None = None,
        *,
        api_key: str | None = None,
        database_url: str | os.PathLike[str] | None = None,
        store: Store | None = None,
    ) -> None:
        if api_url is not None:
            raise NotImplementedError("remote mode arrives with the team server (assay serve)")
        self._store = store if store is not None else Store.open(database_url)
        self._backend = self._store

    @property
    def store(self) -> Store:
        return self._store

    def flush(self) -> None:
        """Wait until every run traced so far is stored."""

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(database_url={self._store.url!r})"


_default: Client | None = None


def get_default_client() -> Client:
    """The process-wide client used when none is passed (created on first use)."""
    global _default
    if _default is None:
        _default = Client()
    return _default
