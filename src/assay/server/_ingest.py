"""Run ingestion: ``/runs/multipart`` parts and ``/runs/batch`` bodies to store calls.

Multipart part names (both SDKs):

    post.<run id>             the run (without its large fields)       patch.<run id> likewise
    post.<run id>.<field>     inputs | outputs | events | extra | error | serialized
    feedback.<feedback id>    a feedback object (JS sends them with the runs)
    attachment.<run id>.<n>   a run attachment (stored with the batch: store/_attachments.py)

Run and feedback parts are JSON (``application/json``, or no Content-Type); a part of another
type is refused with a 422, as LangSmith does.

Everything is parsed and validated first; then runs and feedback are checked and journaled in
ONE transaction, so a bad part anywhere leaves nothing behind.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy.exc import IntegrityError

from .._ids import is_canonical_uuid
from ..errors import StoreError
from ..store import Store
from ..store._admitted import admission
from ..store._attachments import DEFAULT_MAX_ATTACHMENT_BYTES, Upload
from . import _body
from ._attachments import upload_from_part
from ._body import Part
from ._errors import ApiError
from ._folder import Folder
from ._wire import _NOT_PLAIN, FeedbackIn, _micros, run_in, validate

__all__ = ["Batch", "from_json", "from_parts", "write"]

_RUN_FIELDS = ("inputs", "outputs", "events", "extra", "error", "serialized")
_PART_HELP = ("expected post.<run id>[.<field>], patch.<run id>[.<field>], feedback.<id> or "
              "attachment.<run id>.<name>, with <field> one of " + ", ".join(_RUN_FIELDS))


@dataclass
class Batch:
    posts: list[dict[str, Any]] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)
    feedback: list[dict[str, Any]] = field(default_factory=list)
    attachments: dict[str, list[Upload]] = field(default_factory=dict)  # by run id

    def counts(self) -> dict[str, int]:
        return {"post": len(self.posts), "patch": len(self.patches),
                "feedback": len(self.feedback),
                "attachments": sum(len(a) for a in self.attachments.values())}


# a posted run checked and made ready for the journal in one C pass (``store._admitted``); None
# where not built, and for a run in another form: the Python below, which words every error
_ADMIT = admission(_micros, _NOT_PLAIN)
# a body of post and patch parts grouped into runs in C (``_csplit.runs``, the module the split
# comes from, bound to ``Part`` there), None where not built
_RUNS: Any = getattr(_body._CSPLIT, "runs", None)
_loads = orjson.loads


def _uuid(text: str, part: str) -> str:
    if is_canonical_uuid(text):
        return text
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ApiError(422, "unknown_part",
                       f"multipart part {part!r}: {text!r} is not a UUID; {_PART_HELP}") from None


def _run(raw: Any, where: str, run_id: str | None = None, *, copy: bool = True
         ) -> dict[str, Any]:
    out = run_in(raw, where, copy=copy)
    if run_id is not None and str(out["id"]) != run_id:
        raise ApiError(422, "invalid_input", f"{where}: body id {out['id']} differs from {run_id}")
    return out


def _json_part(part: Part) -> Part:
    """A run or feedback part must be JSON, as LangSmith requires (422 otherwise): a part sent
    as text or bytes is a client bug, not something to parse anyway."""
    raw = part.headers.get("content-type")
    if raw is None or raw == "application/json" or raw.startswith("application/json;"):
        return part
    ctype = part.content_type
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise ApiError(422, "invalid_input", f"multipart part {part.name!r} has Content-Type "
                       f"{ctype!r}: run and feedback parts must be application/json")
    return part


def from_parts(parts: list[Part], max_attachment_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES
               ) -> Batch:
    if _RUNS is not None and _ADMIT is not None:  # the usual body of runs, walked in C
        grouped = _RUNS(parts, _loads, _ADMIT)
        if grouped is not None:
            return _grouped(grouped)
    batch = Batch()
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    fields: dict[tuple[str, str], dict[str, Any]] = {}
    order: list[tuple[str, str]] = []
    ids: dict[str, str] = {}  # run id text -> canonical form: a run comes in ~5 parts
    for part in parts:
        kind, _, rest = part.name.partition(".")
        if kind == "post" or kind == "patch":
            _json_part(part)
            run_text, _, fname = rest.partition(".")
            run_id = ids.get(run_text)
            if run_id is None:
                run_id = ids[run_text] = _uuid(run_text, part.name)
            key = (kind, run_id)
            value = part.json()
            if not fname:
                if key in runs:
                    raise ApiError(422, "invalid_input",
                                   f"multipart part {part.name!r} appears twice")
                if value.__class__ is not dict:
                    raise ApiError(422, "invalid_input",
                                   f"multipart part {part.name!r} must be a JSON object")
                runs[key] = value
                order.append(key)
            elif fname in _RUN_FIELDS:
                bucket = fields.get(key)
                if bucket is None:
                    bucket = fields[key] = {}
                elif fname in bucket:
                    raise ApiError(422, "invalid_input",
                                   f"multipart part {part.name!r} appears twice")
                bucket[fname] = value
            else:
                raise ApiError(422, "unknown_part",
                               f"unknown multipart part {part.name!r}: {_PART_HELP}")
        elif kind == "feedback":
            _json_part(part)
            _uuid(rest, part.name)
            fb = validate(FeedbackIn, part.json(), f"multipart part {part.name!r}")
            if fb.id is not None and str(fb.id) != str(uuid.UUID(rest)):
                raise ApiError(422, "invalid_input",
                               f"multipart part {part.name!r}: body id {fb.id} differs")
            batch.feedback.append({**fb.item(), "id": fb.id or uuid.UUID(rest)})
        elif kind == "attachment":
            run_text, _, name = rest.partition(".")
            run_id = _uuid(run_text, part.name)
            if not name:
                raise ApiError(422, "unknown_part", f"multipart part {part.name!r} has no "
                               "attachment name")
            files = batch.attachments.setdefault(run_id, [])
            if any(u.name == name for u in files):
                raise ApiError(422, "invalid_input", f"multipart part {part.name!r} appears twice")
            files.append(upload_from_part(part, name, max_attachment_bytes, f"run {run_id}"))
        else:
            raise ApiError(422, "unknown_part",
                           f"unknown multipart part {part.name!r}: {_PART_HELP}")
    orphans = [k for k in fields if k not in runs]
    if orphans:
        kind, run_id = orphans[0]
        raise ApiError(422, "invalid_input",
                       f"multipart parts for {kind}.{run_id} fields arrived without a "
                       f"{kind}.{run_id} part")
    for key in order:
        kind, run_id = key
        raw = runs[key]
        more = fields.get(key)
        if more is not None:
            raw.update(more)  # the part's own dict, decoded for this request only
        raw.setdefault("id", run_id)
        if kind == "post" and _ADMIT is not None:  # the usual run: checked and ready in C
            admitted = _ADMIT(raw, run_id)
            if admitted is not None:
                batch.posts.append(admitted)
                continue
        _add_part_run(batch, kind, run_id, raw)
    return batch


def _add_part_run(batch: Batch, kind: str, run_id: str, raw: dict[str, Any]) -> None:
    """A multipart run (its parts merged into ``raw``, this request's own dict: validated in
    place, not copied) checked in Python and added to ``batch``."""
    run = _run(raw, f"multipart part {kind}.{run_id}", run_id, copy=False)
    (batch.posts if kind == "post" else batch.patches).append(run)


def _grouped(items: list[Any]) -> Batch:
    """The batch of ``_csplit.runs``'s runs: posts it admitted as they are; the others (a
    patch, or a post in another form) checked here as ``from_parts`` checks them."""
    batch = Batch()
    for item in items:
        if item.__class__ is not tuple:
            batch.posts.append(item)
            continue
        _add_part_run(batch, *item)
    return batch


def from_json(body: Any) -> Batch:
    """``/runs/batch``: ``{"post": [...], "patch": [...]}``."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_input",
                       "body must be a JSON object with 'post' and/or 'patch'")
    unknown = set(body) - {"post", "patch"}
    if unknown:
        raise ApiError(422, "invalid_input",
                       f"unknown field(s) {sorted(unknown)}: expected 'post' and/or 'patch'")
    batch = Batch()
    for kind, out in (("post", batch.posts), ("patch", batch.patches)):
        items = body.get(kind) or []
        if not isinstance(items, list):
            raise ApiError(422, "invalid_input", f"{kind} must be a JSON array of runs")
        for i, raw in enumerate(items):
            if kind == "post" and _ADMIT is not None:
                admitted = _ADMIT(raw, None)
                if admitted is not None:
                    out.append(admitted)
                    continue
            rid = raw.get("id") if isinstance(raw, dict) else None
            out.append(_run(raw, f"{kind}[{i}]" + (f" (run {rid})" if rid else "")))
    return batch


def write(store: Store, batch: Batch, folder: Folder | None = None, *, attempts: int = 3) -> None:
    """Journal the batch's runs and feedback, checked at request time: all or nothing.

    ``Journal.admit`` refuses now what a direct write would (malformed items, another
    workspace's projects or ids) and makes the batch durable in one transaction; the store
    indexes it at the next read, or sooner in the server's background fold (``_folder``).
    On PostgreSQL, concurrent requests may create the same project at once: the loser gets a
    unique violation, which spoils its transaction. Nothing of it was kept, so it runs again
    and now finds the winner's row.
    """
    for attempt in range(attempts):
        try:
            if batch.attachments:  # in the batch's transaction: all or nothing
                with store.transaction():
                    store.attachments.set_runs(batch.attachments)
                    store.journal.admit(batch.posts, batch.patches, batch.feedback)
            else:
                store.journal.admit(batch.posts, batch.patches, batch.feedback)
            if folder is not None:
                folder.ingested()  # the background fold waits for a gap in requests
            return
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError) or attempt == attempts - 1:
                raise
