"""The one guard in front of every route: who the caller is, before any route runs.

An ASGI middleware, so nothing reachable is left out: REST routes, SSE streams, ``/v1``,
``/a2a``, the mounted ``/mcp`` app and paths no route matches alike. It resolves
``Authorization: Bearer <key>`` to a :class:`~crow.auth.keys.Principal` and puts it in the
request scope's state; the routes' dependencies (crow.api.deps) then check organization and
role. Public: the liveness and readiness probes, the API docs, the web page and its static
files, and the A2A agent card (which declares the bearer scheme).
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from crow.api.errors import error_response
from crow.auth.keys import PLATFORM, Principal, same_secret
from crow.settings import AuthSettings, read_secret

PUBLIC_PATHS = frozenset(
    {
        "/health",
        "/ready",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/openapi.json",
        "/",
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
    }
)
PUBLIC_PREFIXES = ("/static/",)
PROBES = frozenset({"/health", "/ready"})  # answered whatever the Host (cluster probes)
LOCAL_DEV = Principal("local-dev", None, "admin")  # auth.mode 'off': the org from the header
REALM = 'Bearer realm="ask-crow"'
_CACHE_MAX = 10_000


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def _is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _header(scope: Scope, name: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope["headers"]  # ASGI: (name, value) byte pairs
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


class AuthGuard:
    """`authenticate(key) -> principal dict | None` is the chat store's lookup."""

    def __init__(self, app: ASGIApp, *, settings: AuthSettings, authenticate: Any) -> None:
        self.app, self.settings, self.authenticate = app, settings, authenticate
        self.operator_token = read_secret(settings.operator_token_env, settings.operator_token_file)
        self.allowed_hosts = {h.lower() for h in settings.allowed_hosts}
        self._cache: dict[str, tuple[Principal | None, float]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if self.allowed_hosts and path not in PROBES and not self._host_allowed(scope):
            await error_response(400, "invalid_host", "this Host is not served here")(
                scope, receive, send
            )
            return
        if not is_public(path):
            principal, problem = await self._principal(scope)
            if principal is None:
                status, code, message, challenge = problem
                response = error_response(status, code, message)
                if challenge:
                    response.headers["WWW-Authenticate"] = challenge
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)

    def _host_allowed(self, scope: Scope) -> bool:
        host = (_header(scope, b"host") or "").lower()
        return host in self.allowed_hosts or host.rsplit(":", 1)[0] in self.allowed_hosts

    async def _principal(self, scope: Scope) -> tuple[Principal | None, Any]:
        if self.settings.mode == "off":
            client, server = scope.get("client") or (None,), scope.get("server") or (None,)
            if _is_loopback(client[0]) and _is_loopback(server[0]):
                return LOCAL_DEV, None
            return None, (
                403,
                "auth_off",
                "auth.mode 'off' answers only local clients of a "
                "server bound to a loopback address; use API keys",
                None,
            )
        value = _header(scope, b"authorization") or ""
        scheme, _, key = value.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return None, (
                401,
                "unauthorized",
                "send an API key: 'Authorization: Bearer <key>'",
                REALM,
            )
        principal = await self._lookup(key.strip())
        if principal is None:
            return None, (
                401,
                "invalid_key",
                "the API key is unknown, revoked or expired",
                f'{REALM}, error="invalid_token"',
            )
        return principal, None

    async def _lookup(self, key: str) -> Principal | None:
        if self.operator_token and same_secret(key, self.operator_token):
            return Principal("operator", None, PLATFORM)
        digest = hashlib.sha256(key.encode()).hexdigest()
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > now:
            return cached[0]
        found = await self.authenticate(key)
        principal = Principal(**found) if found else None
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[digest] = (principal, now + self.settings.key_cache_s)
        return principal
