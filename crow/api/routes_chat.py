"""Chat sessions and messages (the product spec's bff-chat-service routes), with SSE streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import Receive, Scope, Send

from crow.api.deps import ChatOrg, OrgDep, ServicesDep, require_path_org
from crow.api.errors import ApiError, error_body
from crow.chat.service import (
    AnswerInProgress,
    AnswerNotFound,
    NotLatestAnswer,
    SessionNotFound,
)
from crow.services import Services, need
from crow.store.chat_store import SessionKind
from models.errors import ModelError, ModelTimeout, PromptTooLong

router = APIRouter(prefix="/api/v1/chat/sessions", tags=["chat"])
PathOrg = Annotated[str, Depends(require_path_org)]
MAX_POSITION = 2**62  # offsets and seq bounds: beyond it the store's 64-bit integers overflow


class SessionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(None, max_length=200, description="Default: from the first message.")


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="The question, in plain language.")
    message_id: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_-]{1,64}$", description="Client id: a retry is answered once."
    )


def check_message(body: MessageIn, services: Services) -> str:
    content = body.content.strip()
    if not content:
        raise ApiError(422, "invalid_request", "content must not be empty")
    limit = services.settings.limits.max_message_chars
    if len(content) > limit:
        raise ApiError(413, "payload_too_large", f"content is longer than {limit} characters")
    return content


async def own_session(services: Services, org_id: str, session_id: str) -> dict[str, Any]:
    session = await services.store.get_session(org_id, session_id)
    if session is None:
        raise ApiError(404, "session_not_found", "no such session")
    return session


CHAT_ERRORS: dict[type[Exception], ApiError] = {
    SessionNotFound: ApiError(404, "session_not_found", "no such session (deleted?)"),
    AnswerNotFound: ApiError(404, "message_not_found", "no such answer in this session"),
    NotLatestAnswer: ApiError(
        409, "not_latest_answer", "only the session's latest answer can be regenerated"
    ),
    AnswerInProgress: ApiError(
        409,
        "message_in_progress",
        "this message_id is being answered; retry in a few seconds",
        headers={"Retry-After": "5"},
    ),
}


def chat_error(exc: Exception) -> ApiError:
    """The answer to an error of the chat service (also one re-raised from another replica)."""
    if isinstance(exc, ModelError):
        return model_error(exc)
    return next(answer for kind, answer in CHAT_ERRORS.items() if isinstance(exc, kind))


def model_error(exc: ModelError) -> ApiError:
    if isinstance(exc, PromptTooLong):
        return ApiError(
            413, "prompt_too_long", f"{exc}; start a new chat or ask a shorter question"
        )
    if isinstance(exc, ModelTimeout):
        return ApiError(504, "model_timeout", "the model took too long to answer; try again")
    return ApiError(503, "model_unavailable", f"the model could not answer: {exc}")


@router.post("", status_code=201, summary="Create a chat session")
async def create_session(
    org_id: OrgDep, services: ServicesDep, body: SessionIn | None = None
) -> dict[str, Any]:
    return await new_session(services, org_id, "chat", body)


async def new_session(
    services: Services, org_id: str, kind: SessionKind, body: SessionIn | None
) -> dict[str, Any]:
    """A new session; 409 once the organization has as many as `quotas.max_sessions`."""
    cap = services.settings.quotas.max_sessions
    session = await services.store.create_session(
        org_id, kind=kind, title=body.title if body else None, max_sessions=cap
    )
    if session is None:
        raise ApiError(
            409,
            "too_many_sessions",
            f"the organization has {cap:,} sessions; delete old ones first",
        )
    return session


@router.get("/organization/{org_id}", summary="The organization's sessions, newest first")
async def list_sessions(
    org_id: PathOrg,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=MAX_POSITION)] = 0,
) -> dict[str, Any]:
    sessions, total = await services.store.list_sessions(org_id, limit=limit, offset=offset)
    return {"sessions": sessions, "total": total, "limit": limit, "offset": offset}


@router.get("/{session_id}", summary="Session details")
async def get_session(session_id: str, org_id: OrgDep, services: ServicesDep) -> dict[str, Any]:
    return await own_session(services, org_id, session_id)


@router.delete("/{session_id}", status_code=204, summary="Delete a session and its messages")
async def delete_session(session_id: str, org_id: OrgDep, services: ServicesDep) -> None:
    if not await services.store.delete_session(org_id, session_id):
        raise ApiError(404, "session_not_found", "no such session")


@router.get("/{session_id}/messages", summary="Message history, paginated backwards")
async def list_messages(
    session_id: str,
    org_id: OrgDep,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    before: Annotated[
        int | None,
        Query(ge=1, le=MAX_POSITION, description="Only messages with seq below this."),
    ] = None,
) -> dict[str, Any]:
    await own_session(services, org_id, session_id)
    messages = await services.store.list_messages(org_id, session_id, limit=limit, before=before)
    has_more = bool(messages) and messages[0]["seq"] > 1
    return {
        "messages": messages,
        "has_more": has_more,
        "next_before": messages[0]["seq"] if has_more else None,
    }


@router.post("/{session_id}/messages", summary="Send a message and get the answer")
async def send_message(
    session_id: str, body: MessageIn, org_id: ChatOrg, services: ServicesDep
) -> dict[str, Any]:
    content = check_message(body, services)
    try:  # another org's or a deleted session: SessionNotFound, a 404
        return await need(services.chat, "chat").send(
            org_id, session_id, content, message_id=body.message_id
        )
    except ModelError as exc:
        raise model_error(exc) from None


@router.post(
    "/{session_id}/messages/stream", summary="Send a message; answer as server-sent events"
)
async def stream_message(
    session_id: str, body: MessageIn, org_id: ChatOrg, services: ServicesDep
) -> StreamingResponse:
    content = check_message(body, services)
    answer = need(services.chat, "chat").send_events(
        org_id, session_id, content, message_id=body.message_id
    )
    return await sse_response(answer)


@router.post(
    "/{session_id}/messages/{message_id}/regenerate",
    summary="Answer the latest answer's question again; both answers stay in the history",
)
async def regenerate(
    session_id: str, message_id: str, org_id: ChatOrg, services: ServicesDep
) -> dict[str, Any]:
    events = need(services.chat, "chat").regenerate_events(org_id, session_id, message_id)
    try:
        async for event in events:
            if event["type"] == "done":
                return dict(event["message"])
    except ModelError as exc:
        raise model_error(exc) from None
    raise ApiError(503, "model_unavailable", "the answer was not completed; retry")


@router.post(
    "/{session_id}/messages/{message_id}/regenerate/stream",
    summary="Regenerate the latest answer; the new answer as server-sent events",
)
async def regenerate_stream(
    session_id: str, message_id: str, org_id: ChatOrg, services: ServicesDep
) -> StreamingResponse:
    chat = need(services.chat, "chat")
    return await sse_response(chat.regenerate_events(org_id, session_id, message_id))


async def sse_response(answer: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    """The chat service's events as server-sent events. The first event (the stored question,
    or the answer being regenerated) is read before the stream starts: a session or answer
    that isn't the org's is a 4xx, not an error event. A client that closes the stream stops
    the answer (it is stored as far as it got, marked stopped)."""
    first = await anext(answer)

    async def events() -> AsyncIterator[str]:
        try:
            yield _sse(first)
            async for event in answer:
                yield _sse(event)
        except (ModelError, SessionNotFound, AnswerInProgress) as exc:
            err = chat_error(exc)
            yield f"event: error\ndata: {json.dumps(error_body(err.code, err.message))}\n\n"
        finally:
            await aclose(answer)

    return ClosingStreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class ClosingStreamingResponse(StreamingResponse):
    """A StreamingResponse that closes its body when the response ends, however it ends.
    Starlette leaves a body that was not read to the end suspended when sending fails (the
    client went away: Ray Serve's closed queue raises) until the garbage collector finds it;
    until then the answer upstream is neither read nor cancelled, and a stopped answer is
    not stored."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled request still closes it
                await aclose(self.body_iterator)


async def aclose(stream: object) -> None:
    """Close an async generator (what a stream may be); anything else has nothing to close."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


def _sse(event: dict[str, Any]) -> str:
    return f"event: {event['type']}\ndata: {json.dumps(event, default=str)}\n\n"
