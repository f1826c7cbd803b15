"""ASGI middleware: request body bounds (413, chunked bodies too) and per-route request metrics."""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crow.api.errors import ApiError, error_response


class BodyLimit:
    """Every request body is bounded, declared or chunked: `limit` bytes, or `upload_limit`
    under the `uploads` path prefixes. 413 in the error shape, before a route reads too much.

    A declared Content-Length over the bound is answered at once. A JSON body (small) is read
    here, counting bytes as they stream, and handed on whole; an upload (large) is counted as
    the route streams it, and the 413 is raised from the route's read.
    """

    def __init__(
        self, app: ASGIApp, *, limit: int, upload_limit: int, uploads: tuple[str, ...] = ()
    ) -> None:
        self.app, self.limit, self.upload_limit, self.uploads = app, limit, upload_limit, uploads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope["path"].startswith(self.uploads)
        limit = self.upload_limit if upload else self.limit
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(limit, scope, receive, send)
            return
        if upload:
            await self.app(scope, _counted(receive, limit), send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                await _too_large(limit, scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)


async def _too_large(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    response = error_response(413, "payload_too_large", f"the request body is over {limit} bytes")
    await response(scope, receive, send)


def _counted(receive: Receive, limit: int) -> Receive:
    size = 0

    async def counted() -> Message:
        nonlocal size
        message = await receive()
        size += len(message.get("body", b""))
        if size > limit:
            raise ApiError(413, "payload_too_large", f"the upload is larger than {limit} bytes")
        return message

    return counted


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read already, then the client's own messages (a disconnect, for streams)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


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
