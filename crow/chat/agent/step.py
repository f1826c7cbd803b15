"""One answer's working state, and one streamed model call of its loop (crow.chat.agent.loop).

The call's text goes to the client as it is written: a new step's first text replaces what
the last step showed (``text_replaced``, reason ``next_step``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from crow.chat.agent.events import Emit
from crow.chat.agent.sources import Source
from models.chat import ChatModel
from models.errors import ModelError
from models.messages import AssistantTurn, Message, ModelParams, TextDelta, ToolSpec, TurnDone


@dataclass
class AgentRun:
    """What one answer has gathered so far."""

    messages: list[Message]
    emit: Emit
    returned: list[Source] = field(default_factory=list)
    outputs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)  # tool calls already run (name + arguments)
    steps: list[dict[str, Any]] = field(default_factory=list)
    shown: str = ""  # the answer text streamed to the client so far
    calls: int = 0  # model calls made
    tokens: int = 0
    model_s: float = 0.0
    tools_s: float = 0.0
    route_s: float = 0.0  # the guidance's routing hint
    nudged: bool = False  # an answer with no tool behind it was asked again (once)
    must_call: bool = False  # ... and the step asked again must call a tool
    hinted: tuple[str, ...] = ()  # the tools the routing hint named (guidance only)
    hint: str = ""  # the routing hint's line (guidance only)
    refused: int = 0  # calls not run: their query copied the hint (crow.chat.agent.runner)

    @property
    def found(self) -> bool:
        """Whether a tool call returned data (not an error)."""
        return any("error" not in content for _, content in self.outputs)


async def stream_step(
    model: ChatModel, specs: Sequence[ToolSpec], run: AgentRun, params: ModelParams
) -> AssistantTurn:
    """One model call over the run's messages, its text streamed to the client."""
    started, turn, fresh = time.perf_counter(), None, True
    run.calls += 1
    try:
        async for event in model.stream(run.messages, specs, params):
            if isinstance(event, TextDelta):
                if fresh and run.shown:  # a new step's text replaces the last one's
                    run.emit({"type": "text_replaced", "text": "", "reason": "next_step"})
                    run.shown = ""
                fresh = False
                run.shown += event.text
                run.emit({"type": "text_delta", "text": event.text})
            elif isinstance(event, TurnDone):
                turn = event.turn
    finally:
        run.model_s += time.perf_counter() - started
    if turn is None:
        raise ModelError("the model's stream ended without its turn")
    run.tokens += turn.usage.total
    return turn
