"""Model factories for Serve tests (`llm: {backend: custom, factory: ...}`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from models.messages import AssistantTurn, Message, ModelParams, ToolCall, ToolSpec
from models.testing import ScriptedChatModel


def _count_then_answer(
    messages: Sequence[Message], tools: Sequence[ToolSpec], params: ModelParams
) -> AssistantTurn:
    last = messages[-1]
    if last.role == "tool":
        total = json.loads(last.content).get("total_interactions")
        return AssistantTurn(text=f"You have {total:,} interactions.")
    if tools and "how many" in last.content.lower():
        return AssistantTurn(tool_calls=(ToolCall(id="c1", name="get_interaction_summary", arguments={}),),
                             finish_reason="tool_calls")  # fmt: skip
    return AssistantTurn(text="Hello! Ask me about your retail data.")


class _Endless(ScriptedChatModel):
    """Answers every request with the same rule (a scripted model that never runs out)."""

    async def request(self, messages, tools=(), params=None):
        self.add(_count_then_answer)
        return await super().request(messages, tools, params)


def rule_model() -> ScriptedChatModel:
    return _Endless(latency_s=0.0)
