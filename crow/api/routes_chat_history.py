"""What was said in an organization's chats: search by text, export a session as a file."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from crow.api.chat_export import ExportFormat, export_chat
from crow.api.deps import OrgDep, ServicesDep
from crow.api.errors import ApiError
from crow.api.routes_chat import MAX_POSITION, own_session

router = APIRouter(prefix="/api/v1/chat", tags=["chat"])
EXPORT_MAX_MESSAGES = 10_000


@router.get("/search", summary="The organization's chats containing a text, newest first")
async def search_chats(
    org_id: OrgDep,
    services: ServicesDep,
    q: Annotated[str, Query(min_length=1, max_length=200, description="Text, any case.")],
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
    offset: Annotated[int, Query(ge=0, le=MAX_POSITION)] = 0,
) -> dict[str, Any]:
    text = " ".join(q.split())
    if len(text) < 2:
        raise ApiError(422, "invalid_request", "q needs at least 2 characters besides spaces")
    results, total = await services.store.search_chats(org_id, text, limit=limit, offset=offset)
    return {"q": text, "results": results, "total": total, "limit": limit, "offset": offset}


@router.get(
    "/sessions/{session_id}/export",
    summary="Download a chat as Markdown or JSON, with its sources",
    response_class=Response,
    responses={200: {"content": {"text/markdown": {}, "application/json": {}}}},
)
async def export_session(
    session_id: str,
    org_id: OrgDep,
    services: ServicesDep,
    format: Annotated[ExportFormat, Query(description="markdown (default) or json")] = "markdown",
) -> Response:
    session = await own_session(services, org_id, session_id)
    messages = await services.store.list_messages(org_id, session_id, limit=EXPORT_MAX_MESSAGES)
    body, media, name = export_chat(session, messages, format)
    return Response(
        body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )
