"""Remote mode of ``Client``: the store's repository interface over an assay server's REST API.

``RemoteBackend`` has the attributes ``datasets``, ``examples``, ``projects``, ``runs`` and
``feedback`` with the same methods and signatures as the store repositories, so every
``Client`` method works unchanged whether ``_backend`` is a local ``Store`` or this. It speaks
the LangSmith REST endpoints that ``assay serve`` implements; server errors come back as assay's
own exceptions (401 AuthError, 404 NotFoundError, 409 ConflictError, 4xx InvalidInputError).
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx

from .. import _json
from ..errors import (
    AuthError,
    ConflictError,
    ExampleValidationError,
    InvalidInputError,
    NotFoundError,
    RemoteError,
)
from ..schemas import (
    ComparativeExperiment,
    Dataset,
    DatasetVersion,
    Example,
    Feedback,
    Run,
    TracerSession,
    TracerSessionResult,
)
from ..store._feedback import source_kinds

if TYPE_CHECKING:
    from ..store._feedback_tokens import FeedbackToken

__all__ = ["RemoteBackend"]

_PAGE = 100


class _Http:
    def __init__(self, api_url: str, api_key: str | None, timeout: float) -> None:
        self.api_url = api_url.rstrip("/")
        headers = {"accept": "application/json", "user-agent": "assay-client"}
        if api_key:
            headers["x-api-key"] = api_key
        self.client = httpx.Client(base_url=self.api_url, headers=headers, timeout=timeout)
        self._checked = False

    def _check_server(self) -> None:
        """Once, before the first request: the URL must be a server of LangSmith's API (``GET
        /info``: an object with its ``version``), or every answer would be read as the wrong
        thing and fail later as a model's validation error."""
        try:
            resp = self.client.get("/info")
        except httpx.HTTPError as exc:
            raise RemoteError(f"cannot reach the assay server at {self.api_url}: {exc}") from exc
        try:
            info = resp.json() if resp.status_code == 200 else None
        except ValueError:
            info = None
        if not isinstance(info, dict) or "version" not in info:
            raise RemoteError(
                f"{self.api_url} is not an assay server: GET /info answered HTTP "
                f"{resp.status_code} {resp.headers.get('content-type', '')!s}, not the server's "
                f"info (api_url / ASSAY_API_URL must point at `assay serve`)", resp.status_code)
        self._checked = True

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                body: Any = None) -> Any:
        if not self._checked:
            self._check_server()
        content = None if body is None else _json.dumps(body).encode()
        headers = {"content-type": "application/json"} if content is not None else None
        clean = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        try:
            resp = self.client.request(method, path, params=clean, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise RemoteError(f"cannot reach the assay server at {self.api_url}: {exc}") from exc
        if resp.status_code >= 400:
            raise _error(resp)
        return resp.json() if resp.content else None

    def pages(self, path: str, params: Mapping[str, Any], offset: int,
              limit: int | None) -> Iterator[Any]:
        """Offset pagination until ``limit`` items or a short page."""
        got = 0
        while limit is None or got < limit:
            size = _PAGE if limit is None else min(_PAGE, limit - got)
            page = self.request("GET", path,
                                params={**params, "offset": offset + got, "limit": size})
            yield from page
            got += len(page)
            if len(page) < size:
                return

    def close(self) -> None:
        self.client.close()


def _param(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple, set)):
        return [_param(v) for v in value]
    return str(value) if isinstance(value, uuid.UUID) else value


def _error(resp: httpx.Response) -> Exception:
    try:
        data = resp.json()
    except ValueError:
        data = {}
    detail = data.get("detail") if isinstance(data, dict) else None
    message = str(detail or resp.text or resp.reason_phrase)
    status = resp.status_code
    if status == 401:
        return AuthError(message)
    if status == 404:
        return NotFoundError(message)
    if status == 409:
        return ConflictError(message)
    if isinstance(data, dict) and data.get("error") == "invalid_example" and "index" in data:
        return ExampleValidationError(int(data["index"]), str(data.get("problem") or message))
    if status in (400, 413, 415, 422):
        return InvalidInputError(message)
    return RemoteError(f"server error {status}: {message}", status)


def _ids(values: Iterable[Any] | None) -> list[str] | None:
    return None if values is None else [str(v) for v in values]


