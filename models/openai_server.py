"""A small OpenAI-compatible /v1/chat/completions server in front of any ChatModel.

The CPU profile exposes its local model through it; tests put it in front of the scripted
model to exercise the OpenAI client backend end to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from models.chat import ChatModel
from models.errors import (
    ModelError,
    ModelOverloaded,
    ModelTimeout,
    ModelUnavailable,
    PromptTooLong,
)
from models.messages import AssistantTurn, ModelParams, TextDelta, ToolCallDone, TurnDone
from models.openai_wire import (
    WireFormatError,
    attempted_calls_to_wire,
    call_to_wire,
    chunk,
    completion_response,
    finish_reason_to_wire,
    messages_from_wire,
    new_chunk_id,
    params_from_wire,
    tools_from_wire,
    usage_to_wire,
)

MAX_BODY_BYTES = 1_000_000
T = TypeVar("T")
OnTurn = Callable[[Request, AssistantTurn], Awaitable[None]]


def build_openai_app(
    model: ChatModel,
    *,
    model_name: str = "local",
    default_params: ModelParams | None = None,
    max_tokens: int | None = None,
) -> FastAPI:
    """An app serving POST /v1/chat/completions and GET /v1/models for `model`."""
    app = FastAPI(title="OpenAI-compatible chat completions")
    app.include_router(
        openai_router(
            model, model_name=model_name, default_params=default_params, max_tokens=max_tokens
        )
    )
    return app


def openai_router(
    model: ChatModel,
    *,
    model_name: str = "local",
    default_params: ModelParams | None = None,
    max_tokens: int | None = None,
    prefix: str = "/v1",
    on_turn: OnTurn | None = None,
) -> APIRouter:
    """The routes of build_openai_app, to include in a larger app. `max_tokens` caps what a
    request may ask for (a larger `max_tokens` is lowered to it; absent, it is the default);
    `on_turn` hears of every answered completion (e.g. to count its tokens)."""
    defaults = default_params or ModelParams()
    if max_tokens is not None:
        defaults = defaults.model_copy(update={"max_tokens": max_tokens})
    app = APIRouter(prefix=prefix, tags=["OpenAI-compatible"])

    @app.get("/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model"}]}

    @app.post("/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return _error(413, "too_large", f"request body over {MAX_BODY_BYTES} bytes")
        try:
            body = json.loads(raw)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise WireFormatError("body must be an object with a 'messages' list")
            messages = messages_from_wire(body["messages"])
            tools = tools_from_wire(body.get("tools") or [])
            params = params_from_wire(body, default=defaults)
            if max_tokens is not None and params.max_tokens > max_tokens:
                params = params.model_copy(update={"max_tokens": max_tokens})
        except (ValueError, WireFormatError) as exc:
            return _error(400, "invalid_request", str(exc))
        if body.get("stream"):
            done = None if on_turn is None else partial(on_turn, request)
            events = _sse(model, messages, tools, params, model_name, done)
            return StreamingResponse(events, media_type="text/event-stream")
        try:
            turn = await _unless_disconnected(request, model.request(messages, tools, params))
        except ModelError as exc:
            return _model_error(exc)
        except ClientGone:
            return _error(499, "client_closed_request", "the client closed the connection")
        if on_turn is not None:
            await on_turn(request, turn)
        return JSONResponse(completion_response(turn, model_name))

    return app


class ClientGone(Exception):
    """The client closed its connection before the answer was ready."""


async def _unless_disconnected(request: Request, work: Awaitable[T], poll_s: float = 0.25) -> T:
    """`work`'s result, or ClientGone once the client has disconnected; the work is then
    cancelled, which stops a local generation at its next token instead of letting it run
    to max_tokens for nobody (and hold up the requests queued behind it)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_s)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientGone
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _sse(
    model: ChatModel,
    messages: Any,
    tools: Any,
    params: ModelParams,
    model_name: str,
    on_turn: Callable[[AssistantTurn], Awaitable[None]] | None = None,
) -> AsyncIterator[str]:
    chunk_id = new_chunk_id()
    yield _data(chunk(chunk_id, model_name, {"role": "assistant", "content": ""}))
    index = 0
    try:
        async for event in model.stream(messages, tools, params):
            if isinstance(event, TextDelta):
                yield _data(chunk(chunk_id, model_name, {"content": event.text}))
            elif isinstance(event, ToolCallDone):
                call = {"index": index, **call_to_wire(event.call)}
                index += 1
                yield _data(chunk(chunk_id, model_name, {"tool_calls": [call]}))
            elif isinstance(event, TurnDone):
                if on_turn is not None:
                    await on_turn(event.turn)
                text, wrong = attempted_calls_to_wire(event.turn)
                if text:
                    yield _data(chunk(chunk_id, model_name, {"content": text}))
                for call in wrong:
                    yield _data(
                        chunk(chunk_id, model_name, {"tool_calls": [{"index": index, **call}]})
                    )
                    index += 1
                finish = finish_reason_to_wire(event.turn, has_calls=index > 0)
                final = chunk(chunk_id, model_name, {}, finish_reason=finish)
                yield _data(final)
                yield _data(
                    {
                        **chunk(chunk_id, model_name, {}),
                        "choices": [],
                        "usage": usage_to_wire(event.turn),
                    }
                )
    except ModelError as exc:
        code, _ = _model_error_code(exc)
        yield _data({"error": {"code": code, "message": str(exc)}})
    yield "data: [DONE]\n\n"


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def _model_error_code(exc: ModelError) -> tuple[str, int]:
    if isinstance(exc, PromptTooLong):
        return "prompt_too_long", 400
    if isinstance(exc, ModelTimeout):
        return "model_timeout", 504
    if isinstance(exc, ModelOverloaded):
        return "model_overloaded", 503
    if isinstance(exc, ModelUnavailable):
        return "model_unavailable", 503
    return "model_error", 502


def _model_error(exc: ModelError) -> JSONResponse:
    code, status = _model_error_code(exc)
    return _error(status, code, str(exc))


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
