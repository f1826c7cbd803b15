"""A chat message can be followed by names and types, from the HTTP route to the footnoted
answer: each hop's annotation names the next type, none is ``Any`` (mypy checks the bodies
against these annotations; this walks the annotations themselves)."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from crow.api import deps, routes_chat
from crow.app import LocalApp
from crow.chat.agent.answer import AgentAnswer
from crow.chat.agent.context import ToolContext
from crow.chat.agent.loop import Agent
from crow.chat.agent.tool import Tool, ToolOutput
from crow.chat.service import ChatService
from crow.facades import (
    AnalyticsFacade,
    ChatFacade,
    EmbedderFacade,
    RetrieverFacade,
    StoreFacade,
)
from crow.services import Services
from models.chat import ChatModel


def hint(obj: Any, name: str) -> Any:
    """The annotation of parameter or attribute `name` of a function or class, resolved."""
    return get_type_hints(obj, include_extras=True)[name]


def without_none(t: Any) -> Any:
    """``X`` of ``X | None``."""
    if get_origin(t) in (typing.Union, types.UnionType):
        [only] = [a for a in get_args(t) if a is not type(None)]
        return only
    return t


def test_the_route_takes_services_and_awaits_their_chat_facade():
    services_dep = hint(routes_chat.send_message, "services")
    assert services_dep == deps.ServicesDep
    assert get_origin(services_dep) is Annotated and get_args(services_dep)[0] is Services
    assert without_none(hint(Services, "chat")) is ChatFacade


def test_the_chat_service_is_the_chat_facade_over_services_and_a_chat_model():
    for name in ("send", "send_events", "ask_kb"):  # the Protocol's methods, same parameters
        ours = inspect.signature(getattr(ChatService, name)).parameters
        protocol = inspect.signature(getattr(ChatFacade, name)).parameters
        assert list(ours) == list(protocol), name
    init = ChatService.__init__
    assert hint(init, "services") is Services and hint(init, "model") is ChatModel
    assert hint(init, "tools") == Sequence[Tool]
    assert hint(Services, "store") is StoreFacade


def test_the_agent_runs_a_chat_model_and_tools_over_a_tool_context():
    assert hint(Agent.__init__, "model") is ChatModel
    assert hint(Agent.run, "ctx") is ToolContext
    assert hint(Agent.run, "return") is AgentAnswer
    assert hint(Services.tool_context, "return") is ToolContext
    assert hint(LocalApp.tool_context, "return") is ToolContext
    assert {n: hint(ToolContext, n) for n in ("embedder", "retriever", "analytics")} == {
        "embedder": EmbedderFacade,
        "retriever": RetrieverFacade,
        "analytics": AnalyticsFacade,
    }
    assert hint(Tool.invoke, "ctx") is ToolContext and hint(Tool.invoke, "return") is ToolOutput
