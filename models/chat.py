"""The ChatModel protocol: the one contract every LLM backend implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from models.errors import ModelError
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    StreamEvent,
    TextDelta,
    ToolCallDone,
    ToolSpec,
    TurnDone,
)


@runtime_checkable
class ChatModel(Protocol):
    """messages + tools in, text and/or tool calls out.

    `request` returns the whole turn. `stream` yields `TextDelta`s and `ToolCallDone`s as
    they become known and always ends with exactly one `TurnDone` carrying the same turn
    `request` would have returned. Both raise only `models.errors.ModelError` subclasses.
    """

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn: ...

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]: ...


async def stream_turn(turn: AssistantTurn) -> AsyncIterator[StreamEvent]:
    """Replay a finished turn as stream events (for backends that cannot stream)."""
    if turn.text:
        yield TextDelta(text=turn.text)
    for call in turn.tool_calls:
        yield ToolCallDone(call=call)
    yield TurnDone(turn=turn)


async def collect(events: AsyncIterator[StreamEvent]) -> AssistantTurn:
    """Drain a stream and return its final turn."""
    final: AssistantTurn | None = None
    async for event in events:
        if isinstance(event, TurnDone):
            final = event.turn
    if final is None:
        raise ModelError("stream ended without a TurnDone event")
    return final
