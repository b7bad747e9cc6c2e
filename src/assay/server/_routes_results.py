"""Experiment results by example: ``POST /datasets/{id}/runs``.

The official SDK's ``get_experiment_results`` (and LangSmith's compare view) read an
experiment as the dataset's examples, each with the root runs one or more experiments made on
it and each run's feedback per key. The examples are those of the dataset version the first
experiment ran on (its ``dataset_version``), so a later edit of the dataset does not hide them.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ._deps import JsonBody, StoreDep, dump
from ._errors import ApiError
from ._wire import ExamplesWithRunsIn, validate

__all__ = ["router"]

router = APIRouter()


@router.post("/datasets/{dataset_id}/runs")
def examples_with_runs(store: StoreDep, dataset_id: uuid.UUID, body: JsonBody) -> JSONResponse:
    q = validate(ExamplesWithRunsIn, body)
    sessions = [store.projects.read(project_id=sid) for sid in q.session_ids]
    for s in sessions:
        if s.reference_dataset_id is not None and s.reference_dataset_id != dataset_id:
            raise ApiError(422, "invalid_input", f"session {s.id} ran on dataset "
                           f"{s.reference_dataset_id}, not {dataset_id}")
    unknown = set(q.filters or {}) - set(q.session_ids)
    if unknown:
        raise ApiError(422, "invalid_input", "filters name sessions not in session_ids: "
                       + ", ".join(sorted(map(str, unknown))))
    version = (sessions[0].metadata or {}).get("dataset_version")
    examples = store.examples.list(dataset_id=dataset_id, as_of=version, offset=q.offset,
                                   limit=q.limit)
    ids = [str(e.id) for e in examples]
    by_example: dict[str, list[Any]] = {i: [] for i in ids}
    if ids:
        for sid in q.session_ids:
            parts = (q.filters or {}).get(sid) or []
            text = parts[0] if len(parts) == 1 else (f"and({', '.join(parts)})" if parts else None)
            for run in store.runs.list(project_ids=[str(sid)], is_root=True,
                                       reference_example_ids=ids, filter=text):
                by_example[str(run.reference_example_id)].append(run)
    stats = store.runs.feedback_stats([str(r.id) for rs in by_example.values() for r in rs],
                                      comparative_experiment_id=q.comparative_experiment_id)
    out = []
    for ex in examples:
        item = dump(ex)
        item["runs"] = [{**dump(r), "feedback_stats": stats.get(str(r.id), {})}
                        for r in by_example[str(ex.id)]]
        out.append(item)
    return JSONResponse(out)
