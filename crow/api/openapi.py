"""The OpenAPI document says what the API answers: every error in the one shape, and the key.

Each operation lists the error statuses the app can send it (the guard, the body bounds,
validation and the routes themselves), with the error schema, so a client generated from the
document (or schemathesis) knows every answer it can get.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from crow.api.guard import is_public


class ErrorInfo(BaseModel):
    code: str = Field(description="Machine-readable, e.g. 'session_not_found'.")
    message: str = Field(description="What went wrong and what to do about it.")
    details: list[dict[str, Any]] | None = Field(None, description="Per field or per row.")


class ErrorBody(BaseModel):
    error: ErrorInfo


_RETRY = {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}}
_STATUSES: dict[int, tuple[str, dict[str, Any]]] = {
    400: ("Bad request: a missing header, a Host not served", {}),
    401: (
        "No API key, or an unknown, revoked or expired one",
        {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    ),
    403: ("The key may not do this, or names another organization", {}),
    404: ("No such resource in the key's organization", {}),
    409: ("Conflict: a reindex already running, the session cap reached", {}),
    413: ("The body or the prompt is too large", {}),
    415: ("Unsupported media type", {}),
    422: ("Invalid parameters or body", {}),
    429: ("Rate limit or daily token quota reached", _RETRY),
    503: ("A dependency is not ready or is overloaded; retry", {}),
    504: ("The model took too long", {}),
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text, **({"headers": h} if h else {})}
    for status, (text, h) in _STATUSES.items()
}
_GUARD_ONLY = ("401", "403", "429")


def document_errors(app: FastAPI) -> None:
    """The app's document: public operations without the key's answers, every other one with
    the bearer requirement (also where no route dependency declares it, e.g. /v1)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            schema.setdefault("components", {}).setdefault("securitySchemes", {})["HTTPBearer"] = {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "API key",
            }
            for path, operations in schema.get("paths", {}).items():
                for operation in operations.values():
                    if is_public(path):
                        operation.pop("security", None)
                        for status in _GUARD_ONLY:
                            operation["responses"].pop(status, None)
                    else:
                        operation["security"] = [{"HTTPBearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override
