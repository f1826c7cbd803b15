"""Helpers of the agent-loop tests: a scripted tool call, a tool context over the demo
environment (tests/demo_env.py) and one question asked of an agent."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from crow.app import LocalApp
from crow.chat.agent.context import ToolContext
from crow.chat.agent.loop import Agent
from models.messages import AssistantTurn, Message, ToolCall

ORG = "acme-outdoor"


def call(name: str, cid: str = "c1", **arguments: Any) -> AssistantTurn:
    """A model turn that calls the tool `name` with `arguments`."""
    return AssistantTurn(
        tool_calls=(ToolCall(id=cid, name=name, arguments=arguments),), finish_reason="tool_calls"
    )


def ctx_for(demo: LocalApp, **overrides: Any) -> ToolContext:
    """The demo org's tool context over `demo`'s services, some replaced by `overrides`."""
    return dataclasses.replace(demo.tool_context(ORG), **overrides)


def run(agent: Agent, ctx: ToolContext, question: str = "q") -> Any:
    """`agent`'s answer to `question` (after a stub system prompt)."""
    return asyncio.run(agent.run([Message.system("s"), Message.user(question)], ctx))
