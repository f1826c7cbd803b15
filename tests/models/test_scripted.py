"""The scripted ChatModel double: order, recording, completeness, failures, streaming."""

from __future__ import annotations

import asyncio

import pytest

from models.chat import ChatModel, collect
from models.errors import ModelTimeout, ModelUnavailable
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    TextDelta,
    ToolCall,
    ToolCallDone,
    TurnDone,
)
from models.testing import ScriptedChatModel
from tests.models.tools_fixture import TOOLS

HELLO = [Message.user("hello")]
CALL = ToolCall(id="call_1", name="get_interaction_summary", arguments={"channel": "web"})


def test_is_a_chat_model() -> None:
    assert isinstance(ScriptedChatModel(), ChatModel)


def test_turns_come_in_order_and_requests_are_recorded() -> None:
    model = ScriptedChatModel(
        [AssistantTurn(tool_calls=(CALL,), finish_reason="tool_calls"), AssistantTurn(text="42")]
    )
    params = ModelParams(max_tokens=7)
    first = asyncio.run(model.request(HELLO, TOOLS, params))
    second = asyncio.run(model.request([*HELLO, first.to_message()]))
    assert first.tool_calls == (CALL,)
    assert second.text == "42"
    assert [len(c.messages) for c in model.calls] == [1, 2]
    assert model.calls[0].tools == TOOLS
    assert model.calls[0].params == params
    assert model.calls[1].params == ModelParams()
    model.assert_complete()


def test_assert_complete_fails_on_unused_turns() -> None:
    model = ScriptedChatModel([AssistantTurn(text="never asked")])
    with pytest.raises(AssertionError, match="1 scripted turn"):
        model.assert_complete()


def test_unscripted_request_fails_loudly() -> None:
    with pytest.raises(AssertionError, match="unscripted"):
        asyncio.run(ScriptedChatModel().request(HELLO))


def test_callable_step_sees_the_request() -> None:
    model = ScriptedChatModel([lambda msgs, tools, params: AssistantTurn(text=msgs[-1].content)])
    assert asyncio.run(model.request([Message.user("echo me")])).text == "echo me"


def test_error_step_is_raised() -> None:
    model = ScriptedChatModel([ModelUnavailable("down")])
    with pytest.raises(ModelUnavailable, match="down"):
        asyncio.run(model.request(HELLO))


def test_latency_longer_than_timeout_raises_model_timeout() -> None:
    model = ScriptedChatModel([AssistantTurn(text="late")], latency_s=5.0)
    with pytest.raises(ModelTimeout):
        asyncio.run(model.request(HELLO, params=ModelParams(timeout_s=0.05)))


def test_stream_yields_text_calls_then_turn() -> None:
    turn = AssistantTurn(text="Counting.", tool_calls=(CALL,), finish_reason="tool_calls")
    model = ScriptedChatModel([turn, turn])

    async def events() -> list[object]:
        return [e async for e in model.stream(HELLO, TOOLS)]

    assert asyncio.run(events()) == [
        TextDelta(text="Counting."),
        ToolCallDone(call=CALL),
        TurnDone(turn=turn),
    ]
    assert asyncio.run(collect(model.stream(HELLO, TOOLS))) == turn
