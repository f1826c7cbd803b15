"""The ChatModel contract, run against the scripted model and against the OpenAI client
talking to our OpenAI-compatible server (backed by the same scripted model)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from models.chat import ChatModel, collect
from models.errors import ModelError, ModelOverloaded, ModelTimeout
from models.messages import (
    AssistantTurn,
    InvalidToolCall,
    Message,
    ModelParams,
    NamedToolChoice,
    TextDelta,
    ToolCall,
    ToolCallDone,
    TurnDone,
    Usage,
)
from models.openai_backend import OpenAIChatModel
from models.openai_server import build_openai_app
from models.testing import ScriptedChatModel, serve_in_thread
from tests.models.tools_fixture import TOOLS

CALL = ToolCall(id="call_a", name="search_products", arguments={"query": "tents", "limit": 3})
SECOND = ToolCall(id="call_b", name="get_interaction_summary", arguments={})
ANSWER = AssistantTurn(
    text="You have **12** tents.", usage=Usage(prompt_tokens=9, completion_tokens=5)
)
CALLS = AssistantTurn(tool_calls=(CALL, SECOND), finish_reason="tool_calls")
HISTORY = [
    Message.system("You are CROW AI."),
    Message.user("find tents"),
    Message.assistant("", (CALL,)),
    Message.tool('{"results": []}', tool_call_id="call_a", name="search_products"),
]


@dataclass
class Backend:
    model: ChatModel
    script: ScriptedChatModel


@pytest.fixture(scope="module")
def script() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture(scope="module")
def base_url(script: ScriptedChatModel) -> Iterator[str]:
    with serve_in_thread(build_openai_app(script, model_name="scripted")) as url:
        yield url


@pytest.fixture(params=["scripted", "openai"])
def backend(request: pytest.FixtureRequest, script: ScriptedChatModel) -> Iterator[Backend]:
    script.calls.clear()
    if request.param == "scripted":
        yield Backend(script, script)
    else:
        url = request.getfixturevalue("base_url")
        # No SDK retries here: the contract is one request, one answer (an error included);
        # retries have their own tests (tests/models/test_openai_streaming.py).
        model = OpenAIChatModel(f"{url}/v1", api_key="test", model="scripted", max_retries=0)
        yield Backend(model, script)
    script.assert_complete()


def test_text_answer(backend: Backend) -> None:
    backend.script.add(ANSWER)
    turn = asyncio.run(backend.model.request(HISTORY, TOOLS))
    assert turn == ANSWER


def test_tool_calls_answer(backend: Backend) -> None:
    backend.script.add(CALLS)
    turn = asyncio.run(backend.model.request(HISTORY[:2], TOOLS))
    assert turn.tool_calls == (CALL, SECOND)
    assert turn.finish_reason == "tool_calls"
    assert turn.invalid_tool_calls == ()


def test_request_reaches_the_model_unchanged(backend: Backend) -> None:
    backend.script.add(ANSWER)
    params = ModelParams(temperature=0.5, max_tokens=64, tool_choice=NamedToolChoice(name="x"))
    asyncio.run(backend.model.request(HISTORY, TOOLS, params))
    [seen] = backend.script.calls
    assert list(seen.messages) == HISTORY
    assert seen.tools == TOOLS
    assert (seen.params.temperature, seen.params.max_tokens) == (0.5, 64)
    assert seen.params.tool_choice == NamedToolChoice(name="x")


def test_stream_text_then_turn(backend: Backend) -> None:
    backend.script.add(ANSWER)

    async def run() -> list[object]:
        return [e async for e in backend.model.stream(HISTORY, TOOLS)]

    events = asyncio.run(run())
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER.text
    assert events[-1] == TurnDone(turn=ANSWER)


def test_stream_tool_calls(backend: Backend) -> None:
    backend.script.add(CALLS)

    async def run() -> list[object]:
        return [e async for e in backend.model.stream(HISTORY[:2], TOOLS)]

    events = asyncio.run(run())
    assert [e.call for e in events if isinstance(e, ToolCallDone)] == [CALL, SECOND]
    assert isinstance(events[-1], TurnDone)
    assert events[-1].turn.tool_calls == (CALL, SECOND)


@pytest.mark.parametrize("error", [ModelTimeout("slow"), ModelOverloaded("busy")])
def test_model_errors_keep_their_kind(backend: Backend, error: ModelError) -> None:
    backend.script.add(error)
    with pytest.raises(type(error)):
        asyncio.run(backend.model.request(HISTORY, TOOLS))


def test_stream_error_is_a_model_error(backend: Backend) -> None:
    backend.script.add(ModelTimeout("slow"))
    with pytest.raises(ModelError):
        asyncio.run(collect(backend.model.stream(HISTORY, TOOLS)))


# -- OpenAI client specifics ---------------------------------------------------------------


def _client(payload: dict[str, object], status: int = 200) -> OpenAIChatModel:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, json=payload))
    return OpenAIChatModel("http://model.test/v1", transport=transport)


def _completion(message: dict[str, object]) -> dict[str, object]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def test_openai_bad_native_arguments_become_invalid_calls() -> None:
    bad = {
        "id": "c1",
        "type": "function",
        "function": {"name": "search_products", "arguments": "{"},
    }
    model = _client(_completion({"role": "assistant", "content": None, "tool_calls": [bad]}))
    turn = asyncio.run(model.request([Message.user("x")], TOOLS))
    assert turn.tool_calls == ()
    assert [c.reason for c in turn.invalid_tool_calls] == ["arguments are not valid JSON"]


def test_openai_tool_calls_written_as_text_are_parsed() -> None:
    text = '<tool_call>\n{"name": "search_org_context", "arguments": {"query": "mission"}}\n</tool_call>'
    model = _client(_completion({"role": "assistant", "content": text}))
    turn = asyncio.run(model.request([Message.user("x")], TOOLS))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("search_org_context", {"query": "mission"})
    ]
    assert turn.text == ""


def test_openai_unreachable_endpoint_is_model_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    model = OpenAIChatModel("http://model.test/v1", transport=httpx.MockTransport(refuse))
    with pytest.raises(ModelError, match="unreachable"):
        asyncio.run(model.request([Message.user("x")]))


def test_openai_client_timeout() -> None:
    script = ScriptedChatModel([ANSWER], latency_s=2.0)
    with serve_in_thread(build_openai_app(script)) as url:
        model = OpenAIChatModel(f"{url}/v1")
        with pytest.raises(ModelTimeout):
            asyncio.run(model.request([Message.user("x")], params=ModelParams(timeout_s=0.3)))


def test_server_rejects_bad_input_with_the_error_shape(base_url: str) -> None:
    response = httpx.post(f"{base_url}/v1/chat/completions", json={"messages": "nope"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    bad_role = {"messages": [{"role": "wizard", "content": "hi"}]}
    response = httpx.post(f"{base_url}/v1/chat/completions", content=json.dumps(bad_role))
    assert response.status_code == 400


def test_server_accepts_strict_tool_definitions(base_url: str, script: ScriptedChatModel) -> None:
    script.calls.clear()
    script.add(ANSWER)
    tool = {"type": "function", "function": {**TOOLS[0].model_dump(), "strict": True}}
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    response = httpx.post(f"{base_url}/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert script.calls[-1].tools == (TOOLS[0],)


WRONG = AssistantTurn(
    invalid_tool_calls=(
        InvalidToolCall(
            id="w1",
            name="find_tents",
            raw='{"name": "find_tents", "arguments": {"q": "x"}}',
            reason="unknown tool 'find_tents'",
        ),
        InvalidToolCall(
            id="w2", name=None, raw='{"name": "search_', reason="tool call is not valid JSON"
        ),
    ),
    finish_reason="tool_calls",
)


def test_server_returns_calls_the_model_got_wrong_as_written(
    base_url: str, script: ScriptedChatModel
) -> None:
    script.add(WRONG)
    body = {"messages": [{"role": "user", "content": "tents"}], "tools": [TOOLS[0].model_dump()]}
    body["tools"] = [{"type": "function", "function": body["tools"][0]}]
    [choice] = httpx.post(f"{base_url}/v1/chat/completions", json=body).json()["choices"]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "find_tents", "arguments": '{"q": "x"}'}
    assert choice["message"]["content"] == '<tool_call>\n{"name": "search_\n</tool_call>'


@pytest.mark.parametrize("stream", [False, True])
def test_calls_the_model_got_wrong_stay_wrong_through_the_server(
    base_url: str, script: ScriptedChatModel, stream: bool
) -> None:
    script.add(WRONG)
    model = OpenAIChatModel(f"{base_url}/v1", model="scripted")
    if stream:
        turn = asyncio.run(collect(model.stream(HISTORY[:2], TOOLS)))
    else:
        turn = asyncio.run(model.request(HISTORY[:2], TOOLS))
    assert turn.tool_calls == () and turn.finish_reason == "tool_calls"
    assert sorted(c.reason for c in turn.invalid_tool_calls) == [
        "tool call is not valid JSON",
        "unknown tool 'find_tents'",
    ]


class _SlowModel(ScriptedChatModel):
    """Answers after `latency_s`; records whether its request was cancelled instead."""

    def __init__(self, latency_s: float) -> None:
        super().__init__([ANSWER], latency_s=latency_s)
        self.cancelled = threading.Event()

    async def request(self, messages, tools=(), params=None):  # type: ignore[no-untyped-def]
        try:
            return await super().request(messages, tools, params)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def test_server_stops_the_model_when_the_client_hangs_up() -> None:
    """A client that gives up (its own timeout) must not leave the model generating for
    nobody, holding up the requests queued behind it."""
    slow = _SlowModel(latency_s=30.0)
    with serve_in_thread(build_openai_app(slow)) as url:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}/v1/chat/completions", json=body, timeout=0.3)
        assert slow.cancelled.wait(5.0), "the model kept running after the client left"
