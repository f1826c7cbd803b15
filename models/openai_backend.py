"""ChatModel over any OpenAI-compatible /v1/chat/completions endpoint (vLLM, our own server).

Speaks through the official `openai` SDK's async client: its retries with backoff cover
connection errors, 429 and 5xx answers before the first byte; nothing is retried once a
stream has started. `stream` forwards text as the chunks arrive.

`events_from_chunks` (wire chunks -> stream events) and `turn_from_completion` are shared
with the vLLM adapter of deployments/llm_vllm.py, so both backends map the wire the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import httpx
import openai

from models.errors import (
    ModelError,
    ModelOverloaded,
    ModelTimeout,
    ModelUnavailable,
    PromptTooLong,
)
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

T = TypeVar("T")

_NO_KEY = "EMPTY"
"""Sent when no API key is configured (vLLM's convention), so the SDK never falls back to an
OPENAI_API_KEY from the environment and sends it to a self-hosted endpoint."""


class OpenAIChatModel:
    """Speaks the OpenAI chat-completions API with the `openai` SDK; maps it to the shared
    messages."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        model: str = "default",
        *,
        connect_timeout_s: float = 5.0,
        max_retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`base_url` includes the API prefix, e.g. "http://127.0.0.1:8000/v1".

        `max_retries`: the SDK's retries (exponential backoff, honouring Retry-After) of a
        request that failed before its answer started: connection errors, 429, 5xx.
        `transport` replaces the HTTP transport (tests).
        """
        self._model = model
        self._connect_timeout_s = connect_timeout_s
        self._client = openai.AsyncOpenAI(
            base_url=base_url.rstrip("/"),
            api_key=api_key or _NO_KEY,
            max_retries=max_retries,
            # The SDK takes an httpx client at run time (openai/_httpx2.py adapts it); its
            # annotations name only the httpx2 fork's types.
            http_client=httpx.AsyncClient(transport=transport) if transport else None,  # type: ignore[arg-type]
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        params = params or ModelParams()
        body = request_body(self._model, messages, tools, params, stream=False)
        with mapped_errors(params.timeout_s):
            async with asyncio.timeout(params.timeout_s):  # retries included
                completion = await self._client.chat.completions.create(
                    **body,
                    timeout=self._timeout(params),  # type: ignore[call-overload]  # as http_client
                )
            data = _as_dict(completion)
        return turn_from_completion(data, tools, params)

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        params = params or ModelParams()
        body = request_body(self._model, messages, tools, params, stream=True)
        return events_from_chunks(self._chunks(body, params), tools, params)

    async def _chunks(
        self, body: dict[str, Any], params: ModelParams
    ) -> AsyncIterator[dict[str, Any]]:
        """The stream's chunks as wire dicts, as they arrive; the HTTP stream is closed when
        this generator is closed or cancelled, whether or not it was read to the end."""
        deadline = asyncio.get_running_loop().time() + params.timeout_s
        with mapped_errors(params.timeout_s):
            async with asyncio.timeout_at(deadline):  # until the answer starts, retries included
                stream = await self._client.chat.completions.create(
                    **body,
                    timeout=self._timeout(params),  # type: ignore[call-overload]  # as http_client
                )
            try:
                async for chunk in within(deadline, stream):
                    yield _as_dict(chunk)
            finally:
                await stream.close()

    def _timeout(self, params: ModelParams) -> httpx.Timeout:
        return httpx.Timeout(
            params.timeout_s, connect=min(self._connect_timeout_s, params.timeout_s)
        )


# -- shared with the vLLM adapter ----------------------------------------------------------


async def within(deadline: float, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """`items` until `deadline` (event-loop time); TimeoutError when the next item is late.

    The limit covers each wait for an item and never spans a `yield`, so the consumer's own
    time does not count against it in a way that could cancel the consumer.
    """
    iterator = aiter(items)
    while True:
        async with asyncio.timeout_at(deadline):
            try:
                item = await anext(iterator)
            except StopAsyncIteration:
                return
        yield item


async def events_from_chunks(
    chunks: AsyncIterator[Mapping[str, Any]],
    tools: Sequence[ToolSpec],
    params: ModelParams,
) -> AsyncIterator[StreamEvent]:
    """Chat-completion chunks (wire dicts) -> TextDeltas as they arrive, then a ToolCallDone
    per valid call and one TurnDone.

    Native `tool_calls` deltas are joined by index; calls written into the text are parsed
    at the end (toolparse), as `turn_from_completion` does. An error payload in the stream
    raises its ModelError. `chunks` is closed when this generator is closed or cancelled.
    """
    text_filter = TextDeltaFilter()
    text, calls, finish = "", _CallAccumulator(), None
    usage: dict[str, Any] = {}
    try:
        async for data in chunks:
            raise_for_error_payload(data)
            usage = data.get("usage") or usage
            for choice in data.get("choices") or ():
                # A whole (non-streamed) completion carries `message` instead of `delta`.
                delta = choice.get("delta") or choice.get("message") or {}
                piece = delta.get("content") or ""
                text += piece
                calls.add(delta.get("tool_calls") or ())
                finish = choice.get("finish_reason") or finish
                if safe := text_filter.feed(piece):
                    yield TextDelta(text=safe)
    finally:
        if (aclose := getattr(chunks, "aclose", None)) is not None:
            await aclose()
    turn = _turn(text, calls.result(), finish, usage, tools, params)
    if rest := text_filter.finish(turn.text):
        yield TextDelta(text=rest)
    for call in turn.tool_calls:
        yield ToolCallDone(call=call)
    yield TurnDone(turn=turn)


def raise_for_error_payload(data: Mapping[str, Any]) -> None:
    """Raise the ModelError of an error payload ({"error": {...}} or {"object": "error"})."""
    if data.get("error"):
        error = data["error"]
        raise error_from_wire(error if isinstance(error, Mapping) else {"message": error})
    if data.get("object") == "error":
        raise error_from_wire(data)


def error_from_wire(error: Mapping[str, Any]) -> ModelError:
    """The ModelError for an OpenAI-style error object; `code` is an HTTP status (vLLM) or
    one of our server's codes (models/openai_server.py)."""
    code = str(error.get("code") or "")
    message = f"model endpoint error: {error.get('message') or error}"[:400]
    if code in ("429", "503", "model_overloaded"):
        return ModelOverloaded(message)
    if code in ("504", "model_timeout"):
        return ModelTimeout(message)
    if code == "model_unavailable":
        return ModelUnavailable(message)
    if code == "prompt_too_long":
        return PromptTooLong(message)
    return ModelError(message)


@contextlib.contextmanager
def mapped_errors(timeout_s: float) -> Iterator[None]:
    """Map SDK, transport, deadline and decoding errors to ModelErrors."""
    try:
        yield
    except (openai.APITimeoutError, httpx.TimeoutException, TimeoutError) as exc:
        raise ModelTimeout(f"model request exceeded {timeout_s:g}s") from exc
    except (openai.APIConnectionError, httpx.TransportError) as exc:
        raise ModelUnavailable(f"model endpoint unreachable: {exc!r}") from exc
    except openai.APIStatusError as exc:
        raise _status_error(exc) from exc
    except openai.APIError as exc:  # an error event inside the stream
        body = exc.body if isinstance(exc.body, Mapping) else {"message": exc.message}
        raise error_from_wire(body) from exc
    except openai.OpenAIError as exc:
        raise ModelError(f"model endpoint error: {exc}") from exc
    except ValueError as exc:  # JSON decoding
        raise ModelError(f"malformed response from model endpoint: {exc}") from exc


def _status_error(exc: openai.APIStatusError) -> ModelError:
    status, detail = exc.status_code, exc.message[:300]
    if isinstance(exc.body, Mapping) and exc.body.get("code") == "prompt_too_long":
        return PromptTooLong(f"model endpoint refused the prompt: {detail}")
    if status in (429, 503):
        return ModelOverloaded(f"model endpoint busy ({status}): {detail}")
    if status == 504:
        return ModelTimeout(f"model endpoint timed out: {detail}")
    return ModelError(f"model endpoint answered {status}: {detail}")


def _as_dict(obj: Any) -> dict[str, Any]:
    """An SDK response object (or an already plain payload) as its wire dict."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "to_dict"):
        return cast(dict[str, Any], obj.to_dict())
    return cast(dict[str, Any], obj.model_dump())


class _CallAccumulator:
    """Join streamed tool-call deltas (keyed by index) into whole wire tool calls."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, deltas: Sequence[Mapping[str, Any]]) -> None:
        for delta in deltas:
            index = delta.get("index")
            call = self._calls.setdefault(
                len(self._calls) if index is None else index,
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
            finish_reason=finish_reason_from_wire(finish, has_calls=False),
            usage=parsed_usage,
        )
    parsed = parse_tool_calls(text, tools, native=native_calls)
    attempted = bool(parsed.valid or parsed.invalid)
    return AssistantTurn(
        text=parsed.text,
        tool_calls=parsed.valid,
        invalid_tool_calls=parsed.invalid,
        finish_reason=finish_reason_from_wire(finish, has_calls=attempted),
        usage=parsed_usage,
    )
