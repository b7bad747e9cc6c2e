"""Remote mode's example attachments: the multipart endpoints the official SDK uses.

Same methods as the store's ``AttachmentRepo`` (``create_examples``, ``update_examples``,
``sdk_view``), so ``Client`` calls one interface in both modes. Examples with attachments go
to ``/v1/platform/datasets/{id}/examples`` (one request, one transaction on the server), and
attachments come back through ``attachment_urls`` and the signed download URLs.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import _json
from ..errors import InvalidInputError, NotFoundError, RemoteError
from ..schemas import Example
from ..store._attachments import LazyReader, Upload
from ..store._examples import normalize_example

if TYPE_CHECKING:
    from ._remote import _Datasets, _Http

__all__ = ["RemoteAttachments"]


def _encode(parts: list[tuple[str, bytes, str]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = io.BytesIO()
    for name, data, ctype in parts:
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n'
                  f"Content-Type: {ctype}\r\n\r\n".encode())
        out.write(data)
        out.write(b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def _json_part(name: str, value: Any) -> tuple[str, bytes, str]:
    return name, _json.dumps(value).encode(), "application/json"


def _file_parts(ex_id: str, uploads: Sequence[Upload]) -> list[tuple[str, bytes, str]]:
    return [(f"{ex_id}.attachment.{u.name}", u.data, f"{u.mime_type}; length={len(u.data)}")
            for u in uploads]


class RemoteAttachments:
    def __init__(self, http: _Http, datasets: _Datasets) -> None:
        self.http = http
        self.datasets = datasets

    def _send(self, method: str, path: str, parts: list[tuple[str, bytes, str]]) -> Any:
        from ._remote import _error

        body, ctype = _encode(parts)
        try:
            resp = self.http.client.request(method, path, content=body,
                                            headers={"content-type": ctype})
        except Exception as exc:  # httpx.HTTPError
            raise RemoteError(f"cannot reach the assay server at {self.http.api_url}: "
                              f"{exc}") from exc
        if resp.status_code >= 400:
            raise _error(resp)
        return resp.json() if resp.content else None

    def _read(self, ids: Sequence[str]) -> list[Example]:
        found = {}
        for i in range(0, len(ids), 100):
            chunk = ids[i:i + 100]
            for e in self.http.request("GET", "/examples", params={"id": chunk, "limit": 100}):
                found[e["id"]] = Example.model_validate(e)
        return [found[i] for i in ids if i in found]

    def create_examples(self, items: Sequence[Any], uploads: Sequence[Sequence[Upload]], *,
                        dataset_id: Any = None, dataset_name: str | None = None) -> list[Example]:
        ds_id = self.datasets.resolve_id(dataset_id, dataset_name)
        rows = [normalize_example(item, i) for i, item in enumerate(items)]  # same errors
        parts: list[tuple[str, bytes, str]] = []
        for row, ups in zip(rows, uploads, strict=False):
            ex_id = row["id"]
            parts.append(_json_part(ex_id, {"metadata": row["metadata"], "split": row["splits"],
                                            "source_run_id": row["source_run_id"]}))
            parts.append(_json_part(f"{ex_id}.inputs", row["inputs"]))
            if row["outputs"] is not None:
                parts.append(_json_part(f"{ex_id}.outputs", row["outputs"]))
            parts += _file_parts(ex_id, ups)
        if not parts:
            return []
        self._send("POST", f"/v1/platform/datasets/{ds_id}/examples", parts)
        return self._read([r["id"] for r in rows])

    def update_examples(self, updates: Sequence[Mapping[str, Any]],
                        uploads: Sequence[Sequence[Upload]],
                        ops: Sequence[tuple[list[str], dict[str, str]] | None]) -> list[Example]:
        """One PATCH per dataset the examples belong to (atomic per dataset)."""
        ids = [str(u["id"]) for u in updates]
        current = {str(e.id): e for e in self._read(ids)}
        missing = [i for i in ids if i not in current]
        if missing:
            raise NotFoundError(f"example(s) not found: {', '.join(missing)}")
        by_ds: dict[str, list[tuple[str, bytes, str]]] = {}
        for upd, ups, op in zip(updates, uploads, ops, strict=False):
            ex_id = str(upd["id"])
            parts = by_ds.setdefault(str(current[ex_id].dataset_id), [])
            body = {k: upd[k] for k in ("metadata", "split") if upd.get(k) is not None}
            parts.append(_json_part(ex_id, body))
            for key in ("inputs", "outputs"):
                if upd.get(key) is not None:
                    parts.append(_json_part(f"{ex_id}.{key}", upd[key]))
            if op is not None:
                parts.append(_json_part(f"{ex_id}.attachments_operations",
                                        {"retain": op[0], "rename": op[1]}))
            parts += _file_parts(ex_id, ups)
        for ds_id, parts in by_ds.items():
            self._send("PATCH", f"/v1/platform/datasets/{ds_id}/examples", parts)
        return self._read(ids)

    def _download(self, url: str) -> bytes:
        """One attachment's bytes, fetched when its reader is first read (``LazyReader``)."""
        from ._remote import _error

        resp = self.http.client.get(url)
        if resp.status_code >= 400:
            raise _error(resp)
        return resp.content

    def sdk_view(self, example_ids: Sequence[Any], *, as_of: datetime | str | None = None,
                 ) -> dict[str, dict[str, dict[str, Any]]]:
        ids = [str(i) for i in example_ids]
        raw: list[dict[str, Any]] = []
        if as_of is not None:  # a version is a dataset's: one example at a time
            for ex_id in ids:
                raw.append(self.http.request("GET", f"/examples/{ex_id}",
                                             params={"as_of": as_of}))
        else:
            for i in range(0, len(ids), 100):
                raw += self.http.request("GET", "/examples", params={
                    "id": ids[i:i + 100], "limit": 100, "select": ["attachment_urls"]})
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for ex in raw:
            urls = ex.get("attachment_urls") or {}
            if not isinstance(urls, Mapping):
                raise InvalidInputError("the server sent attachment_urls that is not an object")
            for key, info in urls.items():
                name = key.removeprefix("attachment.")
                url = info["presigned_url"]
                out.setdefault(ex["id"], {})[name] = {
                    "presigned_url": url, "mime_type": info.get("mime_type"),
                    "reader": LazyReader(lambda url=url: self._download(url), info.get("size"))}
        return out