class _Datasets:
    def __init__(self, http: _Http) -> None:
        self.http = http

    def create(self, name: str, *, description: str | None = None, data_type: str = "kv",
               metadata: Mapping[str, Any] | None = None,
               inputs_schema: Mapping[str, Any] | None = None,
               outputs_schema: Mapping[str, Any] | None = None,
               id: uuid.UUID | str | None = None) -> Dataset:
        body = {"name": name, "description": description, "data_type": data_type,
                "metadata": dict(metadata) if metadata else None,
                "inputs_schema_definition": inputs_schema,
                "outputs_schema_definition": outputs_schema,
                "id": str(id) if id else None}
        return Dataset.model_validate(self.http.request("POST", "/datasets", body=body))

    def resolve_id(self, dataset_id: uuid.UUID | str | None = None,
                   dataset_name: str | None = None) -> str:
        return str(self.read(dataset_id=dataset_id, dataset_name=dataset_name).id)

    def read(self, *, dataset_id: uuid.UUID | str | None = None,
             dataset_name: str | None = None) -> Dataset:
        if dataset_id is not None:
            return Dataset.model_validate(self.http.request("GET", f"/datasets/{dataset_id}"))
        if dataset_name is not None:
            found = self.http.request("GET", "/datasets", params={"name": dataset_name, "limit": 1})
            if not found:
                raise NotFoundError(f"dataset {dataset_name!r} not found")
            return Dataset.model_validate(found[0])
        raise InvalidInputError("give dataset_id or dataset_name")

    def list(self, *, dataset_ids: Sequence[uuid.UUID | str] | None = None,
             dataset_name: str | None = None,
             dataset_name_contains: str | None = None, metadata: Mapping[str, Any] | None = None,
             offset: int = 0, limit: int | None = None) -> list[Dataset]:
        params = {"id": _ids(dataset_ids), "name": dataset_name,
                  "name_contains": dataset_name_contains,
                  "metadata": _json.dumps(metadata) if metadata else None}
        return [Dataset.model_validate(d) for d in self.http.pages("/datasets", params, offset,
                                                                   limit)]

    def update(self, dataset_id: uuid.UUID | str, *, name: str | None = None,
               description: str | None = None, metadata: Mapping[str, Any] | None = None,
               inputs_schema: Mapping[str, Any] | None = None,
               outputs_schema: Mapping[str, Any] | None = None) -> Dataset:
        body = {"name": name, "description": description, "metadata": metadata,
                "inputs_schema_definition": inputs_schema,
                "outputs_schema_definition": outputs_schema}
        return Dataset.model_validate(self.http.request("PATCH", f"/datasets/{dataset_id}",
                                                        body=body))

    def delete(self, *, dataset_id: uuid.UUID | str | None = None,
               dataset_name: str | None = None) -> None:
        self.http.request("DELETE", f"/datasets/{self.resolve_id(dataset_id, dataset_name)}")

    def version(self, dataset_id: uuid.UUID | str,
                as_of: datetime | str | None = None) -> DatasetVersion:
        data = self.http.request("GET", f"/datasets/{dataset_id}/version",
                                 params={"as_of": as_of if as_of is not None else "latest"})
        return DatasetVersion.model_validate(data)

    def tag(self, dataset_id: uuid.UUID | str, tag: str,
            as_of: datetime | str | None = None) -> DatasetVersion:
        data = self.http.request("PUT", f"/datasets/{dataset_id}/tags",
                                 body={"tag": tag, "as_of": as_of})
        return DatasetVersion.model_validate(data)

    def diff_versions(self, dataset_id: uuid.UUID | str, from_version: datetime | str,
                      to_version: datetime | str) -> dict[str, builtins.list[str]]:
        diff: dict[str, builtins.list[str]] = self.http.request(
            "GET", f"/datasets/{dataset_id}/versions/diff",
            params={"from_version": from_version, "to_version": to_version})
        return diff

    def list_versions(self, dataset_id: uuid.UUID | str) -> builtins.list[DatasetVersion]:
        return [DatasetVersion.model_validate(v)
                for v in self.http.pages(f"/datasets/{dataset_id}/versions", {}, 0, None)]


