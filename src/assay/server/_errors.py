"""Every failure becomes a JSON body ``{"error": kind, "detail": message}`` with a 4xx status.

Bad input of any kind (syntax, types, unknown ids, size, compression) is the caller's problem and
gets a 4xx naming what was wrong; only a broken database gives a 5xx (503), and an unexpected bug
a 500 that is logged with its traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import DataError, IntegrityError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    AuthError,
    ConflictError,
    ExampleValidationError,
    InvalidInputError,
    NotFoundError,
    StoreError,
)

__all__ = ["ApiError", "describe_validation", "install_error_handlers"]

log = logging.getLogger("assay.server")


class ApiError(Exception):
    """An HTTP error raised by the server's own wire handling (body, encoding, multipart)."""

    def __init__(self, status: int, kind: str, detail: str, **extra: Any) -> None:
        self.status = status
        self.kind = kind
        self.detail = detail
        self.extra = extra
        super().__init__(detail)


def error_response(status: int, kind: str, detail: str, *,
                   headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "ApiKey"}
    return JSONResponse({"error": kind, "detail": detail, **extra}, status_code=status,
                        headers=headers)


def describe_validation(errors: list[Any], prefix: str = "") -> str:
    """pydantic errors as ``field: problem; field: problem`` (the message a user reads)."""
    parts = []
    for err in errors[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        where = f"{prefix}{'.' if prefix and loc else ''}{loc}" or prefix or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    if len(errors) > 10:
        parts.append(f"... and {len(errors) - 10} more")
    return "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.kind, exc.detail, **exc.extra)

    @app.exception_handler(AuthError)
    async def _auth(_: Request, exc: AuthError) -> JSONResponse:
        return error_response(401, "unauthorized", str(exc))

    @app.exception_handler(NotFoundError)
    async def _missing(_: Request, exc: NotFoundError) -> JSONResponse:
        return error_response(404, "not_found", str(exc))

    @app.exception_handler(ConflictError)
    async def _conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return error_response(409, "conflict", str(exc))

    @app.exception_handler(ExampleValidationError)
    async def _example(_: Request, exc: ExampleValidationError) -> JSONResponse:
        return error_response(422, "invalid_example", str(exc), index=exc.index,
                              problem=exc.problem)

    @app.exception_handler(InvalidInputError)
    async def _invalid(_: Request, exc: InvalidInputError) -> JSONResponse:
        return error_response(422, "invalid_input", str(exc))

    @app.exception_handler(ValidationError)
    async def _pydantic(_: Request, exc: ValidationError) -> JSONResponse:
        return error_response(422, "invalid_input", describe_validation(exc.errors()))

    @app.exception_handler(RequestValidationError)
    async def _request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, "invalid_input", describe_validation(list(exc.errors())))

    @app.exception_handler(StoreError)
    async def _store(request: Request, exc: StoreError) -> JSONResponse:
        if isinstance(exc.__cause__, IntegrityError):  # e.g. an id taken in another workspace
            return error_response(409, "conflict",
                                  "the request conflicts with an existing record (duplicate id)")
        if isinstance(exc.__cause__, DataError):  # a value the database cannot hold
            return error_response(422, "invalid_input",
                                  f"a value is out of range for the database: {exc.__cause__.orig}")
        log.error("database error on %s %s: %s", request.method, request.url.path, exc)
        return error_response(503, "database_error", str(exc))

    @app.exception_handler(OverflowError)
    async def _overflow(_: Request, exc: OverflowError) -> JSONResponse:
        return error_response(422, "invalid_input", f"a number is out of range: {exc}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        detail = exc.detail
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no endpoint {request.method} {request.url.path}"
        elif exc.status_code == 405:
            detail = f"method {request.method} not allowed on {request.url.path}"
        return error_response(exc.status_code, kind, str(detail))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error",
                              f"internal server error ({exc.__class__.__name__})")
