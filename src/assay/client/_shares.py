"""Sharing methods of ``Client`` (LangSmith's ``share_run``, ``share_dataset`` and what reads a
share token): links that open one trace, or one dataset with its experiments, without a key."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..schemas import Dataset, Example, Run, TracerSession

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["ShareMethods", "share_token_of"]

ID = uuid.UUID | str


def share_token_of(token_or_url: ID) -> str:
    """The token of a share link (``.../public/<token>/r`` or ``/d``) or the token itself."""
    text = str(token_or_url).strip()
    if "/public/" in text:
        text = text.split("/public/", 1)[1].split("/", 1)[0]
    return text


class ShareMethods:
    _backend: Store

    def _share_url(self, token: Any, page: str = "r") -> str:
        """Remote, the server's link; local, the path to append to the address ``assay serve``
        serves this store at."""
        path = f"/public/{token}/{page}"
        return self._backend.url + path if getattr(self, "is_remote", False) else path

    # --- traces ---------------------------------------------------------------------------

    def share_run(self, run_id: ID, *, share_id: ID | None = None) -> str:
        """A link that opens the run's trace (the whole trace) without an API key; the same
        link every time it is asked for, until ``unshare_run``."""
        return self._share_url(self._backend.shares.share_run(run_id, share_id).share_token)

    def unshare_run(self, run_id: ID) -> None:
        """Stop sharing the run's trace: its link opens nothing from now on."""
        self._backend.shares.unshare_run(run_id)

    def read_run_shared_link(self, run_id: ID) -> str | None:
        share = self._backend.shares.of_run(run_id)
        return None if share is None else self._share_url(share.share_token)

    def run_is_shared(self, run_id: ID) -> bool:
        return self._backend.shares.of_run(run_id) is not None

    def read_shared_run(self, share_token: ID, run_id: ID | None = None) -> Run:
        """The shared trace's root run, or ``run_id`` of that trace (a token or its link)."""
        return self._backend.shares.read_shared(share_token_of(share_token), run_id)

    def list_shared_runs(self, share_token: ID, run_ids: Sequence[ID] | None = None,
                         ) -> Iterator[Run]:
        """The shared trace's runs (only ``run_ids``, when given), in start order."""
        yield from self._backend.shares.list_shared(
            share_token_of(share_token), list(run_ids) if run_ids else None)

    # --- datasets -------------------------------------------------------------------------

    def _dataset_schema(self, share: Any) -> dict[str, Any]:
        """LangSmith's ``DatasetShareSchema``: the ids and the link."""
        return {"dataset_id": share.dataset_id, "share_token": share.share_token,
                "url": self._share_url(share.share_token, "d")}

    def share_dataset(self, dataset_id: ID | None = None, *,
                      dataset_name: str | None = None) -> dict[str, Any]:
        """Share a dataset, its examples and the experiments run on it: ``{"dataset_id",
        "share_token", "url"}``, the same link until ``unshare_dataset``."""
        ds_id = self._backend.datasets.resolve_id(dataset_id, dataset_name)
        return self._dataset_schema(self._backend.shares.share_dataset(ds_id))

    def unshare_dataset(self, dataset_id: ID) -> None:
        self._backend.shares.unshare_dataset(dataset_id)

    def read_dataset_shared_schema(self, dataset_id: ID | None = None, *,
                                   dataset_name: str | None = None) -> dict[str, Any]:
        """The dataset's share; NotFoundError when it is not shared."""
        ds_id = self._backend.datasets.resolve_id(dataset_id, dataset_name)
        share = self._backend.shares.of_dataset(ds_id)
        if share is None:
            raise NotFoundError(f"dataset {ds_id} is not shared")
        return self._dataset_schema(share)

    def read_shared_dataset(self, share_token: ID) -> Dataset:
        return self._backend.shares.shared_dataset(share_token_of(share_token))[1]

    def list_shared_examples(self, share_token: ID, *, example_ids: Sequence[ID] | None = None,
                             limit: int | None = None) -> Iterator[Example]:
        yield from self._backend.shares.shared_examples(
            share_token_of(share_token), list(example_ids) if example_ids else None,
            limit=limit)[1]

    def list_shared_projects(self, *, dataset_share_token: ID,
                             project_ids: Sequence[ID] | None = None, name: str | None = None,
                             name_contains: str | None = None,
                             limit: int | None = None) -> Iterator[TracerSession]:
        """The experiments run on a shared dataset, with their statistics."""
        yield from self._backend.shares.shared_experiments(
            share_token_of(dataset_share_token),
            project_ids=list(project_ids) if project_ids else None, name=name,
            name_contains=name_contains, limit=limit)[1]