class _Examples:
    def __init__(self, http: _Http, datasets: _Datasets) -> None:
        self.http = http
        self.datasets = datasets

    def create_many(self, items: Iterable[Any], *, dataset_id: uuid.UUID | str | None = None,
                    dataset_name: str | None = None) -> list[Example]:
        from ..store._examples import normalize_example

        rows = [normalize_example(item, i) for i, item in enumerate(items)]  # same errors as local
        ds_id = self.datasets.resolve_id(dataset_id, dataset_name)
        if not rows:
            return []
        body = [{"id": r["id"], "dataset_id": ds_id, "inputs": r["inputs"], "outputs": r["outputs"],
                 "metadata": r["metadata"], "split": r["splits"],
                 "source_run_id": r["source_run_id"]}
                for r in rows]
        return [Example.model_validate(e) for e in self.http.request("POST", "/examples/bulk",
                                                                     body=body)]

    def splits(self, *, dataset_id: uuid.UUID | str | None = None,
               dataset_name: str | None = None, as_of: datetime | str | None = None) -> list[str]:
        ds_id = self.datasets.resolve_id(dataset_id, dataset_name)
        return list(self.http.request("GET", f"/datasets/{ds_id}/splits",
                                      params={"as_of": as_of}))

    def update_splits(self, split_name: str, example_ids: Sequence[uuid.UUID | str], *,
                      dataset_id: uuid.UUID | str | None = None,
                      dataset_name: str | None = None, remove: bool = False) -> list[Example]:
        ds_id = self.datasets.resolve_id(dataset_id, dataset_name)
        body = {"split_name": split_name, "examples": [str(i) for i in example_ids],
                "remove": remove}
        return [Example.model_validate(e) for e in
                self.http.request("PUT", f"/datasets/{ds_id}/splits", body=body)]

    def list(self, *, dataset_id: uuid.UUID | str | None = None, dataset_name: str | None = None,
             example_ids: Sequence[uuid.UUID | str] | None = None,
             splits: Sequence[str] | None = None,
             metadata: Mapping[str, Any] | None = None, as_of: datetime | str | None = None,
             offset: int = 0, limit: int | None = None, filter: str | None = None
             ) -> list[Example]:
        if dataset_id is None and dataset_name is not None:
            dataset_id = self.datasets.resolve_id(None, dataset_name)
        if dataset_id is None and example_ids is None:
            raise InvalidInputError("give dataset_id, dataset_name or example_ids")
        if example_ids is not None and not example_ids:
            return []
        params = {"dataset": dataset_id, "id": _ids(example_ids),
                  "splits": list(splits) if splits else None,
                  "metadata": _json.dumps(metadata) if metadata else None, "as_of": as_of,
                  "filter": filter}
        return [Example.model_validate(e)
                for e in self.http.pages("/examples", params, offset, limit)]

    def read(self, example_id: uuid.UUID | str, *, as_of: datetime | str | None = None) -> Example:
        return Example.model_validate(
            self.http.request("GET", f"/examples/{example_id}", params={"as_of": as_of}))

    def update_many(self, updates: Sequence[Mapping[str, Any]]) -> builtins.list[Example]:
        if not updates:
            return []
        for i, upd in enumerate(updates):
            if not isinstance(upd, Mapping) or "id" not in upd:
                raise ExampleValidationError(i, "an update needs the example 'id'")
        body = [{("split" if k == "splits" else k): v for k, v in u.items()} for u in updates]
        data = self.http.request("PATCH", "/examples/bulk", body=body)
        return [Example.model_validate(e) for e in data["examples"]]

    def delete_many(self, example_ids: Sequence[uuid.UUID | str]) -> int:
        if not example_ids:
            return 0
        data = self.http.request("DELETE", "/examples", params={"example_ids": _ids(example_ids)})
        return int(data["count"])

    def count(self, dataset_id: uuid.UUID | str, *, as_of: datetime | str | None = None) -> int:
        return len(self.list(dataset_id=dataset_id, as_of=as_of))


