"""Dataset, example and version methods of ``Client`` (LangSmith names and keywords)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import InvalidInputError, NotFoundError
from ..schemas import Dataset, DatasetVersion, Example
from ._args import refuse_unknown
from ._attach import (
    create_with_attachments,
    update_with_attachments,
    with_attachments,
    with_attachments_paged,
)

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["DatasetDiffInfo", "DatasetMethods"]

ID = uuid.UUID | str


class DatasetDiffInfo(BaseModel):
    """What changed between two versions of a dataset (LangSmith's ``DatasetDiffInfo``)."""

    examples_modified: list[uuid.UUID]
    examples_added: list[uuid.UUID]
    examples_removed: list[uuid.UUID]


class DatasetMethods:
    _backend: Store

    # -- datasets ---------------------------------------------------------------------------
    def create_dataset(
        self,
        dataset_name: str,
        *,
        description: str | None = None,
        data_type: str = "kv",
        inputs_schema: Mapping[str, Any] | None = None,
        outputs_schema: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        **unknown: Any,
    ) -> Dataset:
        refuse_unknown("create_dataset", unknown)
        return self._backend.datasets.create(
            dataset_name, description=description, data_type=data_type, metadata=metadata,
            inputs_schema=inputs_schema, outputs_schema=outputs_schema,
        )

    def read_dataset(self, *, dataset_name: str | None = None,
                     dataset_id: ID | None = None) -> Dataset:
        return self._backend.datasets.read(dataset_id=dataset_id, dataset_name=dataset_name)

    def has_dataset(self, *, dataset_name: str | None = None, dataset_id: ID | None = None) -> bool:
        try:
            self.read_dataset(dataset_name=dataset_name, dataset_id=dataset_id)
        except NotFoundError:
            return False
        return True

    def list_datasets(
        self,
        *,
        dataset_ids: Sequence[ID] | None = None,
        dataset_name: str | None = None,
        dataset_name_contains: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
        **unknown: Any,
    ) -> Iterator[Dataset]:
        refuse_unknown("list_datasets", unknown)
        yield from self._backend.datasets.list(
            dataset_ids=dataset_ids, dataset_name=dataset_name,
            dataset_name_contains=dataset_name_contains, metadata=metadata,
            offset=offset, limit=limit,
        )

    def update_dataset(
        self,
        dataset_id: ID | None = None,
        *,
        dataset_name: str | None = None,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        inputs_schema: Mapping[str, Any] | None = None,
        outputs_schema: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """Change what is given; a new schema must hold for the current examples."""
        ds_id = self._backend.datasets.resolve_id(dataset_id, dataset_name)
        return self._backend.datasets.update(ds_id, name=name, description=description,
                                             metadata=metadata, inputs_schema=inputs_schema,
                                             outputs_schema=outputs_schema)

    def delete_dataset(self, *, dataset_id: ID | None = None,
                       dataset_name: str | None = None) -> None:
        self._backend.datasets.delete(dataset_id=dataset_id, dataset_name=dataset_name)

    # -- examples ---------------------------------------------------------------------------
    def create_example(
        self,
        inputs: Mapping[str, Any] | None = None,
        dataset_id: ID | None = None,
        dataset_name: str | None = None,
        created_at: datetime | None = None,
        outputs: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        split: str | list[str] | None = None,
        example_id: ID | None = None,
        source_run_id: ID | None = None,
        attachments: Mapping[str, Any] | None = None,
        dangerously_allow_filesystem: bool = False,
        **unknown: Any,
    ) -> Example:
        """``attachments``: ``{name: (mime_type, bytes)}`` as in LangSmith."""
        refuse_unknown("create_example", unknown)
        item = {"inputs": inputs if inputs is not None else {}, "outputs": outputs,
                "metadata": metadata, "split": split, "id": example_id,
                "source_run_id": source_run_id, "attachments": attachments}
        return create_with_attachments(self._backend, [item], dataset_id=dataset_id,
                                       dataset_name=dataset_name,
                                       allow_filesystem=dangerously_allow_filesystem)[0]

    def create_examples(
        self,
        *,
        dataset_id: ID | None = None,
        dataset_name: str | None = None,
        examples: Sequence[Mapping[str, Any]] | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        outputs: Sequence[Mapping[str, Any] | None] | None = None,
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
        splits: Sequence[str | list[str] | None] | None = None,
        ids: Sequence[ID | None] | None = None,
        attachments: Sequence[Mapping[str, Any] | None] | None = None,
        dangerously_allow_filesystem: bool = False,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Store all examples or none; LangSmith's return shape ``{"example_ids", "count"}``.
        Each example may carry ``attachments`` (``{name: (mime_type, bytes)}``)."""
        refuse_unknown("create_examples", unknown, ("max_concurrency",))
        if examples is not None and inputs is not None:
            raise InvalidInputError("give either examples=[...] or inputs=[...], not both")
        if examples is None:
            if inputs is None:
                raise InvalidInputError("give examples=[...] (or inputs=[...])")
            n = len(inputs)
            for name, seq in (("outputs", outputs), ("metadata", metadata), ("splits", splits),
                              ("ids", ids), ("attachments", attachments)):
                if seq is not None and len(seq) != n:
                    raise InvalidInputError(f"{name} has {len(seq)} items but inputs has {n}")
            examples = [
                {"inputs": inputs[i],
                 "outputs": outputs[i] if outputs is not None else None,
                 "metadata": metadata[i] if metadata is not None else None,
                 "split": splits[i] if splits is not None else None,
                 "id": ids[i] if ids is not None else None,
                 "attachments": attachments[i] if attachments is not None else None}
                for i in range(n)
            ]
        created = create_with_attachments(self._backend, examples, dataset_id=dataset_id,
                                          dataset_name=dataset_name,
                                          allow_filesystem=dangerously_allow_filesystem)
        return {"example_ids": [str(e.id) for e in created], "count": len(created),
                "examples": created}

    def read_example(self, example_id: ID, *, as_of: datetime | str | None = None) -> Example:
        """The example (at ``as_of``), with its ``attachments`` of that version."""
        return with_attachments(self._backend, [self._backend.examples.read(example_id,
                                                                            as_of=as_of)], as_of)[0]

    def list_examples(
        self,
        dataset_id: ID | None = None,
        dataset_name: str | None = None,
        example_ids: Sequence[ID] | None = None,
        as_of: datetime | str | None = None,
        splits: Sequence[str] | None = None,
        inline_s3_urls: bool = True,
        *,
        offset: int = 0,
        limit: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        filter: str | None = None,
        **unknown: Any,
    ) -> Iterator[Example]:
        """``filter``: LangSmith's filter language on examples, e.g.
        ``and(exists(metadata, "tenant"), eq(metadata.lang, "en"))``."""
        include_attachments = bool(unknown.pop("include_attachments", False))
        refuse_unknown("list_examples", unknown)
        found = self._backend.examples.list(
            dataset_id=dataset_id, dataset_name=dataset_name, example_ids=example_ids,
            splits=splits, metadata=metadata, as_of=as_of, offset=offset, limit=limit,
            filter=filter,
        )
        if include_attachments:  # as LangSmith: files are read only when asked for
            yield from with_attachments_paged(self._backend, found, as_of)
            return
        yield from found

    def update_example(
        self,
        example_id: ID,
        *,
        inputs: Mapping[str, Any] | None = None,
        outputs: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        split: str | list[str] | None = None,
        attachments: Mapping[str, Any] | None = None,
        attachments_operations: Mapping[str, Any] | None = None,
        dangerously_allow_filesystem: bool = False,
        **unknown: Any,
    ) -> Example:
        """A new version of the example. ``attachments`` adds or replaces files;
        ``attachments_operations`` (``{"retain": [...], "rename": {old: new}}``) says which
        existing ones it keeps (without it: all)."""
        refuse_unknown("update_example", unknown, ("dataset_id",))
        upd: dict[str, Any] = {"id": example_id}
        for key, value in (("inputs", inputs), ("outputs", outputs), ("metadata", metadata),
                           ("split", split), ("attachments", attachments),
                           ("attachments_operations", attachments_operations)):
            if value is not None:
                upd[key] = value
        return update_with_attachments(self._backend, [upd],
                                       allow_filesystem=dangerously_allow_filesystem)[0]

    def update_examples(self, *, updates: Sequence[Mapping[str, Any]],
                        **unknown: Any) -> dict[str, Any]:
        refuse_unknown("update_examples", unknown, ("dataset_id", "dataset_name"))
        changed = update_with_attachments(self._backend, updates)
        return {"message": f"{len(changed)} examples updated", "count": len(changed)}

    def delete_example(self, example_id: ID) -> None:
        self._backend.examples.delete_many([example_id])

    def delete_examples(self, example_ids: Sequence[ID]) -> None:
        self._backend.examples.delete_many(example_ids)

    # -- versions ---------------------------------------------------------------------------
    def diff_dataset_versions(
        self,
        dataset_id: ID | None = None,
        *,
        dataset_name: str | None = None,
        from_version: str | datetime,
        to_version: str | datetime,
    ) -> DatasetDiffInfo:
        """Examples added, modified and removed between two versions (times or tags)."""
        ds_id = self._backend.datasets.resolve_id(dataset_id, dataset_name)
        return DatasetDiffInfo.model_validate(
            self._backend.datasets.diff_versions(ds_id, from_version, to_version))

    def read_dataset_version(
        self,
        *,
        dataset_id: ID | None = None,
        dataset_name: str | None = None,
        as_of: datetime | None = None,
        tag: str | None = None,
    ) -> DatasetVersion:
        if (as_of is None) == (tag is None):
            raise InvalidInputError("give exactly one of as_of or tag")
        ds_id = self._backend.datasets.resolve_id(dataset_id, dataset_name)
        return self._backend.datasets.version(ds_id, as_of if as_of is not None else tag)

    def list_dataset_versions(
        self, *, dataset_id: ID | None = None, dataset_name: str | None = None,
        limit: int | None = None, **unknown: Any
    ) -> Iterator[DatasetVersion]:
        """The dataset's versions, newest first (``limit``: at most that many)."""
        refuse_unknown("list_dataset_versions", unknown)
        ds_id = self._backend.datasets.resolve_id(dataset_id, dataset_name)
        versions = self._backend.datasets.list_versions(ds_id)
        yield from versions if limit is None else versions[:max(limit, 0)]

    def list_dataset_splits(self, *, dataset_id: ID | None = None,
                            dataset_name: str | None = None,
                            as_of: datetime | str | None = None) -> list[str]:
        """The names of the splits the dataset's examples are in (at ``as_of``: a time or tag)."""
        return self._backend.examples.splits(dataset_id=dataset_id, dataset_name=dataset_name,
                                             as_of=as_of)

    def update_dataset_splits(self, *, dataset_id: ID | None = None,
                              dataset_name: str | None = None, split_name: str,
                              example_ids: Sequence[ID], remove: bool = False) -> None:
        """Put the examples in split ``split_name`` (``remove=True``: take them out)."""
        self._backend.examples.update_splits(split_name, example_ids, dataset_id=dataset_id,
                                             dataset_name=dataset_name, remove=remove)

    def update_dataset_tag(
        self,
        *,
        dataset_id: ID | None = None,
        dataset_name: str | None = None,
        as_of: datetime | None = None,
        tag: str,
    ) -> DatasetVersion:
        ds_id = self._backend.datasets.resolve_id(dataset_id, dataset_name)
        return self._backend.datasets.tag(ds_id, tag, as_of)

    # -- import / export ----------------------------------------------------------------------
    def export_dataset(
        self,
        path: str | Path,
        *,
        dataset_id: ID | None = None,
        dataset_name: str | None = None,
        format: str | None = None,
        as_of: datetime | str | None = None,
    ) -> int:
        """Write the dataset's examples to JSONL or CSV (by ``format`` or the file suffix), or
        as OpenAI fine-tuning JSONL (``format="openai"``)."""
        from ..datasets import write_examples

        examples = list(self.list_examples(dataset_id=dataset_id, dataset_name=dataset_name,
                                           as_of=as_of))
        return write_examples(examples, path, format=format)

    def read_dataset_openai_finetuning(
        self,
        dataset_id: ID | None = None,
        *,
        dataset_name: str | None = None,
        as_of: datetime | str | None = None,
    ) -> list[dict[str, Any]]:
        """Each example's conversation as an OpenAI fine-tuning line (``{"messages": [...]}``),
        as LangSmith's SDK method of this name; an example that is no conversation raises
        naming it. ``export_dataset(path, format="openai")`` writes the same lines."""
        from ..datasets import openai_lines

        return openai_lines(self.list_examples(dataset_id=dataset_id, dataset_name=dataset_name,
                                               as_of=as_of))

    def import_dataset(
        self,
        path: str | Path,
        *,
        dataset_name: str | None = None,
        description: str | None = None,
        format: str | None = None,
        input_keys: Sequence[str] | None = None,
        output_keys: Sequence[str] | None = None,
        keep_ids: bool = False,
    ) -> Dataset:
        """Create a dataset from a JSONL or CSV file; nothing is stored if any row is bad.

        Example ids in the file are kept only with ``keep_ids=True`` (e.g. moving a dataset to
        another store); by default the copy gets fresh ids so it can live beside the original.
        """
        from ..datasets import default_name, read_examples

        items = read_examples(path, format=format, input_keys=input_keys, output_keys=output_keys)
        if not keep_ids:
            for item in items:
                item.pop("id", None)
        name = dataset_name or default_name(path)
        ds = self.create_dataset(name, description=description)
        try:
            self.create_examples(dataset_id=ds.id, examples=items)
        except Exception:
            self.delete_dataset(dataset_id=ds.id)
            raise
        return self.read_dataset(dataset_id=ds.id)

    def upload_csv(
        self,
        csv_file: str | Path,
        input_keys: Sequence[str],
        output_keys: Sequence[str],
        *,
        name: str | None = None,
        description: str | None = None,
        data_type: str | None = "kv",
        **unknown: Any,
    ) -> Dataset:
        refuse_unknown("upload_csv", unknown)
        if data_type not in (None, "kv") and getattr(data_type, "value", None) != "kv":
            raise InvalidInputError(f"upload_csv(): data_type {data_type!r} is not supported: "
                                    "assay datasets are key-value ('kv')")
        return self.import_dataset(csv_file, dataset_name=name, description=description,
                                   format="csv", input_keys=input_keys, output_keys=output_keys)
