"""Agent-to-Agent endpoints: the spec's legacy ``tasks/send``, the current A2A protocol, the card.

- ``POST /a2a/tasks/send``: A2A 0.1-style JSON-RPC ``tasks/send`` (the product spec's route).
- ``POST /a2a``: the current A2A JSON-RPC binding through a2a-sdk (``SendMessage``,
  ``GetTask``, ``CancelTask``, ... with ``A2A-Version: 1.0``; 0.3 ``message/send`` too).
- ``GET /.well-known/agent-card.json`` and ``/.well-known/agent.json``: the agent card.

Both JSON-RPC routes take the org from the caller's API key with the checks of every other
route (401 without a key, 403 for another org's X-Organization-Id, 429 past the chat rate or
the token quota, in the one error shape) before any JSON-RPC processing; JSON-RPC level
errors are answered with HTTP 200 in JSON-RPC shape. The agent card stays public and
declares the bearer scheme.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Literal

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from crow.api.a2a_agent import A2A_RPC_PATH, CARD_PATHS, a2a_state, agent_card
from crow.api.deps import ChatOrg, ServicesDep
from crow.api.errors import ApiError
from crow.services import Services, need
from models.errors import ModelError

log = logging.getLogger(__name__)
router = APIRouter(tags=["a2a"])

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
JsonRpcId = str | int | None


class _TextPart(BaseModel):
    type: Literal["text"]
    text: str


class _LegacyMessage(BaseModel):
    role: Literal["user"]
    parts: list[_TextPart] = Field(min_length=1)


class _SendParams(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str = Field(min_length=1, max_length=200)
    session_id: str | None = Field(None, alias="sessionId", min_length=1, max_length=200)
    message: _LegacyMessage
    metadata: dict[str, Any] | None = None


def _rpc_error(rpc_id: JsonRpcId, code: int, message: str, data: Any = None) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "error": error})


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _task(params: _SendParams, session_id: str, state: str, **extra: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state, "timestamp": _now()}
    if "status_text" in extra:
        status["message"] = {
            "role": "agent",
            "parts": [{"type": "text", "text": extra.pop("status_text")}],
        }
    return {"id": params.id, "sessionId": session_id, "status": status, **extra}


async def _run_task(
    services: Services, request: Request, org_id: str, params: _SendParams, question: str
) -> dict[str, Any]:
    external = params.session_id
    chat_id = await a2a_state(request.app).sessions.resolve(services, org_id, external)
    reply_session = external or chat_id
    try:
        answer = await need(services.chat, "chat").send(org_id, chat_id, question)
    except ModelError as exc:
        return _task(
            params,
            reply_session,
            "failed",
            artifacts=[],
            status_text=f"the model could not answer: {exc}",
        )
    artifact = {
        "name": "answer",
        "index": 0,
        "parts": [{"type": "text", "text": answer["content"]}],
        "metadata": {"sources": answer.get("sources") or [], "chat_session_id": chat_id},
    }
    return _task(params, reply_session, "completed", artifacts=[artifact])


@router.post(
    "/a2a/tasks/send",
    summary="A2A tasks/send (legacy JSON-RPC): ask a question as a task",
    response_model=None,
)
async def tasks_send(request: Request, org_id: ChatOrg, services: ServicesDep) -> JSONResponse:
    try:
        body = await request.json()
    except ValueError:
        return _rpc_error(None, PARSE_ERROR, "parse error: the body is not JSON")
    if not isinstance(body, dict):
        return _rpc_error(None, INVALID_REQUEST, "invalid request: expected one JSON-RPC object")
    rpc_id = body.get("id")
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int | None):
        return _rpc_error(None, INVALID_REQUEST, "invalid request: id must be a string or number")
    if body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
        return _rpc_error(rpc_id, INVALID_REQUEST, "invalid request: jsonrpc '2.0' and a method")
    if body["method"] != "tasks/send":
        return _rpc_error(rpc_id, METHOD_NOT_FOUND, f"method not found: {body['method']}")
    try:
        params = _SendParams.model_validate(body.get("params"))
    except ValidationError as exc:
        details = [
            {"field": ".".join(map(str, e["loc"])), "reason": e["msg"]} for e in exc.errors()
        ]
        return _rpc_error(rpc_id, INVALID_PARAMS, "invalid params", details)
    question = "\n".join(p.text for p in params.message.parts).strip()
    limit = services.settings.limits.max_message_chars
    if not question or len(question) > limit:
        reason = "the message has no text" if not question else f"longer than {limit} characters"
        return _rpc_error(rpc_id, INVALID_PARAMS, f"invalid params: {reason}")
    try:
        task = await _run_task(services, request, org_id, params, question)
    except ApiError:
        raise  # an HTTP answer in the one error shape (e.g. 409 too_many_sessions)
    except Exception:
        log.exception("tasks/send failed")
        return _rpc_error(rpc_id, INTERNAL_ERROR, "internal error")
    return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "result": task})


@router.post(
    A2A_RPC_PATH,
    summary="A2A JSON-RPC endpoint (a2a-sdk): SendMessage, GetTask, CancelTask, ...",
    response_model=None,
)
async def a2a_jsonrpc(request: Request, org_id: ChatOrg) -> Response:
    request.state.org_id = org_id
    return await a2a_state(request.app).dispatcher.handle_requests(request)


async def _card(request: Request) -> JSONResponse:
    rpc_url = str(request.base_url).rstrip("/") + A2A_RPC_PATH
    return JSONResponse(agent_card_to_dict(agent_card(rpc_url)))


for _path in CARD_PATHS:
    router.add_api_route(
        _path, _card, methods=["GET"], summary="The A2A agent card", response_model=None
    )
