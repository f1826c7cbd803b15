"""The OpenAI client backend streams for real: text reaches the consumer while the model is
still generating, tool calls arrive as ToolCallDone, a consumer that stops closes the HTTP
stream, and failures before the first byte are retried by the SDK."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
import pytest

from models.chat import collect
from models.errors import ModelError, ModelOverloaded, ModelTimeout, PromptTooLong
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDone,
    ToolSpec,
    TurnDone,
)
from models.openai_backend import OpenAIChatModel
from models.openai_server import build_openai_app
from models.openai_wire import chunk
from models.testing import serve_in_thread
from tests.models.tools_fixture import TOOLS

CALL = ToolCall(id="call_a", name="search_products", arguments={"query": "tents", "limit": 3})
USER = [Message.user("find tents")]


class SlowStreamingModel:
    """Streams `pieces` with `delay_s` between them, then `calls`; records when it finished
    generating and whether it was stopped before finishing."""

    def __init__(
        self, pieces: Sequence[str], *, delay_s: float, calls: Sequence[ToolCall] = ()
    ) -> None:
        self.pieces, self.delay_s, self.calls = list(pieces), delay_s, tuple(calls)
        self.finished_at: float | None = None
        self.stopped = threading.Event()

    def turn(self) -> AssistantTurn:
        finish = "tool_calls" if self.calls else "stop"
        return AssistantTurn(
            text="".join(self.pieces).strip(), tool_calls=self.calls, finish_reason=finish
        )

    async def request(self, messages, tools=(), params=None) -> AssistantTurn:  # type: ignore[no-untyped-def]
        return await collect(self.stream(messages, tools, params))

    async def stream(self, messages, tools=(), params=None) -> AsyncIterator[StreamEvent]:  # type: ignore[no-untyped-def]
        try:
            for i, piece in enumerate(self.pieces):
                if i:
                    await asyncio.sleep(self.delay_s)
                yield TextDelta(text=piece)
            await asyncio.sleep(self.delay_s)
            for call in self.calls:
                yield ToolCallDone(call=call)
            self.finished_at = time.monotonic()
            yield TurnDone(turn=self.turn())
        finally:
            if self.finished_at is None:
                self.stopped.set()


@pytest.fixture
def served() -> Iterator[tuple[SlowStreamingModel, str]]:
    model = SlowStreamingModel(["Counting ", "your ", "tents."], delay_s=0.4, calls=[CALL])
    with serve_in_thread(build_openai_app(model, model_name="slow")) as url:
        yield model, url


def test_first_text_arrives_before_the_model_has_finished(
    served: tuple[SlowStreamingModel, str],
) -> None:
    server_model, url = served
    client = OpenAIChatModel(f"{url}/v1", model="slow")

    async def run() -> list[tuple[float, StreamEvent]]:
        try:
            return [(time.monotonic(), e) async for e in client.stream(USER, TOOLS)]
        finally:
            await client.aclose()

    timed = asyncio.run(run())
    deltas = [(t, e) for t, e in timed if isinstance(e, TextDelta)]
    assert server_model.finished_at is not None
    first_delta_at = deltas[0][0]
    # The model generates for ~1.2 s; the first piece must not wait for the end.
    assert first_delta_at < server_model.finished_at - 0.6
    assert len(deltas) >= 3, "text was collected and replayed instead of streamed"
    assert "".join(e.text for _, e in deltas) == "Counting your tents."
    events = [e for _, e in timed]
    assert [e.call for e in events if isinstance(e, ToolCallDone)] == [CALL]
    assert isinstance(events[-1], TurnDone)
    assert sum(isinstance(e, TurnDone) for e in events) == 1
    turn = events[-1].turn
    assert (turn.text, turn.tool_calls, turn.finish_reason) == (
        "Counting your tents.",
        (CALL,),
        "tool_calls",
    )


def test_request_returns_the_turn_stream_ends_with(served: tuple[SlowStreamingModel, str]) -> None:
    server_model, url = served
    client = OpenAIChatModel(f"{url}/v1", model="slow")
    turn = asyncio.run(client.request(USER, TOOLS))
    assert turn == server_model.turn()


@pytest.mark.parametrize("how", ["aclose", "cancel"])
def test_a_consumer_that_stops_closes_the_http_stream(how: str) -> None:
    server_model = SlowStreamingModel(["Hello ", "there"], delay_s=30.0)
    with serve_in_thread(build_openai_app(server_model)) as url:
        client = OpenAIChatModel(f"{url}/v1")

        async def run() -> None:
            events = client.stream(USER)
            if how == "aclose":  # the consumer breaks out and closes the generator
                assert await anext(events) == TextDelta(text="Hello ")
                await events.aclose()  # type: ignore[attr-defined]
            else:  # the consuming task is cancelled
                got_first = asyncio.Event()

                async def consume() -> None:
                    async for _ in events:
                        got_first.set()

                task = asyncio.create_task(consume())
                await asyncio.wait_for(got_first.wait(), 10)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            await client.aclose()

        asyncio.run(run())
        assert server_model.stopped.wait(5.0), "the server kept generating for nobody"


def test_a_stalled_stream_times_out() -> None:
    server_model = SlowStreamingModel(["Hello ", "there"], delay_s=30.0)
    with serve_in_thread(build_openai_app(server_model)) as url:
        client = OpenAIChatModel(f"{url}/v1")
        seen: list[StreamEvent] = []

        async def run() -> None:
            async for event in client.stream(USER, params=ModelParams(timeout_s=0.8)):
                seen.append(event)

        started = time.monotonic()
        with pytest.raises(ModelTimeout):
            asyncio.run(run())
        assert time.monotonic() - started < 5
        assert seen == [TextDelta(text="Hello ")]


# -- wire details, over a mock transport ---------------------------------------------------


def _sse(*payloads: dict[str, object]) -> bytes:
    return (
        "".join(f"data: {json.dumps(p)}\n\n" for p in (*payloads, "[DONE]"))
        .replace('data: "[DONE]"', "data: [DONE]")
        .encode()
    )


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return chunk("c", "m", delta, finish_reason=finish)


ANSWER_SSE = _sse(
    _chunk({"role": "assistant", "content": "Hi "}), _chunk({"content": "there"}, "stop")
)
COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi there"},
            "finish_reason": "stop",
        }
    ],
}


class Flaky:
    """A transport answering `failures` (status codes) first, then the good answer."""

    def __init__(self, *failures: int) -> None:
        self.failures = list(failures)
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.failures:
            status = self.failures.pop(0)
            # retry-after-ms keeps the SDK's backoff short in tests
            headers = {"retry-after-ms": "10"}
            return httpx.Response(status, json={"error": {"message": "busy"}}, headers=headers)
        if json.loads(request.content).get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, content=ANSWER_SSE, headers=headers)
        return httpx.Response(200, json=COMPLETION)


def _model(handler: Flaky | object, **kwargs: object) -> OpenAIChatModel:
    return OpenAIChatModel(
        "http://model.test/v1",
        transport=httpx.MockTransport(handler),
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("stream", [True, False])
def test_503_then_success_is_retried(stream: bool) -> None:
    flaky = Flaky(503)
    model = _model(flaky)
    call = collect(model.stream(USER)) if stream else model.request(USER)
    turn = asyncio.run(call)
    assert turn.text == "Hi there"
    assert flaky.requests == 2


def test_429_until_retries_run_out_is_overloaded() -> None:
    flaky = Flaky(429, 429, 429, 429)
    with pytest.raises(ModelOverloaded):
        asyncio.run(collect(_model(flaky, max_retries=2).stream(USER)))
    assert flaky.requests == 3


def test_client_errors_are_not_retried() -> None:
    flaky = Flaky(400)
    with pytest.raises(ModelError, match="400") as info:
        asyncio.run(_model(flaky).request(USER))
    assert not isinstance(info.value, ModelOverloaded)
    assert flaky.requests == 1


def test_native_tool_call_deltas_are_joined_by_index() -> None:
    second = ToolSpec(name="get_interaction_summary")
    body = _sse(
        _chunk({"role": "assistant", "content": None}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "search_products", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_interaction_summary", "arguments": "{}"},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"query": "te'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'nts"}'}}]}),
        _chunk({}, "tool_calls"),
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        },
    )
    transport = lambda r: httpx.Response(  # noqa: E731
        200, content=body, headers={"content-type": "text/event-stream"}
    )

    async def run() -> list[StreamEvent]:
        return [e async for e in _model(transport).stream(USER, [TOOLS[0], second])]

    events = asyncio.run(run())
    calls = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c0", "search_products", {"query": "tents"}),
        ("c1", "get_interaction_summary", {}),
    ]
    assert not any(isinstance(e, TextDelta) for e in events)
    [done] = [e for e in events if isinstance(e, TurnDone)]
    assert done.turn.tool_calls == tuple(calls) and done.turn.finish_reason == "tool_calls"
    assert (done.turn.usage.prompt_tokens, done.turn.usage.completion_tokens) == (7, 3)


def test_tool_calls_written_in_streamed_text_are_parsed() -> None:
    pieces = [
        '<tool_call>\n{"name": "search_products", ',
        '"arguments": {"query": "tents"}}\n</tool_call>',
    ]
    body = _sse(*(_chunk({"content": p}) for p in pieces), _chunk({}, "stop"))
    transport = lambda r: httpx.Response(  # noqa: E731
        200, content=body, headers={"content-type": "text/event-stream"}
    )
    events = asyncio.run(_events(_model(transport), TOOLS))
    assert not any(isinstance(e, TextDelta) for e in events)
    [call] = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert (call.name, call.arguments) == ("search_products", {"query": "tents"})
    assert events[-1].turn.tool_calls == (call,)  # type: ignore[union-attr]


def test_an_error_inside_the_stream_keeps_its_kind() -> None:
    body = _sse(_chunk({"content": "Hi"}), {"error": {"code": "model_overloaded", "message": "x"}})
    transport = lambda r: httpx.Response(  # noqa: E731
        200, content=body, headers={"content-type": "text/event-stream"}
    )
    with pytest.raises(ModelOverloaded):
        asyncio.run(_events(_model(transport), TOOLS))


async def _events(model: OpenAIChatModel, tools: Sequence[ToolSpec]) -> list[StreamEvent]:
    return [e async for e in model.stream(USER, tools)]


def test_a_refused_prompt_keeps_its_kind() -> None:
    error = {"error": {"code": "prompt_too_long", "message": "too long"}}
    transport = lambda r: httpx.Response(400, json=error)  # noqa: E731
    with pytest.raises(PromptTooLong):
        asyncio.run(_model(transport).request(USER))
    with pytest.raises(PromptTooLong):
        asyncio.run(_events(_model(transport), TOOLS))
