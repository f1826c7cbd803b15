"""The one JSON error shape: ``{"error": {"code": "...", "message": "...", "details"?: [...]}}``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    503: "unavailable",
    504: "timeout",
}


class ApiError(Exception):
    """An answer other than 2xx, raised anywhere below a route."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details
        self.headers = headers


def error_body(
    code: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def error_response(
    status: int, code: str, message: str, details: list[dict[str, Any]] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(code, message, details), status_code=status)


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        return f"{parts[0]} " + ".".join(parts[1:]) if len(parts) > 1 else parts[0]
    return ".".join(parts)


async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
    response = error_response(exc.status, exc.code, exc.message, exc.details)
    response.headers.update(exc.headers or {})
    return response


async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = _STATUS_CODES.get(exc.status_code, "error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    return JSONResponse(error_body(code, message), status_code=exc.status_code, headers=exc.headers)


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    details = [{"field": _field(e["loc"]), "reason": e["msg"]} for e in exc.errors()]
    summary = "; ".join(f"{d['field']}: {d['reason']}" for d in details[:5])
    return error_response(422, "invalid_request", f"invalid request - {summary}", details)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal_error", "something went wrong on our side")


def install_error_handlers(
    app: FastAPI, extra: dict[type[Exception], ApiError] | None = None
) -> None:
    """`extra` maps exception types of the serving layer (e.g. back-pressure) to answers."""
    for exc_type, answer in (extra or {}).items():

        async def handler(_: Request, exc: Exception, answer: ApiError = answer) -> JSONResponse:
            response = error_response(answer.status, answer.code, answer.message)
            response.headers.update(answer.headers or {})
            return response

        app.add_exception_handler(exc_type, handler)
    # Starlette types a handler as taking any Exception; it calls each with its own type.
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
