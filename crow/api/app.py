"""The FastAPI application of the ingress, built around injected services."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI, Request

from crow.api import (
    routes_a2a,
    routes_chat,
    routes_chat_history,
    routes_dashboard,
    routes_feedback,
    routes_health,
    routes_ingest,
    routes_keys,
    routes_qna,
    routes_qna_index,
    routes_search,
)
from crow.api.deps import (
    OrgDep,
    PrincipalDep,
    ServicesDep,
    chat_allowed,
    org_for,
    principal_of,
)
from crow.api.errors import ApiError, install_error_handlers
from crow.api.guard import AuthGuard
from crow.api.limits import BodyLimit, RequestMetrics
from crow.api.mcp_server import MCP_PATH, McpEndpoint
from crow.api.openapi import ERROR_RESPONSES, document_errors
from crow.api.routes_chat import CHAT_ERRORS
from crow.services import Services
from models.chat import ChatModel
from models.messages import AssistantTurn, ModelParams
from models.openai_server import openai_router

UPLOADS = ("/api/v1/ingest/",)


def create_app(
    services: Services,
    *,
    chat_model: ChatModel | None = None,
    extra_errors: dict[type[Exception], ApiError] | None = None,
) -> FastAPI:
    """The whole HTTP surface over `services`; with `chat_model`, also the OpenAI-compatible
    /v1 routes over it. Every route but the public ones is behind crow.api.guard."""
    mcp = McpEndpoint(services)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.running():  # the MCP session manager lives as long as the app
            yield

    app = FastAPI(
        title="Ask CROW",
        version="0.1.0",
        description="The retail-analytics chat assistant: chat, Q&A, search, ingest, A2A, MCP. "
        "Every route but /health, /ready and the agent card needs an API key "
        "(`Authorization: Bearer <key>`); the organization is the key's.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    app.state.services = services
    install_error_handlers(app, {**CHAT_ERRORS, **(extra_errors or {})})
    limits, auth = services.settings.limits, services.settings.auth
    # The last added runs first: metrics, then the guard, then the body bounds.
    app.add_middleware(
        BodyLimit,
        limit=limits.max_body_bytes,
        upload_limit=limits.max_ingest_bytes,
        uploads=UPLOADS,
    )
    app.add_middleware(AuthGuard, settings=auth, authenticate=services.store.authenticate)
    app.add_middleware(RequestMetrics, metrics=services.metrics)
    app.include_router(routes_health.router)
    app.include_router(routes_keys.router)
    app.include_router(routes_ingest.router)
    app.include_router(routes_search.router)
    app.include_router(routes_qna_index.router)
    app.include_router(routes_qna.router)
    app.include_router(routes_chat.router)
    app.include_router(routes_chat_history.router)
    app.include_router(routes_feedback.router)
    app.include_router(routes_a2a.router)
    if chat_model is not None:
        app.include_router(
            _openai_routes(services, chat_model),
            dependencies=[Depends(_json_only), Depends(_v1_allowed)],
        )
    # MCP streamable HTTP: Starlette serves a class instance as an ASGI app, which its
    # annotation (a request -> response function) does not cover.
    app.add_route(MCP_PATH, mcp, include_in_schema=False)  # type: ignore[arg-type]
    routes_dashboard.install(app)  # the web page at / and /static/
    document_errors(app)
    return app


def _json_only(request: Request) -> None:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if request.method == "POST" and kind != "application/json":
        raise ApiError(415, "unsupported_media_type", "send the request as application/json")


async def _v1_allowed(
    request: Request, services: ServicesDep, principal: PrincipalDep, org_id: OrgDep
) -> None:
    """A completion is a chat message: the key's chat rate and the org's token quota."""
    if request.method == "POST":
        await chat_allowed(services, principal, org_id)


def _openai_routes(services: Services, model: ChatModel) -> APIRouter:
    """/v1/chat/completions and /v1/models over the app's LLM: a key, the chat rate and the
    token quota like any chat message, JSON bodies only, max_tokens capped by llm.max_tokens."""

    async def count_tokens(request: Request, turn: AssistantTurn) -> None:
        org_id = org_for(services, principal_of(request), request.headers.get("x-organization-id"))
        await services.store.add_usage(org_id, turn.usage.total)

    llm = services.settings.llm
    deadline = ModelParams(timeout_s=services.settings.timeouts.model_s)
    return openai_router(
        model,
        model_name=llm.model,
        max_tokens=llm.max_tokens,
        default_params=deadline,
        on_turn=count_tokens,
    )
