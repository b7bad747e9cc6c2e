"""Remote mode's ``store.shares``: shared traces and datasets over ``/runs/{id}/share``,
``/datasets/{id}/share`` and the public ``/public/{token}/...`` reads (no key needed there)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..schemas import Dataset, Example, Run, TracerSessionResult

if TYPE_CHECKING:
    from ..store._shares import DatasetShare, RunShare
    from ._remote import _Http

__all__ = ["RemoteShares"]

ID = uuid.UUID | str


class RemoteShares:
    def __init__(self, http: _Http) -> None:
        self.http = http

    # --- traces ---------------------------------------------------------------------------

    def share_run(self, run_id: ID, share_token: ID | None = None) -> RunShare:
        made = self.http.request("PUT", f"/runs/{run_id}/share",
                                 body={"run_id": str(run_id), "share_token":
                                       str(share_token) if share_token else None})
        return self._run_share(made)

    def of_run(self, run_id: ID) -> RunShare | None:
        got = self.http.request("GET", f"/runs/{run_id}/share")
        return None if not got else self._run_share(got)

    def unshare_run(self, run_id: ID) -> bool:
        self.http.request("DELETE", f"/runs/{run_id}/share")
        return True

    def read_shared(self, share_token: ID, run_id: ID | None = None) -> Run:
        path = f"/public/{share_token}/run" + (f"/{run_id}" if run_id is not None else "")
        return Run.model_validate(self.http.request("GET", path))

    def list_shared(self, share_token: ID, run_ids: list[ID] | None = None) -> list[Run]:
        body: dict[str, Any] = {"id": [str(r) for r in run_ids]} if run_ids else {}
        out: list[Run] = []
        while True:
            page = self.http.request("POST", f"/public/{share_token}/runs/query", body=body)
            out += [Run.model_validate(r) for r in page["runs"]]
            if not page["cursors"]["next"]:
                return out
            body["cursor"] = page["cursors"]["next"]

    @staticmethod
    def _run_share(got: Mapping[str, Any]) -> RunShare:
        from ..store._shares import RunShare

        return RunShare(share_token=got["share_token"], run_id=got["run_id"])

    # --- datasets -------------------------------------------------------------------------

    def share_dataset(self, dataset_id: ID, *, share_token: ID | None = None) -> DatasetShare:
        body = {"dataset_id": str(dataset_id),
                "share_token": str(share_token) if share_token else None}
        return self._dataset_share(
            self.http.request("PUT", f"/datasets/{dataset_id}/share", body=body))

    def of_dataset(self, dataset_id: ID) -> DatasetShare | None:
        from ..errors import NotFoundError

        try:
            return self._dataset_share(self.http.request("GET", f"/datasets/{dataset_id}/share"))
        except NotFoundError as exc:
            if "is not shared" in str(exc):
                return None
            raise

    def unshare_dataset(self, dataset_id: ID) -> bool:
        self.http.request("DELETE", f"/datasets/{dataset_id}/share")
        return True

    def shared_dataset(self, share_token: ID) -> tuple[None, Dataset]:
        return None, Dataset.model_validate(
            self.http.request("GET", f"/public/{share_token}/datasets"))

    def shared_examples(self, share_token: ID, example_ids: list[ID] | None = None, *,
                        offset: int = 0, limit: int | None = None) -> tuple[None, list[Example]]:
        params = {"id": [str(e) for e in example_ids]} if example_ids else {}
        return None, [Example.model_validate(e) for e in self.http.pages(
            f"/public/{share_token}/examples", params, offset, limit)]

    def shared_experiments(self, share_token: ID, *, project_ids: list[ID] | None = None,
                           name: str | None = None, name_contains: str | None = None,
                           offset: int = 0, limit: int | None = None,
                           ) -> tuple[None, list[TracerSessionResult]]:
        params: dict[str, Any] = {"id": [str(p) for p in project_ids or ()] or None,
                                  "name": name, "name_contains": name_contains}
        params = {k: v for k, v in params.items() if v is not None}
        return None, [TracerSessionResult.model_validate(p) for p in self.http.pages(
            f"/public/{share_token}/datasets/sessions", params, offset, limit)]

    @staticmethod
    def _dataset_share(got: Mapping[str, Any]) -> DatasetShare:
        from ..store._shares import DatasetShare

        return DatasetShare(share_token=got["share_token"], dataset_id=got["dataset_id"])
