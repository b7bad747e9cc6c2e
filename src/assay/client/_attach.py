"""Client-side glue for example attachments, the same for a local store and a server.

Both backends have ``attachments`` with ``create_examples``, ``update_examples`` and
``sdk_view`` (``store._attachments.AttachmentRepo``, ``_remote_attachments``); these helpers
turn the SDK's arguments into those calls and put LangSmith's ``Example.attachments`` on what
comes back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError
from ..schemas import Example
from ..store._attachments import operations, uploads_from_sdk

__all__ = ["create_with_attachments", "update_with_attachments", "with_attachments",
           "with_attachments_paged"]


def _pop(item: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[dict[str, Any], list[Any]]:
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_none=True)
    if not isinstance(item, Mapping):
        return item, [None] * len(keys)
    rest = {k: v for k, v in item.items() if k not in keys}
    return rest, [item.get(k) for k in keys]


def create_with_attachments(backend: Any, examples: Sequence[Any], *, dataset_id: Any,
                            dataset_name: str | None, allow_filesystem: bool = False,
                            ) -> list[Example]:
    """Create ``examples`` (each may hold LangSmith's ``attachments``): all or none."""
    items, uploads = [], []
    for ex in examples:
        rest, (atts,) = _pop(ex, ("attachments",))
        items.append(rest)
        uploads.append(uploads_from_sdk(atts, allow_filesystem=allow_filesystem))
    if not any(uploads):
        return backend.examples.create_many(items, dataset_id=dataset_id,
                                            dataset_name=dataset_name)
    made = backend.attachments.create_examples(items, uploads, dataset_id=dataset_id,
                                               dataset_name=dataset_name)
    return with_attachments(backend, made)


def update_with_attachments(backend: Any, updates: Sequence[Any], *,
                            allow_filesystem: bool = False) -> list[Example]:
    """Update examples; ``attachments`` adds or replaces files, ``attachments_operations``
    (``retain``/``rename``) says which existing ones the new version keeps (all, without)."""
    plain, uploads, ops = [], [], []
    for upd in updates:
        rest, (atts, op) = _pop(upd, ("attachments", "attachments_operations"))
        plain.append(rest)
        uploads.append(uploads_from_sdk(atts, allow_filesystem=allow_filesystem))
        ops.append(operations(op))
    if not any(uploads) and all(o is None for o in ops):
        return backend.examples.update_many(plain)
    if any(not isinstance(u, Mapping) or "id" not in u for u in plain):
        raise InvalidInputError("an update needs the example 'id'")
    return with_attachments(backend, backend.attachments.update_examples(plain, uploads, ops))


def with_attachments(backend: Any, examples: list[Example],
                     as_of: datetime | str | None = None) -> list[Example]:
    """The examples with ``attachments`` (LangSmith's ``{name: {presigned_url, mime_type,
    reader}}``) of the version read."""
    if not examples:
        return examples
    view = backend.attachments.sdk_view([e.id for e in examples], as_of=as_of)
    return [e.model_copy(update={"attachments": view.get(str(e.id), {})}) for e in examples]


def with_attachments_paged(backend: Any, examples: Iterable[Example],
                           as_of: datetime | str | None = None, page: int = 100,
                           ) -> Iterator[Example]:
    batch: list[Example] = []
    for ex in examples:
        batch.append(ex)
        if len(batch) >= page:
            yield from with_attachments(backend, batch, as_of)
            batch = []
    yield from with_attachments(backend, batch, as_of)

