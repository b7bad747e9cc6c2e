"""Presigned feedback tokens: ``POST /feedback/tokens`` (with the API key) makes a URL that an
application's front end calls without it - ``GET /feedback/tokens/{id}?score=1&comment=...`` or
``POST`` with a JSON body - to score one run with one key (``store/_feedback_tokens.py``)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from ..errors import ExpiredError
from ..store import Store
from ..store._feedback_tokens import FeedbackToken, lifetime
from ._deps import JsonBody, StoreDep, json_body, ok
from ._errors import ApiError
from ._wire import FeedbackTokenIn, validate

__all__ = ["router"]

router = APIRouter()

MAX_TOKENS = 100  # a run's keys, not a bulk interface


def _with_url(request: Request, token: FeedbackToken) -> dict[str, Any]:
    out = token.model_dump(mode="json")
    out["url"] = str(request.base_url).rstrip("/") + token.url
    return out


def _spec(raw: Any, where: str) -> dict[str, Any]:
    t = validate(FeedbackTokenIn, raw, where)
    return {"run_id": t.run_id, "feedback_key": t.feedback_key, "expires_at": t.expires_at,
            "expires_in": lifetime(t.expires_in), "feedback_config": t.feedback_config,
            "feedback_id": t.id}


@router.post("/feedback/tokens")
def create_tokens(request: Request, store: StoreDep, body: JsonBody) -> JSONResponse:
    """One token (an object) or several (a list, ``create_presigned_feedback_tokens``)."""
    if isinstance(body, list):
        if len(body) > MAX_TOKENS:
            raise ApiError(422, "invalid_input",
                           f"{len(body)} tokens in one request: at most {MAX_TOKENS}")
        made = store.feedback_tokens.create_many(
            [_spec(raw, f"body[{i}]") for i, raw in enumerate(body)])  # all or none
        return ok([_with_url(request, t) for t in made])
    return ok(_with_url(request, store.feedback_tokens.create_many([_spec(body, "body")])[0]))


@router.get("/feedback/tokens")
def list_tokens(request: Request, store: StoreDep, run_id: uuid.UUID) -> JSONResponse:
    return ok([_with_url(request, t) for t in store.feedback_tokens.list(run_id)])


async def _use(request: Request, token_id: uuid.UUID, fields: dict[str, Any]) -> JSONResponse:
    base: Store = request.app.state.store  # no key: the token says whose run it is
    try:
        made = await run_in_threadpool(lambda: base.feedback_tokens.use(token_id, **fields))
    except ExpiredError as exc:
        raise ApiError(410, "expired", str(exc)) from None
    return ok({"success": True, "feedback_id": str(made.id)})


@router.get("/feedback/tokens/{token_id}")
async def use_token_get(
    request: Request, token_id: uuid.UUID,
    score: Annotated[float | None, Query()] = None,
    value: Annotated[str | None, Query()] = None,
    comment: Annotated[str | None, Query()] = None,
    correction: Annotated[str | None, Query()] = None,
) -> JSONResponse:
    """The URL itself, as a browser or an ``<img>`` calls it (``value`` and ``correction`` as
    text)."""
    return await _use(request, token_id, {"score": score, "value": value, "comment": comment,
                                          "correction": correction})


@router.post("/feedback/tokens/{token_id}")
async def use_token_post(request: Request, token_id: uuid.UUID) -> JSONResponse:
    """``create_feedback_from_token``: ``{score, value, correction, comment, metadata}``."""
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_input", "the body must be a JSON object")
    unknown = sorted(set(body) - {"score", "value", "correction", "comment", "metadata"})
    if unknown:
        raise ApiError(422, "invalid_input", f"unknown field(s) {unknown}")
    return await _use(request, token_id, body)
