"""Q&A sessions and direct questions, answered from the knowledge base only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from crow.api.deps import ChatOrg, OrgDep, ServicesDep
from crow.api.errors import ApiError
from crow.api.routes_chat import MessageIn, SessionIn, check_message, model_error, new_session
from crow.services import Services, need
from models.errors import ModelError

router = APIRouter(prefix="/api/v1/qna", tags=["knowledge base"])


async def _own(services: Services, org_id: str, session_id: str) -> dict[str, Any]:
    session = await services.store.get_session(org_id, session_id, kind="qna")
    if session is None:
        raise ApiError(404, "session_not_found", "no such Q&A session")
    return session


@router.post("/sessions", status_code=201, summary="Create a Q&A session")
async def create_qna_session(
    org_id: OrgDep, services: ServicesDep, body: SessionIn | None = None
) -> dict[str, Any]:
    return await new_session(services, org_id, "qna", body)


@router.get("/sessions/{session_id}", summary="A Q&A session with its messages")
async def get_qna_session(session_id: str, org_id: OrgDep, services: ServicesDep) -> dict[str, Any]:
    session = await _own(services, org_id, session_id)
    return {
        **session,
        "messages": await services.store.list_messages(org_id, session_id, limit=100),
    }


@router.post("/sessions/{session_id}/messages", summary="Ask within a Q&A session")
async def send_qna_message(
    session_id: str, body: MessageIn, org_id: ChatOrg, services: ServicesDep
) -> dict[str, Any]:
    question = check_message(body, services)
    await _own(services, org_id, session_id)
    try:
        return await need(services.chat, "chat").ask_kb(
            org_id, question, session_id=session_id, message_id=body.message_id
        )
    except ModelError as exc:
        raise model_error(exc) from None


@router.post("/query", summary="Ask the knowledge base directly (nothing stored)")
async def qna_query(body: MessageIn, org_id: ChatOrg, services: ServicesDep) -> dict[str, Any]:
    question = check_message(body, services)
    try:
        return await need(services.chat, "chat").ask_kb(org_id, question)
    except ModelError as exc:
        raise model_error(exc) from None