class _Projects:
    def __init__(self, http: _Http, datasets: _Datasets) -> None:
        self.http = http
        self.datasets = datasets

    @staticmethod
    def _model(data: Mapping[str, Any], include_stats: bool) -> TracerSession:
        return (TracerSessionResult if include_stats else TracerSession).model_validate(data)

    def create(self, name: str, *, description: str | None = None,
               metadata: Mapping[str, Any] | None = None,
               extra: Mapping[str, Any] | None = None,
               reference_dataset_id: uuid.UUID | str | None = None,
               id: uuid.UUID | str | None = None, start_time: datetime | None = None,
               end_time: datetime | None = None, upsert: bool = False) -> TracerSession:
        extra_d = dict(extra or {})
        if metadata is not None:
            extra_d["metadata"] = {**(extra_d.get("metadata") or {}), **dict(metadata)}
        body = {"name": name, "description": description, "extra": extra_d or None,
                "reference_dataset_id": reference_dataset_id, "id": id, "start_time": start_time,
                "end_time": end_time}
        data = self.http.request("POST", "/sessions", params={"upsert": upsert or None}, body=body)
        return TracerSession.model_validate(data)

    def read(self, *, project_id: uuid.UUID | str | None = None, project_name: str | None = None,
             include_stats: bool = False) -> TracerSession:
        if project_id is not None:
            data = self.http.request("GET", f"/sessions/{project_id}",
                                     params={"include_stats": include_stats})
            return self._model(data, include_stats)
        if project_name is not None:
            found = self.http.request("GET", "/sessions", params={
                "name": project_name, "include_stats": include_stats, "limit": 1})
            if not found:
                raise NotFoundError(f"project {project_name!r} not found")
            return self._model(found[0], include_stats)
        raise InvalidInputError("give project_id or project_name")

    def list(self, *, project_ids: Sequence[uuid.UUID | str] | None = None, name: str | None = None,
             name_contains: str | None = None, reference_dataset_id: uuid.UUID | str | None = None,
             reference_dataset_name: str | None = None, reference_free: bool | None = None,
             metadata: Mapping[str, Any] | None = None, include_stats: bool = False,
             offset: int = 0, limit: int | None = None) -> list[TracerSession]:
        if reference_dataset_name is not None:
            reference_dataset_id = self.datasets.resolve_id(None, reference_dataset_name)
        params = {"id": _ids(project_ids), "name": name, "name_contains": name_contains,
                  "reference_dataset": reference_dataset_id, "reference_free": reference_free,
                  "metadata": _json.dumps(metadata) if metadata else None,
                  "include_stats": include_stats}
        return [self._model(p, include_stats) for p in self.http.pages("/sessions", params, offset,
                                                                       limit)]

    def update(self, project_id: uuid.UUID | str, *, name: str | None = None,
               description: str | None = None,
               metadata: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None,
               end_time: datetime | None = None) -> TracerSession:
        new_extra = dict(extra) if extra is not None else None
        if metadata is not None:
            new_extra = {**(new_extra or {}), "metadata": dict(metadata)}
        body = {"name": name, "description": description, "extra": new_extra, "end_time": end_time}
        return TracerSession.model_validate(
            self.http.request("PATCH", f"/sessions/{project_id}", body=body))

    def end(self, project_id: uuid.UUID | str, end_time: datetime) -> None:
        self.update(project_id, end_time=end_time)

    def delete(self, *, project_id: uuid.UUID | str | None = None,
               project_name: str | None = None) -> None:
        pid = project_id if project_id is not None else self.read(project_name=project_name).id
        self.http.request("DELETE", f"/sessions/{pid}")


