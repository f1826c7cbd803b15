"""The vLLM adapter forwards LLMServer.chat's chunks as they arrive (no vLLM needed: a fake
handle yields what Ray Serve LLM yields: batches of SSE strings, or pydantic objects)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

import deployments.llm_vllm as llm_vllm
from crow.chat.agent.config import AgentConfig
from crow.chat.agent.context import ToolContext
from crow.chat.agent.loop import Agent
from crow.settings import AppSettings
from deployments.llm_vllm import VLLMHandleChatModel, wire_payloads
from models.chat import collect
from models.errors import ModelError, ModelOverloaded, ModelTimeout
from models.messages import (
    Message,
    ModelParams,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDone,
    TurnDone,
)
from models.openai_wire import chunk
from tests.models.tools_fixture import TOOLS

USER = [Message.user("find tents")]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return chunk("c", "m", delta, finish_reason=finish)


def _sse(payload: dict[str, Any] | str) -> str:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"


TOOL_DELTAS = [
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c0",
                    "type": "function",
                    "function": {"name": "search_products", "arguments": '{"query": '},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"tents"}'}}]}),
]
USAGE = {**_chunk({}), "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}


class FakeResponses:
    """A DeploymentResponseGenerator double: yields `items`, `delay_s` apart."""

    def __init__(self, items: Sequence[Any], delay_s: float = 0.0) -> None:
        self.items, self.delay_s = list(items), delay_s
        self.cancelled = False
        self.last_item_at: float | None = None

    def __aiter__(self) -> FakeResponses:
        return self

    async def __anext__(self) -> Any:
        if not self.items:
            raise StopAsyncIteration
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        item = self.items.pop(0)
        if not self.items:
            self.last_item_at = time.monotonic()
        return item

    def cancel(self) -> None:
        self.cancelled = True


class FakeHandle:
    """`handle.options(stream=True).chat.remote(request)` -> FakeResponses."""

    def __init__(self, responses: FakeResponses) -> None:
        self.responses = responses
        self.requests: list[Any] = []
        self.chat = self

    def options(self, *, stream: bool) -> FakeHandle:
        assert stream, "LLMServer.chat is a generator: the handle must stream"
        return self

    def remote(self, request: Any) -> FakeResponses:
        self.requests.append(request)
        return self.responses


@pytest.fixture(autouse=True)
def _plain_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request body as is (ChatCompletionRequest needs ray[llm] and vLLM)."""
    monkeypatch.setattr(llm_vllm, "_chat_request", lambda body: body)


def _model(*items: Any, delay_s: float = 0.0) -> tuple[VLLMHandleChatModel, FakeHandle]:
    handle = FakeHandle(FakeResponses(items, delay_s))
    return VLLMHandleChatModel(handle, "llama"), handle  # type: ignore[arg-type]


async def _events(
    model: VLLMHandleChatModel, messages: Sequence[Message] = USER, **kwargs: Any
) -> list[StreamEvent]:
    return [e async for e in model.stream(messages, TOOLS, **kwargs)]


def test_batched_sse_strings_become_events() -> None:
    """Ray 2.60: each item is a list of "data: {...}\\n\\n" strings; the last one [DONE]."""
    model, handle = _model(
        [_sse(_chunk({"role": "assistant", "content": ""})), _sse(_chunk({"content": "Let me "}))],
        [_sse(_chunk({"content": "look."})) + _sse(TOOL_DELTAS[0])],
        [_sse(TOOL_DELTAS[1]), _sse(_chunk({}, "tool_calls")), _sse(USAGE), _sse("[DONE]")],
    )
    events = asyncio.run(_events(model))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "look."]
    [call] = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert (call.id, call.name, call.arguments) == ("c0", "search_products", {"query": "tents"})
    assert isinstance(events[-1], TurnDone)
    turn = events[-1].turn
    assert (turn.text, turn.tool_calls, turn.finish_reason) == (
        "Let me look.",
        (call,),
        "tool_calls",
    )
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (5, 4)
    [body] = handle.requests
    assert body["stream"] is True and body["model"] == "llama"
    assert not handle.responses.cancelled


class Chunk(BaseModel):
    """Stands in for vLLM's ChatCompletionStreamResponse (an object with model_dump)."""

    id: str = "c"
    object: str = "chat.completion.chunk"
    choices: list[dict[str, Any]]


def test_pydantic_chunks_and_text_written_tool_calls() -> None:
    written = '<tool_call>{"name": "search_products", "arguments": {"query": "tents"}}</tool_call>'
    model, _ = _model(
        Chunk(choices=_chunk({"content": written[:30]})["choices"]),
        Chunk(choices=_chunk({"content": written[30:]}, "stop")["choices"]),
    )
    events = asyncio.run(_events(model))
    assert not any(isinstance(e, TextDelta) for e in events)
    [call] = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert (call.name, call.arguments) == ("search_products", {"query": "tents"})
    assert events[-1] == TurnDone(turn=events[-1].turn) and events[-1].turn.tool_calls == (call,)


def test_text_is_forwarded_before_the_stream_ends() -> None:
    pieces = [[_sse(_chunk({"content": w}))] for w in ("One ", "two ", "three.")]
    model, handle = _model(*pieces, [_sse(_chunk({}, "stop"))], delay_s=0.3)

    async def run() -> list[tuple[float, StreamEvent]]:
        return [(time.monotonic(), e) async for e in model.stream(USER)]

    timed = asyncio.run(run())
    first_text_at = next(t for t, e in timed if isinstance(e, TextDelta))
    assert handle.responses.last_item_at is not None
    assert first_text_at < handle.responses.last_item_at - 0.5
    assert "".join(e.text for _, e in timed if isinstance(e, TextDelta)) == "One two three."
    assert isinstance(timed[-1][1], TurnDone) and timed[-1][1].turn.text == "One two three."


