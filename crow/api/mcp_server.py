"""The agent's five tools over MCP (streamable HTTP, official ``mcp`` SDK) at ``/mcp``.

Stateless streamable HTTP with JSON responses: every POST stands alone, so any ingress
replica can answer it (no session affinity needed under Ray Serve). Access: the app's guard
has resolved the request's API key before it gets here; the org is the key's (an
``X-Organization-Id`` of another org is answered 403 in the API's one error shape, before MCP
sees the request). Tool calls run for that org and take from the key's search rate.
DNS-rebinding protection is on: Host (and a browser's Origin) must be the configured
``auth.allowed_hosts``, or loopback names when none are configured.

The session manager runs inside the app's lifespan (``McpEndpoint.running``); a request that
arrives while it is not running is answered 503.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from crow.api.deps import admit, org_for, principal_of
from crow.api.errors import ApiError, error_response
from crow.chat.agent.tools import TOOLS, TOOLS_BY_NAME
from crow.services import Services

MCP_PATH = "/mcp"
ORG_HEADER = "x-organization-id"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_INSTRUCTIONS = (
    "Retail-analytics tools of Ask CROW over one organization's data (the organization of "
    "the request's API key): interaction counts, product, interaction, pattern and "
    "company-knowledge search. Results are JSON; 'sources' lists the rows they came from."
)


def _tool_result(payload: dict[str, Any], *, error: bool = False) -> types.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=None if error else payload,
        is_error=error,
    )


class McpEndpoint:
    """ASGI app of ``/mcp``: the org check, then the MCP session manager (while running)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.server: Server[Any] = Server(
            "ask-crow",
            version="0.1.0",
            title="Ask CROW tools",
            instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run a fresh session manager (one per app lifespan; a manager runs only once)."""
        manager = StreamableHTTPSessionManager(
            self.server, json_response=True, stateless=True, security_settings=self._security()
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    def _security(self) -> TransportSecuritySettings:
        # Each name with any port, as the guard compares Hosts (in-cluster clients send
        # "ask-crow-serve-svc:8000").
        names = self.services.settings.auth.allowed_hosts or LOOPBACK_HOSTS
        hosts = [h for name in names for h in (name, f"{name}:*")]
        origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            org_for(self.services, principal_of(request), request.headers.get(ORG_HEADER))
        except ApiError as exc:
            response = error_response(exc.status, exc.code, exc.message)
            await response(scope, receive, send)
            return
        if self._manager is None:
            response = error_response(503, "unavailable", "the MCP endpoint is not running")
            await response(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = []
        for tool in TOOLS:
            spec = tool.spec
            tools.append(
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=spec.parameters,
                    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
                )
            )
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if not isinstance(ctx.request, Request):  # only served over HTTP, behind the guard
            return _tool_result({"error": "unauthorized", "message": "no request"}, error=True)
        try:
            principal = principal_of(ctx.request)
            org_id = org_for(self.services, principal, ctx.request.headers.get(ORG_HEADER))
            await admit(self.services, principal, "search")
        except ApiError as exc:
            return _tool_result({"error": exc.code, "message": exc.message}, error=True)
        tool = TOOLS_BY_NAME.get(params.name)
        if tool is None:
            return _tool_result(
                {"error": "unknown_tool", "message": f"no tool {params.name!r}"}, error=True
            )
        tool_ctx = self.services.tool_context(org_id)
        try:
            output = await tool.invoke(dict(params.arguments or {}), tool_ctx)
        except (ValidationError, ValueError) as exc:
            return _tool_result({"error": "invalid_arguments", "message": str(exc)}, error=True)
        sources = [source.model_dump() for source in output.sources]
        return _tool_result({**output.content, "sources": sources})