class _Runs:
    def __init__(self, http: _Http) -> None:
        self.http = http

    def upsert(self, posts: Iterable[Mapping[str, Any]] = (),
               patches: Iterable[Mapping[str, Any]] = (),
               *, default_project: str = "default") -> int:
        def wire(run: Mapping[str, Any]) -> dict[str, Any]:
            if not isinstance(run, Mapping):
                raise InvalidInputError(f"a run must be an object, got {type(run).__name__}")
            out = {k: v for k, v in run.items() if v is not None}
            if "session_id" not in out and "session_name" not in out:
                out["session_name"] = default_project
            return out

        body = {"post": [wire(r) for r in posts], "patch": [wire(r) for r in patches]}
        if not body["post"] and not body["patch"]:
            return 0
        self.http.request("POST", "/runs/batch", body=body)
        return len({str(r.get("id")) for r in body["post"] + body["patch"]})

    def delete_traces(self, project_id: uuid.UUID | str, *,
                      trace_ids: Iterable[uuid.UUID | str] | None = None,
                      keep: Iterable[uuid.UUID | str] | None = None) -> int:
        if (trace_ids is None) == (keep is None):
            raise InvalidInputError("give exactly one of trace_ids or keep")
        body = {"session_id": str(project_id), "trace_ids": _ids(trace_ids),
                "keep_trace_ids": _ids(keep)}
        return int(self.http.request("POST", "/runs/delete", body=body)["deleted"])

    def read(self, run_id: uuid.UUID | str, *, load_child_runs: bool = False) -> Run:
        return Run.model_validate(self.http.request(
            "GET", f"/runs/{run_id}", params={"load_child_runs": load_child_runs or None}))

    def list(self, *, project_ids: Sequence[str] | None = None, run_type: str | None = None,
             trace_id: uuid.UUID | str | None = None, parent_run_id: uuid.UUID | str | None = None,
             is_root: bool | None = None, error: bool | None = None,
             reference_example_ids: Sequence[uuid.UUID | str] | None = None,
             run_ids: Sequence[uuid.UUID | str] | None = None,
             start_time: datetime | str | None = None,
             filter: str | None = None, trace_filter: str | None = None,
             tree_filter: str | None = None, query: str | None = None,
             order: str = "asc", offset: int = 0, limit: int | None = None) -> list[Run]:
        body: dict[str, Any] = {
            "session": _ids(project_ids), "run_type": run_type, "trace": trace_id,
            "parent_run": parent_run_id, "is_root": is_root, "error": error,
            "reference_example": _ids(reference_example_ids), "id": _ids(run_ids),
            "start_time": start_time, "filter": filter, "trace_filter": trace_filter,
            "tree_filter": tree_filter, "query": query, "order": order,
            "cursor": str(offset) if offset else None,
        }
        body = {k: v for k, v in body.items() if v is not None}
        out: list[Run] = []
        while limit is None or len(out) < limit:
            if limit is not None:
                body["limit"] = min(_PAGE, limit - len(out))
            data = self.http.request("POST", "/runs/query", body=body)
            out.extend(Run.model_validate(r) for r in data["runs"])
            nxt = (data.get("cursors") or {}).get("next")
            if not nxt:
                break
            body["cursor"] = nxt
        return out[:limit] if limit is not None else out


    def stats(self, *, project_ids: Sequence[str] | None = None,
              run_ids: Sequence[uuid.UUID | str] | None = None,
              trace_id: uuid.UUID | str | None = None,
              parent_run_id: uuid.UUID | str | None = None, run_type: str | None = None,
              reference_example_ids: Sequence[uuid.UUID | str] | None = None,
              start_time: datetime | str | None = None, start_before: datetime | str | None = None,
              error: bool | None = None, is_root: bool | None = None, query: str | None = None,
              filter: str | None = None, trace_filter: str | None = None,
              tree_filter: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "session": _ids(project_ids), "id": _ids(run_ids), "trace": trace_id,
            "parent_run": parent_run_id, "run_type": run_type,
            "reference_example": _ids(reference_example_ids), "start_time": start_time,
            "end_time": start_before, "error": error, "is_root": is_root, "query": query,
            "filter": filter, "trace_filter": trace_filter, "tree_filter": tree_filter,
        }
        out = self.http.request("POST", "/runs/stats",
                                body={k: v for k, v in body.items() if v is not None})
        last = out.get("last_run_start_time")
        if isinstance(last, str):  # the local store's type
            out["last_run_start_time"] = datetime.fromisoformat(last)
        return out


class _Feedback:
    def __init__(self, http: _Http) -> None:
        self.http = http

    def create_many(self, items: Iterable[Mapping[str, Any]], *,
                    return_records: bool = True) -> list[Feedback]:
        body = [dict(i) for i in items]
        if not body:
            return []
        made = self.http.request("POST", "/feedback", body=body)
        return [Feedback.model_validate(f) for f in made] if return_records else []

    def create(self, **item: Any) -> Feedback:
        return self.create_many([item])[0]

    def read(self, feedback_id: uuid.UUID | str) -> Feedback:
        return Feedback.model_validate(self.http.request("GET", f"/feedback/{feedback_id}"))

    def list(self, *, run_ids: Sequence[uuid.UUID | str] | None = None,
             project_ids: Sequence[uuid.UUID | str] | None = None,
             feedback_key: Sequence[str] | None = None,
             feedback_ids: Sequence[uuid.UUID | str] | None = None, offset: int = 0,
             limit: int | None = None, pairwise: bool | None = None,
             source_types: Sequence[Any] | str | None = None) -> list[Feedback]:
        params = {"run": _ids(run_ids), "session": _ids(project_ids),
                  "key": list(feedback_key) if feedback_key is not None else None,
                  "id": _ids(feedback_ids),
                  "source": source_kinds(source_types) if source_types is not None else None}
        for value in params.values():
            if value is not None and not value:
                return []  # an empty filter matches nothing (and must not be dropped)
        got = [Feedback.model_validate(f) for f in self.http.pages("/feedback", params, offset,
                                                                   limit)]
        if pairwise is None:  # LangSmith's route has no such filter: applied here
            return got
        return [f for f in got if (f.comparative_experiment_id is not None) == pairwise]

    def update(self, feedback_id: uuid.UUID | str, **changes: Any) -> Feedback:
        return Feedback.model_validate(
            self.http.request("PATCH", f"/feedback/{feedback_id}", body=changes))

    def delete(self, feedback_id: uuid.UUID | str) -> None:
        self.http.request("DELETE", f"/feedback/{feedback_id}")


