"""ASGI middleware: the request body bound (413 before reading) and per-route request metrics."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from crow.api.errors import error_body


class BodyLimit:
    """JSON bodies are bounded by `limit`; upload routes (`exempt` prefixes) bound themselves."""

    def __init__(self, app: ASGIApp, *, limit: int, exempt: tuple[str, ...] = ()) -> None:
        self.app, self.limit, self.exempt = app, limit, exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(self.exempt):
            length = dict(scope["headers"]).get(b"content-length", b"0")
            if length.isdigit() and int(length) > self.limit:
                body = json.dumps(
                    error_body("payload_too_large", f"the request body is over {self.limit} bytes")
                ).encode()
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json")]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class RequestMetrics:
    """Requests and latency per route template (not per raw path: ids would explode tags)."""

    def __init__(self, app: ASGIApp, *, metrics: Any) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 500}

        async def record_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, record_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            self.metrics.inc(
                "crow_http_requests_total", route=route, method=method, status=str(status["code"])
            )
            self.metrics.observe(
                "crow_http_request_seconds",
                time.perf_counter() - started,
                route=route,
                method=method,
            )
