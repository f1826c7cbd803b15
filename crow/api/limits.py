"""Request body bound: a declared body over the limit is refused with 413 before it is read."""

from __future__ import annotations

import json

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