class _Comparative:
    """``store.comparative`` over ``/datasets/comparative``."""

    def __init__(self, http: _Http) -> None:
        self.http = http

    def create(self, **fields: Any) -> ComparativeExperiment:
        return ComparativeExperiment.model_validate(
            self.http.request("POST", "/datasets/comparative", body=fields))

    def read(self, comparative_experiment_id: uuid.UUID | str) -> ComparativeExperiment:
        return ComparativeExperiment.model_validate(
            self.http.request("GET", f"/datasets/comparative/{comparative_experiment_id}"))

    def list(self, *, dataset_id: uuid.UUID | str, name: str | None = None,
             name_contains: str | None = None, offset: int = 0,
             limit: int | None = None) -> list[ComparativeExperiment]:
        params = {"name": name, "name_contains": name_contains}
        return [ComparativeExperiment.model_validate(c) for c in self.http.pages(
            f"/datasets/{dataset_id}/comparative", params, offset, limit)]

    def delete(self, comparative_experiment_id: uuid.UUID | str) -> None:
        self.http.request("DELETE", f"/datasets/comparative/{comparative_experiment_id}")


class _FeedbackTokens:
    """``store.feedback_tokens`` over ``/feedback/tokens``."""

    def __init__(self, http: _Http) -> None:
        self.http = http

    def create(self, run_id: uuid.UUID | str, feedback_key: str, *,
               expires_at: datetime | None = None, expires_in: timedelta | None = None,
               feedback_config: Mapping[str, Any] | None = None,
               feedback_id: uuid.UUID | str | None = None) -> FeedbackToken:
        from ..store._feedback_tokens import FeedbackToken

        body: dict[str, Any] = {"run_id": run_id, "feedback_key": feedback_key,
                                "feedback_config": feedback_config, "id": feedback_id,
                                "expires_at": expires_at}
        if expires_in is not None:
            minutes, seconds = divmod(expires_in.total_seconds(), 60)
            body["expires_in"] = {"minutes": minutes + seconds / 60}
        made = self.http.request("POST", "/feedback/tokens", body=body)
        return FeedbackToken.model_validate({**made, "run_id": run_id,
                                             "feedback_key": feedback_key})

    def use(self, token_id: uuid.UUID | str, **fields: Any) -> Feedback:
        made = self.http.request("POST", f"/feedback/tokens/{token_id}", body=fields)
        return Feedback.model_validate(
            self.http.request("GET", f"/feedback/{made['feedback_id']}"))


class RemoteBackend:
    """Stands where a ``Store`` stands inside ``Client``, talking to ``assay serve``."""

    def __init__(self, api_url: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        self.http = _Http(api_url, api_key, timeout)
        self.datasets = _Datasets(self.http)
        self.examples = _Examples(self.http, self.datasets)
        self.projects = _Projects(self.http, self.datasets)
        self.runs = _Runs(self.http)
        self.feedback = _Feedback(self.http)
        self.comparative = _Comparative(self.http)
        self.feedback_tokens = _FeedbackTokens(self.http)
        from ._remote_shares import RemoteShares  # shared traces and datasets

        self.shares = RemoteShares(self.http)
        from ._remote_threads import RemoteThreads  # conversation threads

        self.threads = RemoteThreads(self.http)
        from ._remote_attachments import RemoteAttachments  # issue 23: example attachments

        self.attachments = RemoteAttachments(self.http, self.datasets)
        from ._queues import RemoteFeedbackConfigs, RemoteQueues  # issue 23

        self.queues = RemoteQueues(self.http)
        self.feedback_configs = RemoteFeedbackConfigs(self.http)

    @property
    def url(self) -> str:
        return self.http.api_url

    def info(self) -> dict[str, Any]:
        return self.http.request("GET", "/info")

    def close(self) -> None:
        self.http.close()
