"""ChatModel over any OpenAI-compatible /v1/chat/completions endpoint (vLLM, our own server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import httpx

from models.errors import ModelError, ModelOverloaded, ModelTimeout, ModelUnavailable
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    StreamEvent,
    TextDelta,
    ToolCallDone,
    ToolSpec,
    TurnDone,
    Usage,
)
from models.openai_wire import finish_reason_from_wire, request_body
from models.streaming import TextDeltaFilter
from models.toolparse import parse_tool_calls


class OpenAIChatModel:
    """Speaks the OpenAI chat-completions API with httpx; maps it to the shared messages."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        model: str = "default",
        *,
        connect_timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`base_url` includes the API prefix, e.g. "http://127.0.0.1:8000/v1"."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._model = model
        self._connect_timeout_s = connect_timeout_s
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, transport=transport
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        params = params or ModelParams()
        body = request_body(self._model, messages, tools, params, stream=False)
        with _mapped_errors(params.timeout_s):
            async with asyncio.timeout(params.timeout_s):
                response = await self._client.post(
                    "/chat/completions", json=body, timeout=self._timeout(params)
                )
            _raise_for_status(response)
            data = response.json()
        return turn_from_completion(data, tools, params)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        params = params or ModelParams()
        body = request_body(self._model, messages, tools, params, stream=True)
        text_filter = TextDeltaFilter()
        text, calls, finish, usage = "", _CallAccumulator(), None, {}
        # No asyncio.timeout here: it must not span yields. httpx bounds each read, and the
        # deadline is checked per event.
        deadline = time.monotonic() + params.timeout_s
        with _mapped_errors(params.timeout_s):
            async with self._client.stream(
                "POST", "/chat/completions", json=body, timeout=self._timeout(params)
            ) as response:
                if response.is_error:
                    await response.aread()
                    _raise_for_status(response)
                async for data in _sse_events(response):
                    if time.monotonic() > deadline:
                        raise ModelTimeout(f"model request exceeded {params.timeout_s:g}s")
                    usage = data.get("usage") or usage
                    for choice in data.get("choices") or ():
                        delta = choice.get("delta") or {}
                        piece = delta.get("content") or ""
                        text += piece
                        calls.add(delta.get("tool_calls") or ())
                        finish = choice.get("finish_reason") or finish
                        if safe := text_filter.feed(piece):
                            yield TextDelta(text=safe)
        turn = _turn(text, calls.result(), finish, usage, tools, params)
        if rest := text_filter.finish(turn.text):
            yield TextDelta(text=rest)
        for call in turn.tool_calls:
            yield ToolCallDone(call=call)
        yield TurnDone(turn=turn)

    def _timeout(self, params: ModelParams) -> httpx.Timeout:
        return httpx.Timeout(
            params.timeout_s, connect=min(self._connect_timeout_s, params.timeout_s)
        )


@contextlib.contextmanager
def _mapped_errors(timeout_s: float) -> Iterator[None]:
    """Map transport and decoding errors to ModelErrors."""
    try:
        yield
    except (httpx.TimeoutException, TimeoutError) as exc:
        raise ModelTimeout(f"model request exceeded {timeout_s:g}s") from exc
    except httpx.TransportError as exc:
        raise ModelUnavailable(f"model endpoint unreachable: {exc!r}") from exc
    except ValueError as exc:  # JSON decoding
        raise ModelError(f"malformed response from model endpoint: {exc}") from exc


class _CallAccumulator:
    """Join streamed tool-call deltas (keyed by index) into whole wire tool calls."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, deltas: Sequence[Mapping[str, Any]]) -> None:
        for delta in deltas:
            call = self._calls.setdefault(
                delta.get("index", len(self._calls)),
                {"id": None, "function": {"name": "", "arguments": ""}},
            )
            call["id"] = delta.get("id") or call["id"]
            function = delta.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            arguments = function.get("arguments") or ""
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments)
            call["function"]["arguments"] += arguments

    def result(self) -> list[dict[str, Any]]:
        return [self._calls[i] for i in sorted(self._calls)]


async def _sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            return
        data = json.loads(payload)
        if isinstance(data, dict) and "error" in data:
            raise ModelError(f"model endpoint error: {data['error']}")
        yield data


def _raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    detail = response.text[:300]
    if response.status_code in (429, 503):
        raise ModelOverloaded(f"model endpoint busy ({response.status_code}): {detail}")
    if response.status_code == 504:
        raise ModelTimeout(f"model endpoint timed out: {detail}")
    raise ModelError(f"model endpoint answered {response.status_code}: {detail}")


def turn_from_completion(
    data: Mapping[str, Any], tools: Sequence[ToolSpec], params: ModelParams
) -> AssistantTurn:
    """The assistant turn of a (non-streamed) chat-completions response body."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelError(f"malformed chat completion: {str(data)[:200]}") from None
    return _turn(
        message.get("content") or "",
        message.get("tool_calls") or (),
        choice.get("finish_reason"),
        data.get("usage") or {},
        tools,
        params,
    )


def _turn(
    text: str,
    native_calls: Sequence[Mapping[str, Any]],
    finish: Any,
    usage: Mapping[str, Any],
    tools: Sequence[ToolSpec],
    params: ModelParams,
) -> AssistantTurn:
    parsed_usage = Usage(
        prompt_tokens=usage.get("prompt_tokens") or 0,
        completion_tokens=usage.get("completion_tokens") or 0,
    )
    if not tools or params.tool_choice == "none":
        return AssistantTurn(
            text=text.strip(),
            finish_reason=finish_reason_from_wire(finish, has_calls=False),  # type: ignore[arg-type]
            usage=parsed_usage,
        )
    parsed = parse_tool_calls(text, tools, native=native_calls)
    attempted = bool(parsed.valid or parsed.invalid)
    return AssistantTurn(
        text=parsed.text,
        tool_calls=parsed.valid,
        invalid_tool_calls=parsed.invalid,
        finish_reason=finish_reason_from_wire(finish, has_calls=attempted),  # type: ignore[arg-type]
        usage=parsed_usage,
    )