def test_a_consumer_that_stops_cancels_the_serve_request() -> None:
    model, handle = _model(*([[_sse(_chunk({"content": "word "}))]] * 10))

    async def run() -> None:
        events = model.stream(USER)
        assert isinstance(await anext(events), TextDelta)
        await events.aclose()  # type: ignore[attr-defined]

    asyncio.run(run())
    assert handle.responses.cancelled


def test_a_stalled_stream_times_out_and_is_cancelled() -> None:
    model, handle = _model([_sse(_chunk({"content": "Hi "}))], [_sse(_chunk({}))], delay_s=5.0)
    with pytest.raises(ModelTimeout):
        asyncio.run(_events(model, params=ModelParams(timeout_s=0.2)))
    assert handle.responses.cancelled


class SilentResponses(FakeResponses):
    """A replica that takes the request and never answers (a wedged engine, a lost node)."""

    def __init__(self) -> None:
        super().__init__([])

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()


class SilentHandle(FakeHandle):
    """Every request gets its own SilentResponses."""

    def __init__(self) -> None:
        super().__init__(SilentResponses())
        self.sent: list[SilentResponses] = []

    def remote(self, request: Any) -> FakeResponses:
        self.requests.append(request)
        self.sent.append(SilentResponses())
        return self.sent[-1]


@pytest.mark.parametrize("call", ["request", "stream"])
def test_a_handle_that_never_answers_times_out_within_the_deadline(call: str) -> None:
    handle = SilentHandle()
    model = VLLMHandleChatModel(handle, "llama")  # type: ignore[arg-type]
    params = ModelParams(timeout_s=0.3)

    async def run() -> Any:
        if call == "request":
            return await model.request(USER, TOOLS, params)
        return [e async for e in model.stream(USER, TOOLS, params)]

    started = time.monotonic()
    with pytest.raises(ModelTimeout, match=r"exceeded 0\.3s"):
        asyncio.run(run())
    assert 0.3 <= time.monotonic() - started < 1.0
    assert [r.cancelled for r in handle.sent] == [True]


def test_the_agent_gives_each_vllm_call_the_deadline_of_timeouts_model_s() -> None:
    """timeouts.model_s -> AgentConfig -> ModelParams.timeout_s of every call of the loop
    (crow/chat/agent/loop.py _step); a silent replica costs two deadlines (the tool step, then the
    plain fallback call), not forever."""
    settings = AppSettings(llm={"backend": "vllm"}, timeouts={"model_s": 0.3})
    handle = SilentHandle()
    agent = Agent(VLLMHandleChatModel(handle, "llama"), AgentConfig.from_settings(settings))  # type: ignore[arg-type]
    started = time.monotonic()
    with pytest.raises(ModelTimeout):
        asyncio.run(agent.run(USER, ToolContext("org", None, None, None)))
    assert 0.6 <= time.monotonic() - started < 2.0
    assert len(handle.sent) == 2 and all(r.cancelled for r in handle.sent)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": 503, "message": "busy", "type": "x"}, ModelOverloaded),
        ({"code": 400, "message": "bad", "type": "BadRequestError"}, ModelError),
    ],
)
def test_error_responses_raise_model_errors(error: dict[str, Any], kind: type) -> None:
    class ErrorResponse(BaseModel):
        error: dict[str, Any]

    model, _ = _model([_sse(_chunk({"content": "Hi"}))], ErrorResponse(error=error))
    with pytest.raises(kind) as info:
        asyncio.run(_events(model))
    assert error["message"] in str(info.value)


def test_request_takes_the_whole_completion() -> None:
    completion = {
        "id": "c",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "You have 12 tents."},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5},
    }
    model, handle = _model(completion)
    turn = asyncio.run(model.request(USER, TOOLS))
    assert (turn.text, turn.usage.completion_tokens) == ("You have 12 tents.", 5)
    assert handle.requests[0]["stream"] is False
    assert turn == asyncio.run(collect(_model(completion)[0].stream(USER, TOOLS)))


def test_several_tool_calls_of_one_turn_go_one_per_message() -> None:
    """The Llama 3.1 JSON chat template renders one call per assistant message."""
    calls = tuple(
        ToolCall(id=f"c{i}", name="search_products", arguments={"query": q})
        for i, q in enumerate(("tents", "stoves"))
    )
    history = [
        *USER,
        Message.assistant("Looking.", calls),
        *(Message.tool(f"found {c.id}", tool_call_id=c.id) for c in calls),
    ]
    model, handle = _model([_sse(_chunk({"content": "Both."}, "stop"))])
    asyncio.run(_events(model, messages=history))
    sent = handle.requests[0]["messages"][1:]
    assert [(m["role"], m.get("content")) for m in sent] == [
        ("assistant", "Looking."),
        ("tool", "found c0"),
        ("assistant", None),
        ("tool", "found c1"),
    ]
    assert [[c["id"] for c in m["tool_calls"]] for m in sent[::2]] == [["c0"], ["c1"]]


def test_wire_payloads_shapes() -> None:
    assert list(wire_payloads(b'data: {"a": 1}\n\ndata: [DONE]\n\n')) == [{"a": 1}]
    assert list(wire_payloads([{"a": 1}, [_sse({"b": 2})]])) == [{"a": 1}, {"b": 2}]
    with pytest.raises(ModelError):
        list(wire_payloads("data: {not json\n\n"))
