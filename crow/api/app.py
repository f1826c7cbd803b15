"""The FastAPI application of the ingress, built around injected services."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from crow.api import (
    routes_a2a,
    routes_chat,
    routes_dashboard,
    routes_health,
    routes_ingest,
    routes_qna,
    routes_qna_index,
    routes_search,
)
from crow.api.errors import ApiError, install_error_handlers
from crow.api.limits import BodyLimit, RequestMetrics
from crow.api.mcp_server import MCP_PATH, McpEndpoint
from crow.services import Services


def create_app(
    services: Services, *, extra_errors: dict[type[Exception], ApiError] | None = None
) -> FastAPI:
    mcp = McpEndpoint(services)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.running():  # the MCP session manager lives as long as the app
            yield

    app = FastAPI(
        title="Ask CROW",
        version="0.1.0",
        description="The retail-analytics chat assistant: chat, Q&A, search, ingest, A2A, MCP.",
        lifespan=lifespan,
    )
    app.state.services = services
    install_error_handlers(app, extra_errors)
    app.add_middleware(RequestMetrics, metrics=services.metrics)
    app.add_middleware(
        BodyLimit, limit=services.settings.limits.max_body_bytes, exempt=("/api/v1/ingest/",)
    )
    app.include_router(routes_health.router)
    app.include_router(routes_ingest.router)
    app.include_router(routes_search.router)
    app.include_router(routes_qna_index.router)
    app.include_router(routes_qna.router)
    app.include_router(routes_chat.router)
    app.include_router(routes_a2a.router)
    app.add_route(MCP_PATH, mcp, include_in_schema=False)  # MCP streamable HTTP (ASGI app)
    routes_dashboard.install(app)  # the web page at / and /static/
    return app
